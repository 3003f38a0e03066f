//! Barracuda `.nn` policies on tract: the model is lowered to an ONNX graph
//! ([`crate::barracuda::to_onnx`]) and run by the same [`OnnxPolicy`] machinery. Inputs may be
//! given as ML-Agents feeds them (`vector_observation` `[N, size]`, `action_masks`
//! `[N, sum of branches]`, visual `[N, H, W, C]`) or in Barracuda's rank 4; missing memory
//! inputs are zeros (a new episode). Outputs of shape `[N, 1, 1, C]` come back as `[N, C]`.

use crate::spec::model;
use super::onnx::{bounded_elements, LoadOptions, OnnxPolicy, PreparedInputs, MAX_INPUT_ELEMENTS, NOISE_INPUT};
use super::interface::{describe_non_finite, DeclaredInput, DeclaredOutput, FileVersion, MemorySlot, ModelInterface};
use super::tensors::{TensorView, TensorViews};
use super::{ModelFormat, NamedTensors, RunError, TensorData};
use crate::barracuda::{self, LowerOptions, NnModel};

/// A loaded `.nn` policy.
pub struct NnPolicy {
    model: NnModel,
    inner: OnnxPolicy,
    /// The branch sizes `prev_action` is one-hot encoded with (the depths of the model's
    /// OneHot layers, in order), when the model reads it.
    prev_action_branches: Vec<usize>,
}


impl NnPolicy {
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let label = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| RunError::Io { path: label.clone(), source })?;
        Self::from_bytes(&bytes, &label, options)
    }

    /// Reads a `.nn` model from bytes (`label` names it in errors).
    pub fn from_bytes(bytes: &[u8], label: &str, options: LoadOptions) -> Result<Self, RunError> {
        let model = barracuda::read(bytes).map_err(|e| RunError::Read { path: label.into(), detail: e.to_string() })?;
        Self::from_model(model, label, options)
    }

    pub fn from_model(mut model: NnModel, label: &str, options: LoadOptions) -> Result<Self, RunError> {
        // Barracuda pads shorter shapes with 1s on the right (its TensorShape constructor).
        for shape in model.inputs.iter_mut().map(|i| &mut i.shape).chain(model.memories.iter_mut().map(|m| &mut m.shape)) {
            if shape.len() > 4 {
                return Err(RunError::Lower { path: label.into(), detail: format!("input or memory shape {shape:?} has more than 4 entries") });
            }
            shape.resize(4, 1);
        }
        for (name, shape) in model.inputs.iter().map(|i| (&i.name, &i.shape)).chain(model.memories.iter().map(|m| (&m.input, &m.shape))) {
            let per_row: Vec<usize> = shape.iter().skip(1).map(|d| (*d).max(1) as usize).collect();
            if bounded_elements(&per_row).is_none() {
                return Err(RunError::Lower {
                    path: label.into(),
                    detail: format!("input or memory {name:?} declares shape {shape:?}, over {MAX_INPUT_ELEMENTS} values per agent"),
                });
            }
        }
        let prev_action_branches = if model.inputs.iter().any(|i| i.name == model::PREV_ACTION) {
            model.layers.iter().filter(|l| l.layer_type == barracuda::LayerType::OneHot).filter_map(|l| l.pool.first().map(|d| (*d).max(0) as usize)).collect()
        } else {
            vec![]
        };
        let lowered = barracuda::to_onnx(&model, LowerOptions { deterministic: options.deterministic, seed: options.seed, for_runner: true })
            .map_err(|e| RunError::Lower { path: label.into(), detail: e.to_string() })?;
        // The lowering already did what the ONNX rewrites do.
        let inner = OnnxPolicy::from_proto(lowered, label, LoadOptions { noise_input: options.noise_input, ..Default::default() })?;
        Ok(Self { model, inner, prev_action_branches })
    }

    /// Whether the lowered graph declares an input of this name.
    pub fn declares_input(&self, name: &str) -> bool {
        self.inner.inputs().iter().any(|i| i.name == name)
    }

    /// Tensors holding NaN or infinities: name and count.
    pub fn non_finite_weights(&self) -> Vec<(String, usize)> {
        self.model
            .tensors()
            .filter_map(|(_, t)| {
                let count = self.model.tensor_values(t).iter().filter(|v| !v.is_finite()).count();
                (count > 0).then(|| (t.name.clone(), count))
            })
            .collect()
    }

    /// The model's interface: its inputs (Barracuda `[N, H, W, C]` dims after the batch), its
    /// outputs, its constants (tensors of the file) and its memories, laid side by side in an
    /// agent's memory vector in file order.
    pub fn interface(&self) -> ModelInterface {
        let m = &self.model;
        let mut memories = vec![];
        let mut offset = 0;
        for memory in &m.memories {
            let size = memory.shape[3].max(0) as usize;
            memories.push(MemorySlot {
                input: memory.input.clone(),
                output: memory.output.clone(),
                offset,
                size,
                declared: false,
                dims: vec![1, 1, memory.shape[3] as i64],
            });
            offset += size;
        }
        let operators = m.layer_histogram().into_iter().map(|(t, n)| (format!("{t:?}"), n)).collect();
        ModelInterface {
            format: ModelFormat::Nn,
            file_version: FileVersion::Barracuda { version: m.version },
            inputs: m.inputs.iter().map(|i| DeclaredInput { name: i.name.clone(), dims: i.shape.iter().skip(1).map(|d| *d as i64).collect() }).collect(),
            outputs: m.outputs.iter().map(|o| DeclaredOutput { name: o.clone(), shape_at_batch_1: None }).collect(),
            constants: model::MODEL_CONSTANTS.iter().filter_map(|c| m.tensor(c).map(|t| (c.to_string(), m.tensor_values(t)))).collect(),
            memory_size: m.constant(model::MEMORY_SIZE).map_or(offset, |v| v as usize).max(offset),
            memories,
            operators,
            non_finite_weights: describe_non_finite(self.non_finite_weights()),
            entity_layouts: Default::default(),
        }
    }

    /// The parsed model.
    pub fn model(&self) -> &NnModel {
        &self.model
    }

    /// Computes only the named outputs from now on ([`OnnxPolicy::keep_outputs`]).
    pub fn keep_outputs(&mut self, names: &[&str]) -> Result<(), RunError> {
        self.inner.keep_outputs(names)
    }

    /// Output names: the model's outputs, then its memory outputs.
    pub fn outputs(&self) -> &[String] {
        self.inner.outputs()
    }

    /// Previous actions must be action indices of their branch, as Unity feeds them.
    fn check_previous_actions(&self, given: &TensorData) -> Result<(), RunError> {
        let branches = &self.prev_action_branches;
        if branches.is_empty() || given.shape.last() != Some(&branches.len()) {
            return Ok(());
        }
        for (i, value) in given.data.iter().enumerate() {
            let (row, branch) = (i / branches.len(), i % branches.len());
            let size = branches[branch];
            if !(value.fract() == 0.0 && *value >= 0.0 && (*value as usize) < size) {
                return Err(RunError::BadInput {
                    name: model::PREV_ACTION.into(),
                    detail: format!("value {value} at row {row} is outside branch {branch} (size {size}): previous actions are indices 0..{size}"),
                });
            }
        }
        Ok(())
    }

    /// Runs the model on named inputs; returns every output (`[N, 1, 1, C]` ones as `[N, C]`).
    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        Ok(unfolded_outputs(self.inner.run_owned(self.prepare(inputs)?)?))
    }

    /// Checks named inputs and copies them into the runner's tensors: each at its rank-4
    /// shape, zeros for the memories not given.
    pub fn prepare(&self, inputs: &NamedTensors) -> Result<PreparedInputs, RunError> {
        let batch = inputs.values().next().and_then(|t| t.shape.first()).copied().unwrap_or(1);
        // Each given input's rank-4 shape (its values are fed as they are, not copied), and
        // zeros for the memories not given.
        let mut given: Vec<(&str, Vec<usize>, &[f32])> = vec![];
        let mut zero_memories: Vec<(&str, Vec<usize>, Vec<f32>)> = vec![];
        let declared = self.model.inputs.iter().map(|i| (&i.name, &i.shape));
        let memories = self.model.memories.iter().map(|m| (&m.input, &m.shape));
        for (name, shape) in declared.chain(memories) {
            match inputs.get(name.as_str()) {
                Some(t) => {
                    if name == model::PREV_ACTION {
                        self.check_previous_actions(t)?;
                    }
                    given.push((name, rank4_shape(name, shape, t)?, &t.data));
                }
                None if self.model.memories.iter().any(|m| &m.input == name) => {
                    let size = shape[3].max(1) as usize;
                    let n = bounded_elements(&[batch, size]).ok_or_else(|| RunError::BadInput {
                        name: name.clone(),
                        detail: format!("a memory of {size} values for {batch} agents is over {MAX_INPUT_ELEMENTS} values"),
                    })?;
                    zero_memories.push((name, vec![batch, 1, 1, size], vec![0.0; n]));
                }
                None => {
                    return Err(RunError::MissingInput {
                        name: name.clone(),
                        known: self.model.inputs.iter().map(|i| i.name.clone()).collect(),
                    })
                }
            }
        }
        let mut fed: TensorViews = given.iter().map(|(name, shape, data)| (*name, TensorView { shape, data })).collect();
        fed.extend(zero_memories.iter().map(|(name, shape, data)| (*name, TensorView { shape, data })));
        if let Some(noise) = inputs.get(NOISE_INPUT) {
            // [N, values per row], reshaped to each random layer's shape in the graph.
            fed.insert(NOISE_INPUT, noise.view());
        }
        self.inner.prepare(&fed)
    }

    /// Runs the model on inputs [`Self::prepare`] made (see [`OnnxPolicy::run_prepared`]).
    pub fn run_prepared(&self, inputs: &PreparedInputs) -> Result<NamedTensors, RunError> {
        Ok(unfolded_outputs(self.inner.run_prepared(inputs)?))
    }
}

/// Outputs of shape `[N, 1, 1, C]` as `[N, C]`.
fn unfolded_outputs(mut outputs: NamedTensors) -> NamedTensors {
    for t in outputs.values_mut() {
        if t.shape.len() == 4 && t.shape[1] == 1 && t.shape[2] == 1 {
            t.shape = vec![t.shape[0], t.shape[3]];
        }
    }
    outputs
}

/// The rank-4 shape a `.nn` input or memory of declared `shape` (padded to 4 entries) is fed
/// with: a rank-4 tensor as it is, `[N, size]` as ML-Agents feeds it (or Barracuda's
/// `[N, H, W, C]`) unfolded.
fn rank4_shape(name: &str, shape: &[i32], t: &TensorData) -> Result<Vec<usize>, RunError> {
    t.validate(name)?;
    if t.shape.len() == 4 {
        return Ok(t.shape.clone());
    }
    let (h, w, c) = (shape[1].max(1) as usize, shape[2].max(1) as usize, shape[3]);
    let declared = if (h, w) == (1, 1) { format!("[batch, {c}]") } else { format!("[batch, {h}, {w}, {c}]") };
    let misfit = || RunError::BadInput { name: name.into(), detail: format!("shape {:?} does not fit the declared {declared}", t.shape) };
    let [n, per_row] = t.shape[..] else { return Err(misfit()) };
    if per_row > MAX_INPUT_ELEMENTS || (c > 0 && per_row != h * w * c as usize) || !per_row.is_multiple_of(h * w) {
        return Err(misfit());
    }
    Ok(vec![n, h, w, per_row / (h * w)])
}
