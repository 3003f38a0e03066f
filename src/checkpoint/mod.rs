//! Checkpoints on disk, readable without libtorch (training.md §10, with safetensors in place
//! of torch's `.pt`). Per behavior, in `results/<run-id>/<Behavior>/`:
//!
//! ```text
//! <Behavior>-<step>.safetensors   every tensor of the trainer: the actor (ML-Agents module
//!                                 paths, normalisers included), `critic.*`, Adam's moments
//!                                 `optimizer.m.*` / `optimizer.v.*`, and `rollout.*`: observations
//!                                 recorded from the run's own rollouts with the training network's
//!                                 outputs on them (the parity record)
//! <Behavior>-<step>.json          the description: policy (network, specs), step, Adam step
//!                                 count, sha256 of the safetensors file
//! <Behavior>-<step>.onnx / .nn    that checkpoint's exports
//! ```
//!
//! Every file is written to a temporary name and renamed; the `.json` is written last, so a
//! checkpoint without its description does not exist yet. A checkpoint whose weights do not
//! match the recorded sha256 (a torn or edited file) is reported and skipped in favour of
//! the previous one when the latest is asked for; asked for by step, it is an error.

use crate::policy::{PolicyDescription, PolicyError, WeightTensor, Weights};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Version of the checkpoint description layout.
pub const CHECKPOINT_FORMAT_VERSION: u32 = 1;
/// Prefix of the critic's tensors.
pub const CRITIC_PREFIX: &str = "critic.";
/// Prefix of Adam's first moments (followed by the variable's name).
pub const ADAM_M_PREFIX: &str = "optimizer.m.";
/// Prefix of Adam's second moments.
pub const ADAM_V_PREFIX: &str = "optimizer.v.";
/// Prefix of the parity record.
pub const ROLLOUT_PREFIX: &str = "rollout.";

/// Why a checkpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("no checkpoint of behavior {behavior} in {dir}")]
    None { behavior: String, dir: String },
    #[error("no usable checkpoint of behavior {behavior} in {dir}: {reasons}")]
    NoneUsable { behavior: String, dir: String, reasons: String },
    #[error("{path}: {source}")]
    Io { path: String, #[source] source: std::io::Error },
    #[error("{path}: no checkpoint at step {step} (checkpoints: {available})")]
    NoStep { path: String, step: u64, available: String },
    #[error("{path} is not a checkpoint description: {detail}")]
    BadDescription { path: String, detail: String },
    #[error("{path}: checkpoint format version {found} is not supported (this build reads {supported})")]
    Version { path: String, found: u32, supported: u32 },
    #[error("{path} is damaged: its sha256 is {found}, the checkpoint recorded {expected} (torn write or edited file)")]
    Torn { path: String, expected: String, found: String },
    #[error("{path}: {problem}")]
    Weights { path: String, #[source] problem: PolicyError },
}

/// Adam's hyperparameters and step count (its moments are tensors in the weights file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    pub step: u64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
}

/// The `<Behavior>-<step>.json` beside the tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointDescription {
    pub format_version: u32,
    pub behavior: String,
    pub trainer: String,
    /// Agent steps taken when the checkpoint was written.
    pub step: u64,
    pub policy: PolicyDescription,
    pub optimizer: AdamState,
    /// File name of the tensors (beside this file) and its sha256 (hex).
    pub weights_file: String,
    pub weights_sha256: String,
    /// Mean episode reward since the last summary, if an episode ended.
    pub reward: Option<f32>,
    /// Seconds since the Unix epoch.
    pub creation_time: f64,
    /// The run's curriculum when the checkpoint was written (runs with environment
    /// parameters only), so `--resume` continues each lesson exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curriculum: Option<CurriculumRecord>,
    /// The behavior's self-play state and the run's team rotation (`train::self_play`), with
    /// its snapshots among the tensors (`selfplay.*`), when the behavior plays itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_play: Option<serde_json::Value>,
    /// What the trainer type keeps beyond tensors (SAC: its update counters), so that
    /// `--resume` continues exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer_state: Option<serde_json::Value>,
}

/// The state of a run's lessons as one checkpoint records it: every parameter's lesson and
/// smoothed measure (run-wide), and the reward buffer of the checkpoint's own behavior.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CurriculumRecord {
    /// Parameter name to lesson number (0-based).
    pub lessons: std::collections::BTreeMap<String, usize>,
    /// Parameter name to the smoothed reward measure of its completion criteria.
    pub smoothed: std::collections::BTreeMap<String, f64>,
    /// The behavior's recent episode rewards, newest first, as the completion criteria read them.
    pub reward_buffer: Vec<f32>,
}

/// A checkpoint read back and verified.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub description: CheckpointDescription,
    /// Every tensor (actor, critic, optimizer, rollout).
    pub tensors: Weights,
    /// Where the description was read from.
    pub path: PathBuf,
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file whole or not at all: a temporary file in the same folder, synced, renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temporary = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// The stem `<Behavior>-<step>` of a checkpoint's files.
pub fn stem(behavior: &str, step: u64) -> String {
    format!("{behavior}-{step}")
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { path: path.display().to_string(), source }
}

impl Checkpoint {
    /// The actor's tensors only: what a policy export needs.
    pub fn actor_weights(&self) -> Result<Weights, CheckpointError> {
        let path = self.path.display().to_string();
        self.description.policy.check_bounds(self.tensors.0.len()).map_err(|problem| CheckpointError::Weights { path: path.clone(), problem })?;
        let mut weights = Weights::default();
        for (name, _) in self.description.policy.weight_shapes() {
            let tensor = self.tensors.get(&name).map_err(|problem| CheckpointError::Weights { path: path.clone(), problem })?;
            weights.0.insert(name, tensor.clone());
        }
        self.description.policy.check(&weights).map_err(|problem| CheckpointError::Weights { path, problem })?;
        Ok(weights)
    }

    /// A rollout tensor (`rollout.<name>`), if recorded.
    pub fn rollout(&self, name: &str) -> Option<&WeightTensor> {
        self.tensors.0.get(&format!("{ROLLOUT_PREFIX}{name}"))
    }

    /// Writes the tensors, then the description (with the tensors' sha256). Returns the
    /// description's path.
    pub fn write(dir: &Path, mut description: CheckpointDescription, tensors: &Weights) -> Result<PathBuf, CheckpointError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let stem = stem(&description.behavior, description.step);
        let bytes = tensors.to_safetensors();
        description.weights_file = format!("{stem}.safetensors");
        description.weights_sha256 = sha256_hex(&bytes);
        let weights_path = dir.join(&description.weights_file);
        write_atomic(&weights_path, &bytes).map_err(io(&weights_path))?;
        let json_path = dir.join(format!("{stem}.json"));
        let json = serde_json::to_vec_pretty(&description).expect("plain data serialises");
        write_atomic(&json_path, &json).map_err(io(&json_path))?;
        Ok(json_path)
    }

    /// Reads and verifies the checkpoint described by `json_path`.
    pub fn read(json_path: &Path) -> Result<Self, CheckpointError> {
        let text = std::fs::read(json_path).map_err(io(json_path))?;
        let bad = |detail: String| CheckpointError::BadDescription { path: json_path.display().to_string(), detail };
        let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
        let found = value.get("format_version").and_then(|v| v.as_u64()).ok_or_else(|| bad("no format_version".into()))? as u32;
        if found != CHECKPOINT_FORMAT_VERSION {
            return Err(CheckpointError::Version { path: json_path.display().to_string(), found, supported: CHECKPOINT_FORMAT_VERSION });
        }
        let description: CheckpointDescription = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        if description.policy.format_version != crate::policy::POLICY_FORMAT_VERSION {
            return Err(bad(format!(
                "policy format version {} is not supported (this build reads {})",
                description.policy.format_version,
                crate::policy::POLICY_FORMAT_VERSION
            )));
        }
        let file_name = json_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let named = format!("{}.json", stem(&description.behavior, description.step));
        if file_name != named {
            return Err(bad(format!(
                "it describes step {} of behavior {} (a file named {named}), not what its name says; it was renamed or edited",
                description.step, description.behavior
            )));
        }
        if description.weights_file.contains(['/', '\\']) {
            return Err(bad(format!("weights_file {:?} must be a file name beside the description", description.weights_file)));
        }
        let weights_path = json_path.with_file_name(&description.weights_file);
        let bytes = std::fs::read(&weights_path).map_err(io(&weights_path))?;
        let found = sha256_hex(&bytes);
        if found != description.weights_sha256 {
            return Err(CheckpointError::Torn { path: weights_path.display().to_string(), expected: description.weights_sha256, found });
        }
        let tensors = Weights::from_safetensors(&bytes).map_err(|problem| CheckpointError::Weights { path: weights_path.display().to_string(), problem })?;
        let checkpoint = Self { description, tensors, path: json_path.to_path_buf() };
        // The actor must fit its description and hold finite numbers: otherwise the
        // checkpoint is unusable (and `latest` falls back to the previous one).
        checkpoint.actor_weights()?;
        Ok(checkpoint)
    }
}

/// The checkpoint descriptions of `behavior` in `dir`, by step (oldest first).
pub fn list(dir: &Path, behavior: &str) -> Vec<(u64, PathBuf)> {
    let prefix = format!("{behavior}-");
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let step = name.strip_prefix(&prefix)?.strip_suffix(".json")?.parse::<u64>().ok()?;
            Some((step, entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// The newest checkpoint of `behavior` that reads back whole; damaged newer ones are
/// reported (`log::warn`) and skipped.
pub fn latest(dir: &Path, behavior: &str) -> Result<Checkpoint, CheckpointError> {
    let all = list(dir, behavior);
    if all.is_empty() {
        return Err(CheckpointError::None { behavior: behavior.into(), dir: dir.display().to_string() });
    }
    let mut reasons = vec![];
    for (_, path) in all.iter().rev() {
        match Checkpoint::read(path) {
            Ok(c) => return Ok(c),
            Err(e) => {
                log::warn!("skipping checkpoint: {e}");
                reasons.push(e.to_string());
            }
        }
    }
    Err(CheckpointError::NoneUsable { behavior: behavior.into(), dir: dir.display().to_string(), reasons: reasons.join("; ") })
}

/// The checkpoint of `behavior` at exactly `step`.
pub fn at_step(dir: &Path, behavior: &str, step: u64) -> Result<Checkpoint, CheckpointError> {
    let path = dir.join(format!("{}.json", stem(behavior, step)));
    if !path.exists() {
        let steps: Vec<String> = list(dir, behavior).iter().map(|(s, _)| s.to_string()).collect();
        return Err(CheckpointError::NoStep { path: path.display().to_string(), step, available: if steps.is_empty() { "none".into() } else { steps.join(", ") } });
    }
    Checkpoint::read(&path)
}

/// Deletes the oldest checkpoints beyond `keep` (≤ 0 keeps all): the description first (so
/// the checkpoint stops existing), then its tensors and exports.
pub fn prune(dir: &Path, behavior: &str, keep: i64) {
    if keep <= 0 {
        return;
    }
    let all = list(dir, behavior);
    let excess = all.len().saturating_sub(keep as usize);
    for (step, json) in all.into_iter().take(excess) {
        let _ = std::fs::remove_file(&json);
        let stem = stem(behavior, step);
        for ext in ["safetensors", "onnx", "nn"] {
            let _ = std::fs::remove_file(dir.join(format!("{stem}.{ext}")));
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ActionSpec;

    fn description(step: u64) -> CheckpointDescription {
        CheckpointDescription {
            format_version: CHECKPOINT_FORMAT_VERSION,
            behavior: "B".into(),
            trainer: "ppo".into(),
            step,
            policy: PolicyDescription {
                format_version: crate::policy::POLICY_FORMAT_VERSION,
                observation_shapes: vec![vec![3]],
                action_spec: ActionSpec { continuous_size: 2, discrete_branches: vec![] },
                hidden_units: 4,
                num_layers: 1,
                normalize: true,
                memory_size: 0,
                vis_encode_type: crate::policy::EncoderType::Simple,
                goal_observations: vec![],
                continuous_head: crate::policy::ContinuousHead::default(),
            },
            optimizer: AdamState { step: 7, beta1: 0.9, beta2: 0.999, epsilon: 1e-8 },
            weights_file: String::new(),
            weights_sha256: String::new(),
            reward: Some(1.5),
            creation_time: 0.0,
            curriculum: None,
            self_play: None,
            trainer_state: None,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mlagents-ckpt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn round_trip_torn_fallback_and_prune() {
        let dir = temp_dir("rt");
        let d = description(100);
        let weights = Weights::random(&d.policy, 1);
        Checkpoint::write(&dir, d.clone(), &weights).unwrap();
        Checkpoint::write(&dir, description(200), &weights).unwrap();
        let latest_ok = latest(&dir, "B").unwrap();
        assert_eq!(latest_ok.description.step, 200);
        assert_eq!(latest_ok.actor_weights().unwrap(), weights);
        // Cut the newest tensors in half: detected, and the previous checkpoint is used.
        let torn = dir.join("B-200.safetensors");
        let bytes = std::fs::read(&torn).unwrap();
        std::fs::write(&torn, &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(Checkpoint::read(&dir.join("B-200.json")), Err(CheckpointError::Torn { .. })));
        assert_eq!(latest(&dir, "B").unwrap().description.step, 100);
        assert!(at_step(&dir, "B", 200).is_err());
        assert!(at_step(&dir, "B", 300).unwrap_err().to_string().contains("100, 200"));
        Checkpoint::write(&dir, description(300), &weights).unwrap();
        prune(&dir, "B", 2);
        let steps: Vec<u64> = list(&dir, "B").iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, vec![200, 300]);
        assert!(!dir.join("B-100.safetensors").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_versions_are_refused() {
        let dir = temp_dir("ver");
        let path = Checkpoint::write(&dir, description(1), &Weights::random(&description(1).policy, 2)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap().replace("\"format_version\": 1,\n  \"behavior\"", "\"format_version\": 9,\n  \"behavior\"");
        std::fs::write(&path, text).unwrap();
        let err = Checkpoint::read(&path).unwrap_err();
        assert!(matches!(err, CheckpointError::Version { found: 9, .. }), "{err}");
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(Checkpoint::read(&path), Err(CheckpointError::BadDescription { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
