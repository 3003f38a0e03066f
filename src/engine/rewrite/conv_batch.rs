//! Batched convolutions run one image at a time, as grouped convolutions: a rewrite of the
//! ONNX graph made for each batch size over 1.
//!
//! tract 0.23 runs a convolution of one image with its lazy im2col (the patches gathered
//! panel by panel as the matrix product reads them), but a batch of several with an eager
//! im2col whose strided writes go one value at a time through its packing writer: on the
//! 84 x 84 visual encoder that writer was half of the time at batch 12, and a batch of 12
//! cost 14 single images. So a `Conv` of `[N, C, H, W]` becomes `Reshape` to
//! `[1, N·C, H, W]`, the same `Conv` with `N·group` groups and its weights and bias repeated
//! `N` times, and `Reshape` back to `[N, O, H', W']`: the same products, each image its own
//! group, and tract takes its one-image path (scripts/bench-policy.sh: visual batch 12 and
//! 64 about 1.7x and 2.5x faster). The upstream fix would be a batch loop in tract's
//! `LazyIm2col` (its offset tables are per image already) or a row gather in the eager
//! im2col's strided path.
//!
//! A `.nn` model's convolutions read NHWC through transposes, which tract otherwise folds into
//! an NHWC convolution; rewritten, the transposes are materialised (about 20% of the `.nn`
//! visual encoder at batch 12 and 64, still 3x faster at 64 than tract's eager path).
//!
//! Only convolutions tract would run lazily on one image are rewritten (kernels of 6 taps or
//! more, tract's own threshold), with float weights given as initializers, and only while
//! the repeated weights stay under [`MAX_REPEATED_WEIGHTS`].

use crate::onnx::tensor_values;
use tract_onnx::pb::{self, ModelProto};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

/// The most weight values (all convolutions, repeated per image) the rewrite adds.
pub const MAX_REPEATED_WEIGHTS: usize = 16 << 20;

/// The smallest kernel (taps) tract runs with its lazy im2col.
const LAZY_IM2COL_MIN_TAPS: usize = 6;

/// The graph with each fitting convolution of a batch over 1 run per image, or `None` when
/// there is none. `model` is the graph as tract reads it with the run's input shapes; a copy
/// of it is analysed to learn each convolution's input shape.
pub fn per_image_convolutions(proto: &ModelProto, model: &InferenceModel) -> Option<ModelProto> {
    let graph = proto.graph.as_ref()?;
    let named_once = |node: &pb::NodeProto| graph.node.iter().filter(|n| n.name == node.name).count() == 1;
    let candidates: Vec<usize> = (0..graph.node.len()).filter(|i| fits(graph, &graph.node[*i]) && named_once(&graph.node[*i])).collect();
    if candidates.is_empty() {
        return None;
    }
    let mut model = model.clone();
    model.analyse(false).ok()?;
    let mut rewritten = proto.clone();
    let out = rewritten.graph.as_mut().expect("cloned from a graph");
    let mut added = 0;
    let mut changed = false;
    for index in candidates.into_iter().rev() {
        let node = &graph.node[index];
        let Some(batch) = input_batch(&model, node).filter(|n| *n > 1) else { continue };
        let weights = initializer(graph, &node.input[1]).expect("checked by fits");
        // (Dims from the file: checked, not trusted.)
        let elements = weights.dims.iter().try_fold(batch, |n, d| n.checked_mul(usize::try_from(*d).ok()?));
        let Some(elements) = elements.filter(|e| added + e <= MAX_REPEATED_WEIGHTS) else { continue };
        added += elements;
        let replacement = per_image(graph, node, batch, &mut out.initializer);
        out.node.splice(index..=index, replacement);
        changed = true;
    }
    changed.then_some(rewritten)
}

/// A 2-D `Conv` with float weights (and bias) in initializers and a kernel of enough taps.
fn fits(graph: &pb::GraphProto, node: &pb::NodeProto) -> bool {
    if node.op_type != "Conv" || node.input.len() < 2 || node.output.len() != 1 || node.name.is_empty() {
        return false;
    }
    // Float data held in the file, as many values as the dims say (else tract reports it).
    let float_initializer = |name: &String| {
        initializer(graph, name).is_some_and(|t| {
            let held = if t.raw_data.is_empty() { t.float_data.len() } else { t.raw_data.len() / 4 };
            let declared = t.dims.iter().try_fold(1usize, |n, d| n.checked_mul(usize::try_from(*d).ok()?));
            t.data_type == crate::onnx::FLOAT && t.data_location != Some(1) && declared == Some(held)
        })
    };
    let Some(weights) = initializer(graph, &node.input[1]).filter(|_| float_initializer(&node.input[1])) else { return false };
    let bias_ok = node.input.get(2).is_none_or(|b| b.is_empty() || float_initializer(b));
    weights.dims.len() == 4 && weights.dims.iter().all(|d| *d > 0) && weights.dims[2].saturating_mul(weights.dims[3]) >= LAZY_IM2COL_MIN_TAPS as i64 && bias_ok
}

fn initializer<'a>(graph: &'a pb::GraphProto, name: &str) -> Option<&'a pb::TensorProto> {
    graph.initializer.iter().find(|t| t.name == name)
}

/// The batch of the convolution's input (`[N, C, H, W]`, all known), from tract's analysis.
fn input_batch(model: &InferenceModel, node: &pb::NodeProto) -> Option<usize> {
    let tract_node = model.nodes().iter().find(|n| n.name == node.name)?;
    let fact = model.outlet_fact(*tract_node.inputs.first()?).ok()?;
    let shape = fact.shape.concretize()?;
    let dims: Vec<i64> = shape.iter().map(|d| d.to_i64().ok()).collect::<Option<_>>()?;
    (dims.len() == 4 && dims[0] > 0).then_some(dims[0] as usize)
}

/// The nodes that replace `conv` for a batch of `batch` (initializers added to `initializers`).
fn per_image(graph: &pb::GraphProto, conv: &pb::NodeProto, batch: usize, initializers: &mut Vec<pb::TensorProto>) -> Vec<pb::NodeProto> {
    let base = format!("{}/per_image_{batch}", conv.name);
    let mut repeated = |name: &str| {
        let t = initializer(graph, name).expect("checked by fits");
        let values: Vec<f32> = tensor_values(t).expect("a float tensor").map(|v| v as f32).collect();
        let mut dims = t.dims.clone();
        dims[0] *= batch as i64;
        let repeated_name = format!("{base}/{name}");
        initializers.push(pb::TensorProto { name: repeated_name.clone(), dims, data_type: crate::onnx::FLOAT, float_data: values.repeat(batch), ..Default::default() });
        repeated_name
    };
    let mut inputs = vec![format!("{base}/images")];
    inputs.extend(conv.input.iter().skip(1).map(|i| if i.is_empty() { i.clone() } else { repeated(i) }));
    let mut shape = |suffix: &str, dims: Vec<i64>| {
        let name = format!("{base}/{suffix}");
        initializers.push(pb::TensorProto { name: name.clone(), dims: vec![4], data_type: crate::onnx::INT64, int64_data: dims, ..Default::default() });
        name
    };
    // [N, C, H, W] -> [1, N·C, H, W] and back ([N, O, H', W'], 0 keeps a dim).
    let together = shape("together_shape", vec![1, -1, 0, 0]);
    let apart = shape("apart_shape", vec![batch as i64, -1, 0, 0]);
    let group = conv.attribute.iter().find(|a| a.name == "group").map_or(1, |a| a.i.max(1));
    let mut attribute: Vec<pb::AttributeProto> = conv.attribute.iter().filter(|a| a.name != "group").cloned().collect();
    attribute.push(crate::onnx::attr_int("group", group * batch as i64));
    let node = |op: &str, name: String, input: Vec<String>, output: String, attribute| pb::NodeProto { op_type: op.into(), name, input, output: vec![output], attribute, ..Default::default() };
    vec![
        node("Reshape", format!("{base}/together"), vec![conv.input[0].clone(), together], inputs[0].clone(), vec![]),
        node("Conv", conv.name.clone(), inputs, format!("{base}/grouped"), attribute),
        node("Reshape", format!("{base}/apart"), vec![format!("{base}/grouped"), apart], conv.output[0].clone(), vec![]),
    ]
}
