//! Arithmetic by constants on a model input (an observation normalizer) as one pass.
//!
//! ML-Agents normalizes an observation as `clip((x - mean) / sqrt(variance / steps), -5, 5)`,
//! one value per observation: after tract's decluttering a `Sub` and a `Mul` by `[1, n]`
//! constants and a `Max` and a `Min` by scalars. tract runs a binary op broadcasting a row
//! through its generic path (an ndarray zip, value by value): on the Walker-sized benchmark
//! network at batch 64 the four ops were about 8% of the decision (perf, AVX-512 Xeon).
//! [`speed_up_input_arithmetic`] replaces such a chain, from the input on, with one
//! [`InputArithmetic`] op that runs the same operations in the same order, each a vectorised
//! loop over a row: the same values, bit for bit.
//!
//! Only chains that start at a model input are taken: an `Add` after a matrix product is
//! tract's to fuse into the product (or [`super::dense`]'s).

use std::sync::Arc;
use tract_onnx::tract_core::ops::binary::TypedBinOp;
use tract_onnx::tract_hir::internal::*;

/// Replaces every chain of float32 arithmetic by constants that starts at a model input
/// and broadcasts at least one row of constants with an [`InputArithmetic`]; returns how
/// many chains.
pub fn speed_up_input_arithmetic(model: &mut TypedModel) -> TractResult<usize> {
    let mut replaced = 0;
    for input in model.input_outlets()?.to_vec() {
        let mut steps = Vec::new();
        let mut end = input;
        while let Some((step, next)) = next_step(model, end)? {
            steps.push(step);
            end = next;
        }
        if !steps.iter().any(|s| s.constant.len() > 1) {
            continue;
        }
        let mut patch = TypedModelPatch::new("input arithmetic");
        let wire = patch.tap_model(model, input)?;
        let output = patch.wire_node(format!("{}.arithmetic", model.node(input.node).name), InputArithmetic { steps }, &[wire])?[0];
        patch.shunt_outside(model, end, output)?;
        patch.apply(model)?;
        replaced += 1;
    }
    Ok(replaced)
}

/// The step the only reader of `outlet` takes, if it is float32 arithmetic of `outlet` and a
/// constant holding one value or one per value of the last axis, with `outlet`'s shape; and
/// the step's output.
fn next_step(model: &TypedModel, outlet: OutletId) -> TractResult<Option<(Step, OutletId)>> {
    let fact = model.outlet_fact(outlet)?;
    let is_output = model.output_outlets()?.contains(&outlet);
    let [reader] = model.node(outlet.node).outputs[outlet.slot].successors.as_slice() else { return Ok(None) };
    let node = model.node(reader.node);
    let Some(op) = node.op_as::<TypedBinOp>() else { return Ok(None) };
    let Some(operation) = Operation::named(op.0.name()) else { return Ok(None) };
    let (Some(shape), [first, second]) = (fact.shape.as_concrete(), node.inputs.as_slice()) else { return Ok(None) };
    let constant_first = *second == outlet;
    let constant = model.outlet_fact(if constant_first { *first } else { *second })?;
    let output = OutletId::new(reader.node, 0);
    let Some(values) = &constant.konst else { return Ok(None) };
    let last = shape.last().copied().unwrap_or(1);
    let along_last = values.rank() <= shape.len() && values.shape().iter().rev().skip(1).all(|d| *d == 1) && (values.len() == 1 || values.len() == last);
    let same_shape = model.outlet_fact(output)?.shape.as_concrete() == Some(shape);
    let float = |f: &TypedFact| f.datum_type == f32::datum_type();
    if is_output || op.1.is_some() || !along_last || !same_shape || !float(fact) || !float(constant) || first == second {
        return Ok(None);
    }
    let constant: Arc<[f32]> = values.try_as_plain_ram()?.as_slice::<f32>()?.into();
    Ok(Some((Step { operation, constant, constant_first }, output)))
}

/// The arithmetic a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Operation {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

impl Operation {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "Add" => Operation::Add,
            "Sub" => Operation::Sub,
            "Mul" => Operation::Mul,
            "Div" => Operation::Div,
            "Max" => Operation::Max,
            "Min" => Operation::Min,
            _ => return None,
        })
    }

}

/// One step of the chain: `value op constant`, or `constant op value`; the constant holds
/// one value, or one per value of the last axis.
#[derive(Clone, Debug, PartialEq)]
struct Step {
    operation: Operation,
    constant: Arc<[f32]>,
    constant_first: bool,
}

impl Step {
    /// The step on one row (as long as the constant, or any length for one value), as tract
    /// computes it for float32 (operands in the graph's order).
    #[inline(always)]
    fn run(&self, row: &mut [f32]) {
        let constants = &*self.constant;
        match (self.operation, self.constant_first) {
            (Operation::Add, false) => each(row, constants, |x, c| x + c),
            (Operation::Add, true) => each(row, constants, |x, c| c + x),
            (Operation::Sub, false) => each(row, constants, |x, c| x - c),
            (Operation::Sub, true) => each(row, constants, |x, c| c - x),
            (Operation::Mul, false) => each(row, constants, |x, c| x * c),
            (Operation::Mul, true) => each(row, constants, |x, c| c * x),
            (Operation::Div, false) => each(row, constants, |x, c| x / c),
            (Operation::Div, true) => each(row, constants, |x, c| c / x),
            (Operation::Max, false) => each(row, constants, |x: f32, c| x.max(c)),
            (Operation::Max, true) => each(row, constants, |x, c: f32| c.max(x)),
            (Operation::Min, false) => each(row, constants, |x: f32, c| x.min(c)),
            (Operation::Min, true) => each(row, constants, |x, c: f32| c.min(x)),
        }
    }
}

/// `x = f(x, c)` over a row, `c` the one constant or the constant of the value's column: a
/// loop the compiler vectorises, inlined into the caller's instruction set.
#[inline(always)]
fn each(row: &mut [f32], constants: &[f32], f: impl Fn(f32, f32) -> f32) {
    if let [c] = constants {
        for x in row.iter_mut() {
            *x = f(*x, *c);
        }
    } else {
        for (x, c) in row.iter_mut().zip(constants) {
            *x = f(*x, *c);
        }
    }
}

/// A chain of arithmetic steps on a float32 input, row by row (each step a loop over the row
/// while it is in the cache).
#[derive(Clone, Debug, PartialEq)]
pub struct InputArithmetic {
    steps: Vec<Step>,
}

impl Eq for InputArithmetic {}

impl InputArithmetic {
    /// The values of the last axis each step's constant has.
    fn row_length(&self) -> usize {
        self.steps.iter().map(|s| s.constant.len()).max().unwrap_or(1)
    }

    /// Every step on every row of `values`, in place, with loops compiled for AVX2 where the
    /// CPU has it (the crate is built for baseline x86-64; compiled for AVX-512 F alone,
    /// rustc 1.95's LLVM fails to select the masks of a vectorised `f32::max`).
    fn run(&self, values: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { self.run_avx2(values) };
        }
        self.run_rows(values)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, values: &mut [f32]) {
        self.run_rows(values)
    }

    #[inline(always)]
    fn run_rows(&self, values: &mut [f32]) {
        for row in values.chunks_mut(self.row_length()) {
            for step in &self.steps {
                step.run(row);
            }
        }
    }
}

impl Op for InputArithmetic {
    fn name(&self) -> StaticName {
        "InputArithmetic".into()
    }

    op_as_typed_op!();
}

impl EvalOp for InputArithmetic {
    op_out_of_plan!();

    fn eval(&self, _: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let row = self.row_length();
        ensure!(input.datum_type() == f32::datum_type() && input.shape().last() == Some(&row), "InputArithmetic over rows of {row} values: {:?}", input);
        // In place when the plan alone holds the input; a copy of prepared inputs, which the
        // caller keeps.
        let mut output = input.into_tensor();
        self.run(output.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?);
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for InputArithmetic {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(f32::fact(inputs[0].shape.clone())))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{value_info, GraphBuilder, FLOAT};
    use crate::engine::kernels::dense_tiles::test_values as values;
    use super::super::testing::run_rewritten;

    /// An ML-Agents normalizer on `[rows, 7]` (`Sub` and `Div` by rows of constants, `Clip` to
    /// ±1.5) then `Sub` from a row of constants (the constant first), `extra` after the input
    /// as more nodes (`"second reader"`: the input read by a second node too, `"scalars"`:
    /// only arithmetic by scalars, `"output"`: the normalized value also a graph output).
    fn normalizer(extra: &str) -> tract_onnx::pb::ModelProto {
        let mut g = GraphBuilder::default();
        let mut outputs = vec![value_info("y", FLOAT, &[])];
        let y = if extra == "scalars" {
            let (two, half) = (g.constant("two", &[], vec![2.0]), g.constant("half", &[1], vec![0.5]));
            let scaled = g.node("Mul", vec!["x".into(), two], vec![], "scaled");
            g.node("Sub", vec![half, scaled], vec![], "y")
        } else {
            let (mean, deviation) = (g.constant("mean", &[1, 7], values(7, 2)), g.constant("deviation", &[7], (0..7).map(|k| 0.5 + k as f32 / 4.0).collect()));
            let centred = g.node("Sub", vec!["x".into(), mean], vec![], "centred");
            let scaled = g.node("Div", vec![centred, deviation], vec![], "scaled");
            let (low, high) = (g.constant("low", &[], vec![-1.5]), g.constant("high", &[], vec![1.5]));
            let clipped = g.node("Clip", vec![scaled, low, high], vec![], "clipped");
            if extra == "output" {
                outputs.push(value_info(&clipped, FLOAT, &[]));
            }
            let offsets = g.constant("offsets", &[1, 7], values(7, 3));
            g.node("Sub", vec![offsets, clipped], vec![], "flipped")
        };
        let mut y = g.node("Relu", vec![y], vec![], "relu");
        if extra == "second reader" {
            y = g.node("Add", vec![y, "x".into()], vec![], "with_x");
        }
        g.node_into("Identity", vec![y], vec![], "y");
        g.finish("normalizer", 13, vec![value_info("x", FLOAT, &[-1, 7])], outputs, "test")
    }

    /// The model's outputs at `rows` rows, with or without the rewrite, and how many chains it
    /// replaced.
    fn run(model: &tract_onnx::pb::ModelProto, rows: usize, rewrite: bool) -> TractResult<(Vec<Vec<f32>>, usize)> {
        // Values around the clip's bounds and beyond, and a NaN.
        let mut x: Vec<f32> = (0..rows * 7).map(|k| (k % 23) as f32 / 4.0 - 2.75).collect();
        x[3] = f32::NAN;
        run_rewritten(model, &Tensor::from_shape(&[rows, 7], &x)?, |m| if rewrite { speed_up_input_arithmetic(m) } else { Ok(0) })
    }

    /// A normalizer chain becomes one op with tract's values bit for bit (the clip's bounds,
    /// a NaN, a constant on either side, 1 to 70 rows); chains of scalars alone, inputs with
    /// two readers, and values the graph returns stay tract's.
    #[test]
    fn input_arithmetic_gives_tracts_values_bit_for_bit() {
        for (extra, expect_replaced) in [("", 1), ("scalars", 0), ("second reader", 0), ("output", 1)] {
            let model = normalizer(extra);
            for rows in [1, 5, 70] {
                let (tracts, _) = run(&model, rows, false).unwrap();
                let (ours, replaced) = run(&model, rows, true).unwrap();
                assert_eq!(replaced, expect_replaced, "{extra:?} at {rows} rows");
                let bits = |outputs: &Vec<Vec<f32>>| outputs.iter().map(|o| o.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>();
                assert_eq!(bits(&ours), bits(&tracts), "{extra:?} at {rows} rows");
            }
        }
    }
}
