//! The building blocks every part of an exported policy graph uses: a torch Linear layer as
//! `Gemm` from the policy's weights, and Swish.

use super::{attr_int, GraphBuilder};
use crate::policy::{PolicyError, Weights};

/// A torch Linear (`weight` `[out, in]`, `bias` `[out]`) on a `[batch, in]` value, as `Gemm`.
pub(super) fn linear(g: &mut GraphBuilder, x: String, weights: &Weights, weight: &str, bias: &str) -> Result<String, PolicyError> {
    let w = weights.get(weight)?;
    let b = weights.get(bias)?;
    let w_name = g.constant(weight, &[w.shape[0] as i64, w.shape[1] as i64], w.data.clone());
    let b_name = g.constant(bias, &[b.shape[0] as i64], b.data.clone());
    Ok(g.node("Gemm", vec![x, w_name, b_name], vec![attr_int("transB", 1)], weight))
}

/// Swish: x · sigmoid(x).
pub(super) fn swish(g: &mut GraphBuilder, x: String) -> String {
    let s = g.node("Sigmoid", vec![x.clone()], vec![], "swish");
    g.node("Mul", vec![x, s], vec![], "swish")
}
