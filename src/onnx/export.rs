//! Exporting a policy to ONNX as ML-Agents 0.28 does (onnx-export.md §2-6): model API
//! version 3, opset 9, inputs `obs_i` and `action_masks`, the constants as `Constant` nodes
//! named like their outputs, sampled and deterministic action outputs.

use super::{attr_float, attr_int, attr_ints, value_info, GraphBuilder, FLOAT, INT64};
use crate::policy::{names, PolicyDescription, PolicyError, Weights, NORMALIZATION_CLIP};
use prost::Message;
use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, ModelProto, TensorProto};

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
fn constant_output(g: &mut GraphBuilder, name: &str, dims: &[i64], data: Vec<f32>) {
    g.node_into("Constant", vec![], vec![tensor_attribute(dims, data)], name);
}

fn linear(g: &mut GraphBuilder, x: String, weights: &Weights, weight: &str, bias: &str) -> Result<String, PolicyError> {
    let w = weights.get(weight)?;
    let b = weights.get(bias)?;
    let w_name = g.constant(weight, &[w.shape[0] as i64, w.shape[1] as i64], w.data.clone());
    let b_name = g.constant(bias, &[b.shape[0] as i64], b.data.clone());
    Ok(g.node("Gemm", vec![x, w_name, b_name], vec![attr_int("transB", 1)], weight))
}

/// Builds the ONNX model of a policy.
pub fn to_onnx(description: &PolicyDescription, weights: &Weights) -> Result<ModelProto, PolicyError> {
    description.check(weights)?;
    let mut g = GraphBuilder::default();
    let actions = &description.action_spec;
    let mut inputs = vec![];
    let mut encodings = vec![];
    for (i, shape) in description.observation_shapes.iter().enumerate() {
        let name = format!("obs_{i}");
        inputs.push(value_info(&name, FLOAT, &[-1, shape[0] as i64]));
        let mut x = name;
        if description.normalize {
            let mean = weights.get(&names::running_mean(i))?;
            let var = weights.get(&names::running_variance(i))?;
            let steps = weights.get(&names::normalization_steps(i))?;
            let n = mean.shape[0] as i64;
            let mean = g.constant(&names::running_mean(i), &[n], mean.data.clone());
            let var = g.constant(&names::running_variance(i), &[n], var.data.clone());
            let steps = g.constant(&names::normalization_steps(i), &[1], steps.data.clone());
            let centred = g.node("Sub", vec![x, mean], vec![], "normalizer");
            let scaled_var = g.node("Div", vec![var, steps], vec![], "normalizer");
            let std = g.node("Sqrt", vec![scaled_var], vec![], "normalizer");
            let z = g.node("Div", vec![centred, std], vec![], "normalizer");
            x = g.node("Clip", vec![z], vec![attr_float("min", -NORMALIZATION_CLIP), attr_float("max", NORMALIZATION_CLIP)], "normalizer");
        }
        encodings.push(x);
    }
    let mut h = if encodings.len() == 1 {
        encodings.remove(0)
    } else {
        g.node("Concat", encodings, vec![attr_int("axis", 1)], "encodings")
    };
    for l in 0..description.num_layers {
        let y = linear(&mut g, h, weights, &names::body_weight(l), &names::body_bias(l))?;
        let s = g.node("Sigmoid", vec![y.clone()], vec![], "swish");
        h = g.node("Mul", vec![y, s], vec![], "swish");
    }
    let mut outputs = vec![value_info("version_number", FLOAT, &[1]), value_info("memory_size", FLOAT, &[1])];
    constant_output(&mut g, "version_number", &[1], vec![MODEL_API_VERSION]);
    constant_output(&mut g, "memory_size", &[1], vec![0.0]);
    let c = actions.continuous_size;
    if c > 0 {
        let mu = linear(&mut g, h.clone(), weights, names::MU_WEIGHT, names::MU_BIAS)?;
        let log_sigma = weights.get(names::LOG_SIGMA)?;
        let log_sigma = g.constant(names::LOG_SIGMA, &[1, c as i64], log_sigma.data.clone());
        let zero = g.constant("zero", &[], vec![0.0]);
        let mu_zero = g.node("Mul", vec![mu.clone(), zero], vec![], "log_sigma");
        let broadcast = g.node("Add", vec![mu_zero, log_sigma], vec![], "log_sigma");
        let std = g.node("Exp", vec![broadcast], vec![], "std");
        let noise = g.node("RandomNormalLike", vec![mu.clone()], vec![attr_float("mean", 0.0), attr_float("scale", 1.0)], "noise");
        let scaled = g.node("Mul", vec![noise, std], vec![], "sample");
        let sample = g.node("Add", vec![mu.clone(), scaled], vec![], "sample");
        let three = g.constant("three", &[], vec![3.0]);
        let clip = [attr_float("min", -3.0), attr_float("max", 3.0)];
        let clipped = g.node("Clip", vec![sample], clip.to_vec(), "continuous");
        g.node_into("Div", vec![clipped, three.clone()], vec![], "continuous_actions");
        let clipped_mu = g.node("Clip", vec![mu], clip.to_vec(), "deterministic");
        g.node_into("Div", vec![clipped_mu, three], vec![], "deterministic_continuous_actions");
        constant_output(&mut g, "continuous_action_output_shape", &[1], vec![c as f32]);
        outputs.push(value_info("continuous_actions", FLOAT, &[-1, c as i64]));
        outputs.push(value_info("continuous_action_output_shape", FLOAT, &[1]));
        outputs.push(value_info("deterministic_continuous_actions", FLOAT, &[-1, c as i64]));
    }
    let branches = &actions.discrete_branches;
    if !branches.is_empty() {
        let total: usize = branches.iter().sum();
        inputs.push(value_info("action_masks", FLOAT, &[-1, total as i64]));
        let (mut sampled, mut argmax) = (vec![], vec![]);
        let mut start = 0i64;
        for (b, k) in branches.iter().enumerate() {
            let logits = linear(&mut g, h.clone(), weights, &names::branch_weight(b), &names::branch_bias(b))?;
            let mask = g.node(
                "Slice",
                vec!["action_masks".into()],
                vec![attr_ints("starts", &[start]), attr_ints("ends", &[start + *k as i64]), attr_ints("axes", &[1])],
                "mask",
            );
            // logits * a - 1e8 * (1 - a), written as Barracuda-friendly products and sums.
            let minus_one = g.constant("minus_one", &[], vec![-1.0]);
            let one = g.constant("one", &[], vec![1.0]);
            let big = g.constant("big", &[], vec![1e8]);
            let negated = g.node("Mul", vec![mask.clone(), minus_one], vec![], "mask");
            let inverse = g.node("Add", vec![negated, one], vec![], "mask");
            let penalty = g.node("Mul", vec![inverse, big], vec![], "mask");
            let kept = g.node("Mul", vec![logits, mask], vec![], "mask");
            let masked = g.node("Sub", vec![kept, penalty], vec![], "mask");
            let probs = g.node("Softmax", vec![masked], vec![attr_int("axis", 1)], "probs");
            let log_probs = g.node("Log", vec![probs.clone()], vec![], "log_probs");
            sampled.push(g.node("Multinomial", vec![log_probs], vec![attr_int("dtype", INT64 as i64), attr_int("sample_size", 1)], "sample"));
            argmax.push(g.node("ArgMax", vec![probs], vec![attr_int("axis", 1), attr_int("keepdims", 1)], "argmax"));
            start += *k as i64;
        }
        g.node_into("Concat", sampled, vec![attr_int("axis", 1)], "discrete_actions");
        g.node_into("Concat", argmax, vec![attr_int("axis", 1)], "deterministic_discrete_actions");
        let sizes: Vec<f32> = branches.iter().map(|k| *k as f32).collect();
        constant_output(&mut g, "discrete_action_output_shape", &[1, branches.len() as i64], sizes);
        outputs.push(value_info("discrete_actions", INT64, &[-1, branches.len() as i64]));
        outputs.push(value_info("discrete_action_output_shape", FLOAT, &[1, branches.len() as i64]));
        outputs.push(value_info("deterministic_discrete_actions", INT64, &[-1, branches.len() as i64]));
    }
    Ok(g.finish("mlagents-rs policy", OPSET, inputs, outputs, "mlagents-rs"))
}

/// The serialised ONNX file.
pub fn to_onnx_bytes(description: &PolicyDescription, weights: &Weights) -> Result<Vec<u8>, PolicyError> {
    Ok(to_onnx(description, weights)?.encode_to_vec())
}
