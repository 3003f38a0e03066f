//! Running ML-Agents policies on tract: ONNX models (model API v1-v3) through tract-onnx, one
//! optimized plan per batch size; named float tensors in and out.
//!
//! The `.nn` format is read by [`crate::barracuda`]; lowering it onto tract is not built yet.

mod onnx;
mod tensors;

pub use onnx::{LoadOptions, OnnxInput, OnnxPolicy};
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
    #[error("input {name:?}: {detail}")]
    BadInput { name: String, detail: String },
    #[error("the model needs input {name:?} (inputs: {known:?})")]
    MissingInput { name: String, known: Vec<String> },
    #[error("running {path} failed: {detail}")]
    Eval { path: String, detail: String },
}
