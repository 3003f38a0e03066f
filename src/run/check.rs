//! Checking a policy against a behavior spec as Unity's model checkers do (barracuda-nn.md
//! §10-11 for `.nn` and the legacy interface, onnx-export.md §7 for ONNX version 3), listing
//! every violation at once.

use super::ModelInterface;
use crate::spec::model::{self as contract, ModelInput};
use crate::spec::BehaviorSpec;

/// Every way the model fails Unity's checks for this behavior (empty = loadable).
pub fn check(model: &ModelInterface, spec: &BehaviorSpec) -> Vec<String> {
    let mut v = Vec::new();
    if !model.non_finite_weights.is_empty() {
        v.push(format!("weights hold NaN or infinities, so Unity would compute NaN actions: {}", model.non_finite_weights.join(", ")));
    }
    let version = model.constant(contract::VERSION_NUMBER);
    match version {
        None => v.push("required constant version_number was not found".to_string()),
        Some(x) if x != 2.0 && x != 3.0 => v.push(format!("{} is {x}; Unity loads 2 or 3", contract::VERSION_NUMBER)),
        _ => {}
    }
    let memory = model.constant(contract::MEMORY_SIZE);
    if memory.is_none() {
        v.push("required constant memory_size was not found".into());
    }
    let memory = memory.unwrap_or(0.0);
    if !(memory.is_finite() && memory >= 0.0 && memory.fract() == 0.0) {
        v.push(format!("{} is {memory}; it must be a whole number, 0 or more", contract::MEMORY_SIZE));
    }
    for (name, dims) in model.all_inputs() {
        if let Some(d) = dims.iter().find(|d| **d < -1) {
            v.push(format!("input {name} declares a negative size {d}"));
        }
    }
    check_actions(model, version, spec, &mut v);
    check_inputs(model, version, spec, &mut v);
    check_memory(model, version, memory, &mut v);
    v
}

/// The action outputs and their constants (model API 3, or the legacy `action`), and the
/// masks a discrete model reads.
fn check_actions(model: &ModelInterface, version: Option<f32>, spec: &BehaviorSpec, v: &mut Vec<String>) {
    let actions = &spec.action_spec;
    let branches: Vec<f32> = actions.discrete_branches.iter().map(|b| *b as f32).collect();
    let action_outputs = [contract::ACTION, contract::CONTINUOUS_ACTIONS, contract::DISCRETE_ACTIONS, contract::DETERMINISTIC_CONTINUOUS_ACTIONS, contract::DETERMINISTIC_DISCRETE_ACTIONS];
    if !action_outputs.iter().any(|o| model.has_output(o)) {
        v.push(format!("no action output (one of {action_outputs:?})"));
    }
    let modern = model.has_output(contract::CONTINUOUS_ACTIONS) || model.has_output(contract::DISCRETE_ACTIONS);
    let discrete_model;
    if modern {
        let continuous = if model.has_output(contract::CONTINUOUS_ACTIONS) { model.constant(contract::CONTINUOUS_ACTION_OUTPUT_SHAPE) } else { Some(0.0) };
        match continuous {
            None => v.push(format!("{} is an output but {} is missing", contract::CONTINUOUS_ACTIONS, contract::CONTINUOUS_ACTION_OUTPUT_SHAPE)),
            Some(c) if c as usize != actions.continuous_size => v.push(format!(
                "the model has {c} continuous actions, the behavior {}",
                actions.continuous_size
            )),
            _ => {}
        }
        let discrete = if model.has_output(contract::DISCRETE_ACTIONS) { model.constants.get(contract::DISCRETE_ACTION_OUTPUT_SHAPE).cloned() } else { Some(vec![]) };
        match discrete {
            None => v.push(format!("{} is an output but {} is missing", contract::DISCRETE_ACTIONS, contract::DISCRETE_ACTION_OUTPUT_SHAPE)),
            Some(d) => {
                // Version 3 lists the branch sizes; version 2 gives their sum.
                let fits = if version == Some(3.0) { d == branches } else { d.first().copied().unwrap_or(0.0) == branches.iter().sum::<f32>() };
                if !fits {
                    v.push(format!("the model's discrete branches {d:?} differ from the behavior's {:?}", actions.discrete_branches));
                }
            }
        }
        discrete_model = model.has_output(contract::DISCRETE_ACTIONS);
    } else {
        let kind = model.constant(contract::IS_CONTINUOUS_CONTROL);
        let size = model.constant(contract::ACTION_OUTPUT_SHAPE);
        if kind.is_none() || size.is_none() {
            v.push("a model without continuous_actions/discrete_actions needs is_continuous_control and action_output_shape".into());
        }
        if !model.has_output(contract::ACTION) {
            v.push("the model has no output named action".into());
        }
        discrete_model = kind == Some(0.0);
        match (kind, size) {
            (Some(1.0), Some(s)) => {
                let fits = actions.discrete_branches.is_empty() && s as usize == actions.continuous_size;
                if !fits {
                    v.push(format!("the model has {s} continuous actions; the behavior has {actions}"));
                }
            }
            (Some(0.0), Some(s)) => {
                let fits = actions.continuous_size == 0 && s == branches.iter().sum::<f32>();
                if !fits {
                    v.push(format!("the model has discrete actions of total size {s}; the behavior has {actions}"));
                }
            }
            (Some(other), _) if other != 0.0 && other != 1.0 => {
                v.push(format!("{} is {other}: cannot infer the type of control", contract::IS_CONTINUOUS_CONTROL))
            }
            _ => {}
        }
    }
    if discrete_model && model.input(contract::ACTION_MASKS).is_none() {
        v.push("a discrete model needs the input action_masks".into());
    }
    if let Some(d) = model.input(contract::ACTION_MASKS) {
        let width = *d.last().unwrap_or(&0);
        if width >= 0 && width as usize != actions.mask_len() && actions.mask_len() > 0 {
            v.push(format!("{} has width {width}, the behavior's branches sum to {}", contract::ACTION_MASKS, actions.mask_len()));
        }
    }
}

/// Each declared input against the observation (or action) it is fed from.
fn check_inputs(model: &ModelInterface, version: Option<f32>, spec: &BehaviorSpec, v: &mut Vec<String>) {
    let actions = &spec.action_spec;
    let observations = &spec.observation_specs;
    let vector_size: usize = observations.iter().filter(|o| o.shape.len() == 1).map(|o| o.shape[0]).sum();
    let visual: Vec<&Vec<usize>> = observations.iter().filter(|o| o.shape.len() == 3).map(|o| &o.shape).collect();
    let image_fits = |dims: &[i64], hwc: &[usize]| {
        let hwc: Vec<i64> = hwc.iter().map(|d| *d as i64).collect();
        let chw = [hwc[2], hwc[0], hwc[1]];
        dims == hwc.as_slice() || dims == chw.as_slice()
    };
    for (name, dims) in model.all_inputs() {
        let last = dims.last().copied().unwrap_or(-1);
        let input = ModelInput::parse(name);
        if let Some(ModelInput::Observation(i)) = input {
            match observations.get(i) {
                None => v.push(format!("input {name}: the behavior has only {} observations", observations.len())),
                Some(o) => {
                    let ok = match o.shape.len() {
                        3 => image_fits(dims, &o.shape),
                        _ => dims.iter().zip(&o.shape).all(|(d, s)| *d < 0 || *d as usize == *s) && dims.len() == o.shape.len(),
                    };
                    if !ok {
                        v.push(format!("input {name} has shape {dims:?}, observation {i} is {:?}", o.shape));
                    }
                }
            }
        } else if input == Some(ModelInput::VectorObservation) {
            if last >= 0 && last as usize != vector_size {
                v.push(format!("{} has size {last}, the behavior's vector observations sum to {vector_size}", contract::VECTOR_OBSERVATION));
            }
        } else if let Some(ModelInput::VisualObservation(k)) = input {
            match visual.get(k) {
                None => v.push(format!("input {name}: the behavior has only {} visual observations", visual.len())),
                Some(hwc) => {
                    if !image_fits(dims, hwc) {
                        v.push(format!("input {name} has shape {dims:?}, the camera is {hwc:?} (H, W, C)"));
                    }
                }
            }
        } else if input == Some(ModelInput::PreviousAction) {
            if last >= 0 && last as usize != actions.discrete_size() {
                v.push(format!("{} has size {last}, the behavior has {} branches", contract::PREV_ACTION, actions.discrete_size()));
            }
        } else if input.is_none() && !model.is_memory_input(name) {
            v.push(format!("the model contains an unexpected input named {name:?}"));
        }
    }
    if version == Some(3.0) {
        for i in 0..observations.len() {
            if model.input(&ModelInput::Observation(i).name()).is_none() {
                v.push(format!("the model has no input obs_{i} for observation {i}"));
            }
        }
    }
}

/// A recurrent model's memory input and output.
fn check_memory(model: &ModelInterface, version: Option<f32>, memory: f32, v: &mut Vec<String>) {
    if memory > 0.0 {
        if version == Some(3.0) && model.input(contract::RECURRENT_IN).is_none() {
            v.push(format!("{} > 0 but the model has no input {}", contract::MEMORY_SIZE, contract::RECURRENT_IN));
        }
        if !model.outputs_memory() {
            v.push(format!("{} > 0 but the model has no output {}", contract::MEMORY_SIZE, contract::RECURRENT_OUT));
        }
    }
    // Unity reads the memory width from the tensor, never from the constant (lstm.md §5.2,
    // §8 row 14): a constant that disagrees hides a broken export.
    if let Some(width) = model.input(contract::RECURRENT_IN).and_then(|d| d.last().copied()).filter(|w| *w >= 0) {
        if version == Some(3.0) && width as f32 != memory {
            v.push(format!("{} is {memory} but input {} is {width} wide; they must agree", contract::MEMORY_SIZE, contract::RECURRENT_IN));
        }
    }
    let slots: usize = model.memories.iter().filter(|m| !m.declared).map(|m| m.size).sum();
    if slots > 0 && slots as f32 != memory {
        let names: Vec<&str> = model.memories.iter().map(|m| m.input.as_str()).collect();
        v.push(format!("{} is {memory} but the memories {names:?} hold {slots} floats; they must agree", contract::MEMORY_SIZE));
    }
}
