//! ONNX policies on tract. Before tract sees the graph, rewrites are made on the protobuf:
//! the `RandomNormalLike` rename workaround for torch-1.x exports (stack.md §2: tract tells
//! the op by node name), and, in deterministic mode, sampling replaced by its mode
//! (`RandomNormalLike` noise by zeros, `Multinomial` by `ArgMax`). In sampled mode each
//! `Multinomial` becomes an inverse-CDF sampler fed by uniform draws from the policy's own
//! seeded stream, which continues from run to run (tract's `Multinomial` re-seeds its
//! generator on every run, so it would repeat one draw at every decision). Then the engine's
//! rewrites ([`crate::engine::rewrite_graph`]) make tract compute what the graph says, and
//! faster; its plans ([`crate::engine::build_plan`]) are built per batch size and cached.

use crate::spec::entity_layout::{self, EntityLayout, InputReader};
use crate::spec::model::{self, ModelInput};
use super::interface::{describe_non_finite, DeclaredInput, DeclaredOutput, FileVersion, ModelInterface};
use super::tensors::{views, TensorViews};
use super::{ModelFormat, NamedTensors, RunError, TensorData};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Mutex;
use tract_onnx::pb::{self, ModelProto};
use tract_onnx::prelude::*;

/// A running state of an optimized plan, kept between runs: no per-run allocation, and
/// random ops continue their stream (as Barracuda's worker does) instead of restarting it.
use crate::engine::PlanState;

/// A declared graph input: name and dims (`None` = symbolic, e.g. the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxInput {
    pub name: String,
    pub dims: Vec<Option<usize>>,
}

impl OnnxInput {
    /// The declared dims as a person reads them: `[batch, 8]` (a symbolic dim is named by
    /// its position: the first is the batch, others are "any").
    pub fn describe_dims(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| d.map_or_else(|| if i == 0 { "batch".to_string() } else { "any".to_string() }, |v| v.to_string()))
            .collect();
        format!("[{}]", dims.join(", "))
    }
}

/// How to load a policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Replace in-graph sampling by its mode: noise by zero, multinomial draws by argmax.
    pub deterministic: bool,
    /// Seed of the random draws (the in-graph random ops' own seed, or a random one for the
    /// discrete draws, otherwise). The streams continue from run to run of one policy.
    pub seed: Option<u32>,
    /// Take the randomness from extra inputs instead of drawing it, so that sampled actions
    /// become reproducible for parity checks against recorded noise: the Gaussian noise from
    /// [`NOISE_INPUT`] (each `RandomNormalLike` becomes a `Reshape` of it to its input's shape), and each discrete
    /// branch's draw from column b of [`UNIFORM_INPUT`] (the b-th `Multinomial` becomes an
    /// inverse-CDF sampler: the number of cumulative probabilities below u).
    pub noise_input: bool,
}

pub use crate::spec::model::{bounded_elements, MAX_INPUT_ELEMENTS};

/// The newest default-domain opset this runner takes (tract is tested on 9 to 19; ONNX's
/// own opsets stop at 21 for every op ML-Agents uses).
pub const MAX_OPSET: i64 = 21;

/// The extra input that carries the noise when [`LoadOptions::noise_input`] is set.
pub const NOISE_INPUT: &str = "parity_noise";
/// The extra input `[batch, branches]` of uniform draws in [0, 1) for the discrete branches.
pub const UNIFORM_INPUT: &str = "parity_uniform";

/// A loaded ONNX policy.
pub struct OnnxPolicy {
    path: String,
    proto: ModelProto,
    /// The inputs a caller gives (the internal uniform draws not among them).
    inputs: Vec<OnnxInput>,
    outputs: Vec<String>,
    /// Plans by batch, each with the input shapes it was built for (a model whose first input
    /// is not batch-major, an ONNX `LSTM`'s `[sequence, batch, features]`, can share a first
    /// dim between calls of other shapes).
    states: Mutex<HashMap<usize, (Vec<Vec<usize>>, PlanState)>>,
    /// The inputs the caller gives NHWC and the graph reads NCHW ([`crate::engine::nchw_tensor`]).
    nchw_inputs: Vec<String>,
    /// Sampled discrete actions: the stream that feeds the graph's last input,
    /// [`UNIFORM_INPUT`], with one draw per row and branch.
    discrete_draws: Option<DiscreteDraws>,
    /// Tells this policy's [`PreparedInputs`] from another's.
    id: u64,
    /// The operators of the graph as the file holds it (before the rewrites), by type.
    file_operators: BTreeMap<String, usize>,
}

/// The uniform draws of sampled discrete actions (see the module docs).
struct DiscreteDraws {
    branches: usize,
    rng: Mutex<rand_chacha::ChaCha8Rng>,
}

impl DiscreteDraws {
    fn draw(&self, batch: usize) -> Tensor {
        use rand::Rng;
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let draws: Vec<f32> = (0..batch * self.branches).map(|_| rng.random::<f32>()).collect();
        Tensor::from_shape(&[batch, self.branches], &draws).expect("length is batch x branches")
    }
}

impl OnnxPolicy {
    /// Loads a model file.
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let bytes = std::fs::read(path).map_err(|source| RunError::Io { path: path.display().to_string(), source })?;
        Self::from_bytes(&bytes, &path.display().to_string(), options)
    }

    /// Loads a model from bytes (`label` names it in errors).
    pub fn from_bytes(bytes: &[u8], label: &str, options: LoadOptions) -> Result<Self, RunError> {
        use prost::Message;
        let proto = ModelProto::decode(bytes).map_err(|e| RunError::NotOnnx { path: label.into(), detail: e.to_string() })?;
        Self::from_proto(proto, label, options)
    }

    /// Builds a policy from a decoded (or generated) ONNX model.
    pub fn from_proto(mut proto: ModelProto, label: &str, options: LoadOptions) -> Result<Self, RunError> {
        let not_onnx = |detail: String| RunError::NotOnnx { path: label.into(), detail };
        if proto.graph.is_none() {
            return Err(not_onnx("no graph (an empty file, or not a model)".into()));
        }
        validate(&proto).map_err(|detail| RunError::InvalidGraph { path: label.into(), detail })?;
        let opset = proto.opset_import.iter().filter(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version).max().unwrap_or(9);
        let graph = proto.graph.as_mut().expect("checked above");
        let mut file_operators = BTreeMap::new();
        for node in &graph.node {
            *file_operators.entry(node.op_type.clone()).or_default() += 1;
        }
        let branches = graph.node.iter().filter(|n| n.op_type == "Multinomial").count();
        let nchw_inputs = rewrite_for_tract(graph, opset, options).map_err(|detail| RunError::InvalidGraph { path: label.into(), detail })?;
        let discrete_draws = (branches > 0 && !options.deterministic && !options.noise_input).then(|| {
            use rand::SeedableRng;
            let seed = options.seed.map_or_else(rand::random::<u64>, u64::from);
            DiscreteDraws { branches, rng: Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(seed)) }
        });
        let initializers: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs = graph
            .input
            .iter()
            .filter(|i| !initializers.contains(i.name.as_str()))
            .filter(|i| discrete_draws.is_none() || i.name != UNIFORM_INPUT)
            .map(|i| {
                let dims = input_dims(i);
                let dims = if nchw_inputs.contains(&i.name) { crate::engine::caller_dims(&dims) } else { dims };
                OnnxInput { name: i.name.clone(), dims }
            })
            .collect();
        let outputs = graph.output.iter().map(|o| o.name.clone()).collect();
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Self { path: label.into(), proto, inputs, outputs, states: Mutex::new(HashMap::new()), nchw_inputs, discrete_draws, id, file_operators })
    }

    pub fn inputs(&self) -> &[OnnxInput] {
        &self.inputs
    }

    /// Inputs Unity's loaders probe a model with: symbolic dims set to `batch`, zeros, and
    /// every action allowed in `action_masks`. A declared size over [`MAX_INPUT_ELEMENTS`] is
    /// an error, not an allocation.
    pub fn neutral_inputs(&self, batch: usize) -> Result<NamedTensors, RunError> {
        self.inputs
            .iter()
            .map(|i| {
                let shape: Vec<usize> = i.dims.iter().map(|d| d.unwrap_or(batch)).collect();
                let fill = if i.name == model::ACTION_MASKS { 1.0 } else { 0.0 };
                let n = bounded_elements(&shape).ok_or_else(|| RunError::TooLarge {
                    path: self.path.clone(),
                    name: i.name.clone(),
                    elements: shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" x "),
                    batch,
                    limit: MAX_INPUT_ELEMENTS,
                })?;
                Ok((i.name.clone(), TensorData { shape, data: vec![fill; n] }))
            })
            .collect()
    }

    /// Output names in graph order.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// Computes only the named outputs from now on (the others are dropped from the graph, so
    /// tract prunes the nodes only they need). Names the model lacks are ignored; keeping
    /// none is an error.
    pub fn keep_outputs(&mut self, names: &[&str]) -> Result<(), RunError> {
        let kept: Vec<String> = self.outputs.iter().filter(|o| names.contains(&o.as_str())).cloned().collect();
        if kept.is_empty() {
            return Err(RunError::InvalidGraph { path: self.path.clone(), detail: format!("none of the outputs {names:?} is an output of the model {:?}", self.outputs) });
        }
        if let Some(graph) = self.proto.graph.as_mut() {
            graph.output.retain(|o| kept.contains(&o.name));
        }
        self.outputs = kept;
        self.states.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        Ok(())
    }

    /// The protobuf as tract sees it.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// Initializers and `Constant` values holding NaN or infinities: name and count. tract
    /// turns some of them into finite, plausible actions where onnxruntime and Unity give NaN.
    pub fn non_finite_weights(&self) -> Vec<(String, usize)> {
        let Some(graph) = &self.proto.graph else { return vec![] };
        let constants = graph.node.iter().filter(|n| n.op_type == "Constant").flat_map(|n| n.attribute.iter().filter_map(|a| a.t.as_ref()));
        graph
            .initializer
            .iter()
            .chain(constants)
            .filter_map(|t| {
                let count = crate::onnx::tensor_values(t).map_or(0, |values| values.filter(|v| !v.is_finite()).count());
                (count > 0).then(|| (t.name.clone(), count))
            })
            .collect()
    }

    /// Builds the optimized plan for one set of input shapes (one per batch size).
    fn build_state(&self, shapes: &[Vec<usize>]) -> Result<PlanState, RunError> {
        crate::engine::build_plan(&self.proto, shapes).map_err(|detail| RunError::Plan { path: self.path.clone(), shapes: describe_shapes(shapes), detail })
    }

    /// Runs the model. Every declared input must be given; its shape must agree with the
    /// declared dims. Returns every output, converted to float.
    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        self.run_owned(self.prepare(&views(inputs))?)
    }

    /// Runs the model on inputs [`super::Policy::prepare`] checked and laid out: they are read
    /// where they are, not copied.
    pub fn run_prepared(&self, prepared: &PreparedInputs) -> Result<NamedTensors, RunError> {
        self.run_owned(prepared.clone())
    }

    /// [`Self::run_prepared`] on inputs no one else holds, which tract's ops may then reuse
    /// in place (a reshape of a value someone else holds copies it).
    pub(crate) fn run_owned(&self, prepared: PreparedInputs) -> Result<NamedTensors, RunError> {
        if prepared.policy != self.id {
            return Err(RunError::ForeignInputs { path: self.path.clone() });
        }
        let PreparedInputs { mut values, mut shapes, batch, .. } = prepared;
        if let Some(draws) = &self.discrete_draws {
            let uniform = draws.draw(batch);
            shapes.push(uniform.shape().to_vec());
            values.push(uniform.into_tvalue());
        }
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if states.get(&batch).is_none_or(|(built_for, _)| *built_for != shapes) {
            let state = self.build_state(&shapes)?;
            states.insert(batch, (shapes, state));
        }
        let (_, state) = states.get_mut(&batch).expect("inserted above");
        let results = match crate::engine::run_plan(state, values) {
            Ok(results) => results,
            Err(detail) => {
                // A state that failed half-way is not reused.
                states.remove(&batch);
                return Err(RunError::Eval { path: self.path.clone(), detail });
            }
        };
        self.collect(results)
    }

    /// Runs the model once on a plan state of its own, with the discrete draws at 0: the
    /// cached states and the random streams are left as they were, so looking at a model
    /// (its constants, its output shapes) does not change what it plays.
    fn probe(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        let PreparedInputs { mut values, mut shapes, batch, .. } = self.prepare(&views(inputs))?;
        if let Some(draws) = &self.discrete_draws {
            let zeros = Tensor::zero::<f32>(&[batch, draws.branches]).expect("shape of two dims");
            shapes.push(zeros.shape().to_vec());
            values.push(zeros.into_tvalue());
        }
        let mut state = self.build_state(&shapes)?;
        let results = crate::engine::run_plan(&mut state, values).map_err(|detail| RunError::Eval { path: self.path.clone(), detail })?;
        self.collect(results)
    }

    /// The given inputs copied into tract's tensors in the declared order (NHWC ones made
    /// NCHW), after checking names, shapes and that the batched inputs share one batch.
    pub(crate) fn prepare(&self, inputs: &TensorViews) -> Result<PreparedInputs, RunError> {
        let mut values = TVec::new();
        let mut shapes = Vec::new();
        for declared in &self.inputs {
            let given = inputs.get(declared.name.as_str()).ok_or_else(|| RunError::MissingInput {
                name: declared.name.clone(),
                known: self.inputs.iter().map(|i| i.name.clone()).collect(),
            })?;
            given.validate(&declared.name)?;
            // No declared dims: any shape (the noise input takes its shape from the graph).
            let fits = declared.dims.is_empty()
                || given.shape.len() == declared.dims.len()
                && given.shape.iter().zip(&declared.dims).all(|(g, d)| d.is_none_or(|d| d == *g));
            if !fits {
                return Err(RunError::BadInput {
                    name: declared.name.clone(),
                    detail: format!("shape {:?} does not fit the declared {}", given.shape, declared.describe_dims()),
                });
            }
            let tensor = if self.nchw_inputs.contains(&declared.name) {
                crate::engine::nchw_tensor(given.shape, given.data)
            } else {
                Tensor::from_shape(given.shape, given.data)
            };
            let tensor = tensor.map_err(|e| RunError::BadInput { name: declared.name.clone(), detail: e.to_string() })?;
            shapes.push(tensor.shape().to_vec());
            values.push(tensor.into_tvalue());
        }
        for name in inputs.keys() {
            if !self.inputs.iter().any(|i| i.name == *name) {
                return Err(RunError::BadInput { name: name.to_string(), detail: "the model has no such input".into() });
            }
        }
        let batch = shapes.first().and_then(|s| s.first()).copied().unwrap_or(1);
        // Inputs with a symbolic first dim share the batch (tract would broadcast a 1).
        let mut batched = self.inputs.iter().zip(&shapes).filter(|(d, s)| d.dims.first() == Some(&None) && !s.is_empty());
        if let Some((first, first_shape)) = batched.next() {
            if let Some((other, shape)) = batched.find(|(_, s)| s[0] != first_shape[0]) {
                return Err(RunError::BadInput {
                    name: other.name.clone(),
                    detail: format!("batch {} differs from the batch {} of input {}", shape[0], first_shape[0], first.name),
                });
            }
        }
        Ok(PreparedInputs { values, shapes, batch, policy: self.id })
    }

    /// The plan's results by output name, as float tensors.
    fn collect(&self, results: TVec<TValue>) -> Result<NamedTensors, RunError> {
        let eval = |e: TractError| RunError::Eval { path: self.path.clone(), detail: format!("{e:#}") };
        let mut out = NamedTensors::new();
        for (name, value) in self.outputs.iter().zip(results.iter()) {
            let floats = value.cast_to::<f32>().map_err(eval)?;
            let data = floats.try_as_plain_ram().and_then(|v| v.as_slice::<f32>().map(|s| s.to_vec())).map_err(eval)?;
            out.insert(name.clone(), TensorData { shape: value.shape().to_vec(), data });
        }
        Ok(out)
    }

    /// The model's interface. Its constants are graph outputs: they come from one
    /// [`Self::probe`] at batch 1 on [`Self::neutral_inputs`], which also gives each
    /// output's shape at batch 1.
    pub fn interface(&self) -> Result<ModelInterface, RunError> {
        let probed = self.probe(&self.neutral_inputs(1)?)?;
        let inputs: Vec<DeclaredInput> = self
            .inputs
            .iter()
            .map(|i| DeclaredInput { name: i.name.clone(), dims: i.dims.iter().skip(1).map(|d| d.map_or(-1, |v| v as i64)).collect() })
            .collect();
        let memories = ModelInterface::onnx_memory(&inputs);
        Ok(ModelInterface {
            format: ModelFormat::Onnx,
            file_version: FileVersion::Onnx {
                ir_version: self.proto.ir_version,
                opset: self.proto.opset_import.iter().map(|o| o.version).max(),
                producer: format!("{} {}", self.proto.producer_name, self.proto.producer_version).trim().to_string(),
            },
            outputs: self.outputs.iter().map(|o| DeclaredOutput { name: o.clone(), shape_at_batch_1: probed.get(o).map(|t| t.shape.clone()) }).collect(),
            constants: model::MODEL_CONSTANTS.iter().filter_map(|c| probed.get(*c).map(|t| (c.to_string(), t.data.clone()))).collect(),
            memory_size: memories.first().map_or(0, |m| m.size),
            memories,
            inputs,
            operators: self.file_operators.clone(),
            non_finite_weights: describe_non_finite(self.non_finite_weights()),
            entity_layouts: self.entity_layouts(),
        })
    }

    /// The layout each rank-3 observation input expects ([`ModelInterface::entity_layouts`]).
    fn entity_layouts(&self) -> BTreeMap<String, EntityLayout> {
        let recorded = self.proto.metadata_props.iter().find(|p| p.key == entity_layout::METADATA_KEY).and_then(|p| EntityLayout::parse(&p.value).ok());
        let graph = self.proto.graph.as_ref().expect("checked at load");
        let entity_inputs = self.inputs.iter().filter(|i| i.dims.len() == 3 && matches!(ModelInput::parse(&i.name), Some(ModelInput::Observation(_))));
        entity_inputs
            .map(|input| {
                let read = || {
                    let readers: Vec<InputReader> = graph
                        .node
                        .iter()
                        .filter(|n| n.input.contains(&input.name))
                        .map(|n| InputReader {
                            swaps_last_axes: n.op_type == "Transpose" && n.attribute.iter().any(|a| a.name == "perm" && a.ints == [0, 2, 1]),
                            feeds_reshape: graph.node.iter().any(|next| next.op_type == "Reshape" && n.output.iter().any(|o| next.input.first() == Some(o))),
                        })
                        .collect();
                    EntityLayout::read_by(&readers)
                };
                (input.name.clone(), recorded.unwrap_or_else(read))
            })
            .collect()
    }
}

/// A policy's inputs, checked and laid out in the runner's own tensors, so that runs read
/// them where they are (as onnxruntime reads a caller's arrays): the values in the declared
/// order, their shapes, the batch they share, and the policy they were prepared for.
#[derive(Clone)]
pub struct PreparedInputs {
    values: TVec<TValue>,
    shapes: Vec<Vec<usize>>,
    batch: usize,
    policy: u64,
}

/// Input shapes as a person reads them: `[1, 8], [1, 3]`.
fn describe_shapes(shapes: &[Vec<usize>]) -> String {
    shapes.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
}

/// Checks what tract would otherwise panic on or misread, in the model's own terms: the
/// default-domain opset, external data, operators tract does not know, names that nothing
/// provides (graph outputs and node inputs), and cycles.
fn validate(proto: &ModelProto) -> Result<(), String> {
    use std::collections::{HashMap, HashSet};
    let opset = proto.opset_import.iter().filter(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version).max();
    match opset {
        None => return Err("the model declares no opset for the default ONNX domain (opset_import is empty)".into()),
        Some(v) if v > MAX_OPSET => return Err(format!("model opset {v} is newer than this runner supports (up to {MAX_OPSET})")),
        Some(v) if v < 1 => return Err(format!("model opset {v} is not a valid opset")),
        _ => {}
    }
    let graph = proto.graph.as_ref().expect("checked by the caller");
    const EXTERNAL: i32 = 1;
    if let Some(t) = graph.initializer.iter().find(|t| t.data_location == Some(EXTERNAL)) {
        return Err(format!("initializer {:?} keeps its data in an external file; ONNX models with external data are not supported (save the model with its weights inside)", t.name));
    }
    let known_ops = tract_onnx::onnx().op_register.0;
    if let Some(node) = graph.node.iter().find(|n| !known_ops.contains_key(&n.op_type)) {
        return Err(format!("operator {} (node {:?}) is not supported by this runner", node.op_type, node.name));
    }
    // Attributes tract takes on trust (a Transpose whose perm repeats an axis made it size a
    // tensor of 8 GiB).
    for node in graph.node.iter().filter(|n| n.op_type == "Transpose") {
        if let Some(perm) = node.attribute.iter().find(|a| a.name == "perm") {
            let mut sorted = perm.ints.clone();
            sorted.sort_unstable();
            if !sorted.iter().copied().eq(0..perm.ints.len() as i64) {
                return Err(format!("node {:?} (Transpose) has perm {:?}, which is not a permutation of its axes", node.name, perm.ints));
            }
        }
    }
    let mut available: HashSet<&str> = graph.input.iter().map(|i| i.name.as_str()).chain(graph.initializer.iter().map(|t| t.name.as_str())).collect();
    let producer: HashMap<&str, usize> = graph.node.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i))).collect();
    for node in &graph.node {
        if let Some(missing) = node.input.iter().find(|i| !i.is_empty() && !available.contains(i.as_str()) && !producer.contains_key(i.as_str())) {
            return Err(format!("node {:?} ({}) reads {missing:?}, which no node, input or initializer provides", node.name, node.op_type));
        }
    }
    if let Some(output) = graph.output.iter().find(|o| !available.contains(o.name.as_str()) && !producer.contains_key(o.name.as_str())) {
        return Err(format!("graph output {:?} is not produced by any node", output.name));
    }
    // Every node must become computable from the inputs and initializers: what is left when
    // nothing more can be computed sits on a cycle.
    let mut pending: Vec<&pb::NodeProto> = graph.node.iter().collect();
    loop {
        let before = pending.len();
        pending.retain(|node| {
            let ready = node.input.iter().all(|i| i.is_empty() || available.contains(i.as_str()));
            if ready {
                available.extend(node.output.iter().map(|o| o.as_str()));
            }
            !ready
        });
        if pending.is_empty() {
            return Ok(());
        }
        if pending.len() == before {
            return Err(format!("the graph has a cycle through node {:?} ({})", pending[0].name, pending[0].op_type));
        }
    }
}

fn input_dims(input: &pb::ValueInfoProto) -> Vec<Option<usize>> {
    use pb::tensor_shape_proto::dimension::Value;
    use pb::type_proto::Value as TypeValue;
    let Some(TypeValue::TensorType(t)) = input.r#type.as_ref().and_then(|t| t.value.as_ref()) else { return vec![] };
    let Some(shape) = &t.shape else { return vec![] };
    shape
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(Value::DimValue(v)) if *v > 0 => Some(*v as usize),
            _ => None,
        })
        .collect()
}

/// The protobuf rewrites made before tract builds the graph (see the module docs); returns
/// the inputs fed NCHW, or why a node cannot be computed as ONNX defines it (both from
/// [`crate::engine::rewrite_graph`]).
fn rewrite_for_tract(graph: &mut pb::GraphProto, opset: i64, options: LoadOptions) -> Result<Vec<String>, String> {
    let unshaped_float_input = |name: &str| pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor { elem_type: 1, shape: None })),
            ..Default::default()
        }),
        ..Default::default()
    };
    if options.noise_input && graph.node.iter().any(|n| n.op_type == "RandomNormalLike") {
        graph.input.push(unshaped_float_input(NOISE_INPUT));
    }
    // Parity feeds recorded draws; sampled play feeds the policy's own (see the module docs).
    if (options.noise_input || !options.deterministic) && graph.node.iter().any(|n| n.op_type == "Multinomial") {
        graph.input.push(unshaped_float_input(UNIFORM_INPUT));
        replace_multinomials(graph, opset);
    }
    let nchw_inputs = crate::engine::rewrite_graph(graph, opset)?;
    if options.noise_input {
        feed_noise(graph);
    }
    for node in &mut graph.node {
        if node.op_type.ends_with("Like") && !node.name.ends_with("Like") {
            node.name.push_str("_Like");
        }
        let random = matches!(node.op_type.as_str(), "RandomNormalLike" | "RandomUniformLike" | "RandomNormal" | "RandomUniform" | "Multinomial");
        if let (Some(seed), true) = (options.seed, random) {
            node.attribute.retain(|a| a.name != "seed");
            node.attribute.push(pb::AttributeProto {
                name: "seed".into(),
                f: seed as f32,
                r#type: pb::attribute_proto::AttributeType::Float as i32,
                ..Default::default()
            });
        }
        if !options.deterministic {
            continue;
        }
        match node.op_type.as_str() {
            "RandomNormalLike" | "RandomUniformLike" => {
                // x - x: zeros of x's shape (the noise's mode for a standard normal).
                node.op_type = "Sub".into();
                let x = node.input[0].clone();
                node.input = vec![x.clone(), x];
                node.attribute.clear();
            }
            "Multinomial" => {
                node.op_type = "ArgMax".into();
                node.attribute = vec![int_attribute("axis", 1), int_attribute("keepdims", 1)];
            }
            _ => {}
        }
    }
    Ok(nchw_inputs)
}

/// Makes every `RandomNormalLike` draw [`NOISE_INPUT`] (`[batch, values per row]`) reshaped
/// to its input's shape.
fn feed_noise(graph: &mut pb::GraphProto) {
    let mut rewritten = Vec::with_capacity(graph.node.len());
    for mut node in std::mem::take(&mut graph.node) {
        if node.op_type == "RandomNormalLike" && !node.input.is_empty() && !node.output.is_empty() {
            let shape = format!("{}/noise_shape", node.output[0]);
            rewritten.push(pb::NodeProto { op_type: "Shape".into(), name: shape.clone(), input: vec![node.input[0].clone()], output: vec![shape.clone()], ..Default::default() });
            node.op_type = "Reshape".into();
            node.input = vec![NOISE_INPUT.into(), shape];
            node.attribute.clear();
            node.name.push_str("/noise");
        }
        rewritten.push(node);
    }
    graph.node = rewritten;
}

/// Replaces the b-th `Multinomial` (in graph order, as the branches are) by an inverse-CDF
/// sampler fed by column b of [`UNIFORM_INPUT`]: p = exp(x) / sum, cdf = cumsum(p), choice =
/// min(count(cdf < u), k - 1), as int64 `[batch, 1]`. (`opset` picks the form of `Slice`.)
fn replace_multinomials(graph: &mut pb::GraphProto, opset: i64) {
    let float = |name: &str, values: Vec<f32>, dims: Vec<i64>| pb::TensorProto { name: name.into(), dims, data_type: 1, float_data: values, ..Default::default() };
    graph.initializer.push(pb::TensorProto { name: "parity/axis".into(), dims: vec![], data_type: 7, int64_data: vec![1], ..Default::default() });
    graph.initializer.push(float("parity/one", vec![1.0], vec![]));
    graph.initializer.push(float("parity/two", vec![2.0], vec![]));
    let node = |op: &str, inputs: Vec<String>, output: String, attribute: Vec<pb::AttributeProto>| pb::NodeProto {
        op_type: op.into(),
        name: output.clone(),
        input: inputs,
        output: vec![output],
        attribute,
        ..Default::default()
    };
    let ints = |name: &str, values: Vec<i64>| pb::AttributeProto { name: name.into(), ints: values, r#type: pb::attribute_proto::AttributeType::Ints as i32, ..Default::default() };
    let mut rewritten = Vec::with_capacity(graph.node.len());
    let mut branch = 0i64;
    for original in std::mem::take(&mut graph.node) {
        // (A malformed node is left as it is, for tract to report.)
        if original.op_type != "Multinomial" || original.input.is_empty() || original.output.is_empty() {
            rewritten.push(original);
            continue;
        }
        let (x, out) = (original.input[0].clone(), original.output[0].clone());
        let n = |suffix: &str| format!("parity/branch_{branch}/{suffix}");
        rewritten.push(node("Exp", vec![x], n("p"), vec![]));
        rewritten.push(node("ReduceSum", vec![n("p")], n("sum"), vec![ints("axes", vec![1]), int_attribute("keepdims", 1)]));
        rewritten.push(node("Div", vec![n("p"), n("sum")], n("probs"), vec![]));
        rewritten.push(node("CumSum", vec![n("probs"), "parity/axis".into()], n("cdf"), vec![]));
        if opset >= 10 {
            for (bound, value) in [("starts", branch), ("ends", branch + 1), ("axes", 1)] {
                graph.initializer.push(pb::TensorProto { name: n(bound), dims: vec![1], data_type: 7, int64_data: vec![value], ..Default::default() });
            }
            rewritten.push(node("Slice", vec![UNIFORM_INPUT.into(), n("starts"), n("ends"), n("axes")], n("u"), vec![]));
        } else {
            rewritten.push(node("Slice", vec![UNIFORM_INPUT.into()], n("u"), vec![ints("starts", vec![branch]), ints("ends", vec![branch + 1]), ints("axes", vec![1])]));
        }
        rewritten.push(node("Less", vec![n("cdf"), n("u")], n("below"), vec![]));
        rewritten.push(node("Cast", vec![n("below")], n("below_f"), vec![int_attribute("to", 1)]));
        rewritten.push(node("ReduceSum", vec![n("below_f")], n("count"), vec![ints("axes", vec![1]), int_attribute("keepdims", 1)]));
        // k - 1, from the shape at run time: every cdf value is below 2.
        rewritten.push(node("Less", vec![n("cdf"), "parity/two".into()], n("all"), vec![]));
        rewritten.push(node("Cast", vec![n("all")], n("all_f"), vec![int_attribute("to", 1)]));
        rewritten.push(node("ReduceSum", vec![n("all_f")], n("k"), vec![ints("axes", vec![1]), int_attribute("keepdims", 1)]));
        rewritten.push(node("Sub", vec![n("k"), "parity/one".into()], n("last"), vec![]));
        rewritten.push(node("Min", vec![n("count"), n("last")], n("choice"), vec![]));
        rewritten.push(node("Cast", vec![n("choice")], out, vec![int_attribute("to", 7)]));
        branch += 1;
    }
    graph.node = rewritten;
}

fn int_attribute(name: &str, value: i64) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), i: value, r#type: pb::attribute_proto::AttributeType::Int as i32, ..Default::default() }
}
