//! The deterministic actions of discrete branches: the index of each row's largest (or
//! smallest) value.
//!
//! A model API 3 policy's `deterministic_discrete_actions` is an `ArgMax` over each branch's
//! probabilities. tract 0.23 reduces a float32 axis to its arg-max through ndarray's generic
//! per-lane iteration (a view, an index conversion and a closure per row): at batch 64 of the
//! recurrent benchmark network that was ~7% of the whole decision (perf), for 64 rows of 5
//! values. [`speed_up_row_argmax`] replaces such a node, once tract has optimised the plan,
//! with [`RowArgMax`], one pass over contiguous rows.

use tract_onnx::tract_core::ops::nn::{Reduce, Reducer};
use tract_onnx::tract_hir::internal::*;

/// Replaces every arg-max and arg-min of an optimised plan over the last axis of a float32
/// tensor of known shape; returns how many were replaced.
pub fn speed_up_row_argmax(model: &mut TypedModel) -> TractResult<usize> {
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let node = model.node(id);
        let Some(reduce) = node.op_as::<Reduce>() else { continue };
        let (smallest, last_of_ties) = match reduce.reducer {
            Reducer::ArgMax(last) => (false, last),
            Reducer::ArgMin(last) => (true, last),
            _ => continue,
        };
        let input = model.outlet_fact(node.inputs[0])?;
        let rank = input.rank();
        let known = input.shape.as_concrete().is_some_and(|shape| shape.last().is_some_and(|&row| row > 0));
        if input.datum_type != f32::datum_type() || reduce.axes.as_slice() != [rank.wrapping_sub(1)] || !known {
            continue;
        }
        model.node_mut(id).op = Box::new(RowArgMax { smallest, last_of_ties });
        replaced += 1;
    }
    Ok(replaced)
}

/// The index (int64) of each float32 row's largest value over the last axis, or smallest,
/// the axis kept with length 1, with tract's rules: the first of equal values (the last with
/// `last_of_ties`, ONNX's `select_last_index`); NaN never wins; a row with nothing above
/// `f32::MIN` (below `f32::MAX` for the smallest) gives 0.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct RowArgMax {
    /// The smallest value's index (ArgMin) rather than the largest's.
    smallest: bool,
    /// The last of equal values rather than the first.
    last_of_ties: bool,
}

impl RowArgMax {
    fn row(&self, row: &[f32]) -> i64 {
        let (mut best_index, mut best) = (0, if self.smallest { f32::MAX } else { f32::MIN });
        for (index, &value) in row.iter().enumerate() {
            let better = if self.smallest { value < best } else { value > best };
            if better || (self.last_of_ties && value == best) {
                (best_index, best) = (index, value);
            }
        }
        best_index as i64
    }
}

impl Op for RowArgMax {
    fn name(&self) -> StaticName {
        "RowArgMax".into()
    }

    op_as_typed_op!();
}

impl EvalOp for RowArgMax {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let mut shape: TVec<usize> = input.shape().into();
        let row_length = shape.last_mut().context("an arg-max needs an axis")?;
        ensure!(*row_length > 0 && input.datum_type() == f32::datum_type(), "RowArgMax over {:?}", input);
        let rows = input.try_as_plain_ram()?;
        let indices: Vec<i64> = rows.as_slice::<f32>()?.chunks(*row_length).map(|row| self.row(row)).collect();
        *row_length = 1;
        Ok(tvec!(Tensor::from_shape(&shape, &indices)?.into_tvalue()))
    }
}

impl TypedOp for RowArgMax {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let mut shape = inputs[0].shape.clone();
        let last = shape.rank().checked_sub(1).context("an arg-max needs an axis")?;
        shape.set(last, 1.to_dim());
        Ok(tvec!(i64::fact(shape)))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_int, value_info, GraphBuilder, FLOAT};

    /// Rows with ties, NaN, infinities and values at the float limits, each `length` long:
    /// first a row of NaN, one of -inf and `f32::MIN` only (nothing above tract's starting
    /// value), one of +inf and `f32::MAX` only (the same for the smallest), then mixtures.
    fn awkward_rows(length: usize) -> Vec<f32> {
        let specials = [f32::NAN, f32::NEG_INFINITY, f32::INFINITY, f32::MIN, f32::MAX, 0.0, -0.0, 1.5, 1.5, -2.0];
        let low = |k: usize| if k % 2 == 0 { f32::NEG_INFINITY } else { f32::MIN };
        let high = |k: usize| if k % 2 == 0 { f32::INFINITY } else { f32::MAX };
        let mixed = |k: usize| if k % 3 == 0 { specials[(k * 7) % specials.len()] } else { ((k * 7919) % 13) as f32 - 6.0 };
        let mut rows = vec![f32::NAN; length];
        rows.extend((0..length).map(low));
        rows.extend((0..length).map(high));
        rows.extend((0..40 * length).map(mixed));
        rows
    }

    /// `op` (ArgMax or ArgMin) over the last axis of `[rows, length]` on tract's optimised plan,
    /// with the replacement or without: the indices and how many nodes were replaced.
    fn run(op: &str, select_last_index: i64, values: &[f32], length: usize, replace: bool) -> TractResult<(Vec<i64>, usize)> {
        let rows = values.len() / length;
        let mut g = GraphBuilder::default();
        g.node_into(op, vec!["x".into()], vec![attr_int("axis", 1), attr_int("keepdims", 1), attr_int("select_last_index", select_last_index)], "y");
        let proto = g.finish("argmax", 13, vec![value_info("x", FLOAT, &[rows as i64, length as i64])], vec![value_info("y", tract_onnx::pb::tensor_proto::DataType::Int64 as i32, &[])], "test");
        let mut plan = tract_onnx::onnx().model_for_proto_model(&proto)?.into_optimized()?;
        let replaced = if replace { speed_up_row_argmax(&mut plan)? } else { 0 };
        let outputs = plan.into_runnable()?.run(tvec![Tensor::from_shape(&[rows, length], values)?.into_tvalue()])?;
        ensure!(outputs[0].shape() == [rows, 1], "output shape {:?}", outputs[0].shape());
        Ok((outputs[0].try_as_plain_ram()?.as_slice::<i64>()?.to_vec(), replaced))
    }

    /// The same index as tract's own reduction for every row, including ties, NaN, infinities
    /// and the float limits, for ArgMax and ArgMin, first or last of ties.
    #[test]
    fn indices_are_tracts_for_every_kind_of_row() {
        for op in ["ArgMax", "ArgMin"] {
            for select_last_index in [0, 1] {
                for length in [1, 2, 3, 5, 17] {
                    let values = awkward_rows(length);
                    let (ours, replaced) = run(op, select_last_index, &values, length, true).unwrap();
                    let (tracts, _) = run(op, select_last_index, &values, length, false).unwrap();
                    assert_eq!(replaced, 1, "{op} over {length}");
                    assert_eq!(ours, tracts, "{op} (last {select_last_index}) over rows of {length}");
                }
            }
        }
    }

    /// A plain case read by eye: the first of the equal largest values, or the last.
    #[test]
    fn ties_go_to_the_first_value_unless_the_last_is_asked_for() {
        let values = [0.5, 2.0, -1.0, 2.0, 0.25, -3.0, 1.0, -3.0];
        assert_eq!(run("ArgMax", 0, &values, 4, true).unwrap().0, vec![1, 2]);
        assert_eq!(run("ArgMax", 1, &values, 4, true).unwrap().0, vec![3, 2]);
        assert_eq!(run("ArgMin", 0, &values, 4, true).unwrap().0, vec![2, 1]);
        assert_eq!(run("ArgMin", 1, &values, 4, true).unwrap().0, vec![2, 3]);
    }
}
