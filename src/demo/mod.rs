//! `.demo` files (reward-signals.md §7): Unity's recordings of one agent's decisions, read and
//! written as Unity and ML-Agents 0.28 lay them out:
//!
//! ```text
//! byte 0    varint length, DemonstrationMetaProto (api version, name, steps, episodes, mean reward)
//! byte 33   varint length, BrainParametersProto (behavior name, action spec)
//! then      number_steps x (varint length, AgentInfoActionPairProto)
//! ```
//!
//! A record holds a decision's observations, the reward since the previous decision, whether
//! the episode ended there, and the action that led into it (Unity's convention: zeros at an
//! episode's first decision; the episode's last action on its terminal record). [`Pairing`]
//! turns records into training rows: each observation with the action taken from it (ours), or
//! with the action stored beside it, one decision late (0.28's loader, §7.7).

pub mod recorder;

use crate::comm::convert::{action_spec_from_proto, agent_action_from_proto, agent_action_to_proto, brain_parameters_to_proto};
use crate::comm::observation;
use crate::proto::{AgentInfoActionPairProto, AgentInfoProto, BrainParametersProto, DemonstrationMetaProto};
use crate::spec::{ActionSpec, BehaviorSpec, ObservationSpec};
use prost::Message;
use std::path::{Path, PathBuf};

/// The metadata versions readers accept (0: Python's own test writer; 1: every Unity release).
pub const SUPPORTED_API_VERSIONS: [i32; 2] = [0, 1];
/// The version Unity writes.
pub const API_VERSION: i32 = 1;
/// Where the brain parameters start: the metadata is written in the 33 bytes before, and
/// rewritten in place when the recording closes.
pub const BRAIN_PARAMETERS_OFFSET: usize = 33;
/// Unity keeps demonstration names to 16 characters of `[A-Za-z0-9 -]`, so that the metadata
/// fits before the brain parameters.
pub const MAX_NAME_LENGTH: usize = 16;

/// Why a demonstration cannot be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{path}: {source}")]
    Io { path: String, #[source] source: std::io::Error },
    #[error("the demonstration file or directory {path} does not exist")]
    Missing { path: String },
    #[error("{path} is not a '.demo' file")]
    NotDemo { path: String },
    #[error("there are no '.demo' files in {path}")]
    EmptyFolder { path: String },
    #[error("{path} is not a demonstration: {detail}")]
    Format { path: String, detail: String },
    #[error("{path}: demonstration API version {found} is not supported (readers take {SUPPORTED_API_VERSIONS:?})")]
    Version { path: String, found: i32 },
    #[error("{path}: record {record}: {detail}")]
    Record { path: String, record: usize, detail: String },
    #[error("{path}: the demonstration's {what} do not match the policy's: the demonstration has {demonstration}, the policy {policy}")]
    Mismatch { path: String, what: String, demonstration: String, policy: String },
}

/// The metadata at the start of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoMetadata {
    pub api_version: i32,
    pub name: String,
    pub number_steps: usize,
    pub number_episodes: usize,
    pub mean_reward: f32,
}

/// One recorded decision.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoRecord {
    /// Each observation's values, row-major in its shape.
    pub observations: Vec<Vec<f32>>,
    /// The reward since the previous decision.
    pub reward: f32,
    /// The episode ended here (`interrupted`: by reaching its maximum length).
    pub done: bool,
    pub interrupted: bool,
    pub agent_id: i32,
    /// Per discrete action, whether it was not allowed (empty: all allowed).
    pub action_mask: Vec<bool>,
    /// The action stored with the record: the one that led into this decision (Unity).
    pub continuous: Vec<f32>,
    pub discrete: Vec<i32>,
}

/// One `.demo` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Demonstration {
    pub path: PathBuf,
    pub metadata: DemoMetadata,
    /// `<Behavior>?team=<id>` as Unity names it.
    pub behavior_name: String,
    pub spec: BehaviorSpec,
    pub records: Vec<DemoRecord>,
}

/// How records become (observation, action) rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pairing {
    /// Each observation with the action taken from it (stored in the next record of its
    /// episode); terminal records give no row, and files are never joined.
    #[default]
    ActionTaken,
    /// 0.28's loader: each record's observation with the action stored beside it (the previous
    /// decision's), over all files joined, the last record dropped (for parity runs).
    Compat0_28,
}

/// A training row from demonstrations.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoRow {
    pub observations: Vec<Vec<f32>>,
    pub continuous: Vec<f32>,
    pub discrete: Vec<i32>,
    /// The reward that followed and whether the episode ended there.
    pub reward: f32,
    pub done: bool,
    /// The last row of its episode as the rows hold it: the episode ended, or its recording
    /// did (where a recurrent policy's sequences are cut).
    pub episode_ends: bool,
}

fn format_error(path: &Path, detail: impl Into<String>) -> DemoError {
    DemoError::Format { path: path.display().to_string(), detail: detail.into() }
}

/// One length-delimited message at `offset`; returns it and the offset after it.
fn delimited<M: Message + Default>(bytes: &[u8], offset: usize, path: &Path, what: &str) -> Result<(M, usize), DemoError> {
    let mut rest = bytes.get(offset..).filter(|rest| !rest.is_empty()).ok_or_else(|| format_error(path, format!("the file ends before its {what} (byte {offset})")))?;
    let before = rest.len();
    let length = prost::decode_length_delimiter(&mut rest).map_err(|e| format_error(path, format!("{what} at byte {offset}: {e}")))?;
    let start = offset + (before - rest.len());
    let body = bytes.get(start..start.saturating_add(length)).ok_or_else(|| format_error(path, format!("{what} at byte {offset} claims {length} bytes, past the end of the file")))?;
    let message = M::decode(body).map_err(|e| format_error(path, format!("{what} at byte {offset}: {e}")))?;
    Ok((message, start + length))
}

/// Reads one `.demo` file: every record Unity wrote (up to `number_steps`; to the end of the file
/// when the metadata says 0, as Python's writer leaves it).
pub fn read(path: &Path) -> Result<Demonstration, DemoError> {
    let bytes = std::fs::read(path).map_err(|source| DemoError::Io { path: path.display().to_string(), source })?;
    let (meta, _) = delimited::<DemonstrationMetaProto>(&bytes, 0, path, "metadata")?;
    if !SUPPORTED_API_VERSIONS.contains(&meta.api_version) {
        return Err(DemoError::Version { path: path.display().to_string(), found: meta.api_version });
    }
    let (brain, mut offset) = delimited::<BrainParametersProto>(&bytes, BRAIN_PARAMETERS_OFFSET, path, "brain parameters")?;
    let action_spec = action_spec_from_proto(&brain);
    let expected = meta.number_steps.max(0) as usize;
    let mut infos: Vec<AgentInfoActionPairProto> = vec![];
    while offset < bytes.len() && (expected == 0 || infos.len() < expected) {
        let (pair, next) = delimited::<AgentInfoActionPairProto>(&bytes, offset, path, &format!("record {}", infos.len()))?;
        infos.push(pair);
        offset = next;
    }
    if infos.len() < expected {
        return Err(format_error(path, format!("the metadata counts {expected} records, the file holds {}", infos.len())));
    }
    let first = infos.first().and_then(|p| p.agent_info.as_ref()).ok_or_else(|| format_error(path, "no records"))?;
    let mut spec = BehaviorSpec { observation_specs: first.observations.iter().map(observation::spec_from_proto).collect(), action_spec };
    let mut records: Vec<DemoRecord> = infos.iter().enumerate().map(|(k, pair)| record_from_proto(pair, &spec, path, k)).collect::<Result<_, _>>()?;
    to_channels_last(&mut spec, &mut records);
    let metadata = DemoMetadata {
        api_version: meta.api_version,
        name: meta.demonstration_name,
        number_steps: expected,
        number_episodes: meta.number_episodes.max(0) as usize,
        mean_reward: meta.mean_reward,
    };
    Ok(Demonstration { path: path.to_path_buf(), metadata, behavior_name: brain.brain_name, spec, records })
}

/// Images that com.unity.ml-agents 3.x declares channel-first (`[C, H, W]`, dimension
/// properties (none, translational equivariance ×2)) made `[H, W, C]`, as every earlier release
/// and every environment this trainer serves sends them: the spec's shape and properties and
/// each record's values (0.28 refuses such files; reward-signals.md §7.4).
fn to_channels_last(spec: &mut BehaviorSpec, records: &mut [DemoRecord]) {
    use crate::spec::DimensionProperty::{None as Plain, TranslationalEquivariance as Spatial};
    for (i, o) in spec.observation_specs.iter_mut().enumerate() {
        let (&[c, h, w], [Plain, Spatial, Spatial]) = (o.shape.as_slice(), o.dimension_properties.as_slice()) else { continue };
        o.shape = vec![h, w, c];
        o.dimension_properties = vec![Spatial, Spatial, Plain];
        for record in records.iter_mut() {
            let chw = &record.observations[i];
            let mut hwc = vec![0.0; chw.len()];
            for ch in 0..c {
                for p in 0..h * w {
                    hwc[p * c + ch] = chw[ch * h * w + p];
                }
            }
            record.observations[i] = hwc;
        }
    }
}

fn record_from_proto(pair: &AgentInfoActionPairProto, spec: &BehaviorSpec, path: &Path, k: usize) -> Result<DemoRecord, DemoError> {
    let error = |detail: String| DemoError::Record { path: path.display().to_string(), record: k, detail };
    let info = pair.agent_info.as_ref().ok_or_else(|| error("no agent info".into()))?;
    if info.observations.len() != spec.observation_specs.len() {
        return Err(error(format!("{} observations, the first record has {}", info.observations.len(), spec.observation_specs.len())));
    }
    let mut observations = Vec::with_capacity(info.observations.len());
    for (i, (o, expected)) in info.observations.iter().zip(&spec.observation_specs).enumerate() {
        let shape: Vec<usize> = o.shape.iter().map(|d| (*d).max(0) as usize).collect();
        if shape != expected.shape {
            return Err(error(format!("observation {i} has shape {shape:?}, the first record's has {:?}", expected.shape)));
        }
        let values = observation::decode(o).map_err(|e| error(format!("observation {i}: {e}")))?;
        if values.iter().any(|v| v.is_nan()) {
            return Err(error(format!("observation {i} holds NaN")));
        }
        observations.push(values);
    }
    let (continuous, discrete) = pair.action_info.as_ref().map(|a| agent_action_from_proto(a, &spec.action_spec)).unwrap_or_default();
    let (continuous, discrete) = if continuous.is_empty() && discrete.is_empty() {
        (vec![0.0; spec.action_spec.continuous_size], vec![0; spec.action_spec.discrete_branches.len()])
    } else {
        (continuous, discrete)
    };
    if continuous.len() != spec.action_spec.continuous_size || discrete.len() != spec.action_spec.discrete_branches.len() {
        return Err(error(format!("its action ({} continuous, {} discrete) does not fit the action spec {}", continuous.len(), discrete.len(), spec.action_spec)));
    }
    Ok(DemoRecord {
        observations,
        reward: info.reward,
        done: info.done,
        interrupted: info.max_step_reached,
        agent_id: info.id,
        action_mask: info.action_mask.clone(),
        continuous,
        discrete,
    })
}

/// Reads a `.demo` file, or every `.demo` file of a folder in name order (0.28 takes the
/// folder's listing order, which the file system decides).
pub fn read_path(path: &Path) -> Result<Vec<Demonstration>, DemoError> {
    let shown = path.display().to_string();
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|source| DemoError::Io { path: shown.clone(), source })?;
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "demo")).collect();
        files.sort();
        if files.is_empty() {
            return Err(DemoError::EmptyFolder { path: shown });
        }
        return files.iter().map(|f| read(f)).collect();
    }
    if !path.exists() {
        return Err(DemoError::Missing { path: shown });
    }
    if path.extension().is_none_or(|x| x != "demo") {
        return Err(DemoError::NotDemo { path: shown });
    }
    Ok(vec![read(path)?])
}

fn describe_observations(specs: &[ObservationSpec]) -> String {
    let each: Vec<String> = specs.iter().map(|o| format!("{:?} {:?} ({:?})", o.name, o.shape, o.observation_type)).collect();
    format!("[{}]", each.join(", "))
}

impl Demonstration {
    /// Checks that the recording fits a policy of `policy`'s spec: the same actions and, in
    /// order, observations of the same shapes and types (0.28 checks the shapes only).
    pub fn check_spec(&self, policy: &BehaviorSpec) -> Result<(), DemoError> {
        let mismatch = |what: &str, demonstration: String, policy: String| DemoError::Mismatch { path: self.path.display().to_string(), what: what.into(), demonstration, policy };
        if self.spec.action_spec != policy.action_spec {
            return Err(mismatch("actions", self.spec.action_spec.to_string(), policy.action_spec.to_string()));
        }
        let (ours, theirs) = (&self.spec.observation_specs, &policy.observation_specs);
        let differs = ours.len() != theirs.len() || ours.iter().zip(theirs).any(|(a, b)| a.shape != b.shape || a.observation_type != b.observation_type);
        if differs {
            return Err(mismatch("observations", describe_observations(ours), describe_observations(theirs)));
        }
        Ok(())
    }

    /// Episodes ended in the recording.
    pub fn episodes(&self) -> usize {
        self.records.iter().filter(|r| r.done).count()
    }
}

/// Training rows from demonstrations, paired as `pairing` says.
pub fn training_rows(demos: &[Demonstration], pairing: Pairing) -> Vec<DemoRow> {
    let row = |observation: &DemoRecord, action: &DemoRecord, next: &DemoRecord, last: bool| DemoRow {
        observations: observation.observations.clone(),
        continuous: action.continuous.clone(),
        discrete: action.discrete.clone(),
        reward: next.reward,
        done: next.done,
        episode_ends: next.done || last,
    };
    match pairing {
        Pairing::ActionTaken => demos
            .iter()
            .flat_map(|d| {
                let pairs = d.records.len().saturating_sub(1);
                d.records.windows(2).enumerate().filter(|(_, w)| !w[0].done).map(|(i, w)| row(&w[0], &w[1], &w[1], i + 1 == pairs)).collect::<Vec<_>>()
            })
            .collect(),
        Pairing::Compat0_28 => {
            let all: Vec<&DemoRecord> = demos.iter().flat_map(|d| &d.records).collect();
            let pairs = all.len().saturating_sub(1);
            all.windows(2).enumerate().map(|(i, w)| row(w[0], w[0], w[1], i + 1 == pairs)).collect()
        }
    }
}

/// Keeps a name as Unity does: `[A-Za-z0-9 -]` only, at most 16 characters.
pub fn sanitize_name(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-').take(MAX_NAME_LENGTH).collect()
}

/// Writes a `.demo` file as Unity's `DemonstrationWriter` does (metadata padded to byte 33,
/// the brain parameters, one record per decision); `name` is sanitised as Unity does. The
/// file is written to a temporary name and renamed.
pub fn write(path: &Path, name: &str, behavior_name: &str, spec: &BehaviorSpec, records: &[DemoRecord]) -> Result<(), DemoError> {
    let io = |source| DemoError::Io { path: path.display().to_string(), source };
    let episodes = records.iter().filter(|r| r.done).count() + 1;
    let meta = DemonstrationMetaProto {
        api_version: API_VERSION,
        demonstration_name: sanitize_name(name),
        number_steps: i32::try_from(records.len()).map_err(|_| format_error(path, "more records than a .demo file counts"))?,
        number_episodes: episodes as i32,
        mean_reward: (records.iter().map(|r| r.reward as f64).sum::<f64>() / episodes as f64) as f32,
    };
    let mut bytes = meta.encode_length_delimited_to_vec();
    if bytes.len() > BRAIN_PARAMETERS_OFFSET {
        return Err(format_error(path, format!("the metadata needs {} bytes, more than the {BRAIN_PARAMETERS_OFFSET} Unity reserves", bytes.len())));
    }
    bytes.resize(BRAIN_PARAMETERS_OFFSET, 0);
    let mut brain = brain_parameters_to_proto(behavior_name, &spec.action_spec, true);
    brain.is_training = false;
    // The deprecated fields too, for readers older than hybrid actions.
    let legacy = brain_parameters_to_proto(behavior_name, &spec.action_spec, false);
    (brain.vector_action_size_deprecated, brain.vector_action_space_type_deprecated) = (legacy.vector_action_size_deprecated, legacy.vector_action_space_type_deprecated);
    bytes.extend(brain.encode_length_delimited_to_vec());
    for record in records {
        let info = AgentInfoProto {
            reward: record.reward,
            done: record.done,
            max_step_reached: record.interrupted,
            id: record.agent_id,
            action_mask: record.action_mask.clone(),
            observations: spec.observation_specs.iter().zip(&record.observations).map(|(s, values)| observation::float_observation(s, values.clone())).collect(),
            group_id: 0,
            group_reward: 0.0,
        };
        let pair = AgentInfoActionPairProto { agent_info: Some(info), action_info: Some(agent_action_to_proto(&record.continuous, &record.discrete)) };
        bytes.extend(pair.encode_length_delimited_to_vec());
    }
    let temporary = path.with_extension("demo.partial");
    std::fs::write(&temporary, &bytes).map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)
}

/// A recording for `spec` as the action spec sees it (for tests and tools).
pub fn zero_action(spec: &ActionSpec) -> (Vec<f32>, Vec<i32>) {
    (vec![0.0; spec.continuous_size], vec![0; spec.discrete_branches.len()])
}

#[cfg(test)]
mod tests;
