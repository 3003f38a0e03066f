//! A graph input's NHWC -> NCHW transposition, done while the input is copied in, or by one
//! tract op with a copy loop made for it.
//!
//! A `.nn` model's visual inputs are NHWC and its convolutions run NCHW, so the lowered graph
//! transposes each image input once (`Transpose` with perm `[0, 3, 1, 2]`). tract 0.23 turns
//! that into `MoveAxis`, whose generic tile loop moves one value at a time when the channel
//! axis is short (3 for RGB): 12% of the visual network's time at batch 12. An input that only
//! such transpositions read is fed NCHW instead: the runner transposes the caller's values as
//! it copies them into tract ([`nchw_tensor`]), one pass where there were two. An input that
//! other nodes read too keeps its transpositions, given to [`CHANNELS_FIRST`]. Transpositions
//! inside the graph are left to tract, which cancels them against each other.

use std::collections::HashSet;
use tract_onnx::model::OnnxOpRegister;
use tract_onnx::pb;
use tract_onnx::tract_hir::internal::*;

/// The op type the rewrite writes (a prefix no ONNX domain uses).
pub const CHANNELS_FIRST: &str = "MlAgentsChannelsFirst";

/// The ONNX permutation the op stands for.
const NHWC_TO_NCHW: [i64; 4] = [0, 3, 1, 2];

/// Adds [`CHANNELS_FIRST`] to a tract-onnx op register.
pub fn register(register: &mut OnnxOpRegister) {
    register.insert(CHANNELS_FIRST, |_, _| Ok((expand(ChannelsFirstRules), vec![])));
}

/// Rewrites the transpositions of graph inputs by `[0, 3, 1, 2]` (see the module docs);
/// returns the inputs now fed NCHW, whose declared dims are permuted so.
pub fn fast_input_transpositions(graph: &mut pb::GraphProto) -> Vec<String> {
    let initializers: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<String> = graph.input.iter().map(|i| i.name.clone()).filter(|name| !initializers.contains(name.as_str())).collect();
    let graph_outputs: HashSet<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    // A subgraph (Loop, If, Scan) may read a transposition's output by name: keep the nodes.
    let subgraphs = graph.node.iter().any(|n| n.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty()));
    let mut fed_nchw = vec![];
    for input in inputs {
        let readers: Vec<usize> = (0..graph.node.len()).filter(|k| graph.node[*k].input.contains(&input)).collect();
        let transposes: Vec<usize> = readers.iter().copied().filter(|k| to_channels_first(&graph.node[*k])).collect();
        if transposes.is_empty() {
            continue;
        }
        let outputs: Vec<String> = transposes.iter().flat_map(|k| graph.node[*k].output.clone()).collect();
        // (An input that is itself a graph output is returned as given, so it stays NHWC.)
        let only_transposed = !subgraphs && transposes.len() == readers.len() && !graph_outputs.contains(&input) && outputs.iter().all(|o| !graph_outputs.contains(o));
        let declared = graph.input.iter_mut().find(|i| i.name == input).and_then(|i| declared_dims(i)).filter(|dims| dims.len() == 4);
        match (only_transposed, declared) {
            (true, Some(dims)) => {
                let nhwc = std::mem::take(dims);
                *dims = NHWC_TO_NCHW.iter().map(|axis| nhwc[*axis as usize].clone()).collect();
                let mut k = 0;
                graph.node.retain(|_| {
                    k += 1;
                    !transposes.contains(&(k - 1))
                });
                for value in graph.node.iter_mut().flat_map(|n| n.input.iter_mut()).filter(|v| outputs.contains(v)) {
                    *value = input.clone();
                }
                fed_nchw.push(input);
            }
            _ => {
                for k in transposes {
                    graph.node[k].op_type = CHANNELS_FIRST.into();
                    graph.node[k].attribute.clear();
                }
            }
        }
    }
    fed_nchw
}

/// Whether a node is a `Transpose` of one value by `[0, 3, 1, 2]`.
fn to_channels_first(node: &pb::NodeProto) -> bool {
    let permutation = node.attribute.iter().find(|a| a.name == "perm").map(|a| a.ints.as_slice());
    node.op_type == "Transpose" && node.input.len() == 1 && permutation == Some(&NHWC_TO_NCHW[..])
}

/// The dims an input declares, when it declares a shape.
fn declared_dims(input: &mut pb::ValueInfoProto) -> Option<&mut Vec<pb::tensor_shape_proto::Dimension>> {
    let pb::type_proto::Value::TensorType(tensor) = input.r#type.as_mut()?.value.as_mut()?;
    Some(&mut tensor.shape.as_mut()?.dim)
}

/// `[N, C, H, W]` dims as the caller gives them, `[N, H, W, C]`.
pub fn caller_dims<T: Clone>(nchw: &[T]) -> Vec<T> {
    match nchw {
        [n, c, h, w] => vec![n.clone(), h.clone(), w.clone(), c.clone()],
        other => other.to_vec(),
    }
}

/// NHWC float values of this shape as an NCHW tensor, transposed while copied.
pub fn nchw_tensor(nhwc_shape: &[usize], values: &[f32]) -> TractResult<Tensor> {
    let &[n, h, w, c] = nhwc_shape else { bail!("a channels-last image needs 4 dims, got {nhwc_shape:?}") };
    let image = h * w * c;
    ensure!(values.len() == n * image, "shape {nhwc_shape:?} needs {} values, got {}", n * image, values.len());
    // SAFETY: `channels_first` writes every value of every image (each channel plane in
    // full) before the tensor is read.
    let mut output = unsafe { Tensor::uninitialized::<f32>(&[n, c, h, w])? };
    if image > 0 {
        let mut plain = output.try_as_plain_ram_mut()?;
        for (from, to) in values.chunks_exact(image).zip(plain.as_slice_mut::<f32>()?.chunks_exact_mut(image)) {
            channels_first(from, to, c);
        }
    }
    Ok(output)
}

/// The op's shape rules while tract reads the graph.
#[derive(Debug, Clone, Hash)]
struct ChannelsFirstRules;

impl Expansion for ChannelsFirstRules {
    fn name(&self) -> StaticName {
        CHANNELS_FIRST.into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(&'s self, s: &mut Solver<'r>, inputs: &'p [TensorProxy], outputs: &'p [TensorProxy]) -> InferenceResult {
        check_input_arity(inputs, 1)?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].rank, 4)?;
        s.equals(&outputs[0].rank, 4)?;
        s.equals(&outputs[0].datum_type, &inputs[0].datum_type)?;
        for (to, from) in NHWC_TO_NCHW.iter().enumerate() {
            s.equals(&outputs[0].shape[to], &inputs[0].shape[*from as usize])?;
        }
        Ok(())
    }

    fn wire(&self, prefix: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        model.wire_node(prefix, ChannelsFirst, inputs)
    }
}

/// `[N, H, W, C]` -> `[N, C, H, W]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ChannelsFirst;

impl Op for ChannelsFirst {
    fn name(&self) -> StaticName {
        CHANNELS_FIRST.into()
    }

    op_as_typed_op!();
}

impl EvalOp for ChannelsFirst {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let permutation = NHWC_TO_NCHW.map(|axis| axis as usize);
        if input.datum_type() != f32::datum_type() {
            return Ok(tvec!(input.into_tensor().permute_axes(&permutation)?.into_tvalue()));
        }
        let source = input.try_as_plain_ram()?;
        let output = nchw_tensor(input.shape(), source.as_slice::<f32>()?)?;
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for ChannelsFirst {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let input = inputs[0];
        ensure!(input.rank() == 4, "{CHANNELS_FIRST} needs a rank-4 input, got {:?}", input.shape);
        let shape: TVec<TDim> = NHWC_TO_NCHW.iter().map(|axis| input.shape[*axis as usize].clone()).collect();
        Ok(tvec!(input.datum_type.fact(shape)))
    }

    as_op!();
}

/// Pixels per block: the block's channel runs are written while its source is in cache.
const PIXELS_PER_BLOCK: usize = 64;

/// One image, `[pixels, channels]` -> `[channels, pixels]`: one pass writing every plane at
/// once for up to four channels (images), a block of pixels at a time otherwise.
fn channels_first(from: &[f32], to: &mut [f32], channels: usize) {
    match channels {
        1 => to.copy_from_slice(from),
        2 => few_channels_first::<2>(from, to),
        3 => few_channels_first::<3>(from, to),
        4 => few_channels_first::<4>(from, to),
        _ => {
            let pixels = from.len() / channels;
            for start in (0..pixels).step_by(PIXELS_PER_BLOCK) {
                let end = (start + PIXELS_PER_BLOCK).min(pixels);
                let block = &from[start * channels..end * channels];
                for channel in 0..channels {
                    let plane = &mut to[channel * pixels + start..channel * pixels + end];
                    for (value, pixel) in plane.iter_mut().zip(block.chunks_exact(channels)) {
                        *value = pixel[channel];
                    }
                }
            }
        }
    }
}

/// [`channels_first`] for `C` channels known at compile time.
fn few_channels_first<const C: usize>(from: &[f32], to: &mut [f32]) {
    let pixels = from.len() / C;
    let mut rest = &mut to[..C * pixels];
    let mut planes: [&mut [f32]; C] = std::array::from_fn(|_| {
        let (plane, others) = std::mem::take(&mut rest).split_at_mut(pixels);
        rest = others;
        plane
    });
    for (index, pixel) in from.chunks_exact(C).enumerate() {
        for (plane, value) in planes.iter_mut().zip(pixel) {
            plane[index] = *value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rewrite takes the transpositions of graph inputs by `[0, 3, 1, 2]` and no other.
    #[test]
    fn only_input_transpositions_to_channels_first_are_rewritten() {
        use crate::onnx::{attr_ints, value_info, GraphBuilder, FLOAT};
        let mut g = GraphBuilder::default();
        let weight = g.constant("weight", &[1, 1, 1, 1], vec![1.0]);
        let from_input = g.node("Transpose", vec!["image".into()], vec![attr_ints("perm", &[0, 3, 1, 2])], "from_input");
        let other_order = g.node("Transpose", vec!["image".into()], vec![attr_ints("perm", &[0, 2, 3, 1])], "other_order");
        let inner = g.node("Transpose", vec![other_order], vec![attr_ints("perm", &[0, 3, 1, 2])], "inner");
        let of_weight = g.node("Transpose", vec![weight], vec![attr_ints("perm", &[0, 3, 1, 2])], "of_weight");
        let outputs = [from_input, inner, of_weight].map(|name| value_info(&name, FLOAT, &[]));
        let mut proto = g.finish("t", 11, vec![value_info("image", FLOAT, &[1, 2, 2, 3])], outputs.to_vec(), "test");
        let graph = proto.graph.as_mut().unwrap();
        fast_input_transpositions(graph);
        let ops: Vec<&str> = graph.node.iter().filter(|n| n.op_type != "Constant").map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, [CHANNELS_FIRST, "Transpose", "Transpose", "Transpose"]);
    }

    /// An input only transpositions read is fed NCHW: they go, and its dims are permuted;
    /// one whose transposition is a graph output keeps the op.
    #[test]
    fn inputs_read_only_by_transpositions_are_fed_channels_first() {
        use crate::onnx::{attr_ints, value_info, GraphBuilder, FLOAT};
        let mut g = GraphBuilder::default();
        let moved = g.node("Transpose", vec!["image".into()], vec![attr_ints("perm", &[0, 3, 1, 2])], "moved");
        g.node_into("Relu", vec![moved], vec![], "features");
        g.node_into("Transpose", vec!["other".into()], vec![attr_ints("perm", &[0, 3, 1, 2])], "other_moved");
        let inputs = vec![value_info("image", FLOAT, &[-1, 5, 7, 3]), value_info("other", FLOAT, &[-1, 2, 2, 4])];
        let outputs = vec![value_info("features", FLOAT, &[]), value_info("other_moved", FLOAT, &[])];
        let mut proto = g.finish("t", 11, inputs, outputs, "test");
        let graph = proto.graph.as_mut().unwrap();
        assert_eq!(fast_input_transpositions(&mut graph.clone()), ["image"]);
        let mut echoed = graph.clone();
        echoed.output.push(value_info("image", FLOAT, &[]));
        assert!(fast_input_transpositions(&mut echoed).is_empty(), "an input that is also an output stays NHWC");
        assert_eq!(fast_input_transpositions(graph), ["image"]);
        let ops: Vec<(&str, &[String])> = graph.node.iter().map(|n| (n.op_type.as_str(), n.input.as_slice())).collect();
        assert_eq!(ops, [("Relu", &["image".to_string()][..]), (CHANNELS_FIRST, &["other".to_string()][..])]);
        let dims: Vec<String> = declared_dims(&mut graph.input[0]).unwrap().iter().map(|d| format!("{:?}", d.value)).collect();
        assert_eq!(dims, ["Some(DimParam(\"batch\"))", "Some(DimValue(3))", "Some(DimValue(5))", "Some(DimValue(7))"]);
    }

    /// Every value of an image lands in its channel plane, across block boundaries.
    #[test]
    fn channels_first_moves_every_value() {
        for (pixels, channels) in [(1, 1), (5, 1), (63, 3), (64, 3), (65, 7), (130, 2), (33, 4), (200, 70)] {
            let from: Vec<f32> = (0..pixels * channels).map(|k| k as f32).collect();
            let mut to = vec![-1.0; from.len()];
            channels_first(&from, &mut to, channels);
            for channel in 0..channels {
                for pixel in 0..pixels {
                    assert_eq!(to[channel * pixels + pixel], from[pixel * channels + channel], "{pixels} x {channels}");
                }
            }
        }
    }
}
