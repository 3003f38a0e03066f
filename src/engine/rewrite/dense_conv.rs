//! Convolutions without padding on the dense-layer kernel, reading their patches in place.
//!
//! tract 0.23 runs a visual encoder's convolutions as a gather of each image's patches into
//! panels (its lazy im2col, sped up by [`super::im2col`]) and its own matrix kernel: at batch
//! 12 of the 84 x 84 benchmark encoder that was 54% kernel and 24% gather (perf, AVX-512
//! Xeon). A [`DenseConv`] gathers nothing: each tile of the product is a run of output
//! points, whose patch values lie at `stride` apart for every kernel tap within an output row,
//! so the tile kernel reads them where they are (one offset per tap, from a table) and
//! multiplies them by the packed weights ([`PackedWeights::multiply_gathered`]; with the
//! AVX2 kernels a tile runs on into the next output row, taking a start per point,
//! [`PackedWeights::multiply_gathered_rows`], so that every tile is full but the last); the
//! tile's outputs are then written channel by channel.
//!
//! [`speed_up_convolutions`] replaces, in a decluttered model, every float32 two-dimensional
//! `Conv` whose input layout is NCHW (or CHW, as [`super::conv_batch`] writes a batch), with
//! an OIHW constant kernel and bias, no padding and no dilation; groups are run one after the
//! other (a batch rewritten by `conv_batch` is one group per image, its weights repeated: they
//! are packed once). A convolution reads through the reshapes in front of it (they move no
//! value): `conv_batch`'s reshape of the batch into groups would otherwise copy an input the
//! caller prepared once, as tract copies what it does not
//! own before reshaping it.

use crate::engine::kernels::dense_tiles::{Isa, PackedWeights, MAX_TILE_ROWS};
use super::fused_activation::FusedActivation;
use std::sync::Arc;
use tract_onnx::tract_core::ops::cnn::conv::{Conv, KernelFormat};
use tract_onnx::tract_core::ops::cnn::PaddingSpec;
use tract_onnx::tract_core::ops::nn::DataFormat;
use tract_onnx::tract_hir::internal::*;

/// Replaces every convolution of a decluttered model that [`DenseConv`] runs (see the module
/// docs); returns how many. A CPU without AVX2 and FMA keeps tract's, as does
/// `MLAGENTS_MATRIX_KERNELS=tract`.
pub fn speed_up_convolutions(model: &mut TypedModel) -> TractResult<usize> {
    let Some(isa) = Isa::for_plans() else { return Ok(0) };
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let Some(mut op) = DenseConv::find(model, id, isa)? else { continue };
        let (activation, replaced_output) = FusedActivation::take_in(model, OutletId::new(id, 0));
        op.activation = activation;
        let node = model.node(id);
        let mut patch = TypedModelPatch::new("dense convolution");
        let input = patch.tap_model(model, unreshaped(model, node.inputs[0]))?;
        let output = patch.wire_node(&node.name, op, &[input])?[0];
        patch.shunt_outside(model, replaced_output, output)?;
        patch.apply(model)?;
        replaced += 1;
    }
    Ok(replaced)
}

/// Where the value on `wire` comes from before the reshapes and added or removed unit axes
/// in front of it, which keep every value in its place.
fn unreshaped(model: &TypedModel, mut wire: OutletId) -> OutletId {
    loop {
        let node = model.node(wire.node);
        let moves_nothing = node.op_as::<AxisOp>().is_some_and(|op| !matches!(op, AxisOp::Move(..)));
        if !moves_nothing || node.inputs.len() != 1 {
            return wire;
        }
        wire = node.inputs[0];
    }
}

/// The shape of one convolution: images of `channels x height x width` (one per batch item,
/// or one), `groups` groups of channels, a `kernel` of taps moved by `stride`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Geometry {
    /// Whether the input has a batch axis (NCHW) rather than none (CHW).
    batched: bool,
    channels: usize,
    height: usize,
    width: usize,
    groups: usize,
    output_channels: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
}

impl Geometry {
    fn output_size(&self) -> [usize; 2] {
        [(self.height - self.kernel[0]) / self.stride[0] + 1, (self.width - self.kernel[1]) / self.stride[1] + 1]
    }

    /// Where each kernel tap of one group reads, from the patch's first value: channel,
    /// kernel row, kernel column, in the kernel's OIHW order.
    fn tap_offsets(&self) -> Vec<usize> {
        let channels = self.channels / self.groups;
        let [kernel_height, kernel_width] = self.kernel;
        let mut offsets = Vec::with_capacity(channels * kernel_height * kernel_width);
        for channel in 0..channels {
            for row in 0..kernel_height {
                offsets.extend((0..kernel_width).map(|column| (channel * self.height + row) * self.width + column));
            }
        }
        offsets
    }
}

/// A convolution on [`PackedWeights`]: one packed matrix per group (`taps x output channels
/// of the group`), or one for all where the groups' weights are equal.
#[derive(Clone, Debug)]
pub struct DenseConv {
    geometry: Geometry,
    /// The images of a run (the plan's batch, or 1 without a batch axis).
    images: usize,
    weights: Vec<Arc<PackedWeights>>,
    tap_offsets: Arc<Vec<usize>>,
    /// The activation of the node that read the convolution's output, applied to each
    /// group of each image once it is written.
    activation: Option<FusedActivation>,
}

/// Two convolutions are the same op when they share their packed weights.
impl PartialEq for DenseConv {
    fn eq(&self, other: &Self) -> bool {
        self.geometry == other.geometry && self.images == other.images && self.activation == other.activation && self.weights.len() == other.weights.len() && self.weights.iter().zip(&other.weights).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Eq for DenseConv {}

impl DenseConv {
    /// Node `id` as a [`DenseConv`], if it is a convolution it runs.
    fn find(model: &TypedModel, id: usize, isa: Isa) -> TractResult<Option<DenseConv>> {
        let node = model.node(id);
        let Some(conv) = node.op_as::<Conv>() else { return Ok(None) };
        let spec = &conv.pool_spec;
        let no_padding = match &spec.padding {
            PaddingSpec::Valid => true,
            PaddingSpec::Explicit(before, after) | PaddingSpec::ExplicitOnnxPool(before, after, _) => before.iter().chain(after).all(|p| *p == 0),
            _ => false,
        };
        let undilated = spec.dilations.as_ref().is_none_or(|d| d.iter().all(|d| *d == 1));
        let batched = match spec.data_format {
            DataFormat::NCHW => true,
            DataFormat::CHW => false,
            _ => return Ok(None),
        };
        if conv.q_params.is_some() || conv.kernel_fmt != KernelFormat::OIHW || spec.kernel_shape.len() != 2 || !no_padding || !undilated || node.inputs.len() != 3 || conv.group == 0 {
            return Ok(None);
        }
        let input = model.outlet_fact(node.inputs[0])?;
        let (kernel, bias) = (model.outlet_fact(node.inputs[1])?, model.outlet_fact(node.inputs[2])?);
        let (Some(shape), Some(kernel), Some(bias)) = (input.shape.as_concrete(), &kernel.konst, &bias.konst) else { return Ok(None) };
        let float = |t: &Tensor| t.datum_type() == f32::datum_type();
        if !float(kernel) || !float(bias) || input.datum_type != f32::datum_type() || shape.len() != 3 + usize::from(batched) {
            return Ok(None);
        }
        let image = &shape[usize::from(batched)..];
        let strides = spec.strides();
        let geometry = Geometry {
            batched,
            channels: image[0],
            height: image[1],
            width: image[2],
            groups: conv.group,
            output_channels: spec.output_channels,
            kernel: [spec.kernel_shape[0], spec.kernel_shape[1]],
            stride: [strides[0], strides[1]],
        };
        let fits = geometry.channels.is_multiple_of(geometry.groups) && geometry.output_channels.is_multiple_of(geometry.groups) && geometry.kernel[0] <= geometry.height && geometry.kernel[1] <= geometry.width && geometry.stride.iter().all(|s| *s > 0);
        let taps = geometry.channels / geometry.groups.max(1) * geometry.kernel[0] * geometry.kernel[1];
        if !fits || kernel.len() != geometry.output_channels * taps || !(bias.len() == geometry.output_channels || bias.len() == 1) {
            return Ok(None);
        }
        let expected = model.outlet_fact(OutletId::new(id, 0))?.shape.as_concrete().map(|s| s[s.len() - 2..].to_vec());
        if expected != Some(geometry.output_size().to_vec()) {
            return Ok(None);
        }
        let weights = Self::pack(&geometry, kernel, bias, isa)?;
        let tap_offsets = Arc::new(geometry.tap_offsets());
        let images = if batched { shape[0] } else { 1 };
        Ok(Some(DenseConv { geometry, images, weights, tap_offsets, activation: None }))
    }

    /// The kernel `[output channels, taps]` (OIHW flattened) packed per group, with each
    /// output channel's bias; groups of equal weights and biases share one.
    fn pack(geometry: &Geometry, kernel: &Tensor, bias: &Tensor, isa: Isa) -> TractResult<Vec<Arc<PackedWeights>>> {
        let kernel = kernel.try_as_plain_ram()?;
        let kernel = kernel.as_slice::<f32>()?;
        let bias = bias.try_as_plain_ram()?;
        let bias = bias.as_slice::<f32>()?;
        let bias: Vec<f32> = (0..geometry.output_channels).map(|o| bias[o % bias.len()]).collect();
        let per_group = geometry.output_channels / geometry.groups;
        let taps = kernel.len() / geometry.output_channels;
        let group_values = |g: usize| (&kernel[g * per_group * taps..(g + 1) * per_group * taps], &bias[g * per_group..(g + 1) * per_group]);
        let shared = (1..geometry.groups).all(|g| group_values(g) == group_values(0));
        let packed = |g: usize| {
            let (weights, bias) = group_values(g);
            Arc::new(PackedWeights::new(isa, taps, per_group, |o, tap| weights[o * taps + tap], Some(bias)))
        };
        Ok(if shared { vec![packed(0)] } else { (0..geometry.groups).map(packed).collect() })
    }

    /// Convolves `images` images of the input into the output, group by group, tile by tile:
    /// each tile is a run of consecutive output points, written channel by channel; then the
    /// fused activation, if any, on the group's outputs.
    fn convolve(&self, input: &[f32], images: usize, output: &mut [f32]) -> TractResult<()> {
        let g = &self.geometry;
        let [output_height, output_width] = g.output_size();
        let points = output_height * output_width;
        let (group_channels, group_outputs) = (g.channels / g.groups, g.output_channels / g.groups);
        let max_offset = self.tap_offsets.last().copied().unwrap_or(0);
        for image in 0..images {
            for group in 0..g.groups {
                let weights = &self.weights[group % self.weights.len()];
                let group_input = ((image * g.channels) + group * group_channels) * g.height * g.width;
                let group_output = (image * g.output_channels + group * group_outputs) * points;
                assert!(group_output + points * group_outputs <= output.len(), "convolution writes past its output");
                // Tiles of consecutive points: within each output row, or, where the kernels
                // take a start per row as fast, over the rows one after the other (20 x 20
                // points are then 67 tiles of 6, not 80 of 5).
                let tiles: Vec<(usize, usize)> = if weights.gathers_by_start_at_full_speed() {
                    weights.row_blocks(points).collect()
                } else {
                    (0..output_height).flat_map(|row| weights.row_blocks(output_width).map(move |(first, rows)| (row * output_width + first, rows))).collect()
                };
                for (first, rows) in tiles {
                    let start_of = |point: usize| group_input + (point / output_width) * g.stride[0] * g.width + (point % output_width) * g.stride[1];
                    let last_read = start_of(first + rows - 1) + max_offset;
                    assert!(last_read < input.len(), "convolution reads past its input ({last_read} of {})", input.len());
                    let at = group_output + first;
                    let one_output_row = first / output_width == (first + rows - 1) / output_width;
                    // SAFETY: every read, `start_of(point) + offset`, is at most `last_read`
                    // (starts and offsets ascend), inside the input (checked above); every
                    // write, `at + channel · points + r`, is inside the group's output channels
                    // (checked above: `first + r < points`).
                    unsafe {
                        if one_output_row {
                            weights.multiply_gathered(input[start_of(first)..].as_ptr(), g.stride[1], &self.tap_offsets, rows, output[at..].as_mut_ptr(), points);
                        } else {
                            let mut starts = [0; MAX_TILE_ROWS];
                            for (start, point) in starts.iter_mut().zip(first..first + rows) {
                                *start = start_of(point) - group_input;
                            }
                            weights.multiply_gathered_rows(input[group_input..].as_ptr(), &starts[..rows], &self.tap_offsets, output[at..].as_mut_ptr(), points);
                        }
                    }
                }
                if let Some(activation) = &self.activation {
                    activation.apply(&mut output[group_output..group_output + points * group_outputs])?;
                }
            }
        }
        Ok(())
    }
}

impl Op for DenseConv {
    fn name(&self) -> StaticName {
        "DenseConv".into()
    }

    op_as_typed_op!();
}

impl EvalOp for DenseConv {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let g = &self.geometry;
        // The input may be the source of reshapes (see the module docs): only its values count.
        let image_len = g.channels * g.height * g.width;
        ensure!(input.datum_type() == f32::datum_type() && input.len() == self.images * image_len, "DenseConv of {} images of {image_len} values over {:?}", self.images, input);
        // SAFETY: `convolve` writes every output value (every channel of every point).
        let mut output = unsafe { Tensor::uninitialized::<f32>(&self.output_shape())? };
        self.convolve(input.try_as_plain_ram()?.as_slice::<f32>()?, self.images, output.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?)?;
        Ok(tvec!(output.into_tvalue()))
    }
}

impl DenseConv {
    /// `[images, output channels, height, width]`, without the images for a CHW input.
    fn output_shape(&self) -> TVec<usize> {
        let g = &self.geometry;
        let [height, width] = g.output_size();
        let mut shape = tvec![g.output_channels, height, width];
        if g.batched {
            shape.insert(0, self.images);
        }
        shape
    }
}

impl TypedOp for DenseConv {
    fn output_facts(&self, _: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(f32::fact(self.output_shape())))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kernels::dense_tiles::test_values as values;
    use super::super::testing::run_rewritten;
    use crate::onnx::{attr_ints, attr_int, value_info, GraphBuilder, FLOAT};


    /// One ONNX `Conv` (then a `Relu`) of `[images, channels, 13, 11]` into `outputs` channels:
    /// a 3 x 2 kernel with strides 2 x 1, `groups` groups, `pads` on every side.
    fn convolution(images: usize, channels: usize, outputs: usize, groups: usize, pads: i64) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let taps = channels / groups * 3 * 2;
        let kernel = g.constant("w", &[outputs as i64, (channels / groups) as i64, 3, 2], values(outputs * taps, 2));
        let bias = g.constant("b", &[outputs as i64], values(outputs, 3));
        let attributes = vec![attr_ints("kernel_shape", &[3, 2]), attr_ints("strides", &[2, 1]), attr_ints("pads", &[pads; 4]), attr_int("group", groups as i64)];
        let conv = g.node("Conv", vec!["x".into(), kernel, bias], attributes, "conv");
        g.node_into("Relu", vec![conv], vec![], "y");
        g.finish("conv", 13, vec![value_info("x", FLOAT, &[images as i64, channels as i64, 13, 11])], vec![value_info("y", FLOAT, &[])], "test")
    }

    /// The convolution's output on a `shape` input of test values, with or without
    /// [`speed_up_convolutions`], and how many convolutions it replaced.
    fn run(model: &tract_onnx::pb::ModelProto, shape: [usize; 4], rewrite: bool) -> TractResult<(Vec<f32>, usize)> {
        let input = Tensor::from_shape(&shape, &values(shape.iter().product(), 1))?;
        let (mut outputs, replaced) = run_rewritten(model, &input, |m| if rewrite { speed_up_convolutions(m) } else { Ok(0) })?;
        Ok((outputs.swap_remove(0), replaced))
    }

    /// Convolutions of one image and of a batch, plain and grouped (different weights per
    /// group), give tract's outputs once replaced; padded ones stay tract's.
    #[test]
    fn convolutions_give_tracts_outputs() {
        let expect_replaced = usize::from(Isa::for_plans().is_some());
        for (images, channels, outputs, groups) in [(1, 3, 4, 1), (3, 3, 20, 1), (2, 4, 6, 2), (1, 2, 40, 1)] {
            let model = convolution(images, channels, outputs, groups, 0);
            let shape = [images, channels, 13, 11];
            let (tract, _) = run(&model, shape, false).unwrap();
            let (ours, replaced) = run(&model, shape, true).unwrap();
            assert_eq!(replaced, expect_replaced, "{images} x {channels} -> {outputs} in {groups} groups");
            assert_eq!(ours.len(), images * outputs * 6 * 10);
            for (index, (ours, tract)) in ours.iter().zip(&tract).enumerate() {
                assert!((ours - tract).abs() <= 1e-6, "{images} x {channels} -> {outputs} in {groups} groups [{index}]: {ours} vs tract {tract}");
            }
        }
        assert_eq!(run(&convolution(1, 3, 4, 1, 1), [1, 3, 13, 11], true).unwrap().1, 0, "padded");
    }

    /// A batch reshaped into groups in front of the convolution, as `conv_batch` writes it:
    /// the convolution reads the reshape's source (the model's input, so a prepared input is
    /// not copied) and gives tract's outputs.
    #[test]
    fn convolutions_read_through_the_reshapes_in_front_of_them() {
        if Isa::for_plans().is_none() {
            return;
        }
        let mut g = GraphBuilder::default();
        let kernel = g.constant("w", &[8, 3, 3, 2], values(8 * 18, 2));
        let bias = g.constant("b", &[8], values(8, 3));
        let grouped_shape = g.constant_i64("grouped_shape", &[4], vec![1, 6, 13, 11]);
        let grouped = g.node("Reshape", vec!["x".into(), grouped_shape], vec![], "grouped");
        let attributes = vec![attr_ints("kernel_shape", &[3, 2]), attr_ints("strides", &[2, 1]), attr_int("group", 2)];
        g.node_into("Conv", vec![grouped, kernel, bias], attributes, "y");
        let model = g.finish("conv", 13, vec![value_info("x", FLOAT, &[2, 3, 13, 11])], vec![value_info("y", FLOAT, &[])], "test");
        let mut typed = tract_onnx::onnx().model_for_proto_model(&model).unwrap().into_typed().unwrap().into_decluttered().unwrap();
        assert_eq!(speed_up_convolutions(&mut typed).unwrap(), 1);
        let conv = typed.nodes().iter().find(|n| n.op_is::<DenseConv>()).expect("a DenseConv");
        assert_eq!(conv.inputs[0], typed.input_outlets().unwrap()[0], "the DenseConv reads the model's input");
        let (tract, _) = run(&model, [2, 3, 13, 11], false).unwrap();
        let (ours, _) = run(&model, [2, 3, 13, 11], true).unwrap();
        assert_eq!(ours.len(), 8 * 6 * 10);
        for (index, (ours, tract)) in ours.iter().zip(&tract).enumerate() {
            assert!((ours - tract).abs() <= 1e-6, "[{index}]: {ours} vs tract {tract}");
        }
    }
}
