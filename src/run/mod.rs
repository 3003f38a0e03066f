//! Running ML-Agents policies on tract: ONNX models (model API v1-v3) through tract-onnx, one
//! optimized plan per batch size; named float tensors in and out.
//!
//! `.nn` models are read by [`crate::barracuda`] and lowered onto tract ([`NnPolicy`]).

mod check;
mod nn;
mod onnx;
mod parity;
mod play;
mod tensors;

pub use check::{check, ModelFacts};
pub use nn::NnPolicy;
pub use play::{play, PlayError, PlayReport, PolicyDriver};
pub use onnx::{LoadOptions, OnnxInput, OnnxPolicy, NOISE_INPUT, UNIFORM_INPUT};
pub use parity::{check_parity, compare_models, record_steps, CompareReport, OutputCheck, ParityReport};
pub use tensors::{NamedTensors, TensorData};

/// Why a model cannot be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("{path} is not an ONNX model: {detail}")]
    NotOnnx { path: String, detail: String },
    #[error("tract cannot build a plan for {path} at batch {batch}: {detail}")]
    Plan { path: String, batch: usize, detail: String },
    #[error("cannot lower {path} onto tract: {detail}")]
    Lower { path: String, detail: String },
    #[error("input {name:?}: {detail}")]
    BadInput { name: String, detail: String },
    #[error("the model needs input {name:?} (inputs: {known:?})")]
    MissingInput { name: String, known: Vec<String> },
    #[error("running {path} failed: {detail}")]
    Eval { path: String, detail: String },
}

/// A policy in either format.
#[allow(clippy::large_enum_variant)] // a handful of policies per process
pub enum Policy {
    Onnx(OnnxPolicy),
    Nn(NnPolicy),
}

impl Policy {
    /// Loads `.nn` (by extension or by its version header) or ONNX.
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let is_nn = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("nn"));
        Ok(if is_nn { Self::Nn(NnPolicy::load(path, options)?) } else { Self::Onnx(OnnxPolicy::load(path, options)?) })
    }

    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        match self {
            Self::Onnx(p) => p.run(inputs),
            Self::Nn(p) => p.run(inputs),
        }
    }

    pub fn outputs(&self) -> &[String] {
        match self {
            Self::Onnx(p) => p.outputs(),
            Self::Nn(p) => p.outputs(),
        }
    }

    /// Whether the (possibly rewritten) graph declares an input of this name.
    pub fn declares_input(&self, name: &str) -> bool {
        match self {
            Self::Onnx(p) => p.inputs().iter().any(|i| i.name == name),
            Self::Nn(p) => p.declares_input(name),
        }
    }
}
