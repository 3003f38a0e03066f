//! A graph input's NHWC -> NCHW transposition as one tract op with a copy loop made for it.
//!
//! A `.nn` model's visual inputs are NHWC and its convolutions run NCHW, so the lowered graph
//! transposes each image input once (`Transpose` with perm `[0, 3, 1, 2]`). tract 0.23 turns
//! that into `MoveAxis`, whose generic tile loop moves one value at a time when the channel
//! axis is short (3 for RGB): 12% of the visual network's time at batch 12. The rewrite
//! gives such a transposition of a graph input to [`CHANNELS_FIRST`], which walks each image
//! once and writes every channel plane in runs. Transpositions inside the graph are left to
//! tract, which cancels them against each other.

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

/// Gives every `Transpose` of a graph input by `[0, 3, 1, 2]` to [`CHANNELS_FIRST`].
pub fn fast_input_transpositions(graph: &mut pb::GraphProto) {
    let initializers: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: std::collections::HashSet<String> =
        graph.input.iter().map(|i| i.name.clone()).filter(|name| !initializers.contains(name.as_str())).collect();
    for node in &mut graph.node {
        let permutation = node.attribute.iter().find(|a| a.name == "perm").map(|a| a.ints.as_slice());
        let of_input = node.input.len() == 1 && inputs.contains(&node.input[0]);
        if node.op_type == "Transpose" && of_input && permutation == Some(&NHWC_TO_NCHW[..]) {
            node.op_type = CHANNELS_FIRST.into();
            node.attribute.clear();
        }
    }
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
        let &[n, h, w, c] = input.shape() else { bail!("{CHANNELS_FIRST} needs a rank-4 input, got {:?}", input.shape()) };
        let source = input.try_as_plain_ram()?;
        let source = source.as_slice::<f32>()?;
        // SAFETY: `channels_first` writes every value of every image (each channel plane in
        // full, block by block) before the tensor is read.
        let mut output = unsafe { Tensor::uninitialized::<f32>(&[n, c, h, w])? };
        let mut plain = output.try_as_plain_ram_mut()?;
        let target = plain.as_slice_mut::<f32>()?;
        let image = h * w * c;
        if image > 0 {
            for (from, to) in source.chunks_exact(image).zip(target.chunks_exact_mut(image)) {
                channels_first(from, to, c);
            }
        }
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

/// One image, `[pixels, channels]` -> `[channels, pixels]`, a block of pixels at a time.
fn channels_first(from: &[f32], to: &mut [f32], channels: usize) {
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

    /// Every value of an image lands in its channel plane, across block boundaries.
    #[test]
    fn channels_first_moves_every_value() {
        for (pixels, channels) in [(1, 1), (63, 3), (64, 3), (65, 7), (130, 2), (200, 70)] {
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
