//! The interface of a loaded policy, whatever its file format: the inputs it declares, its
//! outputs, its ML-Agents constants and its recurrent memories. Each format's reader builds it
//! once ([`super::OnnxPolicy::interface`], [`super::NnPolicy::interface`]); playing, checking,
//! parity and `mlagents-run inspect` read it and never look at the format again.

use super::ModelFormat;
use crate::spec::model::{self, ModelInput};
use crate::spec::EntityLayout;
use serde::Serialize;
use std::collections::BTreeMap;

/// An input the model declares: its name and its dims after the batch (-1 = symbolic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredInput {
    pub name: String,
    pub dims: Vec<i64>,
}

/// An output the model declares, with its shape at batch 1 where a run showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredOutput {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape_at_batch_1: Option<Vec<usize>>,
}

/// A recurrent memory: read from `input`, written to `output`, and kept per agent at
/// `offset..offset + size` of the agent's memory vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemorySlot {
    pub input: String,
    pub output: String,
    pub offset: usize,
    pub size: usize,
    /// Whether the input is also one of [`ModelInterface::inputs`] (ONNX's `recurrent_in`);
    /// `.nn` memories are inputs of their own, fed as `[batch, size]`.
    #[serde(skip)]
    pub declared: bool,
    /// The memory's dims after the batch as the file gives them.
    #[serde(skip)]
    pub dims: Vec<i64>,
}

/// The version fields of the file a policy came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FileVersion {
    /// A Barracuda `.nn` file: its format version.
    Barracuda { version: i64 },
    /// An ONNX model: IR version, the newest default opset, who wrote it.
    Onnx { ir_version: i64, opset: Option<i64>, producer: String },
}

/// What a loaded policy declares (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInterface {
    pub format: ModelFormat,
    #[serde(flatten)]
    pub file_version: FileVersion,
    /// The inputs a caller feeds by name (`.nn` memories are in [`Self::memories`]).
    pub inputs: Vec<DeclaredInput>,
    pub outputs: Vec<DeclaredOutput>,
    /// ML-Agents' constants the model holds ([`model::MODEL_CONSTANTS`]), all their values.
    pub constants: BTreeMap<String, Vec<f32>>,
    pub memories: Vec<MemorySlot>,
    /// The width of an agent's memory vector (0 for feed-forward policies).
    pub memory_size: usize,
    /// Layers (`.nn`) or nodes (ONNX) by operator.
    pub operators: BTreeMap<String, usize>,
    /// Weights and constants holding NaN or infinities, each as `name (count values)`. Such a
    /// model gives NaN actions in Unity; tract may give finite ones.
    pub non_finite_weights: Vec<String>,
    /// How each entity (rank-3 `[batch, K, E]`) observation input expects its entities laid
    /// out: as recorded by our exporter, else as its graph reads it (0.28's transpose in front
    /// means Barracuda's view). Empty for models without entity inputs and for `.nn`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub entity_layouts: BTreeMap<String, EntityLayout>,
}

impl ModelInterface {
    /// The first value of an ML-Agents constant, if the model has it.
    pub fn constant(&self, name: &str) -> Option<f32> {
        self.constants.get(name).and_then(|v| v.first()).copied()
    }

    /// Whether the model has an output of this name.
    pub fn has_output(&self, name: &str) -> bool {
        self.outputs.iter().any(|o| o.name == name)
    }

    /// The dims of a declared input (memories included), if the model declares it.
    pub fn input(&self, name: &str) -> Option<&[i64]> {
        self.all_inputs().find(|(n, _)| *n == name).map(|(_, d)| d)
    }

    /// Every input the model reads with its dims: the declared ones, then `.nn` memories.
    pub fn all_inputs(&self) -> impl Iterator<Item = (&str, &[i64])> {
        let declared = self.inputs.iter().map(|i| (i.name.as_str(), i.dims.as_slice()));
        let memories = self.memories.iter().filter(|m| !m.declared).map(|m| (m.input.as_str(), m.dims.as_slice()));
        declared.chain(memories)
    }

    /// Whether `name` is the input of a recurrent memory.
    pub fn is_memory_input(&self, name: &str) -> bool {
        self.memories.iter().any(|m| m.input == name)
    }

    /// Whether the model outputs a memory (`.nn` memories always do; ONNX through
    /// `recurrent_out`).
    pub fn outputs_memory(&self) -> bool {
        self.memories.iter().any(|m| !m.declared) || self.has_output(model::RECURRENT_OUT)
    }

    /// The ONNX memory slot of a model that declares `recurrent_in` (its width is the input's
    /// last dim; it is written back from `recurrent_out`).
    pub(super) fn onnx_memory(inputs: &[DeclaredInput]) -> Vec<MemorySlot> {
        let Some(input) = inputs.iter().find(|i| ModelInput::parse(&i.name) == Some(ModelInput::RecurrentIn)) else { return vec![] };
        let size = input.dims.last().copied().unwrap_or(0).max(0) as usize;
        if size == 0 {
            return vec![];
        }
        vec![MemorySlot { input: input.name.clone(), output: model::RECURRENT_OUT.into(), offset: 0, size, declared: true, dims: input.dims.clone() }]
    }
}

/// `name (count values)` for each non-finite weight, as [`ModelInterface::non_finite_weights`]
/// lists them.
pub(super) fn describe_non_finite(found: Vec<(String, usize)>) -> Vec<String> {
    found.into_iter().map(|(name, count)| format!("{name} ({count} non-finite value{})", if count == 1 { "" } else { "s" })).collect()
}
