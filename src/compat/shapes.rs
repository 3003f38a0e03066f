//! Rules that need every tensor's shape (unity-import.md §4 rows 8-10): the static shapes
//! come from tract's inference at batch 1 (the engine the project runs models on). O7: the
//! ranks each importer takes, and a Reshape of a convolution's NCHW output (which Barracuda's
//! NHWC storage has reshaped wrongly); O6: a Gemm whose weights do not fit its input.

use super::facts::{ModelFacts, FLOAT, INT32, INT64};
use super::targets::{EngineBucket, Target};
use super::{Finding, Severity};
use crate::run::ModelFormat;
use std::collections::BTreeMap;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

/// What shape inference found, by tensor name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct InferredShapes {
    pub ranks: BTreeMap<String, usize>,
    /// Shapes known to the last dim (batch 1).
    pub shapes: BTreeMap<String, Vec<usize>>,
}

/// Infers the shapes of an ONNX model's tensors at batch 1, as far as tract gets (a graph
/// that contradicts itself still has the shapes before the contradiction).
pub fn infer(bytes: &[u8], facts: &ModelFacts) -> InferredShapes {
    if facts.format != ModelFormat::Onnx {
        return InferredShapes::default();
    }
    crate::engine::contain_tract_panics(|| infer_with_tract(bytes, facts)).unwrap_or_default()
}

fn infer_with_tract(bytes: &[u8], facts: &ModelFacts) -> TractResult<InferredShapes> {
    use prost::Message;
    let mut proto = tract_onnx::pb::ModelProto::decode(bytes)?;
    // Intermediate shapes with a symbolic batch contradict the batch set below (as in the
    // runner, which drops them too).
    if let Some(graph) = proto.graph.as_mut() {
        graph.value_info.clear();
    }
    let mut model = tract_onnx::onnx().model_for_proto_model(&proto)?;
    for (i, outlet) in model.input_outlets()?.to_vec().iter().enumerate() {
        let name = model.node(outlet.node).name.clone();
        let (Some(dims), Some((_, element_type))) = (facts.input_dims.get(&name), facts.inputs.iter().find(|(n, _)| *n == name)) else { continue };
        let datum = match *element_type {
            FLOAT => f32::datum_type(),
            INT64 => i64::datum_type(),
            INT32 => i32::datum_type(),
            _ => continue,
        };
        if !dims.is_empty() {
            let shape: Vec<usize> = dims.iter().map(|d| d.unwrap_or(1).max(1) as usize).collect();
            model.set_input_fact(i, InferenceFact::dt_shape(datum, shape))?;
        }
    }
    // A contradiction stops the analysis; what was inferred before it stays.
    let _ = model.analyse(false);
    let mut found = InferredShapes::default();
    for node in model.nodes() {
        for (slot, output) in node.outputs.iter().enumerate() {
            let label = model.outlet_label(OutletId::new(node.id, slot)).map(str::to_string).unwrap_or_else(|| node.name.clone());
            if let Some(rank) = output.fact.shape.rank().concretize() {
                found.ranks.insert(label.clone(), rank as usize);
            }
            if let Ok(Some(shape)) = output.fact.shape.as_concrete_finite() {
                found.shapes.insert(label, shape.to_vec());
            }
        }
    }
    Ok(found)
}

/// The text Barracuda's legacy importer prints for a tensor above rank 4.
fn rank_message(rank: usize) -> String {
    format!("Only tensors of rank 4 or less are supported, but got rank {rank}")
}

/// O7 and O6's weight check for one target.
pub fn shape_rules(facts: &ModelFacts, shapes: &InferredShapes, target: &Target, out: &mut Vec<Finding>) {
    if facts.format != ModelFormat::Onnx {
        return;
    }
    let bucket = target.engine.bucket;
    let producer: BTreeMap<&str, &str> = facts.operations.iter().flat_map(|op| op.outputs.iter().map(move |o| (o.as_str(), op.op_type.as_str()))).collect();
    for (name, rank) in &shapes.ranks {
        let op = producer.get(name.as_str()).copied().unwrap_or("input");
        let legacy_op = op.starts_with("Reduce") || matches!(op, "Squeeze" | "Unsqueeze" | "Reshape");
        let limit = match bucket {
            EngineBucket::B0 | EngineBucket::B1 => Some(4),
            EngineBucket::B2 if legacy_op => Some(4),
            b if !b.is_barracuda() => Some(8),
            _ => None,
        };
        if let Some(limit) = limit.filter(|l| rank > l) {
            let unity = (limit == 4).then(|| rank_message(*rank));
            out.push(Finding::new("O7", Severity::Error, format!("{name:?} ({op}) has rank {rank}; {}@{} takes tensors up to rank {limit}: keep the graph at rank {limit} or below", target.engine.package.id(), target.engine.version), unity));
        }
    }
    if bucket.is_barracuda() && bucket >= EngineBucket::B3 {
        for (name, dims) in facts.constants.iter().filter(|(_, d)| d.len() > 6) {
            out.push(Finding::new("O7", Severity::Error, format!("constant {name:?} has rank {}; Barracuda's layout permutations take constants up to rank 6", dims.len()), None));
        }
    }
    if bucket.is_barracuda() && bucket <= EngineBucket::B3 {
        conv_reshapes(facts, shapes, out);
    }
    gemm_weights(facts, shapes, bucket, out);
}

/// Ops that keep a convolution's NCHW layout on the way to a Reshape.
const LAYOUT_KEEPING: &[&str] = &["Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Identity", "Dropout", "MaxPool", "AveragePool", "BatchNormalization"];

/// §4 row 10: a Reshape of a convolution's output into anything but rows of features, which
/// Barracuda up to 1.4 stores NHWC and reshapes in that order (ML-Agents #5355, a GridSensor
/// policy on Barracuda 1.4.0). The flatten to `[N, C*H*W]` of ML-Agents' own visual encoders
/// is imported correctly and not reported.
fn conv_reshapes(facts: &ModelFacts, shapes: &InferredShapes, out: &mut Vec<Finding>) {
    let made_by: BTreeMap<&str, &super::facts::Operation> = facts.operations.iter().flat_map(|op| op.outputs.iter().map(move |o| (o.as_str(), op))).collect();
    let rows_of_features = |op: &&super::facts::Operation| op.inputs.get(1).and_then(|shape| facts.constants.get(shape)).is_some_and(|dims| dims == &[2]);
    for reshape in facts.operations.iter().filter(|op| op.op_type == "Reshape" && !rows_of_features(op)) {
        let mut value = reshape.inputs.first().map(String::as_str).unwrap_or_default();
        let mut conv = None;
        for _ in 0..facts.operations.len() {
            match made_by.get(value) {
                Some(op) if op.op_type == "Conv" => {
                    conv = Some(*op);
                    break;
                }
                Some(op) if LAYOUT_KEEPING.contains(&op.op_type.as_str()) => value = op.inputs.first().map(String::as_str).unwrap_or_default(),
                _ => break,
            }
        }
        let Some(conv) = conv else { continue };
        let size = shapes.shapes.get(value).map_or(String::new(), |s| format!(" {s:?}"));
        out.push(Finding::new(
            "O7",
            Severity::Warning,
            format!("Reshape node {:?} reshapes the NCHW output{size} of Conv {:?} into another rank than rows of features; Barracuda up to 1.4 holds it NHWC and can fail or reorder the values: flatten it to [N, C*H*W] first, or use Barracuda 2.0 or later", reshape.name, conv.name),
            Some("Unexpected error while evaluating model output version_number. System.ArgumentException: Cannot reshape array of size".into()),
        ));
    }
}

/// §4 row 9: a Gemm whose constant weights take another number of features than its input
/// has (a flatten-order or size mismatch between the exporter and the importer).
fn gemm_weights(facts: &ModelFacts, shapes: &InferredShapes, bucket: EngineBucket, out: &mut Vec<Finding>) {
    for op in facts.operations.iter().filter(|op| op.op_type == "Gemm") {
        let (Some(a), Some(b)) = (op.inputs.first(), op.inputs.get(1)) else { continue };
        let (Some(a_shape), Some(b_dims)) = (shapes.shapes.get(a), facts.constants.get(b)) else { continue };
        if a_shape.len() != 2 || b_dims.len() != 2 {
            continue;
        }
        let features = a_shape[if op.int("transA").unwrap_or(0) == 0 { 1 } else { 0 }] as i64;
        let weights = b_dims[if op.int("transB").unwrap_or(0) == 0 { 0 } else { 1 }];
        if features != weights {
            out.push(Finding::new(
                "O6",
                Severity::Error,
                format!("Gemm node {:?}: its input has {features} features per row, its weights take {weights}; the graph does not compute (a flatten order or size that another exporter version assumed): re-export the model", op.name),
                bucket.is_barracuda().then(|| format!("Unexpected error while parsing layer {} of type Gemm. Assertion failure. Values are not equal. Expected: {features} == {weights}", op.name)),
            ));
        }
    }
}
