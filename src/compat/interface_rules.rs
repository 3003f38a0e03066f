//! The ML-Agents interface rules on shapes (unity-import.md §5.2 M10), the variable-length
//! observation layout (M13) and against a behavior spec (M11: Unity's own checks of the
//! model against the agent's sensors and actuators).

use super::facts::ModelFacts;
use super::targets::MlAgentsBucket;
use super::{Finding, Severity};
use crate::run::ModelFormat;
use crate::spec::entity_layout::{EntityLayout, InputReader};
use crate::spec::model::{self as names, ModelInput};

fn finding(severity: Severity, message: String) -> Finding {
    Finding::new("M10", severity, message, None)
}

/// M10: the ranks and dims of an ONNX model's ML-Agents inputs and memory output.
pub fn input_shapes(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx {
        return;
    }
    let memory = facts.constant(names::MEMORY_SIZE).unwrap_or(0.0) as i64;
    for (name, dims) in &facts.input_dims {
        let Some(kind) = ModelInput::parse(name) else { continue };
        if dims.is_empty() {
            continue;
        }
        if let Some(Some(batch)) = dims.first() {
            out.push(finding(Severity::Warning, format!("input {name} has a fixed batch of {batch}; Unity feeds one row per agent deciding: make dim 0 symbolic")));
        }
        let rank = dims.len();
        match kind {
            ModelInput::Observation(_) if !(2..=4).contains(&rank) => out.push(finding(Severity::Error, format!("input {name} has rank {rank}; an observation is [batch, size], [batch, rows, size] or [batch, C, H, W]"))),
            ModelInput::Observation(_) | ModelInput::VisualObservation(_) if rank == 4 && looks_channels_last(dims) => {
                out.push(finding(Severity::Warning, format!("input {name} is {dims:?}, which looks like [batch, H, W, C]; Unity feeds ONNX models images as [batch, C, H, W]")))
            }
            ModelInput::ActionMasks | ModelInput::VectorObservation if rank != 2 => out.push(finding(Severity::Error, format!("input {name} has rank {rank}; Unity feeds it as [batch, size]"))),
            ModelInput::RecurrentIn if bucket >= MlAgentsBucket::M6 && (rank != 3 || dims[2].is_some_and(|m| m != memory)) => {
                out.push(finding(Severity::Error, format!("input {name} is {dims:?}; the Sentis-era memory code feeds [batch, 1, memory_size] = [batch, 1, {memory}]")))
            }
            _ => {}
        }
    }
    if let Some(dims) = facts.output_dims.get(names::RECURRENT_OUT).filter(|d| !d.is_empty()) {
        if bucket >= MlAgentsBucket::M6 && (dims.len() != 3 || dims[2].is_some_and(|m| m != memory)) {
            out.push(finding(Severity::Error, format!("output {} is {dims:?}; the Sentis-era memory code reads [batch, 1, memory_size] = [batch, 1, {memory}]", names::RECURRENT_OUT)));
        }
    }
}

/// M13: a rank-3 (variable-length, BufferSensor) observation. mlagents 0.28 exports it read
/// through `Transpose(perm 0,2,1)` and a Reshape back, which makes up for how Barracuda lays out
/// rank-3 inputs (onnx-export.md §5.4); Sentis lays them out as declared. Without the quirk in
/// the Barracuda era, or with it in the Sentis era, the entities are read scrambled (no error).
pub fn variable_length_layout(facts: &ModelFacts, bucket: MlAgentsBucket, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx || !(MlAgentsBucket::M4..=MlAgentsBucket::M8).contains(&bucket) {
        return;
    }
    for (name, dims) in facts.input_dims.iter().filter(|(n, d)| matches!(ModelInput::parse(n), Some(ModelInput::Observation(_))) && d.len() == 3) {
        let readers: Vec<InputReader> = facts
            .operations
            .iter()
            .filter(|op| op.inputs.contains(name))
            .map(|op| InputReader {
                swaps_last_axes: op.op_type == "Transpose" && matches!(op.attributes.get("perm"), Some(super::facts::Attribute::Ints(p)) if p == &[0, 2, 1]),
                feeds_reshape: facts.operations.iter().any(|next| next.op_type == "Reshape" && op.outputs.iter().any(|o| next.inputs.first() == Some(o))),
            })
            .collect();
        let quirk = EntityLayout::read_by(&readers) == EntityLayout::Barracuda;
        let barracuda_era = bucket <= MlAgentsBucket::M5;
        if quirk != barracuda_era {
            let (what, fix) = if barracuda_era {
                ("is read as declared", "com.unity.ml-agents 2.x (Barracuda) lays rank-3 inputs out transposed: export with mlagents 0.28's Transpose(0,2,1) + Reshape in front")
            } else {
                ("goes through mlagents 0.28's Transpose(0,2,1) + Reshape", "Sentis lays rank-3 inputs out as declared, so that quirk scrambles the entities: export without it")
            };
            out.push(Finding::new("M13", Severity::Error, format!("variable-length observation {name} {dims:?} {what}; {fix}"), None));
        }
    }
}

/// Channels last: the last dim is a channel count (1, 3 or 4) and the second is not.
fn looks_channels_last(dims: &[Option<i64>]) -> bool {
    let channels = |d: Option<i64>| matches!(d, Some(1 | 3 | 4));
    channels(dims[3]) && !channels(dims[1]) && dims[1].is_some()
}

/// M11: Unity's checks of the model against the behavior spec (`violations`, from
/// [`crate::run::check`]), each an error.
pub fn against_spec(violations: &[String], out: &mut Vec<Finding>) {
    for v in violations {
        out.push(Finding::new("M11", Severity::Error, format!("against the behavior spec: {v}"), None));
    }
}
