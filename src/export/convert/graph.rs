//! The ONNX graph of a converted `.nn` policy: the `.nn`'s layers lowered as the runner lowers
//! them ([`crate::barracuda::lower_into`]), wrapped in ML-Agents' model interface: API 3
//! (`obs_i` with NCHW images, integer discrete actions sampled by `Multinomial` and picked by
//! `ArgMax`, deterministic outputs computed with the random layers at their mode, rank-3
//! memories, metadata as float constants) or API 2 (the `.nn`'s own input names, `action`,
//! the legacy constants and the hybrid-era outputs).

use super::layout::{LegacyLayout, ObservationTarget};
use crate::barracuda::{lower_into, unsqueeze_to_rank4, LowerError, LowerOptions, NnModel, LOWERED_OPSET};
use crate::onnx::export::{constant_output, OnnxApi};
use crate::onnx::{attr_int, attr_ints, value_info, GraphBuilder, FLOAT, INT64};
use crate::spec::model::{self, ModelInput};
use std::collections::HashMap;
use tract_onnx::pb::{ModelProto, ValueInfoProto};

fn to_rank4(g: &mut GraphBuilder, x: &str) -> String {
    unsqueeze_to_rank4(g, x.into(), x)
}

/// `[N, ...]` -> `[N, product]`.
fn flat(g: &mut GraphBuilder, x: &str) -> String {
    g.node("Flatten", vec![x.into()], vec![attr_int("axis", 1)], x)
}

/// Columns `start..end` of `[N, K]` (opset 10+ Slice: bounds as inputs).
fn slice_columns(g: &mut GraphBuilder, x: &str, start: usize, end: usize) -> String {
    let starts = g.constant_i64("starts", &[1], vec![start as i64]);
    let ends = g.constant_i64("ends", &[1], vec![end as i64]);
    let axes = g.constant_i64("axes", &[1], vec![1]);
    g.node("Slice", vec![x.into(), starts, ends, axes], vec![], x)
}

/// The graph inputs and the values standing for the `.nn`'s inputs and memories.
fn inputs(g: &mut GraphBuilder, layout: &LegacyLayout, api: OnnxApi) -> (Vec<ValueInfoProto>, HashMap<String, String>) {
    let mut declared = vec![];
    let mut fed = HashMap::new();
    let mut vector_parts = vec![];
    for (i, o) in layout.observations.iter().enumerate() {
        match o {
            ObservationTarget::Visual { input, shape: [h, w, c] } => {
                let name = if api == OnnxApi::V3 { ModelInput::Observation(i).name() } else { input.clone() };
                declared.push(value_info(&name, FLOAT, &[-1, *c as i64, *h as i64, *w as i64]));
                fed.insert(input.clone(), g.node("Transpose", vec![name], vec![attr_ints("perm", &[0, 2, 3, 1])], input));
            }
            ObservationTarget::Vector { size, .. } if api == OnnxApi::V3 => {
                let name = ModelInput::Observation(i).name();
                declared.push(value_info(&name, FLOAT, &[-1, *size as i64]));
                vector_parts.push(name);
            }
            ObservationTarget::Vector { .. } => {}
        }
    }
    if layout.vector_size > 0 {
        if api == OnnxApi::V2 {
            declared.push(value_info(model::VECTOR_OBSERVATION, FLOAT, &[-1, layout.vector_size as i64]));
            vector_parts.push(model::VECTOR_OBSERVATION.into());
        }
        let joined = if vector_parts.len() == 1 { vector_parts.remove(0) } else { g.node("Concat", vector_parts, vec![attr_int("axis", 1)], model::VECTOR_OBSERVATION) };
        fed.insert(model::VECTOR_OBSERVATION.into(), to_rank4(g, &joined));
    }
    // `recurrent_in` as [N, M]: the memories side by side.
    let mut memory = None;
    if layout.memory_size > 0 {
        declared.push(value_info(model::RECURRENT_IN, FLOAT, &[-1, 1, layout.memory_size as i64]));
        let whole = g.node("Squeeze", vec![model::RECURRENT_IN.into()], vec![attr_ints("axes", &[1])], model::RECURRENT_IN);
        let mut offset = 0;
        for part in &layout.memories {
            let slice = slice_columns(g, &whole, offset, offset + part.size);
            fed.insert(part.input.clone(), to_rank4(g, &slice));
            offset += part.size;
        }
        memory = Some(whole);
    }
    for (kind, name, width) in &layout.other_inputs {
        if let (ModelInput::RecurrentIn, Some(whole)) = (kind, &memory) {
            // The legacy copy of the memory (TF-era files read it only in a dead branch; the
            // layout checked that its width is the memories').
            fed.insert(name.clone(), to_rank4(g, whole));
            continue;
        }
        declared.push(value_info(name, FLOAT, &[-1, *width as i64]));
        fed.insert(name.clone(), to_rank4(g, name));
    }
    (declared, fed)
}

/// The lowered value of the `.nn` output `name`, flattened to `[N, K]`; `deterministic`
/// takes its twin computed with the random layers at their mode, where it has one.
fn output(g: &mut GraphBuilder, lowered: &crate::barracuda::LoweredValues, name: &str, deterministic: bool) -> Result<String, LowerError> {
    let twin = if deterministic { lowered.twins.get(name) } else { None };
    let value = twin.or_else(|| lowered.values.get(name)).ok_or_else(|| LowerError::UnknownOutput(name.into()))?.clone();
    Ok(flat(g, &value))
}

/// Builds the converted model.
pub fn converted_graph(nn: &NnModel, layout: &LegacyLayout, api: OnnxApi) -> Result<ModelProto, LowerError> {
    let mut g = GraphBuilder::default();
    let (declared, fed) = inputs(&mut g, layout, api);
    let mut twins = HashMap::new();
    if let Some(epsilon) = fed.get(model::EPSILON) {
        // The noise Unity feeds, at its mode for the deterministic outputs.
        twins.insert(model::EPSILON.to_string(), g.node("Sub", vec![epsilon.clone(), epsilon.clone()], vec![], model::EPSILON));
    }
    let lowered = lower_into(nn, LowerOptions::default(), &mut g, fed, Some(twins))?;
    let spec = &layout.action_spec;
    let (c, branches) = (spec.continuous_size, &spec.discrete_branches);
    let version = if api == OnnxApi::V3 { 3.0 } else { 2.0 };
    constant_output(&mut g, model::VERSION_NUMBER, &[1], vec![version]);
    constant_output(&mut g, model::MEMORY_SIZE, &[1], vec![layout.memory_size as f32]);
    let mut outputs = vec![value_info(model::VERSION_NUMBER, FLOAT, &[1]), value_info(model::MEMORY_SIZE, FLOAT, &[1])];
    let sampled = output(&mut g, &lowered, model::ACTION, false)?;
    if c > 0 {
        g.node_into("Identity", vec![sampled.clone()], vec![], model::CONTINUOUS_ACTIONS);
        constant_output(&mut g, model::CONTINUOUS_ACTION_OUTPUT_SHAPE, &[1], vec![c as f32]);
        outputs.push(value_info(model::CONTINUOUS_ACTIONS, FLOAT, &[-1, c as i64]));
        outputs.push(value_info(model::CONTINUOUS_ACTION_OUTPUT_SHAPE, FLOAT, &[1]));
        if api == OnnxApi::V3 {
            let mode = output(&mut g, &lowered, model::ACTION, true)?;
            g.node_into("Identity", vec![mode], vec![], model::DETERMINISTIC_CONTINUOUS_ACTIONS);
            outputs.push(value_info(model::DETERMINISTIC_CONTINUOUS_ACTIONS, FLOAT, &[-1, c as i64]));
        }
    }
    if !branches.is_empty() {
        let k = branches.len() as i64;
        if api == OnnxApi::V3 {
            // `action` holds each branch's normalised, masked log-probabilities side by side.
            let (mut samples, mut argmaxes, mut start) = (vec![], vec![], 0);
            for size in branches {
                let log_probs = slice_columns(&mut g, &sampled, start, start + size);
                samples.push(g.node("Multinomial", vec![log_probs.clone()], vec![attr_int("dtype", INT64 as i64), attr_int("sample_size", 1)], "sample"));
                argmaxes.push(g.node("ArgMax", vec![log_probs], vec![attr_int("axis", 1), attr_int("keepdims", 1)], "argmax"));
                start += size;
            }
            g.node_into("Concat", samples, vec![attr_int("axis", 1)], model::DISCRETE_ACTIONS);
            g.node_into("Concat", argmaxes, vec![attr_int("axis", 1)], model::DETERMINISTIC_DISCRETE_ACTIONS);
            outputs.push(value_info(model::DISCRETE_ACTIONS, INT64, &[-1, k]));
            outputs.push(value_info(model::DETERMINISTIC_DISCRETE_ACTIONS, INT64, &[-1, k]));
        } else {
            g.node_into("Identity", vec![sampled.clone()], vec![], model::DISCRETE_ACTIONS);
            outputs.push(value_info(model::DISCRETE_ACTIONS, FLOAT, &[-1, spec.mask_len() as i64]));
        }
        constant_output(&mut g, model::DISCRETE_ACTION_OUTPUT_SHAPE, &[1, k], branches.iter().map(|b| *b as f32).collect());
        outputs.push(value_info(model::DISCRETE_ACTION_OUTPUT_SHAPE, FLOAT, &[1, k]));
    }
    if api == OnnxApi::V2 {
        // The width of `action`: the continuous actions, or every branch's log-probabilities.
        let total = (c + spec.mask_len()) as f32;
        g.node_into("Identity", vec![sampled], vec![], model::ACTION);
        constant_output(&mut g, model::IS_CONTINUOUS_CONTROL, &[1], vec![if c > 0 { 1.0 } else { 0.0 }]);
        constant_output(&mut g, model::ACTION_OUTPUT_SHAPE, &[1], vec![total]);
        outputs.push(value_info(model::ACTION, FLOAT, &[-1, total as i64]));
        outputs.push(value_info(model::IS_CONTINUOUS_CONTROL, FLOAT, &[1]));
        outputs.push(value_info(model::ACTION_OUTPUT_SHAPE, FLOAT, &[1]));
    }
    if layout.memory_size > 0 {
        let parts = layout.memories.iter().map(|m| output(&mut g, &lowered, &m.output, false)).collect::<Result<Vec<_>, _>>()?;
        let joined = if parts.len() == 1 { parts[0].clone() } else { g.node("Concat", parts, vec![attr_int("axis", 1)], model::RECURRENT_OUT) };
        g.node_into("Unsqueeze", vec![joined], vec![attr_ints("axes", &[1])], model::RECURRENT_OUT);
        outputs.push(value_info(model::RECURRENT_OUT, FLOAT, &[-1, 1, layout.memory_size as i64]));
    }
    let kept: Vec<String> = outputs.iter().map(|o| o.name.clone()).collect();
    g.prune(&kept);
    Ok(g.finish("mlagents-rs converted .nn policy", LOWERED_OPSET, declared, outputs, "mlagents-rs convert"))
}
