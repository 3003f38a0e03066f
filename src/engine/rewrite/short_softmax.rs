//! A softmax for the short rows of discrete action branches.
//!
//! A discrete policy ends in a softmax over each branch's logits: a handful of values per
//! agent (5 for Hallway). tract 0.23 runs a float32 softmax whose row length is not a multiple
//! of four row by row, three vector kernels per row, each copying the row into an aligned
//! scratch buffer padded to its width (64 lanes with AVX-512): at batch 64 of the recurrent
//! benchmark network that was 12-15% of the whole decision (perf). [`speed_up_short_softmax`]
//! replaces such a node, once tract has optimised the plan, with [`ShortRowSoftmax`], which
//! computes the same formula in one pass over the rows with the standard library's `exp`.

use tract_onnx::tract_core::ops::nn::{Softmax, SoftmaxKind};
use tract_onnx::tract_hir::internal::*;

/// The longest row [`ShortRowSoftmax`] takes; longer rows are tract's (its vector kernels
/// pay for their padding there).
const SHORT_ROW: usize = 32;

/// Replaces every float32 softmax of an optimised plan over one trailing axis of at most
/// [`SHORT_ROW`] values; returns how many were replaced.
pub fn speed_up_short_softmax(model: &mut TypedModel) -> TractResult<usize> {
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let node = model.node(id);
        let Some(softmax) = node.op_as::<Softmax>() else { continue };
        let input = model.outlet_fact(node.inputs[0])?;
        let rank = input.rank();
        let row = input.shape.as_concrete().and_then(|shape| shape.last().copied());
        let trailing = softmax.axes.len() == 1 && rank > 0 && softmax.axes[0] == rank - 1;
        if input.datum_type != f32::datum_type() || softmax.quant_output_dt.is_some() || !trailing || !row.is_some_and(|r| (1..=SHORT_ROW).contains(&r)) {
            continue;
        }
        let kind = softmax.kind;
        model.node_mut(id).op = Box::new(ShortRowSoftmax { log: kind == SoftmaxKind::LogSoftmax });
        replaced += 1;
    }
    Ok(replaced)
}

/// Softmax (or log-softmax) over the last axis of a float32 tensor of short rows:
/// `exp(x - max) · (1 / Σ exp(x - max))`, or `x - max - ln Σ exp(x - max)`, as tract computes
/// them (the reciprocal multiplied, as onnxruntime does too).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct ShortRowSoftmax {
    /// Log-softmax rather than softmax.
    log: bool,
}

impl ShortRowSoftmax {
    fn row(&self, row: &mut [f32]) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for x in row.iter_mut() {
            *x -= max;
            sum += x.exp();
        }
        if self.log {
            let log_sum = sum.ln();
            row.iter_mut().for_each(|x| *x -= log_sum);
        } else {
            let scale = sum.recip();
            row.iter_mut().for_each(|x| *x = x.exp() * scale);
        }
    }
}

impl Op for ShortRowSoftmax {
    fn name(&self) -> StaticName {
        "ShortRowSoftmax".into()
    }

    op_as_typed_op!();
}

impl EvalOp for ShortRowSoftmax {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let mut output = args_1!(inputs).into_tensor();
        let row_length = *output.shape().last().context("a softmax needs an axis")?;
        ensure!(row_length > 0 && output.datum_type() == f32::datum_type(), "ShortRowSoftmax over {:?}", output);
        output.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?.chunks_mut(row_length).for_each(|row| self.row(row));
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for ShortRowSoftmax {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(inputs[0].without_value()))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_int, value_info, GraphBuilder, FLOAT};

    /// The test's logits, `rows` x `length`, between -10 and 11.
    fn logits(rows: usize, length: usize) -> Vec<f32> {
        (0..rows * length).map(|k| ((k * 7919) % 211) as f32 / 10.0 - 10.0).collect()
    }

    /// `op` (Softmax or LogSoftmax) over the last axis of a `[rows, length]` input, on tract's
    /// plan with the short-row softmax; the output and how many nodes were replaced.
    fn run(op: &str, rows: usize, length: usize) -> TractResult<(Vec<f32>, usize)> {
        let mut g = GraphBuilder::default();
        g.node_into(op, vec!["x".into()], vec![attr_int("axis", 1)], "y");
        let proto = g.finish("softmax", 13, vec![value_info("x", FLOAT, &[rows as i64, length as i64])], vec![value_info("y", FLOAT, &[])], "test");
        let mut plan = tract_onnx::onnx().model_for_proto_model(&proto)?.into_optimized()?;
        let replaced = speed_up_short_softmax(&mut plan)?;
        let outputs = plan.into_runnable()?.run(tvec![Tensor::from_shape(&[rows, length], &logits(rows, length))?.into_tvalue()])?;
        Ok((outputs[0].try_as_plain_ram()?.as_slice::<f32>()?.to_vec(), replaced))
    }

    /// Softmax and log-softmax of `x` in float64 from the float32 differences `x - max` (the
    /// rounding of that difference is the formula's, in every engine).
    fn reference(log: bool, row: &[f32]) -> Vec<f64> {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let shifted: Vec<f64> = row.iter().map(|x| (x - max) as f64).collect();
        let sum: f64 = shifted.iter().map(|d| d.exp()).sum();
        shifted.iter().map(|d| if log { d - sum.ln() } else { d.exp() / sum }).collect()
    }

    /// Within a few float32 ulps of the exact values, for the row lengths of discrete branches
    /// (measured: softmax within 2.2 ulps; tract's own kernels within 2.3 on the same rows).
    #[test]
    fn short_rows_are_within_a_few_ulps_of_the_exact_softmax() {
        for (op, log) in [("Softmax", false), ("LogSoftmax", true)] {
            for length in [1, 2, 3, 5, 7, 8, 20, 32] {
                let (short, replaced) = run(op, 64, length).unwrap();
                assert_eq!(replaced, 1, "{op} over {length}");
                let exact: Vec<f64> = logits(64, length).chunks(length).flat_map(|row| reference(log, row)).collect();
                for (value, exact) in short.iter().zip(&exact) {
                    let ulp = (exact.abs() as f32).max(f32::MIN_POSITIVE) * f32::EPSILON;
                    assert!((*value as f64 - exact).abs() <= 6.0 * ulp as f64 + if log { 4e-6 } else { 0.0 }, "{op} over {length}: {value} vs exact {exact}");
                }
            }
        }
    }

    /// Rows longer than [`SHORT_ROW`] stay tract's.
    #[test]
    fn long_rows_stay_tracts() {
        assert_eq!(run("Softmax", 4, SHORT_ROW + 1).unwrap().1, 0);
    }
}
