//! Dense layers on our own matrix kernel ([`super::dense_kernel`]) where a batch of
//! activations is large enough for its tiles.
//!
//! Once tract has decluttered a model, a dense layer is an `EinSum` of a `[batch, k]`
//! activation by a constant `[n, k]` (or `[k, n]`) weight, usually followed by the `Add` of a
//! constant bias. [`speed_up_dense_layers`] replaces the pair with one [`DenseLayer`] when the
//! batch has at least [`MIN_ROWS`] rows; smaller batches keep tract's matrix-vector kernels,
//! which stream the weights with more accumulators per activation than a tile of few rows has.

use super::dense_kernel::{Isa, PackedWeights};
use std::sync::Arc;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_core::ops::einsum::EinSum;
use tract_onnx::tract_hir::internal::*;

/// The fewest activation rows a dense layer needs to run on [`DenseLayer`].
const MIN_ROWS: usize = 4;

/// Replaces every float32 dense layer of a decluttered model whose batch has at least
/// [`MIN_ROWS`] rows (and its bias `Add`, if any) with a [`DenseLayer`]; returns how many. A
/// CPU without AVX2 and FMA keeps tract's.
pub fn speed_up_dense_layers(model: &mut TypedModel) -> TractResult<usize> {
    let Some(isa) = Isa::detect() else { return Ok(0) };
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let Some(layer) = DenseMatch::find(model, id)? else { continue };
        let weights = layer.pack(model, isa)?;
        let mut patch = TypedModelPatch::new("dense layer");
        let input = patch.tap_model(model, layer.input)?;
        let output = patch.wire_node(&model.node(id).name, DenseLayer { weights: Arc::new(weights) }, &[input])?[0];
        patch.shunt_outside(model, layer.output, output)?;
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
    /// Whether the weight is held `[n, k]` (ONNX Gemm's `transB`) rather than `[k, n]`.
    weight_n_major: bool,
    bias: Option<Arc<Tensor>>,
    output: OutletId,
}

impl DenseMatch {
    /// Node `id` as a dense layer, if it is one: a float32 `EinSum` whose output `[m, n]`
    /// takes m from a non-constant `[m, k]` input of at least [`MIN_ROWS`] rows and n from a
    /// constant two-dimensional weight, summing over k.
    fn find(model: &TypedModel, id: usize) -> TractResult<Option<DenseMatch>> {
        let node = model.node(id);
        let Some(einsum) = node.op_as::<EinSum>() else { return Ok(None) };
        if node.inputs.len() != 2 || einsum.q_params.is_some() || einsum.operating_dt != f32::datum_type() {
            return Ok(None);
        }
        let facts = [model.outlet_fact(node.inputs[0])?, model.outlet_fact(node.inputs[1])?];
        let Some(w) = facts.iter().position(|f| f.konst.is_some()) else { return Ok(None) };
        let a = 1 - w;
        let Some(a_shape) = facts[a].shape.as_concrete() else { return Ok(None) };
        let weight = facts[w].konst.clone().expect("found constant");
        let axes = &einsum.axes;
        if facts[a].konst.is_some() || facts.iter().any(|f| f.datum_type != f32::datum_type() || f.rank() != 2) || axes.rank(InOut::Out(0)) != 2 || axes.iter_all_axes().count() != 3 || a_shape[0] < MIN_ROWS {
            return Ok(None);
        }
        // Each axis's position in the activation, the weight and the output (None: absent).
        let positions: Vec<[Option<usize>; 3]> = axes.iter_all_axes().map(|x| [x.inputs[a].first().copied(), x.inputs[w].first().copied(), x.outputs[0].first().copied()]).collect();
        if axes.iter_all_axes().any(|x| x.inputs.iter().chain(&x.outputs).any(|p| p.len() > 1)) {
            return Ok(None);
        }
        let role = |in_a: Option<usize>, in_w: bool, out: Option<usize>| positions.iter().find(|p| p[0] == in_a && p[1].is_some() == in_w && p[2] == out).copied();
        let (Some(_m), Some(n), Some(k)) = (role(Some(0), false, Some(0)), role(None, true, Some(1)), role(Some(1), true, None)) else { return Ok(None) };
        let weight_n_major = n[1] == Some(0) && k[1] == Some(1);
        let mut output = OutletId::new(id, 0);
        let bias = Self::bias(model, id, weight.shape()[if weight_n_major { 0 } else { 1 }])?;
        if let Some((add, _)) = &bias {
            output = OutletId::new(*add, 0);
        }
        Ok(Some(DenseMatch { input: node.inputs[a], weight, weight_n_major, bias: bias.map(|(_, b)| b), output }))
    }

    /// The bias of the layer at node `id`, with the node that adds it: its only successor is a
    /// float32 `Add` of a constant of `n` values along the last axis.
    fn bias(model: &TypedModel, id: usize, n: usize) -> TractResult<Option<(usize, Arc<Tensor>)>> {
        let successors = &model.node(id).outputs[0].successors;
        let [next] = &successors[..] else { return Ok(None) };
        let add = model.node(next.node);
        if !add.op_as::<TypedBinOp>().is_some_and(|op| op.0.name() == "Add") || model.outputs.contains(&OutletId::new(id, 0)) {
            return Ok(None);
        }
        let other = add.inputs[1 - next.slot];
        let fact = model.outlet_fact(other)?;
        let along_last = fact.shape.as_concrete().is_some_and(|s| s.len() <= 2 && s.last() == Some(&n) && s.iter().product::<usize>() == n);
        match &fact.konst {
            Some(bias) if along_last && bias.datum_type() == f32::datum_type() => Ok(Some((add.id, bias.clone()))),
            _ => Ok(None),
        }
    }

    fn pack(&self, model: &TypedModel, isa: Isa) -> TractResult<PackedWeights> {
        let weight = self.weight.try_as_plain_ram()?;
        let weight = weight.as_slice::<f32>()?;
        let shape = self.weight.shape();
        let (n, k) = if self.weight_n_major { (shape[0], shape[1]) } else { (shape[1], shape[0]) };
        let bias = self.bias.as_ref().map(|b| b.try_as_plain_ram().and_then(|b| b.as_slice::<f32>().map(|s| s.to_vec()))).transpose()?;
        let at = |j: usize, p: usize| if self.weight_n_major { weight[j * k + p] } else { weight[p * n + j] };
        ensure!(model.outlet_fact(self.input)?.shape[1] == k.to_dim(), "dense layer: input and weight disagree on k");
        Ok(PackedWeights::new(isa, k, n, at, bias.as_deref()))
    }
}

/// `input · weight + bias` for a `[rows, k]` float32 input, on [`PackedWeights::multiply`].
#[derive(Clone, Debug)]
pub struct DenseLayer {
    weights: Arc<PackedWeights>,
}

/// Two layers are the same op when they share their packed weights.
impl PartialEq for DenseLayer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.weights, &other.weights)
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
        let input = args_1!(inputs);
        let (k, n) = (self.weights.k(), self.weights.n());
        let &[rows, input_k] = input.shape() else { bail!("DenseLayer takes [rows, k], got {:?}", input.shape()) };
        ensure!(input_k == k && input.datum_type() == f32::datum_type(), "DenseLayer of k = {k} over {:?}", input);
        // SAFETY: every value of the output is written by `multiply` below.
        let mut output = unsafe { Tensor::uninitialized::<f32>(&[rows, n])? };
        self.weights.multiply(input.try_as_plain_ram()?.as_slice::<f32>()?, rows, output.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?);
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for DenseLayer {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs[0].rank() == 2, "DenseLayer takes [rows, k]");
        Ok(tvec!(f32::fact([inputs[0].shape[0].clone(), self.weights.n().to_dim()])))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_int, value_info, GraphBuilder, FLOAT};

    /// The test layer's `[rows, k]` input, its weights and its bias, between -0.5 and 0.5.
    fn values(count: usize, seed: usize) -> Vec<f32> {
        (0..count).map(|i| ((i * 7919 + seed) % 1000) as f32 / 1000.0 - 0.5).collect()
    }

    /// A layer of `n` outputs over `k` inputs as ONNX writes it: `Gemm` (weights `[n, k]`,
    /// `transB`) or `MatMul` (weights `[k, n]`) then `Add`, with or without the bias; then a
    /// `Relu`, so that the layer's result is not the graph's output.
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
        g.node_into("Relu", vec![product], vec![], "y");
        g.finish("layer", 13, vec![value_info("x", FLOAT, &[-1, k as i64])], vec![value_info("y", FLOAT, &[])], "test")
    }

    /// The layer's output for `rows` rows on tract's plan, with or without the dense-layer
    /// rewrite, and how many layers the rewrite replaced.
    fn run(model: &tract_onnx::pb::ModelProto, rows: usize, k: usize, rewrite: bool) -> TractResult<(Vec<f32>, usize)> {
        let mut inference = tract_onnx::onnx().model_for_proto_model(model)?;
        inference.set_input_fact(0, f32::fact([rows, k]).into())?;
        let mut typed = inference.into_typed()?.into_decluttered()?;
        let replaced = if rewrite { speed_up_dense_layers(&mut typed)? } else { 0 };
        let plan = typed.into_optimized()?.into_runnable()?;
        let outputs = plan.run(tvec![Tensor::from_shape(&[rows, k], &values(rows * k, 1))?.into_tvalue()])?;
        Ok((outputs[0].try_as_plain_ram()?.as_slice::<f32>()?.to_vec(), replaced))
    }

    /// Gemm and MatMul layers, with and without a bias, give tract's own outputs (to float32
    /// rounding: tract's kernels sum in k order too) once replaced; batches under
    /// [`MIN_ROWS`] stay tract's.
    #[test]
    fn dense_layers_give_tracts_outputs() {
        let expect_replaced = usize::from(Isa::detect().is_some());
        let (k, n) = (70, 45);
        for gemm in [true, false] {
            for bias in [true, false] {
                let model = layer(gemm, bias, k, n);
                for rows in [1, MIN_ROWS - 1, MIN_ROWS, 12, 13, 64] {
                    let (tract, _) = run(&model, rows, k, false).unwrap();
                    let (ours, replaced) = run(&model, rows, k, true).unwrap();
                    assert_eq!(replaced, if rows >= MIN_ROWS { expect_replaced } else { 0 }, "gemm {gemm} bias {bias} rows {rows}");
                    assert_eq!(ours.len(), rows * n);
                    for (index, (ours, tract)) in ours.iter().zip(&tract).enumerate() {
                        assert!((ours - tract).abs() <= 2e-6, "gemm {gemm} bias {bias} rows {rows} [{index}]: {ours} vs tract {tract}");
                    }
                }
            }
        }
    }
}
