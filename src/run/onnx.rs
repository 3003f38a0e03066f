//! ONNX policies on tract. Before tract sees the graph, two rewrites are made on the protobuf:
//! the `RandomNormalLike` rename workaround for torch-1.x exports (stack.md §2: tract tells
//! the op by node name), and, in deterministic mode, sampling replaced by its mode
//! (`RandomNormalLike` noise by zeros, `Multinomial` by `ArgMax`). Plans are optimized per
//! batch size and cached (`Multinomial` needs a constant shape).

use super::{NamedTensors, RunError, TensorData};
use std::collections::HashMap;
use std::sync::Mutex;
use tract_onnx::pb::{self, ModelProto};
use tract_onnx::prelude::*;

/// A running state of an optimized plan, kept between runs: no per-run allocation, and
/// random ops continue their stream (as Barracuda's worker does) instead of restarting it.
type PlanState = tract_onnx::tract_core::model::TypedSimpleState;

/// A declared graph input: name and dims (`None` = symbolic, e.g. the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxInput {
    pub name: String,
    pub dims: Vec<Option<usize>>,
}

/// How to load a policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Replace in-graph sampling by its mode: noise by zero, multinomial draws by argmax.
    pub deterministic: bool,
    /// Seed of the in-graph random ops (their own seed otherwise). The stream continues from
    /// run to run of one policy (one stream per batch size).
    pub seed: Option<u32>,
    /// Take the randomness from extra inputs instead of drawing it, so that sampled actions
    /// become reproducible for parity checks against recorded noise: the Gaussian noise from
    /// [`NOISE_INPUT`] (`RandomNormalLike` becomes an `Identity` of it), and each discrete
    /// branch's draw from column b of [`UNIFORM_INPUT`] (the b-th `Multinomial` becomes an
    /// inverse-CDF sampler: the number of cumulative probabilities below u).
    pub noise_input: bool,
}

/// The extra input that carries the noise when [`LoadOptions::noise_input`] is set.
pub const NOISE_INPUT: &str = "parity_noise";
/// The extra input `[batch, branches]` of uniform draws in [0, 1) for the discrete branches.
pub const UNIFORM_INPUT: &str = "parity_uniform";

/// A loaded ONNX policy.
pub struct OnnxPolicy {
    path: String,
    proto: ModelProto,
    inputs: Vec<OnnxInput>,
    outputs: Vec<String>,
    states: Mutex<HashMap<usize, PlanState>>,
}

impl OnnxPolicy {
    /// Loads a model file.
    pub fn load(path: &std::path::Path, options: LoadOptions) -> Result<Self, RunError> {
        let bytes = std::fs::read(path).map_err(|e| RunError::Read { path: path.display().to_string(), detail: e.to_string() })?;
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
        let graph = proto.graph.as_mut().ok_or_else(|| not_onnx("no graph".into()))?;
        rewrite_for_tract(graph, options);
        let initializers: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs = graph
            .input
            .iter()
            .filter(|i| !initializers.contains(i.name.as_str()))
            .map(|i| OnnxInput { name: i.name.clone(), dims: input_dims(i) })
            .collect();
        let outputs = graph.output.iter().map(|o| o.name.clone()).collect();
        Ok(Self { path: label.into(), proto, inputs, outputs, states: Mutex::new(HashMap::new()) })
    }

    pub fn inputs(&self) -> &[OnnxInput] {
        &self.inputs
    }

    /// Inputs Unity's loaders probe a model with: symbolic dims set to `batch`, zeros, and
    /// every action allowed in `action_masks`.
    pub fn neutral_inputs(&self, batch: usize) -> NamedTensors {
        self.inputs
            .iter()
            .map(|i| {
                let shape: Vec<usize> = i.dims.iter().map(|d| d.unwrap_or(batch)).collect();
                let fill = if i.name == "action_masks" { 1.0 } else { 0.0 };
                let n = shape.iter().product();
                (i.name.clone(), TensorData { shape, data: vec![fill; n] })
            })
            .collect()
    }

    /// Output names in graph order.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// The protobuf as tract sees it.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// Builds the optimized plan for one set of input shapes (one per batch size).
    fn build_state(&self, shapes: &[Vec<usize>], batch: usize) -> Result<PlanState, RunError> {
        let fail = |e: TractError| RunError::Plan { path: self.path.clone(), batch, detail: format!("{e:#}") };
        let mut model = tract_onnx::onnx().model_for_proto_model(&self.proto).map_err(fail)?;
        for (i, shape) in shapes.iter().enumerate() {
            model.set_input_fact(i, InferenceFact::dt_shape(f32::datum_type(), shape.clone())).map_err(fail)?;
        }
        let plan = model.into_optimized().and_then(|m| m.into_runnable()).map_err(fail)?;
        PlanState::new(&plan).map_err(fail)
    }

    /// Runs the model. Every declared input must be given; its shape must agree with the
    /// declared dims. Returns every output, converted to float.
    pub fn run(&self, inputs: &NamedTensors) -> Result<NamedTensors, RunError> {
        let mut values = TVec::new();
        let mut shapes = Vec::new();
        for declared in &self.inputs {
            let given = inputs.get(&declared.name).ok_or_else(|| RunError::MissingInput {
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
                    detail: format!("shape {:?} does not fit the declared {:?} (None = any)", given.shape, declared.dims),
                });
            }
            let tensor = Tensor::from_shape(&given.shape, &given.data)
                .map_err(|e| RunError::BadInput { name: declared.name.clone(), detail: e.to_string() })?;
            values.push(tensor.into_tvalue());
            shapes.push(given.shape.clone());
        }
        for name in inputs.keys() {
            if !self.inputs.iter().any(|i| &i.name == name) {
                return Err(RunError::BadInput { name: name.clone(), detail: "the model has no such input".into() });
            }
        }
        let batch = shapes.first().and_then(|s| s.first()).copied().unwrap_or(1);
        let eval = |e: TractError| RunError::Eval { path: self.path.clone(), detail: format!("{e:#}") };
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if let std::collections::hash_map::Entry::Vacant(e) = states.entry(batch) {
            let state = self.build_state(&shapes, batch)?;
            e.insert(state);
        }
        let state = states.get_mut(&batch).expect("inserted above");
        let results = state.run(values).map_err(eval)?;
        let mut out = NamedTensors::new();
        for (name, value) in self.outputs.iter().zip(results.iter()) {
            let floats = value.cast_to::<f32>().map_err(eval)?;
            let data = floats.try_as_plain_ram().and_then(|v| v.as_slice::<f32>().map(|s| s.to_vec())).map_err(eval)?;
            out.insert(name.clone(), TensorData { shape: value.shape().to_vec(), data });
        }
        Ok(out)
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

/// The protobuf rewrites made before tract builds the graph (see the module docs).
fn rewrite_for_tract(graph: &mut pb::GraphProto, options: LoadOptions) {
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
    if options.noise_input && graph.node.iter().any(|n| n.op_type == "Multinomial") {
        graph.input.push(unshaped_float_input(UNIFORM_INPUT));
        replace_multinomials(graph);
    }
    for node in &mut graph.node {
        if options.noise_input && node.op_type == "RandomNormalLike" {
            node.op_type = "Identity".into();
            node.input = vec![NOISE_INPUT.into()];
            node.attribute.clear();
            continue;
        }
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
}

/// Replaces the b-th `Multinomial` (in graph order, as the branches are) by an inverse-CDF
/// sampler fed by column b of [`UNIFORM_INPUT`]: p = exp(x) / sum, cdf = cumsum(p), choice =
/// min(count(cdf < u), k - 1), as int64 `[batch, 1]`.
fn replace_multinomials(graph: &mut pb::GraphProto) {
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
        rewritten.push(node("Slice", vec![UNIFORM_INPUT.into()], n("u"), vec![ints("starts", vec![branch]), ints("ends", vec![branch + 1]), ints("axes", vec![1])]));
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
