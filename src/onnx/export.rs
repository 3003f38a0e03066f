//! Exporting a policy to ONNX as ML-Agents 0.28 does (onnx-export.md §2-6): model API
//! version 3, opset 9, inputs `obs_i` and `action_masks`, the constants as `Constant` nodes
//! named like their outputs, sampled and deterministic action outputs. Model API 2 (the
//! com.unity.ml-agents 1.x interface) on request.

use crate::spec::model::{self, ModelInput};
use super::attention::{entity_attention, EntityInput};
use super::layers::{linear, swish};
use super::{attr_float, attr_int, attr_ints, value_info, GraphBuilder, FLOAT, INT64};
use crate::spec::entity_layout::{self, EntityLayout};
use crate::policy::visual::{Step, LEAKY_SLOPE};
use crate::policy::{names, ConditionalBody, ContinuousHead, PolicyDescription, PolicyError, VisualEncoder, Weights, LOG_SIGMA_BOUNDS, NORMALIZATION_CLIP};
use prost::Message;
use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, ModelProto, StringStringEntryProto, TensorProto, ValueInfoProto};

/// The opset ML-Agents exports with.
pub const OPSET: i64 = 9;
/// Model API version of the exported interface.
pub const MODEL_API_VERSION: f32 = 3.0;

fn tensor_attribute(dims: &[i64], data: Vec<f32>) -> AttributeProto {
    AttributeProto {
        name: "value".into(),
        t: Some(TensorProto { dims: dims.to_vec(), data_type: FLOAT, float_data: data, ..Default::default() }),
        r#type: AttributeType::Tensor as i32,
        ..Default::default()
    }
}

/// A constant output: a `Constant` node whose output has exactly the output's name.
pub(crate) fn constant_output(g: &mut GraphBuilder, name: &str, dims: &[i64], data: Vec<f32>) {
    g.node_into("Constant", vec![], vec![tensor_attribute(dims, data)], name);
}


/// Which ML-Agents model interface to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnnxApi {
    /// Model API 3 (ML-Agents 0.26+, com.unity.ml-agents 2.x): `obs_i` inputs, separate
    /// continuous/discrete and deterministic outputs.
    #[default]
    V3,
    /// Model API 2 (com.unity.ml-agents 1.x): `vector_observation` input, one `action` output
    /// (continuous: clip(sample, -3, 3) / 3; discrete: masked log-probabilities per branch),
    /// `is_continuous_control` and `action_output_shape`.
    V2,
}

/// What to write: the model interface and, for entity observations, the layout of the Unity
/// package the model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OnnxOptions {
    pub api: OnnxApi,
    pub entity_layout: EntityLayout,
}

/// The observation inputs and the Swish body: returns the inputs and the body's output.
fn body(g: &mut GraphBuilder, description: &PolicyDescription, weights: &Weights, options: OnnxOptions) -> Result<(Vec<ValueInfoProto>, String), PolicyError> {
    let mut inputs = vec![];
    // Each observation's own encoding, by observation index (None: an entity observation,
    // read by the attention after the others).
    let mut encodings: Vec<Option<String>> = vec![];
    let mut entities = vec![];
    let normalize = |g: &mut GraphBuilder, x: String, mean: &[f32], var: &[f32], steps: &[f32], label: &str| -> String {
        let n = mean.len() as i64;
        let mean = g.constant(&format!("{label}.running_mean"), &[n], mean.to_vec());
        let var = g.constant(&format!("{label}.running_variance"), &[n], var.to_vec());
        let steps = g.constant(&format!("{label}.normalization_steps"), &[steps.len() as i64], steps.to_vec());
        let centred = g.node("Sub", vec![x, mean], vec![], "normalizer");
        let scaled_var = g.node("Div", vec![var, steps], vec![], "normalizer");
        let std = g.node("Sqrt", vec![scaled_var], vec![], "normalizer");
        let z = g.node("Div", vec![centred, std], vec![], "normalizer");
        g.node("Clip", vec![z], vec![attr_float("min", -NORMALIZATION_CLIP), attr_float("max", NORMALIZATION_CLIP)], "normalizer")
    };
    match options.api {
        OnnxApi::V3 => {
            for (i, shape) in description.observation_shapes.iter().enumerate() {
                let name = ModelInput::Observation(i).name();
                if let Some(encoder) = description.visual_encoder(i) {
                    // Images come in NCHW, as ML-Agents 0.28 exports them.
                    let dims = [-1, encoder.channels as i64, encoder.height as i64, encoder.width as i64];
                    inputs.push(value_info(&name, FLOAT, &dims));
                    encodings.push(Some(visual_encoder(g, name, &encoder, description.hidden_units, weights, i)?));
                    continue;
                }
                if let [max_entities, entity_size] = shape[..] {
                    // Declared [batch, K, E] whatever the layout, as 0.28 declares it.
                    inputs.push(value_info(&name, FLOAT, &[-1, max_entities as i64, entity_size as i64]));
                    entities.push(EntityInput { name, shape: [max_entities, entity_size], index: i });
                    encodings.push(None);
                    continue;
                }
                inputs.push(value_info(&name, FLOAT, &[-1, shape[0] as i64]));
                let mut x = name;
                if description.normalize {
                    let mean = &weights.get(&names::running_mean(i))?.data;
                    let var = &weights.get(&names::running_variance(i))?.data;
                    let steps = &weights.get(&names::normalization_steps(i))?.data;
                    let label = names::running_mean(i).trim_end_matches(".running_mean").to_string();
                    x = normalize(g, x, mean, var, steps, &label);
                }
                encodings.push(Some(x));
            }
        }
        OnnxApi::V2 if description.has_visual() => {
            return Err(PolicyError::Unsupported("visual observations are exported with model API 3 only".into()));
        }
        OnnxApi::V2 if !description.entity_observations().is_empty() => {
            return Err(PolicyError::Unsupported("entity (BufferSensor) observations are exported with model API 3 only".into()));
        }
        OnnxApi::V2 => {
            // One concatenated vector input; each observation's statistics laid side by side
            // (the step counts folded into the variances).
            let width = description.encoding_width();
            inputs.push(value_info(model::VECTOR_OBSERVATION, FLOAT, &[-1, width as i64]));
            let mut x = model::VECTOR_OBSERVATION.to_string();
            if description.normalize {
                let (mut mean, mut var) = (vec![], vec![]);
                for i in 0..description.observation_shapes.len() {
                    let steps = weights.get(&names::normalization_steps(i))?.data[0];
                    mean.extend_from_slice(&weights.get(&names::running_mean(i))?.data);
                    var.extend(weights.get(&names::running_variance(i))?.data.iter().map(|v| v / steps));
                }
                x = normalize(g, x, &mean, &var, &[1.0], model::VECTOR_OBSERVATION);
            }
            encodings.push(Some(x));
        }
    }
    let concat = |g: &mut GraphBuilder, mut parts: Vec<String>, label: &str| {
        if parts.len() == 1 { parts.remove(0) } else { g.node("Concat", parts, vec![attr_int("axis", 1)], label) }
    };
    let goal: Vec<String> = description.goal_observations.iter().filter_map(|i| encodings.get(*i).cloned().flatten()).collect();
    let own: Vec<String> = encodings.into_iter().flatten().collect();
    let mut h = match (own.is_empty(), entities.is_empty()) {
        (_, true) => concat(g, own, "encodings"),
        (true, false) => entity_attention(g, &entities, None, weights, options.entity_layout)?,
        (false, false) => {
            let encoded_self = concat(g, own, "encodings");
            let pooled = entity_attention(g, &entities, Some(encoded_self.clone()), weights, options.entity_layout)?;
            concat(g, vec![encoded_self, pooled], "encodings")
        }
    };
    if let Some(body) = description.conditional_body(0) {
        if options.api == OnnxApi::V2 {
            return Err(PolicyError::Unsupported("goal-conditioned (hypernetwork) policies are exported with model API 3 only".into()));
        }
        let goal = concat(g, goal, "goal");
        return Ok((inputs, conditional_body(g, h, goal, &body, weights)?));
    }
    for l in 0..description.num_layers {
        let y = linear(g, h, weights, &names::body_weight(l), &names::body_bias(l))?;
        h = swish(g, y);
    }
    Ok((inputs, h))
}


/// 0.28's `ConditionalEncoder` ([`crate::policy::conditioning`]): plain layers, then the
/// hypernetwork layer, whose `[input, hidden]` matrix per row multiplies that row (`MatMul` of
/// `[batch, 1, input]` by `[batch, input, hidden]`, as torch's `bmm` exports).
fn conditional_body(g: &mut GraphBuilder, x: String, goal: String, body: &ConditionalBody, weights: &Weights) -> Result<String, PolicyError> {
    use crate::policy::conditioning::{names as hyper, HYPER_LAYERS, LAYER_NORM_EPSILON};
    let mut h = x;
    for l in 0..body.hyper_layer() {
        let y = linear(g, h, weights, &hyper::plain_weight(l), &hyper::plain_bias(l))?;
        h = swish(g, y);
    }
    let l = body.hyper_layer();
    let mut z = goal;
    for k in 0..HYPER_LAYERS {
        let y = linear(g, z, weights, &hyper::hyper_weight(l, k), &hyper::hyper_bias(l, k))?;
        z = swish(g, y);
    }
    // LayerNorm without parameters: (z - mean) / sqrt(mean((z - mean)^2) + eps).
    let mean = g.node("ReduceMean", vec![z.clone()], vec![attr_ints("axes", &[-1]), attr_int("keepdims", 1)], "layer_norm");
    let centred = g.node("Sub", vec![z, mean], vec![], "layer_norm");
    let squared = g.node("Mul", vec![centred.clone(), centred.clone()], vec![], "layer_norm");
    let variance = g.node("ReduceMean", vec![squared], vec![attr_ints("axes", &[-1]), attr_int("keepdims", 1)], "layer_norm");
    let epsilon = g.constant("layer_norm_epsilon", &[], vec![LAYER_NORM_EPSILON]);
    let shifted = g.node("Add", vec![variance, epsilon], vec![], "layer_norm");
    let std = g.node("Sqrt", vec![shifted], vec![], "layer_norm");
    let normalised = g.node("Div", vec![centred, std], vec![], "layer_norm");
    let generated = linear(g, normalised, weights, &hyper::hyper_weight(l, HYPER_LAYERS), &hyper::hyper_bias(l, HYPER_LAYERS))?;
    let (input, hidden) = (body.hyper_input() as i64, body.hidden as i64);
    let matrix_shape = g.constant_i64("hypernetwork_matrix_shape", &[3], vec![-1, input, hidden]);
    let matrices = g.node("Reshape", vec![generated, matrix_shape], vec![], "hypernetwork");
    let row_shape = g.constant_i64("hypernetwork_row_shape", &[3], vec![-1, 1, input]);
    let rows = g.node("Reshape", vec![h, row_shape], vec![], "hypernetwork");
    let product = g.node("MatMul", vec![rows, matrices], vec![], "hypernetwork");
    let flat_shape = g.constant_i64("hypernetwork_output_shape", &[2], vec![-1, hidden]);
    let flat = g.node("Reshape", vec![product, flat_shape], vec![], "hypernetwork");
    let bias_name = hyper::generated_bias(l);
    let bias = weights.get(&bias_name)?;
    let bias = g.constant(&bias_name, &[bias.shape[0] as i64], bias.data.clone());
    let y = g.node("Add", vec![flat, bias], vec![], "hypernetwork");
    Ok(swish(g, y))
}

/// A visual encoder on an NCHW input: returns its `[batch, hidden]` output.
fn visual_encoder(g: &mut GraphBuilder, x: String, encoder: &VisualEncoder, hidden: usize, weights: &Weights, obs: usize) -> Result<String, PolicyError> {
    encoder_steps(g, x, &encoder.steps(hidden), weights, &names::visual_encoder(obs))
}

fn encoder_steps(g: &mut GraphBuilder, x: String, steps: &[Step], weights: &Weights, module: &str) -> Result<String, PolicyError> {
    let mut x = x;
    for step in steps {
        x = match step {
            Step::Conv { module: conv, kernel, stride, padding, .. } => {
                let (w_name, b_name) = (format!("{module}.{conv}.weight"), format!("{module}.{conv}.bias"));
                let (w, b) = (weights.get(&w_name)?, weights.get(&b_name)?);
                let dims: Vec<i64> = w.shape.iter().map(|d| *d as i64).collect();
                let w_value = g.constant(&w_name, &dims, w.data.clone());
                let b_value = g.constant(&b_name, &[b.shape[0] as i64], b.data.clone());
                let (k, s, p) = (*kernel as i64, *stride as i64, *padding as i64);
                let mut attrs = vec![attr_ints("kernel_shape", &[k, k]), attr_ints("strides", &[s, s])];
                if p > 0 {
                    attrs.push(attr_ints("pads", &[p, p, p, p]));
                }
                g.node("Conv", vec![x, w_value, b_value], attrs, "visual_encoder")
            }
            Step::MaxPool { kernel, stride } => {
                let attrs = vec![attr_ints("kernel_shape", &[*kernel as i64; 2]), attr_ints("strides", &[*stride as i64; 2])];
                g.node("MaxPool", vec![x], attrs, "visual_encoder")
            }
            Step::LeakyRelu => g.node("LeakyRelu", vec![x], vec![attr_float("alpha", LEAKY_SLOPE)], "visual_encoder"),
            Step::Relu => g.node("Relu", vec![x], vec![], "visual_encoder"),
            Step::Swish => {
                let s = g.node("Sigmoid", vec![x.clone()], vec![], "visual_encoder");
                g.node("Mul", vec![x, s], vec![], "visual_encoder")
            }
            Step::Residual(inner) => {
                let y = encoder_steps(g, x.clone(), inner, weights, module)?;
                g.node("Add", vec![x, y], vec![], "visual_encoder")
            }
            Step::Flatten { .. } => g.node("Flatten", vec![x], vec![attr_int("axis", 1)], "visual_encoder"),
            Step::Dense { module: dense, .. } => linear(g, x, weights, &format!("{module}.{dense}.weight"), &format!("{module}.{dense}.bias"))?,
        };
    }
    Ok(x)
}

/// Masked branch probabilities: softmax(logits·a − 1e8·(1 − a)) per branch, written as
/// Barracuda-friendly products and sums. Returns one `[batch, k]` probability tensor per branch.
fn masked_branch_probabilities(g: &mut GraphBuilder, h: &str, description: &PolicyDescription, weights: &Weights) -> Result<Vec<String>, PolicyError> {
    let mut probabilities = vec![];
    let mut start = 0i64;
    for (b, k) in description.action_spec.discrete_branches.iter().enumerate() {
        let logits = linear(g, h.to_string(), weights, &names::branch_weight(b), &names::branch_bias(b))?;
        let mask = g.node(
            "Slice",
            vec![model::ACTION_MASKS.into()],
            vec![attr_ints("starts", &[start]), attr_ints("ends", &[start + *k as i64]), attr_ints("axes", &[1])],
            "mask",
        );
        let minus_one = g.constant("minus_one", &[], vec![-1.0]);
        let one = g.constant("one", &[], vec![1.0]);
        let big = g.constant("big", &[], vec![1e8]);
        let negated = g.node("Mul", vec![mask.clone(), minus_one], vec![], "mask");
        let inverse = g.node("Add", vec![negated, one], vec![], "mask");
        let penalty = g.node("Mul", vec![inverse, big], vec![], "mask");
        let kept = g.node("Mul", vec![logits, mask], vec![], "mask");
        let masked = g.node("Sub", vec![kept, penalty], vec![], "mask");
        probabilities.push(g.node("Softmax", vec![masked], vec![attr_int("axis", 1)], "probs"));
        start += *k as i64;
    }
    Ok(probabilities)
}

/// The Gaussian head: the sampled action written to `sampled_name` and, when given, the
/// deterministic one to `deterministic_name`. PPO's head (a free log σ): clip(μ + σ·N(0,1),
/// -3, 3) / 3 and clip(μ, -3, 3) / 3; SAC's (log σ = Clip(Gemm(h), -20, 2)): tanh(μ + σ·N(0,1))
/// and tanh(μ).
fn continuous_head(g: &mut GraphBuilder, h: &str, weights: &Weights, head: ContinuousHead, c: usize, sampled_name: &str, deterministic_name: Option<&str>) -> Result<(), PolicyError> {
    let mu = linear(g, h.to_string(), weights, names::MU_WEIGHT, names::MU_BIAS)?;
    let log_sigma = match head {
        ContinuousHead::Clipped => {
            let log_sigma = weights.get(names::LOG_SIGMA)?;
            let log_sigma = g.constant(names::LOG_SIGMA, &[1, c as i64], log_sigma.data.clone());
            let zero = g.constant("zero", &[], vec![0.0]);
            let mu_zero = g.node("Mul", vec![mu.clone(), zero], vec![], "log_sigma");
            g.node("Add", vec![mu_zero, log_sigma], vec![], "log_sigma")
        }
        ContinuousHead::Squashed => {
            let layer = linear(g, h.to_string(), weights, names::LOG_SIGMA_WEIGHT, names::LOG_SIGMA_BIAS)?;
            let (low, high) = LOG_SIGMA_BOUNDS;
            g.node("Clip", vec![layer], vec![attr_float("min", low), attr_float("max", high)], "log_sigma")
        }
    };
    let std = g.node("Exp", vec![log_sigma], vec![], "std");
    let noise = g.node("RandomNormalLike", vec![mu.clone()], vec![attr_float("mean", 0.0), attr_float("scale", 1.0)], "noise");
    let scaled = g.node("Mul", vec![noise, std], vec![], "sample");
    let sample = g.node("Add", vec![mu.clone(), scaled], vec![], "sample");
    match head {
        ContinuousHead::Clipped => {
            let three = g.constant("three", &[], vec![model::ACTION_CLIP]);
            let clip = [attr_float("min", -model::ACTION_CLIP), attr_float("max", model::ACTION_CLIP)];
            let clipped = g.node("Clip", vec![sample], clip.to_vec(), "continuous");
            g.node_into("Div", vec![clipped, three.clone()], vec![], sampled_name);
            if let Some(name) = deterministic_name {
                let clipped_mu = g.node("Clip", vec![mu], clip.to_vec(), "deterministic");
                g.node_into("Div", vec![clipped_mu, three], vec![], name);
            }
        }
        ContinuousHead::Squashed => {
            g.node_into("Tanh", vec![sample], vec![], sampled_name);
            if let Some(name) = deterministic_name {
                g.node_into("Tanh", vec![mu], vec![], name);
            }
        }
    }
    Ok(())
}

/// The LSTM of a recurrent policy in the shape Unity's importers accept (lstm.md §4.2-4.3):
/// `Transpose(recurrent_in)` → `Slice` h0 / c0 → ONNX `LSTM` over a sequence of one step →
/// the output as `[batch, m/2]` (returned), and `Concat(Y_h, Y_c)` → `Transpose` →
/// `recurrent_out` `[batch, 1, m]`. Never slices `recurrent_in` directly (Barracuda would take
/// the graph for a legacy one).
fn recurrent_section(g: &mut GraphBuilder, x: String, description: &PolicyDescription, weights: &Weights) -> Result<String, PolicyError> {
    use crate::policy::lstm::{Gate, LstmWeights};
    let lstm = LstmWeights::read(weights)?;
    let (hidden, input) = (lstm.hidden as i64, lstm.input_size as i64);
    let order = Gate::ONNX_ORDER.map(|gate| lstm.gate(gate));
    let w: Vec<f32> = order.iter().flat_map(|w| w.input.iter().copied()).collect();
    let r: Vec<f32> = order.iter().flat_map(|w| w.recurrent.iter().copied()).collect();
    let b: Vec<f32> = order.iter().flat_map(|w| w.input_bias.iter().copied()).chain(order.iter().flat_map(|w| w.recurrent_bias.iter().copied())).collect();
    let w = g.constant("lstm.W", &[1, 4 * hidden, input], w);
    let r = g.constant("lstm.R", &[1, 4 * hidden, hidden], r);
    let b = g.constant("lstm.B", &[1, 8 * hidden], b);
    let perm = || vec![attr_ints("perm", &[1, 0, 2])];
    let sequence_shape = g.constant_i64("lstm.shape", &[3], vec![-1, 1, input]);
    let sequence = g.node("Reshape", vec![x, sequence_shape], vec![], "lstm");
    let seq_first = g.node("Transpose", vec![sequence], perm(), "lstm");
    let memories = g.node("Transpose", vec![model::RECURRENT_IN.into()], perm(), "lstm");
    let slice = |g: &mut GraphBuilder, start: i64, end: i64| {
        g.node("Slice", vec![memories.clone()], vec![attr_ints("axes", &[2]), attr_ints("starts", &[start]), attr_ints("ends", &[end])], "lstm")
    };
    let h0 = slice(g, 0, hidden);
    let c0 = slice(g, hidden, i64::MAX);
    let outputs = [g.fresh("lstm.Y"), g.fresh("lstm.Y_h"), g.fresh("lstm.Y_c")];
    g.node_outputs("LSTM", vec![seq_first, w, r, b, String::new(), h0, c0], vec![attr_int("hidden_size", hidden)], &outputs);
    let [y, y_h, y_c] = outputs;
    let squeezed = g.node("Squeeze", vec![y], vec![attr_ints("axes", &[1])], "lstm");
    let batch_first = g.node("Transpose", vec![squeezed], perm(), "lstm");
    let flat_shape = g.constant_i64("lstm.flat", &[2], vec![-1, hidden]);
    let encoding = g.node("Reshape", vec![batch_first, flat_shape], vec![], "lstm");
    let state = g.node("Concat", vec![y_h, y_c], vec![attr_int("axis", -1)], "lstm");
    g.node_into("Transpose", vec![state], perm(), model::RECURRENT_OUT);
    debug_assert_eq!(description.memory_size as i64, 2 * hidden);
    Ok(encoding)
}

/// Builds the ONNX model of a policy (model API 3).
pub fn to_onnx(description: &PolicyDescription, weights: &Weights) -> Result<ModelProto, PolicyError> {
    to_onnx_api(description, weights, OnnxApi::V3)
}

/// Builds the ONNX model of a policy with the chosen interface.
pub fn to_onnx_api(description: &PolicyDescription, weights: &Weights, api: OnnxApi) -> Result<ModelProto, PolicyError> {
    to_onnx_with(description, weights, OnnxOptions { api, ..Default::default() })
}

/// Builds the ONNX model of a policy as `options` say. A model with entity observations
/// records its layout in its metadata ([`entity_layout::METADATA_KEY`]).
pub fn to_onnx_with(description: &PolicyDescription, weights: &Weights, options: OnnxOptions) -> Result<ModelProto, PolicyError> {
    let mut model = build_onnx(description, weights, options)?;
    if !description.entity_observations().is_empty() {
        let entry = StringStringEntryProto { key: entity_layout::METADATA_KEY.into(), value: options.entity_layout.name().into() };
        model.metadata_props.push(entry);
    }
    Ok(model)
}

fn build_onnx(description: &PolicyDescription, weights: &Weights, options: OnnxOptions) -> Result<ModelProto, PolicyError> {
    description.check(weights)?;
    let mut g = GraphBuilder::default();
    let actions = &description.action_spec;
    if options.api == OnnxApi::V2 {
        return to_onnx_v2(g, description, weights);
    }
    let (mut inputs, mut h) = body(&mut g, description, weights, options)?;
    let m = description.memory_size as i64;
    if description.is_recurrent() {
        h = recurrent_section(&mut g, h, description, weights)?;
    }
    let mut outputs = vec![value_info(model::VERSION_NUMBER, FLOAT, &[1]), value_info(model::MEMORY_SIZE, FLOAT, &[1])];
    constant_output(&mut g, model::VERSION_NUMBER, &[1], vec![MODEL_API_VERSION]);
    constant_output(&mut g, model::MEMORY_SIZE, &[1], vec![m as f32]);
    let c = actions.continuous_size;
    if c > 0 {
        continuous_head(&mut g, &h, weights, description.continuous_head, c, model::CONTINUOUS_ACTIONS, Some(model::DETERMINISTIC_CONTINUOUS_ACTIONS))?;
        constant_output(&mut g, model::CONTINUOUS_ACTION_OUTPUT_SHAPE, &[1], vec![c as f32]);
        outputs.push(value_info(model::CONTINUOUS_ACTIONS, FLOAT, &[-1, c as i64]));
        outputs.push(value_info(model::CONTINUOUS_ACTION_OUTPUT_SHAPE, FLOAT, &[1]));
        outputs.push(value_info(model::DETERMINISTIC_CONTINUOUS_ACTIONS, FLOAT, &[-1, c as i64]));
    }
    let branches = &actions.discrete_branches;
    if !branches.is_empty() {
        let total: usize = branches.iter().sum();
        inputs.push(value_info(model::ACTION_MASKS, FLOAT, &[-1, total as i64]));
        let (mut sampled, mut argmax) = (vec![], vec![]);
        for probs in masked_branch_probabilities(&mut g, &h, description, weights)? {
            let log_probs = g.node("Log", vec![probs.clone()], vec![], "log_probs");
            sampled.push(g.node("Multinomial", vec![log_probs], vec![attr_int("dtype", INT64 as i64), attr_int("sample_size", 1)], "sample"));
            argmax.push(g.node("ArgMax", vec![probs], vec![attr_int("axis", 1), attr_int("keepdims", 1)], "argmax"));
        }
        g.node_into("Concat", sampled, vec![attr_int("axis", 1)], model::DISCRETE_ACTIONS);
        g.node_into("Concat", argmax, vec![attr_int("axis", 1)], model::DETERMINISTIC_DISCRETE_ACTIONS);
        let sizes: Vec<f32> = branches.iter().map(|k| *k as f32).collect();
        constant_output(&mut g, model::DISCRETE_ACTION_OUTPUT_SHAPE, &[1, branches.len() as i64], sizes);
        outputs.push(value_info(model::DISCRETE_ACTIONS, INT64, &[-1, branches.len() as i64]));
        outputs.push(value_info(model::DISCRETE_ACTION_OUTPUT_SHAPE, FLOAT, &[1, branches.len() as i64]));
        outputs.push(value_info(model::DETERMINISTIC_DISCRETE_ACTIONS, INT64, &[-1, branches.len() as i64]));
    }
    if description.is_recurrent() {
        inputs.push(value_info(model::RECURRENT_IN, FLOAT, &[-1, 1, m]));
        outputs.push(value_info(model::RECURRENT_OUT, FLOAT, &[-1, 1, m]));
    }
    Ok(g.finish("mlagents-rs policy", OPSET, inputs, outputs, "mlagents-rs"))
}

/// Model API 2: `vector_observation` (+ `action_masks`) in; `action`, `version_number` (2),
/// `memory_size`, `is_continuous_control`, `action_output_shape` out.
fn to_onnx_v2(mut g: GraphBuilder, description: &PolicyDescription, weights: &Weights) -> Result<ModelProto, PolicyError> {
    let actions = &description.action_spec;
    if actions.is_hybrid() {
        return Err(PolicyError::Unsupported("model API 2 has no hybrid actions; export API 3".into()));
    }
    if description.is_recurrent() {
        return Err(PolicyError::Unsupported(
            "model API 2 with memory: com.unity.ml-agents 2.x and later refuse version-2 models that use memory; export API 3 (or the .nn for 1.x)".into(),
        ));
    }
    let (mut inputs, h) = body(&mut g, description, weights, OnnxOptions { api: OnnxApi::V2, ..Default::default() })?;
    let continuous = actions.continuous_size > 0;
    let width = if continuous { actions.continuous_size } else { actions.mask_len() };
    if continuous {
        continuous_head(&mut g, &h, weights, description.continuous_head, width, model::ACTION, None)?;
    } else {
        inputs.push(value_info(model::ACTION_MASKS, FLOAT, &[-1, width as i64]));
        // log(p + 1e-7): masked actions get about -16 instead of -inf.
        let epsilon = g.constant("log_epsilon", &[], vec![1e-7]);
        let log_probs: Vec<String> = masked_branch_probabilities(&mut g, &h, description, weights)?
            .into_iter()
            .map(|p| {
                let lifted = g.node("Add", vec![p, epsilon.clone()], vec![], "log_probs");
                g.node("Log", vec![lifted], vec![], "log_probs")
            })
            .collect();
        g.node_into("Concat", log_probs, vec![attr_int("axis", 1)], model::ACTION);
    }
    constant_output(&mut g, model::VERSION_NUMBER, &[1], vec![2.0]);
    constant_output(&mut g, model::MEMORY_SIZE, &[1], vec![0.0]);
    constant_output(&mut g, model::IS_CONTINUOUS_CONTROL, &[1], vec![if continuous { 1.0 } else { 0.0 }]);
    constant_output(&mut g, model::ACTION_OUTPUT_SHAPE, &[1], vec![width as f32]);
    let outputs = vec![
        value_info(model::ACTION, FLOAT, &[-1, width as i64]),
        value_info(model::VERSION_NUMBER, FLOAT, &[1]),
        value_info(model::MEMORY_SIZE, FLOAT, &[1]),
        value_info(model::IS_CONTINUOUS_CONTROL, FLOAT, &[1]),
        value_info(model::ACTION_OUTPUT_SHAPE, FLOAT, &[1]),
    ];
    Ok(g.finish("mlagents-rs policy", OPSET, inputs, outputs, "mlagents-rs"))
}

/// The serialised ONNX file (model API 3).
pub fn to_onnx_bytes(description: &PolicyDescription, weights: &Weights) -> Result<Vec<u8>, PolicyError> {
    to_onnx_api_bytes(description, weights, OnnxApi::V3)
}

/// The serialised ONNX file with the chosen interface.
pub fn to_onnx_api_bytes(description: &PolicyDescription, weights: &Weights, api: OnnxApi) -> Result<Vec<u8>, PolicyError> {
    Ok(to_onnx_api(description, weights, api)?.encode_to_vec())
}

/// The serialised ONNX file as `options` say.
pub fn to_onnx_bytes_with(description: &PolicyDescription, weights: &Weights, options: OnnxOptions) -> Result<Vec<u8>, PolicyError> {
    Ok(to_onnx_with(description, weights, options)?.encode_to_vec())
}
