//! The operator rules of unity-import.md §5.2 that read attributes: what Barracuda ignores
//! or refuses in Gemm, Softmax, Reduce*, Split, Squeeze / Unsqueeze and Flatten (P2-P5), and
//! the operators it runs differently from the ONNX meaning (P8). Most of these are silent in
//! Unity: a wrong action, no error (§4 row 13).

use super::facts::{Attribute, ModelFacts, Operation};
use super::shapes::InferredShapes;
use super::targets::{EngineBucket, Target};
use super::{Finding, Severity};
use crate::run::ModelFormat;

fn finding(id: &'static str, severity: Severity, op: &Operation, what: String, unity_message: Option<String>) -> Finding {
    Finding::new(id, severity, format!("{} node {:?}: {what}", op.op_type, op.name), unity_message)
}

/// P2-P5 and P8 for a Barracuda target (Sentis and Inference Engine implement these
/// operators as ONNX defines them; Softmax without an axis is P3's concern for Sentis 1.2-1.4).
pub fn barracuda_attributes(facts: &ModelFacts, shapes: &InferredShapes, target: &Target, out: &mut Vec<Finding>) {
    let bucket = target.engine.bucket;
    if facts.format != ModelFormat::Onnx {
        return;
    }
    for op in &facts.operations {
        match op.op_type.as_str() {
            "Gemm" if bucket.is_barracuda() => gemm(facts, op, bucket, out),
            "Softmax" | "LogSoftmax" => softmax(op, input_rank(op, shapes), facts.default_opset(), bucket, out),
            reduce if reduce.starts_with("Reduce") && bucket.is_barracuda() && op.inputs.len() < 2 && !op.attributes.contains_key("axes") => out.push(finding(
                "P4",
                Severity::Error,
                op,
                "no axes: ONNX reduces every axis, Barracuda reduces axis 0 only (a wrong result, no error): give axes explicitly".into(),
                None,
            )),
            "Split" if bucket.is_barracuda() && !op.attributes.contains_key("split") => out.push(finding(
                "P5",
                Severity::Error,
                op,
                "no split attribute (an opset-13 Split takes the sizes as an input), which Barracuda refuses: export with opset 11 or earlier, or give split".into(),
                Some(format!("Unexpected error while parsing layer {} of type Split. Unsupported default attribute split for node {} of type Split. Value is required.", op.name, op.name)),
            )),
            "Squeeze" | "Unsqueeze" if bucket.is_barracuda() && bucket < EngineBucket::B5 => {
                if let Some(Attribute::Ints(axes)) = op.attributes.get("axes") {
                    if axes.len() > 1 {
                        out.push(finding("P5", Severity::Error, op, format!("{} axes {axes:?}; Barracuda before 2.3 takes one axis per node: use one node per axis", axes.len()), None));
                    }
                }
            }
            "Flatten" if bucket.is_barracuda() && op.int("axis").unwrap_or(1) != 1 => {
                out.push(finding("P5", Severity::Error, op, format!("axis {}; Barracuda flattens from axis 1 whatever the attribute says: flatten from axis 1", op.int("axis").unwrap_or(1)), None))
            }
            "Cast" if bucket.is_barracuda() => out.push(finding("P8", Severity::Warning, op, "Barracuda's Cast does nothing (values are not truncated to integers)".into(), None)),
            _ => {}
        }
    }
}

/// P2: Gemm as Barracuda imports it.
fn gemm(facts: &ModelFacts, op: &Operation, bucket: EngineBucket, out: &mut Vec<Finding>) {
    for (name, default) in [("alpha", 1.0), ("beta", 1.0)] {
        let value = op.float(name).unwrap_or(default);
        if value != 1.0 {
            out.push(finding("P2", Severity::Error, op, format!("{name} = {value}, which Barracuda ignores (a wrong result, no error): fold it into the weights"), None));
        }
    }
    if bucket <= EngineBucket::B4 {
        if op.int("transA").unwrap_or(0) != 0 {
            out.push(finding("P2", Severity::Error, op, "transA = 1, which Barracuda before 2.3 ignores: transpose A beforehand".into(), None));
        }
        if op.inputs.get(1).is_some_and(|b| !facts.constants.contains_key(b)) {
            out.push(finding("P2", Severity::Error, op, "B is computed, and Barracuda before 2.3 takes Gemm weights only as constants: use MatMul".into(), None));
        }
    }
    if let Some(c) = op.inputs.get(2).filter(|c| !c.is_empty()) {
        match facts.constants.get(c) {
            Some(dims) if dims.len() == 1 => {}
            Some(dims) => out.push(finding("P2", Severity::Error, op, format!("the bias C has dims {dims:?}; Barracuda keeps only a rank-1 constant bias and zeroes any other (a wrong result, no error): store C as [N]"), None)),
            None => out.push(finding("P2", Severity::Error, op, "the bias C is computed; Barracuda keeps only a rank-1 constant bias and zeroes any other (a wrong result, no error): add the bias with Add".into(), None)),
        }
    }
}

/// The rank shape inference found for an op's first input.
fn input_rank(op: &Operation, shapes: &InferredShapes) -> Option<usize> {
    op.inputs.first().and_then(|input| shapes.ranks.get(input)).copied()
}

/// P3: Softmax and LogSoftmax axes, which Barracuda and Sentis 1.2-1.4 read differently from
/// ONNX (an omitted axis: axis 1 always; Barracuda 1.0 ignores any axis but 1), and Sentis
/// 1.5+ and Inference Engine from ONNX before opset 13 (an omitted axis: the last one, where
/// ONNX flattens from axis 1).
fn softmax(op: &Operation, rank: Option<usize>, opset: Option<i64>, bucket: EngineBucket, out: &mut Vec<Finding>) {
    let axis_one_reader = bucket.is_barracuda() || bucket == EngineBucket::S1;
    match op.int("axis") {
        // Over axis 1 of a rank-3 input the probabilities are over a length-1 axis: all ones.
        None if axis_one_reader && rank.is_some_and(|r| r > 2) => out.push(finding(
            "P3",
            Severity::Error,
            op,
            format!("no axis on a rank-{} input: ONNX normalizes over every axis from 1 on, this release over axis 1 alone (a wrong result, no error): set axis to the last axis explicitly", rank.unwrap_or_default()),
            None,
        )),
        None if axis_one_reader => out.push(finding(
            "P3",
            Severity::Warning,
            op,
            "no axis: Barracuda always uses axis 1, Sentis 1.5+ the last axis (and opset 13+ means the last axis): set axis to the last axis explicitly".into(),
            None,
        )),
        None if rank.is_some_and(|r| r > 2) && opset.is_some_and(|v| v < 13) => out.push(finding(
            "P3",
            Severity::Warning,
            op,
            format!("no axis on a rank-{} input at opset {}: ONNX normalizes over every axis from 1 on, this release over the last axis alone (the same only when the axes between are 1): set axis explicitly", rank.unwrap_or_default(), opset.unwrap_or_default()),
            None,
        )),
        Some(axis) if op.op_type == "Softmax" && bucket <= EngineBucket::B1 && axis != 1 && !(axis == -1 && rank == Some(2)) => out.push(finding(
            "P3",
            Severity::Error,
            op,
            format!("axis {axis}; Barracuda 1.0 ignores any Softmax axis but 1 and uses 1 (a wrong result, no error): compute it over axis 1"),
            None,
        )),
        Some(axis) if op.op_type == "LogSoftmax" && bucket.is_barracuda() && bucket <= EngineBucket::B4 && axis != 1 && axis != -1 => out.push(finding(
            "P3",
            Severity::Error,
            op,
            format!("axis {axis}; Barracuda before 2.2 ignores LogSoftmax's axis and uses 1 (a wrong result, no error): compute it over axis 1"),
            None,
        )),
        _ => {}
    }
}
