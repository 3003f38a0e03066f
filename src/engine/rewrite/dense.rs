//! Dense layers on our own matrix kernel ([`crate::engine::kernels::dense_tiles`]) where a batch of
//! activations is large enough for its tiles.
//!
//! Once tract has decluttered a model, a dense layer is an `EinSum` of a `[batch, k]`
//! activation by a constant `[n, k]` (or `[k, n]`) weight, usually followed by the `Add` of a
//! constant bias. [`speed_up_dense_layers`] replaces the pair with one [`DenseLayer`] when the
//! batch has at least [`MIN_ROWS`] rows; smaller batches keep tract's matrix-vector kernels,
//! which stream the weights with more accumulators per activation than a tile of few rows has.
//!
//! A product added to another tensor of its shape, then to a constant bias, as an LSTM's gates
//! `x · W + h · R + b` are once tract has split the product over the concatenation of `x` and
//! `h`, takes the sums in too: tract ran them as a chain of broadcasting adds, about 8% of the
//! Hallway-sized recurrent benchmark network at batch 64 (perf, AVX-512 Xeon).

use crate::engine::kernels::dense_tiles::{Isa, PackedWeights};
use super::fused_activation::FusedActivation;
use std::sync::Arc;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::einsum::EinSum;
use tract_onnx::tract_hir::internal::*;

/// The fewest activation rows a dense layer needs to run on [`DenseLayer`].
const MIN_ROWS: usize = 4;

/// Replaces every float32 dense layer of a decluttered model whose batch has at least
/// [`MIN_ROWS`] rows (and its bias `Add`, if any) with a [`DenseLayer`]; returns how many. A
/// CPU without AVX2 and FMA keeps tract's, as does `MLAGENTS_MATRIX_KERNELS=tract`.
pub fn speed_up_dense_layers(model: &mut TypedModel) -> TractResult<usize> {
    let Some(isa) = Isa::for_plans() else { return Ok(0) };
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let Some(layer) = DenseMatch::find(model, id)? else { continue };
        let weights = layer.pack(isa)?;
        let (activation, replaced_output) = FusedActivation::take_in(model, layer.output);
        let mut patch = TypedModelPatch::new("dense layer");
        let mut inputs = vec![patch.tap_model(model, layer.input)?];
        let mut sum = None;
        if let Some(summand) = layer.summand {
            inputs.push(patch.tap_model(model, summand)?);
            sum = Some(Sum { bias: layer.bias.as_deref().map(float_values).transpose()? });
        }
        let op = DenseLayer { weights: Arc::new(weights), output_shape: layer.output_shape.clone(), activation, sum };
        let output = patch.wire_node(&model.node(id).name, op, &inputs)?[0];
        patch.shunt_outside(model, replaced_output, output)?;
        patch.apply(model)?;
        replaced += 1;
    }
    Ok(replaced)
}

/// A dense layer found in the graph: where its activations come from, its weight and bias
/// constants, and the outlet its result leaves by (the bias `Add`'s, or the product's).
struct DenseMatch {
    input: OutletId,
    weight: Arc<Tensor>,
    /// The weight's stride (in values) along n, and along each of the input's k axes in the
    /// input's order, with those axes' lengths.
    n_stride: usize,
    k_axes: Vec<(usize, usize)>,
    /// Outputs, and inputs per output (the product of the input's axes after the first).
    n: usize,
    k: usize,
    /// The layer's output shape: `[m, n]`, or with axes of length 1 between them.
    output_shape: TVec<usize>,
    /// The constant added last: to the product, or after the summand.
    bias: Option<Arc<Tensor>>,
    /// Another tensor of the product's shape added to it before the bias.
    summand: Option<OutletId>,
    output: OutletId,
}

impl DenseMatch {
    /// Node `id` as a dense layer, if it is one: a float32 `EinSum` of a non-constant input of
    /// at least [`MIN_ROWS`] rows (m, its first axis) by a constant weight, summing over every
    /// other axis of the input (k: one axis, or several flattened, as a convolution's output
    /// into a dense layer), which the weight holds in any order around n; axes of length 1 of
    /// the input alone are dropped. The output is `[m, n]`, or has axes of length 1 between
    /// them.
    fn find(model: &TypedModel, id: usize) -> TractResult<Option<DenseMatch>> {
        let node = model.node(id);
        let Some(einsum) = node.op_as::<EinSum>() else { return Ok(None) };
        if node.inputs.len() != 2 || einsum.q_params.is_some() || einsum.operating_dt != f32::datum_type() {
            return Ok(None);
        }
        let facts = [model.outlet_fact(node.inputs[0])?, model.outlet_fact(node.inputs[1])?];
        let Some(w) = facts.iter().position(|f| f.konst.is_some()) else { return Ok(None) };
        let a = 1 - w;
        let output_fact = model.outlet_fact(OutletId::new(id, 0))?;
        let (Some(a_shape), Some(output_shape)) = (facts[a].shape.as_concrete(), output_fact.shape.as_concrete()) else { return Ok(None) };
        let rank = a_shape.len();
        let axes = &einsum.axes;
        let single = axes.iter_all_axes().all(|x| x.inputs.iter().chain(&x.outputs).all(|p| p.len() <= 1));
        if facts[a].konst.is_some() || facts.iter().any(|f| f.datum_type != f32::datum_type()) || rank < 2 || output_shape.len() < 2 || !single || a_shape[0] < MIN_ROWS {
            return Ok(None);
        }
        let weight = facts[w].konst.clone().expect("found constant");
        let weight_strides = weight.strides().to_vec();
        let last_output = output_shape.len() - 1;
        let (mut n_axis, mut m_found, mut k_axes, mut unit_input_axes) = (None, false, Vec::new(), 0);
        for axis in axes.iter_all_axes() {
            let (in_a, in_w, out) = (axis.inputs[a].first().copied(), axis.inputs[w].first().copied(), axis.outputs[0].first().copied());
            match (in_a, in_w, out) {
                (Some(0), None, Some(0)) => m_found = true,
                (None, Some(position), Some(o)) if o == last_output => n_axis = Some(position),
                (Some(position), Some(in_weight), None) if position > 0 => k_axes.push((position, weight_strides[in_weight] as usize, a_shape[position])),
                (None, None, Some(o)) if output_shape[o] == 1 && o > 0 && o < last_output => {}
                (Some(position), None, None) if position > 0 && a_shape[position] == 1 => unit_input_axes += 1,
                _ => return Ok(None),
            }
        }
        k_axes.sort_by_key(|(position, ..)| *position);
        let Some(n_axis) = n_axis else { return Ok(None) };
        if !m_found || k_axes.len() + unit_input_axes != rank - 1 || weight.rank() != k_axes.len() + 1 {
            return Ok(None);
        }
        let (n, k) = (weight.shape()[n_axis], a_shape[1..].iter().product());
        let mut output = OutletId::new(id, 0);
        let mut summand = None;
        let mut bias = Self::bias(model, id, n)?;
        if bias.is_none() {
            if let Some((add, other)) = Self::summand(model, id)? {
                summand = Some(other);
                output = OutletId::new(add, 0);
                bias = Self::bias(model, add, n)?;
            }
        }
        if let Some((add, _)) = &bias {
            output = OutletId::new(*add, 0);
        }
        let k_axes = k_axes.into_iter().map(|(_, stride, length)| (stride, length)).collect();
        let output_shape = output_shape.into();
        Ok(Some(DenseMatch { input: node.inputs[a], weight, n_stride: weight_strides[n_axis] as usize, k_axes, n, k, output_shape, bias: bias.map(|(_, b)| b), summand, output }))
    }

    /// The `Add` node that is the only reader of node `id`'s output, and the other tensor it
    /// adds; none if the output is also a model output.
    fn added_to(model: &TypedModel, id: usize) -> Option<(usize, OutletId)> {
        let [next] = &model.node(id).outputs[0].successors[..] else { return None };
        let add = model.node(next.node);
        let is_add = add.op_as::<TypedBinOp>().is_some_and(|op| op.0.name() == "Add") && add.inputs.len() == 2;
        (is_add && !model.outputs.contains(&OutletId::new(id, 0))).then(|| (add.id, add.inputs[1 - next.slot]))
    }

    /// What the product at node `id` is added to, with the node that adds it: its only
    /// successor is a float32 `Add` with another non-constant tensor of the same shape (which
    /// cannot depend on the product: the `Add` is the product's only reader).
    fn summand(model: &TypedModel, id: usize) -> TractResult<Option<(usize, OutletId)>> {
        let Some((add, other)) = Self::added_to(model, id) else { return Ok(None) };
        let facts = [model.outlet_fact(OutletId::new(id, 0))?, model.outlet_fact(other)?, model.outlet_fact(OutletId::new(add, 0))?];
        let shapes = facts.map(|f| f.shape.as_concrete().map(|s| s.to_vec()));
        let same = shapes[0].is_some() && shapes.iter().all(|s| *s == shapes[0]) && facts.iter().all(|f| f.datum_type == f32::datum_type());
        if !same || facts[1].konst.is_some() {
            return Ok(None);
        }
        Ok(Some((add, other)))
    }

    /// The bias of the layer at node `id`, with the node that adds it: its only successor is a
    /// float32 `Add` of a constant of `n` values along the last axis.
    fn bias(model: &TypedModel, id: usize, n: usize) -> TractResult<Option<(usize, Arc<Tensor>)>> {
        let Some((add, other)) = Self::added_to(model, id) else { return Ok(None) };
        let fact = model.outlet_fact(other)?;
        let rank = model.outlet_fact(OutletId::new(id, 0))?.rank();
        let along_last = fact.shape.as_concrete().is_some_and(|s| s.len() <= rank && s.last() == Some(&n) && s.iter().product::<usize>() == n);
        match &fact.konst {
            Some(bias) if along_last && bias.datum_type() == f32::datum_type() => Ok(Some((add, bias.clone()))),
            _ => Ok(None),
        }
    }

    /// The weights packed by output and flattened input position (the input's k axes in its
    /// own order, row-major), with the bias.
    fn pack(&self, isa: Isa) -> TractResult<PackedWeights> {
        let weight = self.weight.try_as_plain_ram()?;
        let weight = weight.as_slice::<f32>()?;
        ensure!(weight.len() == self.n * self.k, "dense layer: {} weights for {} x {}", weight.len(), self.n, self.k);
        // (With a summand, the bias comes after it: [`Sum`].)
        let bias = self.bias.as_deref().filter(|_| self.summand.is_none()).map(float_values).transpose()?;
        // Each flattened input position's offset in the weight.
        let mut k_offsets = vec![0usize];
        for &(stride, length) in &self.k_axes {
            k_offsets = k_offsets.iter().flat_map(|offset| (0..length).map(move |i| offset + i * stride)).collect();
        }
        let at = |j: usize, p: usize| weight[j * self.n_stride + k_offsets[p]];
        Ok(PackedWeights::new(isa, self.k, self.n, at, bias.as_deref().map(|b| b.as_slice())))
    }
}

/// A float32 constant's values.
fn float_values(tensor: &Tensor) -> TractResult<Arc<Vec<f32>>> {
    Ok(Arc::new(tensor.try_as_plain_ram()?.as_slice::<f32>()?.to_vec()))
}

/// The fewest outputs a fused activation runs on at once (16 KiB, half a first-level cache):
/// the exact activations set up tract's kernels at each call.
const ACTIVATION_SPAN: usize = 4096;

/// `input · weight + bias` for a `[rows, ...]` float32 input of k values per row, on
/// [`PackedWeights::multiply`].
#[derive(Clone, Debug)]
pub struct DenseLayer {
    weights: Arc<PackedWeights>,
    /// `[m, n]`, or with axes of length 1 between them (m is the input's at each run).
    output_shape: TVec<usize>,
    /// The activation of the node that read the layer's output, applied to spans of row
    /// blocks just written ([`ACTIVATION_SPAN`]).
    activation: Option<FusedActivation>,
    /// With a second input of the output's shape: the sum that follows the product.
    sum: Option<Sum>,
}

/// `(product + summand) + bias`, value by value, in tract's order: the product's sum with
/// the layer's second input, then the bias (`n` values along the last axis), if any.
#[derive(Clone, Debug, PartialEq)]
struct Sum {
    bias: Option<Arc<Vec<f32>>>,
}

impl Sum {
    /// Adds `summand` to `outputs` (whole rows of `n`), then the bias.
    fn add(&self, outputs: &mut [f32], summand: &[f32], n: usize) {
        for (row, summand_row) in outputs.chunks_mut(n).zip(summand.chunks(n)) {
            row.iter_mut().zip(summand_row).for_each(|(value, summand)| *value += *summand);
            if let Some(bias) = &self.bias {
                row.iter_mut().zip(bias.iter()).for_each(|(value, bias)| *value += *bias);
            }
        }
    }
}

/// Two layers are the same op when they share their packed weights.
impl PartialEq for DenseLayer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.weights, &other.weights) && self.output_shape == other.output_shape && self.activation == other.activation && self.sum == other.sum
    }
}

impl Eq for DenseLayer {}

impl Op for DenseLayer {
    fn name(&self) -> StaticName {
        "DenseLayer".into()
    }

    op_as_typed_op!();
}

impl EvalOp for DenseLayer {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        ensure!(inputs.len() == 1 + usize::from(self.sum.is_some()), "DenseLayer given {} inputs", inputs.len());
        let input = &inputs[0];
        let k = self.weights.k();
        let n = self.weights.n();
        let rows = input.shape().first().copied().unwrap_or(0);
        ensure!(input.rank() >= 2 && input.len() == rows * k && input.datum_type() == f32::datum_type(), "DenseLayer of k = {k} over {:?}", input);
        // The second input, with a sum: the summand, of the output's shape.
        if let Some(summand) = inputs.get(1) {
            ensure!(summand.len() == rows * n && summand.datum_type() == f32::datum_type(), "DenseLayer of n = {n} summing {:?}", summand);
        }
        let summand = inputs.get(1).map(|summand| summand.try_as_plain_ram()).transpose()?;
        let summand = summand.as_ref().map(|summand| summand.as_slice::<f32>()).transpose()?;
        // SAFETY: every value of the output is written by `multiply` below.
        let mut shape = self.output_shape.clone();
        shape[0] = rows;
        let mut output = unsafe { Tensor::uninitialized::<f32>(&shape)? };
        let input = input.try_as_plain_ram()?;
        let input = input.as_slice::<f32>()?;
        let mut plain = output.try_as_plain_ram_mut()?;
        let outputs = plain.as_slice_mut::<f32>()?;
        // The sum, then the activation on spans, of finished rows still in the cache.
        let mut unactivated = 0;
        self.weights.multiply(input, rows, outputs, |outputs, finished| {
            if let (Some(sum), Some(summand)) = (&self.sum, summand) {
                sum.add(&mut outputs[finished.clone()], &summand[finished.clone()], n);
            }
            if let Some(activation) = self.activation.filter(|_| finished.end - unactivated >= ACTIVATION_SPAN || finished.end == rows * n) {
                activation.apply(&mut outputs[unactivated..finished.end])?;
                unactivated = finished.end;
            }
            Ok(())
        })?;
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for DenseLayer {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs[0].rank() >= 2, "DenseLayer takes [rows, ...]");
        let mut shape: TVec<TDim> = self.output_shape.iter().map(|d| d.to_dim()).collect();
        shape[0] = inputs[0].shape[0].clone();
        Ok(tvec!(f32::fact(shape)))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kernels::dense_tiles::test_values as values;
    use super::super::testing::run_rewritten;
    use crate::onnx::{attr_int, attr_ints, value_info, GraphBuilder, FLOAT};


    /// A layer of `n` outputs over `k` inputs as ONNX writes it: `Gemm` (weights `[n, k]`,
    /// `transB`) or `MatMul` (weights `[k, n]`) then `Add`, with or without the bias; its
    /// result is the graph's output ([`reshaped_layer`]'s feed a `Relu`).
    fn layer(gemm: bool, bias: bool, k: usize, n: usize) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let (w, b) = (values(n * k, 2), values(n, 3));
        let product = if gemm {
            let weight = g.constant("w", &[n as i64, k as i64], w);
            let mut inputs = vec!["x".to_string(), weight];
            if bias {
                inputs.push(g.constant("b", &[n as i64], b));
            }
            g.node("Gemm", inputs, vec![attr_int("transB", 1)], "gemm")
        } else {
            let weight = g.constant("w", &[k as i64, n as i64], w);
            let product = g.node("MatMul", vec!["x".into(), weight], vec![], "matmul");
            if bias {
                let bias = g.constant("b", &[1, n as i64], b);
                g.node("Add", vec![product, bias], vec![], "add")
            } else {
                product
            }
        };
        g.finish("layer", 13, vec![value_info("x", FLOAT, &[-1, k as i64])], vec![value_info(&product, FLOAT, &[])], "test")
    }

    /// How [`reshaped_layer`]'s input reaches its `MatMul`.
    #[derive(Clone, Copy, Debug)]
    enum InputForm {
        /// `[rows, 2, 3, 4]` flattened.
        Flattened,
        /// `[rows, 2, 3, 4]` flattened after moving its second axis last (a `.nn` encoder's
        /// NHWC flatten).
        Permuted,
        /// `[rows, 1, 24]` squeezed (an LSTM state's slice).
        Squeezed,
    }

    impl InputForm {
        fn shape(self, rows: usize) -> Vec<usize> {
            match self {
                InputForm::Squeezed => vec![rows, 1, 24],
                _ => vec![rows, 2, 3, 4],
            }
        }
    }

    /// A layer over 24 inputs reached by `form`, `MatMul` by `[24, n]` weights and `Add`; its
    /// output reshaped to `[rows, 1, n]` when `unit_axis`.
    fn reshaped_layer(form: InputForm, unit_axis: bool, n: usize) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let mut x = "x".to_string();
        if let InputForm::Permuted = form {
            x = g.node("Transpose", vec![x], vec![attr_ints("perm", &[0, 2, 3, 1])], "nhwc");
        }
        let rows = match form {
            InputForm::Squeezed => {
                let axis = g.constant_i64("axis", &[1], vec![1]);
                g.node("Squeeze", vec![x, axis], vec![], "squeezed")
            }
            _ => {
                let flat = g.constant_i64("flat", &[2], vec![0, 24]);
                g.node("Reshape", vec![x, flat], vec![], "flat")
            }
        };
        let weight = g.constant("w", &[24, n as i64], values(24 * n, 2));
        let product = g.node("MatMul", vec![rows, weight], vec![], "matmul");
        let bias = g.constant("b", &[n as i64], values(n, 3));
        let mut y = g.node("Add", vec![product, bias], vec![], "add");
        if unit_axis {
            let shape = g.constant_i64("unit", &[3], vec![0, 1, n as i64]);
            y = g.node("Reshape", vec![y, shape], vec![], "unit");
        }
        g.node_into("Relu", vec![y], vec![], "y");
        let dims: Vec<i64> = form.shape(1).iter().enumerate().map(|(i, d)| if i == 0 { -1 } else { *d as i64 }).collect();
        g.finish("layer", 13, vec![value_info("x", FLOAT, &dims)], vec![value_info("y", FLOAT, &[])], "test")
    }

    /// The layer's output on a `shape` input of test values, with or without the dense-layer
    /// rewrite, and how many layers the rewrite replaced.
    fn run(model: &tract_onnx::pb::ModelProto, shape: &[usize], rewrite: bool) -> TractResult<(Vec<f32>, usize)> {
        let input = Tensor::from_shape(shape, &values(shape.iter().product(), 1))?;
        let (mut outputs, replaced) = run_rewritten(model, &input, |m| if rewrite { speed_up_dense_layers(m) } else { Ok(0) })?;
        Ok((outputs.swap_remove(0), replaced))
    }

    /// Gemm and MatMul layers, with and without a bias, give tract's own outputs (to float32
    /// rounding: tract's kernels sum in k order too) once replaced; batches under
    /// [`MIN_ROWS`] stay tract's.
    #[test]
    fn dense_layers_give_tracts_outputs() {
        let expect_replaced = usize::from(Isa::for_plans().is_some());
        let (k, n) = (70, 45);
        for gemm in [true, false] {
            for bias in [true, false] {
                let model = layer(gemm, bias, k, n);
                for rows in [1, MIN_ROWS - 1, MIN_ROWS, 12, 13, 64] {
                    let (tract, _) = run(&model, &[rows, k], false).unwrap();
                    let (ours, replaced) = run(&model, &[rows, k], true).unwrap();
                    assert_eq!(replaced, if rows >= MIN_ROWS { expect_replaced } else { 0 }, "gemm {gemm} bias {bias} rows {rows}");
                    assert_eq!(ours.len(), rows * n);
                    for (index, (ours, tract)) in ours.iter().zip(&tract).enumerate() {
                        assert!((ours - tract).abs() <= 2e-6, "gemm {gemm} bias {bias} rows {rows} [{index}]: {ours} vs tract {tract}");
                    }
                }
            }
        }
    }

    /// `Gemm(Concat(Relu(x), x), W, b)`, as an LSTM's gates are written: tract splits the
    /// product over the concatenation into two products and a chain of adds, which the
    /// layers take in (no add left) with tract's outputs.
    #[test]
    fn products_added_together_take_in_the_sum_and_the_bias() {
        let (k, n) = (24, 40);
        let mut g = GraphBuilder::default();
        let relu = g.node("Relu", vec!["x".into()], vec![], "relu");
        let both = g.node("Concat", vec![relu, "x".into()], vec![attr_int("axis", 1)], "both");
        let weight = g.constant("w", &[n as i64, 2 * k as i64], values(n * 2 * k, 2));
        let bias = g.constant("b", &[n as i64], values(n, 3));
        let y = g.node("Gemm", vec![both, weight, bias], vec![attr_int("transB", 1)], "gates");
        let model = g.finish("gates", 13, vec![value_info("x", FLOAT, &[-1, k as i64])], vec![value_info(&y, FLOAT, &[])], "test");
        let adds = |m: &TypedModel| m.nodes().iter().filter(|node| node.op_as::<TypedBinOp>().is_some_and(|op| op.0.name() == "Add")).count();
        for rows in [MIN_ROWS, 13, 64] {
            let input = Tensor::from_shape(&[rows, k], &values(rows * k, 1)).unwrap();
            let (tract, adds_before) = run_rewritten(&model, &input, |m| Ok(adds(m))).unwrap();
            let (ours, adds_after) = run_rewritten(&model, &input, |m| {
                speed_up_dense_layers(m)?;
                Ok(adds(m))
            })
            .unwrap();
            assert_eq!(adds_before, 2, "rows {rows}: tract's split of the product");
            if Isa::for_plans().is_some() {
                assert_eq!(adds_after, 0, "rows {rows}");
            }
            assert_eq!(ours[0].len(), rows * n);
            for (index, (ours, tract)) in ours[0].iter().zip(&tract[0]).enumerate() {
                assert!((ours - tract).abs() <= 2e-6, "rows {rows} [{index}]: {ours} vs tract {tract}");
            }
        }
    }

    /// Flattened inputs (in their own axis order or permuted), squeezed ones and outputs with
    /// a unit axis give tract's outputs once replaced.
    #[test]
    fn reshaped_layers_give_tracts_outputs() {
        let expect_replaced = usize::from(Isa::for_plans().is_some());
        for form in [InputForm::Flattened, InputForm::Permuted, InputForm::Squeezed] {
            for unit_axis in [false, true] {
                let model = reshaped_layer(form, unit_axis, 21);
                let (tract, _) = run(&model, &form.shape(12), false).unwrap();
                let (ours, replaced) = run(&model, &form.shape(12), true).unwrap();
                assert_eq!(replaced, expect_replaced, "{form:?}, unit axis {unit_axis}");
                assert_eq!(ours.len(), 12 * 21);
                for (index, (ours, tract)) in ours.iter().zip(&tract).enumerate() {
                    assert!((ours - tract).abs() <= 2e-6, "{form:?}, unit axis {unit_axis} [{index}]: {ours} vs tract {tract}");
                }
            }
        }
    }
}
