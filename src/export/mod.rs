//! From a checkpoint to the files Unity loads, without libtorch: `<stem>.onnx` (model API 3,
//! or 2 on request), `<stem>.nn` (Barracuda format 16, when the actions fit its interface)
//! and `<stem>.parity.json` (the checkpoint's recorded rollout inputs and the training
//! network's outputs, with the sha256 of each exported file).
//!
//! Every file is built in memory first and written atomically; if any write fails, the files
//! this export already wrote are removed, so an export is whole or absent.

pub mod convert;

use crate::spec::model::{self, ModelInput};
use crate::onnx::export::{to_onnx_bytes_with, OnnxApi, OnnxOptions};
use crate::spec::EntityLayout;
use crate::policy::parity::{ParityRecord, PARITY_FORMAT_VERSION};
use crate::policy::PolicyError;
use crate::checkpoint::{self, sha256_hex, write_atomic, Checkpoint, CheckpointError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why an export failed (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("behavior {behavior}: {problem}")]
    Policy { behavior: String, #[source] problem: PolicyError },
    #[error("writing {path}: {source}")]
    Write { path: String, #[source] source: std::io::Error },
    #[error("{0}")]
    Run(String),
}

/// Export choices.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportOptions {
    pub onnx_api: OnnxApi,
    /// How the Unity package the export is for lays out entity observations (Barracuda, as
    /// ML-Agents 0.28 exports, unless the target is Sentis-era).
    pub entity_layout: EntityLayout,
}

/// What one export wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    pub behavior: String,
    pub step: u64,
    pub onnx: PathBuf,
    /// None when the policy has no `.nn` form (`nn_skipped` says why).
    pub nn: Option<PathBuf>,
    pub nn_skipped: Option<String>,
    /// None when the checkpoint recorded no rollout.
    pub parity: Option<PathBuf>,
}

/// The parity record of a checkpoint (None if it recorded no rollout).
pub fn parity_record(checkpoint: &Checkpoint, files: BTreeMap<String, String>) -> Option<ParityRecord> {
    let d = &checkpoint.description;
    let first = checkpoint.rollout(&ModelInput::Observation(0).name())?;
    let batch = *first.shape.first()?;
    let observations = (0..d.policy.observation_shapes.len()).map(|i| checkpoint.rollout(&ModelInput::Observation(i).name()).map(|t| t.data.clone())).collect::<Option<Vec<_>>>()?;
    let values = |name: &str| checkpoint.rollout(name).map(|t| t.data.clone()).unwrap_or_default();
    Some(ParityRecord {
        format_version: PARITY_FORMAT_VERSION,
        behavior: d.behavior.clone(),
        step: d.step,
        policy: d.policy.clone(),
        files,
        batch,
        observations,
        action_masks: values(model::ACTION_MASKS),
        noise: values("noise"),
        deterministic_continuous_actions: values(model::DETERMINISTIC_CONTINUOUS_ACTIONS),
        continuous_actions: values(model::CONTINUOUS_ACTIONS),
        deterministic_discrete_actions: values(model::DETERMINISTIC_DISCRETE_ACTIONS).iter().map(|v| *v as i64).collect(),
        uniform: values("uniform"),
        discrete_actions: values(model::DISCRETE_ACTIONS).iter().map(|v| *v as i64).collect(),
        recurrent_in: values(model::RECURRENT_IN),
        recurrent_out: values(model::RECURRENT_OUT),
    })
}

/// Writes `<stem>.onnx`, `<stem>.nn` and (with `with_parity`) `<stem>.parity.json` into
/// `out_dir` from a verified checkpoint.
pub fn export_checkpoint(checkpoint: &Checkpoint, out_dir: &Path, stem: &str, options: ExportOptions, with_parity: bool) -> Result<Exported, ExportError> {
    let d = &checkpoint.description;
    let policy_error = |problem| ExportError::Policy { behavior: d.behavior.clone(), problem };
    let weights = checkpoint.actor_weights()?;
    let onnx_options = OnnxOptions { api: options.onnx_api, entity_layout: options.entity_layout };
    let onnx = to_onnx_bytes_with(&d.policy, &weights, onnx_options).map_err(policy_error)?;
    let (nn, nn_skipped) = match crate::barracuda::export::to_nn(&d.policy, &weights) {
        Ok(model) => (Some(crate::barracuda::write(&model)), None),
        Err(PolicyError::Unsupported(why)) => (None, Some(why)),
        Err(e) => return Err(policy_error(e)),
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![(out_dir.join(format!("{stem}.onnx")), onnx)];
    if let Some(bytes) = nn {
        files.push((out_dir.join(format!("{stem}.nn")), bytes));
    }
    let mut parity_path = None;
    if with_parity {
        let digests = files.iter().map(|(p, b)| (p.file_name().unwrap_or_default().to_string_lossy().into_owned(), sha256_hex(b))).collect();
        if let Some(record) = parity_record(checkpoint, digests) {
            let path = out_dir.join(format!("{stem}.parity.json"));
            files.push((path.clone(), serde_json::to_vec_pretty(&record).expect("plain data serialises")));
            parity_path = Some(path);
        }
    }
    std::fs::create_dir_all(out_dir).map_err(|source| ExportError::Write { path: out_dir.display().to_string(), source })?;
    for (k, (path, bytes)) in files.iter().enumerate() {
        if let Err(e) = write_atomic(path, bytes) {
            for (written, _) in &files[..k] {
                let _ = std::fs::remove_file(written);
            }
            return Err(ExportError::Write { path: path.display().to_string(), source: e });
        }
    }
    let nn_path = files.iter().map(|(p, _)| p).find(|p| p.extension().is_some_and(|e| e == "nn")).cloned();
    Ok(Exported { behavior: d.behavior.clone(), step: d.step, onnx: files[0].0.clone(), nn: nn_path, nn_skipped, parity: parity_path })
}

/// The behaviors with checkpoint folders in a run folder (sub-folders holding `<Name>-<step>.json`).
pub fn run_behaviors(run_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !checkpoint::list(&run_dir.join(name), name).is_empty())
        .collect();
    names.sort();
    names
}

/// Exports a run: for each behavior (or the one named), its latest usable checkpoint (or the
/// one at `step`) becomes `<Behavior>.onnx`, `.nn` and `.parity.json` in the run folder.
pub fn export_run(run_dir: &Path, behavior: Option<&str>, step: Option<u64>, options: ExportOptions) -> Result<Vec<Exported>, ExportError> {
    if run_dir.exists() && !run_dir.is_dir() {
        return Err(ExportError::Run(format!("{} is a file, not a run folder", run_dir.display())));
    }
    if !run_dir.is_dir() {
        return Err(ExportError::Run(format!("run folder {} does not exist", run_dir.display())));
    }
    let with_checkpoints = run_behaviors(run_dir);
    let behaviors = match behavior {
        Some(b) if !with_checkpoints.iter().any(|w| w == b) => {
            let known = if with_checkpoints.is_empty() { "none".to_string() } else { with_checkpoints.join(", ") };
            return Err(ExportError::Run(format!("no checkpoint of behavior {b} in {} (behaviors with checkpoints: {known})", run_dir.display())));
        }
        Some(b) => vec![b.to_string()],
        None => with_checkpoints,
    };
    if behaviors.is_empty() {
        return Err(ExportError::Run(format!("{} holds no checkpoints", run_dir.display())));
    }
    // Read and verify every checkpoint before writing anything.
    let mut checkpoints = vec![];
    for b in &behaviors {
        let dir = run_dir.join(b);
        let c = match step {
            Some(s) => checkpoint::at_step(&dir, b, s)?,
            None => checkpoint::latest(&dir, b)?,
        };
        c.actor_weights()?;
        checkpoints.push(c);
    }
    checkpoints.iter().map(|c| export_checkpoint(c, run_dir, &c.description.behavior, options, true)).collect()
}
