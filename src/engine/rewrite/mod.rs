//! The rewrites that make tract compute what the graph says, and faster.
//!
//! On the protobuf, before tract reads it ([`rewrite_graph`]): [`exact`] (the activations
//! tract approximates, as [`super::kernels::exact_ops`]), [`lstm_step`] (a one-step `LSTM` as
//! one product and a gate step), [`recurrent`] (every other `LSTM`, `GRU` and `RNN` as ONNX
//! defines them), [`layout_ops`] (an NHWC -> NCHW input transposition as a copy), and
//! [`conv_batch`] (at a batch over 1, convolutions image by image; made per plan). tract's
//! `LogSoftmax` reader is replaced ([`log_softmax`]).
//!
//! On tract's plan: before its optimisation ([`before_optimizing`]) [`input_arithmetic`],
//! [`dense`] layers and [`dense_conv`] convolutions on the dense tiles, with the
//! [`fused_activation`] that follows each; after it ([`after_optimizing`]) [`im2col`]'s
//! patch gather, the [`short_softmax`] and [`row_argmax`] passes.

pub mod conv_batch;
pub mod dense;
pub mod dense_conv;
pub mod exact;
pub mod fused_activation;
pub mod im2col;
pub mod input_arithmetic;
pub mod layout_ops;
pub mod log_softmax;
pub mod lstm_step;
pub mod recurrent;
pub mod row_argmax;
pub mod short_softmax;
#[cfg(test)]
pub mod testing;

use tract_onnx::pb;
use tract_onnx::prelude::*;

/// The protobuf rewrites (see the module docs) of a graph of default-domain opset `opset`;
/// returns the graph inputs its caller gives NHWC and the graph now reads NCHW
/// ([`layout_ops::fast_input_transpositions`]), or why a node cannot be computed as ONNX
/// defines it ([`recurrent`]).
pub fn rewrite_graph(graph: &mut pb::GraphProto, opset: i64) -> Result<Vec<String>, String> {
    // Intermediate shapes are hints tract takes as constraints: a symbolic `batch` there (as
    // onnx.shape_inference, onnxsim and newer exporters write) contradicts the concrete batch
    // of a plan ("Impossible to unify Sym(batch) with Val(1)"). onnxruntime ignores them too.
    graph.value_info.clear();
    lstm_step::one_step_lstms(graph, opset);
    recurrent::recurrent_nodes(graph, opset)?;
    exact::exact_activations(graph);
    Ok(layout_ops::fast_input_transpositions(graph))
}

/// The plan rewrites made on the decluttered plan, before tract optimises it.
pub fn before_optimizing(plan: &mut TypedModel) -> TractResult<()> {
    input_arithmetic::speed_up_input_arithmetic(plan)?;
    dense::speed_up_dense_layers(plan)?;
    dense_conv::speed_up_convolutions(plan)?;
    Ok(())
}

/// The plan rewrites made on the optimised plan.
pub fn after_optimizing(plan: &mut TypedModel) -> TractResult<()> {
    im2col::speed_up_lazy_im2col(plan)?;
    short_softmax::speed_up_short_softmax(plan)?;
    row_argmax::speed_up_row_argmax(plan)?;
    Ok(())
}
