//! The index of each row's largest (or smallest) value.
//!
//! A policy's deterministic discrete actions are an `ArgMax` over each branch's
//! probabilities. tract 0.23 reduces a float32 axis to its arg-max through ndarray's generic
//! per-lane iteration (a view, an index conversion and a closure per row): at batch 64 of the
//! recurrent benchmark network that was ~7% of the whole decision (perf), for 64 rows of 5
//! values. [`speed_up_row_argmax`] replaces such a node, once tract has optimised the plan,
//! with [`RowArgMax`], one pass over contiguous rows.
//!
//! tract starts its search from `f32::MIN` at index 0, so a row with nothing above it (all
//! `-inf`, or `-inf` and `f32::MIN`) gave 0 even with `select_last_index`, and `[-inf,
//! f32::MIN]` gave 0 where the largest value is at 1 (bad-input report of 2 December, S4).
//! [`RowArgMax`] takes ONNX's rule, which onnxruntime follows: the index of the largest value
//! (the first of equal values, the last with `select_last_index`), infinities included; NaN
//! never wins, and a row of NaN alone gives 0. It replaces every float32 arg-max and arg-min
//! of known shape, over any axis, so one rule holds whatever the axis.

use tract_onnx::tract_core::ops::nn::{Reduce, Reducer};
use tract_onnx::tract_hir::internal::*;

/// Replaces every arg-max and arg-min of an optimised plan over one axis of a float32 tensor
/// of known shape; returns how many were replaced.
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
        let &[axis] = reduce.axes.as_slice() else { continue };
        let known = input.shape.as_concrete().is_some_and(|shape| shape.get(axis).is_some_and(|&row| row > 0));
        if input.datum_type != f32::datum_type() || !known {
            continue;
        }
        model.node_mut(id).op = Box::new(RowArgMax { axis, smallest, last_of_ties });
        replaced += 1;
    }
    Ok(replaced)
}

/// The index (int64) of the largest float32 value along `axis`, or the smallest, the axis
/// kept with length 1: the first of equal values (the last with `last_of_ties`, ONNX's
/// `select_last_index`); infinities count; NaN never wins; a row of NaN alone gives 0.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct RowArgMax {
    /// The axis reduced.
    axis: usize,
    /// The smallest value's index (ArgMin) rather than the largest's.
    smallest: bool,
    /// The last of equal values rather than the first.
    last_of_ties: bool,
}

impl RowArgMax {
    /// The winning index among `length` values `stride` apart.
    fn row(&self, values: &[f32], length: usize, stride: usize) -> i64 {
        let mut best: Option<(usize, f32)> = None;
        for index in 0..length {
            let value = values[index * stride];
            let wins = match best {
                _ if value.is_nan() => false,
                None => true,
                Some((_, b)) => (if self.smallest { value < b } else { value > b }) || (self.last_of_ties && value == b),
            };
            if wins {
                best = Some((index, value));
            }
        }
        best.map_or(0, |(index, _)| index as i64)
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
        let length = *shape.get(self.axis).context("the arg-max's axis is outside its input")?;
        ensure!(length > 0 && input.datum_type() == f32::datum_type(), "RowArgMax over {:?}", input);
        let inner: usize = shape[self.axis + 1..].iter().product();
        let values = input.try_as_plain_ram()?;
        let values = values.as_slice::<f32>()?;
        let mut indices = Vec::with_capacity(values.len() / length);
        for block in values.chunks(length * inner) {
            indices.extend((0..inner).map(|offset| self.row(&block[offset..], length, inner)));
        }
        shape[self.axis] = 1;
        Ok(tvec!(Tensor::from_shape(&shape, &indices)?.into_tvalue()))
    }
}

impl TypedOp for RowArgMax {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let mut shape = inputs[0].shape.clone();
        ensure!(self.axis < shape.rank(), "the arg-max's axis is outside its input");
        shape.set(self.axis, 1.to_dim());
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

    /// `op` (ArgMax or ArgMin) over axis `axis` (0 or 1) of `[rows, length]` (given
    /// transposed to `[length, rows]` for axis 0) on tract's optimised plan with the
    /// replacement: the indices and how many nodes were replaced.
    fn run(op: &str, select_last_index: i64, values: &[f32], length: usize, axis: usize) -> TractResult<(Vec<i64>, usize)> {
        let rows = values.len() / length;
        let (dims, data) = match axis {
            1 => ([rows, length], values.to_vec()),
            _ => ([length, rows], (0..length * rows).map(|k| values[(k % rows) * length + k / rows]).collect()),
        };
        let mut g = GraphBuilder::default();
        g.node_into(op, vec!["x".into()], vec![attr_int("axis", axis as i64), attr_int("keepdims", 1), attr_int("select_last_index", select_last_index)], "y");
        let proto = g.finish("argmax", 13, vec![value_info("x", FLOAT, &[dims[0] as i64, dims[1] as i64])], vec![value_info("y", tract_onnx::pb::tensor_proto::DataType::Int64 as i32, &[])], "test");
        let mut plan = tract_onnx::onnx().model_for_proto_model(&proto)?.into_optimized()?;
        let replaced = speed_up_row_argmax(&mut plan)?;
        let outputs = plan.into_runnable()?.run(tvec![Tensor::from_shape(&dims, &data)?.into_tvalue()])?;
        let expected_shape = if axis == 1 { [rows, 1] } else { [1, rows] };
        ensure!(outputs[0].shape() == expected_shape, "output shape {:?}", outputs[0].shape());
        Ok((outputs[0].try_as_plain_ram()?.as_slice::<i64>()?.to_vec(), replaced))
    }

    /// ONNX's rule written out: among the values that are not NaN, the positions of the
    /// largest (smallest), the first or the last of them; 0 when there are none.
    fn reference(row: &[f32], smallest: bool, last: bool) -> i64 {
        let candidates: Vec<(usize, f32)> = row.iter().copied().enumerate().filter(|(_, v)| !v.is_nan()).collect();
        let Some(target) = candidates.iter().map(|(_, v)| *v).reduce(|a, b| if (b < a) == smallest && b != a { b } else { a }) else { return 0 };
        let mut ties = candidates.iter().filter(|(_, v)| *v == target).map(|(i, _)| *i as i64);
        if last { ties.last().unwrap_or(0) } else { ties.next().unwrap_or(0) }
    }

    /// ONNX's index for every row, including ties, NaN, infinities and the float limits, for
    /// ArgMax and ArgMin, first or last of ties, over the last axis and over the first.
    #[test]
    fn indices_follow_onnx_for_every_kind_of_row() {
        for op in ["ArgMax", "ArgMin"] {
            for select_last_index in [0, 1] {
                for length in [1, 2, 3, 5, 17] {
                    let values = awkward_rows(length);
                    let expected: Vec<i64> = values.chunks(length).map(|row| reference(row, op == "ArgMin", select_last_index == 1)).collect();
                    for axis in [1, 0] {
                        let (ours, replaced) = run(op, select_last_index, &values, length, axis).unwrap();
                        assert_eq!(replaced, 1, "{op} over {length}");
                        assert_eq!(ours, expected, "{op} (last {select_last_index}) over rows of {length}, axis {axis}");
                    }
                }
            }
        }
    }

    /// Rows with nothing above tract's starting value `f32::MIN`, where tract answered 0.
    #[test]
    fn rows_of_minus_infinity_and_the_lowest_float_give_the_largest_value() {
        let values = [f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::MIN, f32::MAX, f32::INFINITY];
        assert_eq!(run("ArgMax", 1, &values, 2, 1).unwrap().0, vec![1, 1, 1]);
        assert_eq!(run("ArgMax", 0, &values, 2, 1).unwrap().0, vec![0, 1, 1]);
        assert_eq!(run("ArgMin", 1, &values, 2, 1).unwrap().0, vec![1, 0, 0]);
    }

    /// A plain case read by eye: the first of the equal largest values, or the last.
    #[test]
    fn ties_go_to_the_first_value_unless_the_last_is_asked_for() {
        let values = [0.5, 2.0, -1.0, 2.0, 0.25, -3.0, 1.0, -3.0];
        assert_eq!(run("ArgMax", 0, &values, 4, 1).unwrap().0, vec![1, 2]);
        assert_eq!(run("ArgMax", 1, &values, 4, 1).unwrap().0, vec![3, 2]);
        assert_eq!(run("ArgMin", 0, &values, 4, 1).unwrap().0, vec![2, 1]);
        assert_eq!(run("ArgMin", 1, &values, 4, 1).unwrap().0, vec![2, 3]);
    }
}
