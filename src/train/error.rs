//! Why training stopped, with its cause attached ([`std::error::Error::source`]) so that an
//! embedder can match on the kind and walk the chain; each message names the behavior, the
//! file or the setting concerned.

use crate::checkpoint::CheckpointError;
use crate::env::EnvError;
use crate::export::ExportError;
use crate::train::config::ConfigError;
use std::path::PathBuf;

/// A training error.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The environment failed: launch, connection, a malformed message, its process died.
    #[error(transparent)]
    Environment(#[from] EnvError),
    /// A checkpoint could not be written, read back, or loaded (`context` says which, e.g.
    /// `cannot resume 3DBall`).
    #[error("{}", with_context(context, source))]
    Checkpoint { context: Option<String>, #[source] source: CheckpointError },
    /// A checkpoint's policy could not be exported.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The configuration file was refused.
    #[error(transparent)]
    Config(#[from] Box<ConfigError>),
    /// The configuration and the environment (or a checkpoint) do not agree: a behavior the
    /// configuration does not name, two teams with different specs, a network that differs
    /// from the checkpoint's.
    #[error("{0}")]
    Mismatch(String),
    /// The environment needs a feature this trainer lacks.
    #[error("{0}")]
    Unsupported(String),
    /// The training diverged (non-finite outputs, loss or weights); it stops, and the last
    /// good checkpoint on disk stays the last one.
    #[error("training of {behavior} diverged at step {step}: {what}; training stopped (lower learning_rate, now {learning_rate:e}, or check the rewards and observations)")]
    Diverged { behavior: String, step: u64, what: String, learning_rate: f64 },
    /// Numbers from the environment beyond what training's float32 arithmetic holds (an
    /// observation whose square overflows the normaliser, rewards whose returns overflow):
    /// training stops before they make it diverge, naming where they came from.
    #[error("{behavior}: {what} of agent {agent} {detail}, beyond what training in float32 can take; training stopped at step {step} (scale them down in the environment)")]
    Overflow { behavior: String, agent: i32, step: u64, what: String, detail: String },
    /// A file or folder of the run folder could not be written (`what`: e.g. `writing`,
    /// `TensorBoard folder`).
    #[error("{what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, #[source] source: std::io::Error },
    /// A player failed and its worker has no restarts left (`env_settings`' limits).
    #[error("{error}; worker {worker} is not restarted again: {why}")]
    RestartsExhausted { worker: usize, why: String, #[source] error: EnvError },
    /// A behavior's update thread (`threaded: true`) ended with an update in hand.
    #[error("the update thread of {behavior} failed: {detail}")]
    UpdateThread { behavior: String, detail: String },
    /// An error after which the training so far was checkpointed.
    #[error("{error} (checkpoints of the training so far were written: {saved})")]
    AfterCheckpoints { #[source] error: Box<TrainError>, saved: String },
}

fn with_context(context: &Option<String>, source: &CheckpointError) -> String {
    match context {
        Some(context) => format!("{context}: {source}"),
        None => source.to_string(),
    }
}

impl TrainError {
    /// A checkpoint error, with what was being done.
    pub fn checkpoint(context: impl Into<String>, source: CheckpointError) -> Self {
        Self::Checkpoint { context: Some(context.into()), source }
    }

    /// An error writing a file of the run folder.
    pub fn writing(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { what: "writing", path: path.into(), source }
    }
}
