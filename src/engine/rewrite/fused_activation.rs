//! Activations applied by the op in front of them, on outputs it has just written.
//!
//! A [`super::dense::DenseLayer`] or [`super::dense_conv::DenseConv`] followed by an
//! activation (the visual encoder's `LeakyRelu`, the hidden layers' exact Swish) takes the
//! activation in: it runs the same element-wise kernel on each block of outputs it has just
//! written, while they are still in the first-level cache, instead of tract running a pass
//! over the whole tensor as a node of its own. Same kernel, same values: the outputs are
//! those of the two nodes, bit for bit. (tract fuses a `LeakyRelu` into its own matrix
//! kernel's store; the runner's kernels, which replace tract's, had left it a pass of its
//! own.) On the 84 x 84 visual encoder at batch 64 those passes were 2.5% of the decision's
//! profile, and 0.8% fused (perf, AVX-512 Xeon); wall-clock differences stayed within the
//! machine's noise.

use crate::engine::kernels::exact_ops::Activation;
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::nn::LeakyRelu;
use tract_onnx::tract_core::tract_linalg::Func;
use tract_onnx::tract_hir::internal::*;

/// An activation an op applies to its own outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FusedActivation {
    /// tract's `LeakyRelu` (its alpha as bits, so that the op compares equal to itself).
    LeakyRelu { alpha_bits: u32 },
    /// One of the runner's exact activations ([`crate::engine::kernels::exact_ops`]).
    Exact(Activation),
}

impl FusedActivation {
    /// The float32 activation node `id` runs, if it is one of those fused.
    fn of_node(model: &TypedModel, id: usize) -> Option<Self> {
        let op = model.node(id).op_as::<ElementWiseOp>()?;
        if op.1.is_some_and(|dt| dt != f32::datum_type()) {
            return None;
        }
        if let Some(leaky) = op.0.downcast_ref::<LeakyRelu>() {
            return Some(FusedActivation::LeakyRelu { alpha_bits: leaky.alpha.to_bits() });
        }
        op.0.downcast_ref::<Activation>().map(|exact| FusedActivation::Exact(*exact))
    }

    /// What an op that replaces the one writing `outlet` takes in: the activation that is
    /// `outlet`'s only reader (when `outlet` is not an output of the model), and the outlet
    /// the replacement stands for (the activation's, or `outlet` itself).
    pub fn take_in(model: &TypedModel, outlet: OutletId) -> (Option<FusedActivation>, OutletId) {
        match Self::following(model, outlet) {
            Some((activation, activated)) => (Some(activation), activated),
            None => (None, outlet),
        }
    }

    /// The activation reading `outlet`, when it is the outlet's only reader and the outlet
    /// is not an output of the model: the activation and the outlet it writes.
    fn following(model: &TypedModel, outlet: OutletId) -> Option<(FusedActivation, OutletId)> {
        let readers = &model.nodes().get(outlet.node)?.outputs.get(outlet.slot)?.successors;
        let is_output = model.output_outlets().ok()?.contains(&outlet);
        let [reader] = readers.as_slice() else { return None };
        if is_output || model.node(reader.node).inputs.len() != 1 {
            return None;
        }
        let activation = Self::of_node(model, reader.node)?;
        (model.outlet_fact(OutletId::new(reader.node, 0)).ok()?.datum_type == f32::datum_type()).then_some((activation, OutletId::new(reader.node, 0)))
    }

    /// Applies the activation to `values` in place, with the kernel its own node runs.
    pub fn apply(&self, values: &mut [f32]) -> TractResult<()> {
        match self {
            FusedActivation::LeakyRelu { alpha_bits } => Func::LeakyRelu.ew_f32_param()?.run_with_params(values, f32::from_bits(*alpha_bits)),
            FusedActivation::Exact(activation) => activation.run_f32(values),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::kernels::dense_tiles::test_values as values;
    use super::super::testing::run_rewritten;
    use super::super::{dense, dense_conv};
    use crate::engine::kernels::exact_ops;
    use super::*;
    use crate::onnx::{attr_float, attr_ints, value_info, GraphBuilder, FLOAT};

    /// `activation` (an ONNX op type, or one of the runner's exact ones) after `layer` (a
    /// 24-input `MatMul` and `Add`, or a 3 x 2 `Conv` of 2 channels) on `[batch, 2, 4, 3]`;
    /// the layer's output is also a graph output when `also_output`.
    fn activated(layer: &str, activation: &str, batch: usize, also_output: bool) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let output = if layer == "Conv" {
            let kernel = g.constant("w", &[5, 2, 3, 2], values(60, 2));
            let bias = g.constant("b", &[5], values(5, 3));
            g.node("Conv", vec!["x".into(), kernel, bias], vec![attr_ints("kernel_shape", &[3, 2])], "conv")
        } else {
            let flat = g.constant_i64("flat", &[2], vec![0, 24]);
            let rows = g.node("Reshape", vec!["x".into(), flat], vec![], "flat");
            let weight = g.constant("w", &[24, 20], values(480, 2));
            let product = g.node("MatMul", vec![rows, weight], vec![], "matmul");
            let bias = g.constant("b", &[20], values(20, 3));
            g.node("Add", vec![product, bias], vec![], "add")
        };
        let attributes = if activation == "LeakyRelu" { vec![attr_float("alpha", 0.01)] } else { vec![] };
        g.node_into(activation, vec![output.clone()], attributes, "y");
        let mut outputs = vec![value_info("y", FLOAT, &[])];
        if also_output {
            outputs.push(value_info(&output, FLOAT, &[]));
        }
        g.finish("activated", 13, vec![value_info("x", FLOAT, &[batch as i64, 2, 4, 3])], outputs, "test")
    }

    /// The model's outputs, with or without the dense rewrites, and how many element-wise
    /// nodes the rewritten model kept.
    fn run(model: &tract_onnx::pb::ModelProto, batch: usize, rewrite: bool) -> TractResult<(Vec<Vec<f32>>, usize)> {
        let input = Tensor::from_shape(&[batch, 2, 4, 3], &values(batch * 24, 1))?;
        run_rewritten(model, &input, |typed| {
            if rewrite {
                dense::speed_up_dense_layers(typed)?;
                dense_conv::speed_up_convolutions(typed)?;
            }
            Ok(typed.nodes().iter().filter(|n| n.op_is::<ElementWiseOp>()).count())
        })
    }

    /// A dense layer or convolution takes in the activation that reads it (tract's
    /// `LeakyRelu`, the exact Swish and Tanh), and gives the outputs of the two nodes (300
    /// rows of 20 outputs: the activation on spans of several row blocks and on the rest); an
    /// output the graph also returns keeps its activation apart.
    #[test]
    fn layers_take_in_the_activation_that_reads_them() {
        if crate::engine::kernels::dense_tiles::Isa::for_plans().is_none() {
            return;
        }
        for (layer, activation, batch) in [("MatMul", "LeakyRelu", 300), ("MatMul", exact_ops::SWISH, 300), ("Conv", "LeakyRelu", 6), ("Conv", exact_ops::TANH, 6)] {
            for also_output in [false, true] {
                let model = activated(layer, activation, batch, also_output);
                let (tracts, _) = run(&model, batch, false).unwrap();
                let (ours, element_wise) = run(&model, batch, true).unwrap();
                assert_eq!(element_wise, usize::from(also_output), "{layer} then {activation}, also an output: {also_output}");
                for (output, (ours, tracts)) in ours.iter().zip(&tracts).enumerate() {
                    assert_eq!(ours.len(), tracts.len());
                    for (index, (a, b)) in ours.iter().zip(tracts).enumerate() {
                        assert!((a - b).abs() <= 2e-6 * b.abs().max(1.0), "{layer} then {activation}, output {output} [{index}]: {a} vs tract {b}");
                    }
                }
            }
        }
    }
}
