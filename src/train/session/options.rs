//! How to run a training session besides its configuration (`mlagents-learn`'s flags that
//! are not configuration: where the environment and the run folder are, resume, stop).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How to run a training session besides the configuration.
#[derive(Debug, Clone)]
pub struct LearnOptions {
    /// `--env`: a build, `sim:SCENE`, or `None` for the Editor.
    pub env: Option<String>,
    /// The run folder: checkpoints, exports, TensorBoard files, run logs (None: nothing is
    /// written, no checkpoints).
    pub run_dir: Option<PathBuf>,
    pub timeout_wait: Duration,
    /// `--resume`: continue every behavior from its latest checkpoint in `run_dir` (step,
    /// weights, normalisers, optimizer state).
    pub resume: bool,
    /// `--initialize-from`: another run folder whose latest checkpoints give the initial
    /// weights (step 0, fresh optimizer).
    pub initialize_from: Option<PathBuf>,
    /// The resolved configuration, written to `<run>/configuration.yaml` once every behavior
    /// present at the first reset has its trainer (for `--resume`: once its checkpoint has
    /// loaded), so a failed start or resume leaves the earlier record as it was.
    pub configuration_yaml: Option<String>,
    /// Set (e.g. by a signal handler) to stop after the current step: a checkpoint is written,
    /// the environments closed and the policies exported.
    pub stop: Option<&'static AtomicBool>,
}

impl LearnOptions {
    /// Options for `env` with nothing written to disk.
    pub fn in_memory(env: &str) -> Self {
        Self { env: Some(env.into()), run_dir: None, timeout_wait: Duration::from_secs(60), resume: false, initialize_from: None, configuration_yaml: None, stop: None }
    }
}
