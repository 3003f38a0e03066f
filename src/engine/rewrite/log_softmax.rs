//! ONNX `LogSoftmax` as `x - max - ln Σ exp(x - max)`, onnxruntime's formula.
//!
//! tract-onnx 0.23 reads `LogSoftmax` as a softmax followed by a logarithm: a probability
//! under the smallest float32 (a log-probability under about -103) became `-inf`, and those
//! between -88 and -103 lost their digits to subnormals (bad-input report of 2 December, S3).
//! This reader replaces tract's: it wires tract's own softmax kernel in its log-softmax kind,
//! which subtracts the log of the sum instead of dividing (the short-row softmax,
//! [`super::short_softmax`], takes that kind the same way). The axis rules are ONNX's: before
//! opset 13 the input is flattened from `axis` (default 1) to the end; from 13 on it is the
//! one axis `axis` (default -1).

use tract_onnx::model::{OnnxOpRegister, ParsingContext};
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::ops::nn::{Softmax, SoftmaxKind};
use tract_onnx::tract_hir::internal::*;

/// Replaces tract-onnx's `LogSoftmax` reader in an op register.
pub fn register(register: &mut OnnxOpRegister) {
    register.insert("LogSoftmax", log_softmax);
}

fn log_softmax(ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis: Option<isize> = node.get_attr_opt("axis")?;
    let flattened = ctx.onnx_operator_set_version < 13;
    let axis = axis.unwrap_or(if flattened { 1 } else { -1 });
    Ok((expand(StableLogSoftmax { axis, flattened }), vec![]))
}

/// `LogSoftmax` over `axis` (and every axis after it when `flattened`).
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct StableLogSoftmax {
    axis: isize,
    flattened: bool,
}

impl Expansion for StableLogSoftmax {
    fn name(&self) -> StaticName {
        "LogSoftmax".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(&'s self, s: &mut Solver<'r>, inputs: &'p [TensorProxy], outputs: &'p [TensorProxy]) -> InferenceResult {
        check_input_arity(inputs, 1)?;
        check_output_arity(outputs, 1)?;
        s.equals(&outputs[0].datum_type, &inputs[0].datum_type)?;
        s.equals(&outputs[0].shape, &inputs[0].shape)?;
        Ok(())
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        let fact = model.outlet_fact(inputs[0])?.clone();
        ensure!(fact.datum_type.is_float(), "LogSoftmax {name} takes floats, not {:?}", fact.datum_type);
        let rank = fact.rank() as isize;
        let axis = if self.axis < 0 { rank + self.axis } else { self.axis };
        ensure!((0..rank).contains(&axis), "LogSoftmax {name}: axis {} is outside rank {rank}", self.axis);
        let axes: TVec<usize> = if self.flattened { (axis as usize..rank as usize).collect() } else { tvec!(axis as usize) };
        model.wire_node(name, Softmax { axes, quant_output_dt: None, kind: SoftmaxKind::LogSoftmax }, inputs)
    }
}

#[cfg(test)]
mod tests {
    use crate::onnx::{attr_int, value_info, GraphBuilder, FLOAT};
    use tract_onnx::prelude::*;

    /// LogSoftmax of `rows` (each `width` long) in a model of `opset`, on the engine's plan.
    fn run(rows: &[Vec<f32>], opset: i64, axis: Option<i64>) -> Vec<f32> {
        let width = rows[0].len() as i64;
        let mut graph = GraphBuilder::default();
        let attributes = axis.map(|a| vec![attr_int("axis", a)]).unwrap_or_default();
        graph.node_into("LogSoftmax", vec!["x".into()], attributes, "y");
        let model = graph.finish("log_softmax", opset, vec![value_info("x", FLOAT, &[-1, width])], vec![value_info("y", FLOAT, &[-1, width])], "test");
        let shape = vec![rows.len(), width as usize];
        let mut plan = crate::engine::build_plan(&model, std::slice::from_ref(&shape)).unwrap();
        let input = Tensor::from_shape(&shape, &rows.concat()).unwrap();
        let outputs = crate::engine::run_plan(&mut plan, tvec![input.into_tvalue()]).unwrap();
        outputs[0].try_as_plain_ram().unwrap().as_slice::<f32>().unwrap().to_vec()
    }

    /// log softmax in float64.
    fn reference(row: &[f32]) -> Vec<f64> {
        let max = row.iter().fold(f64::MIN, |m, v| m.max(*v as f64));
        let sum: f64 = row.iter().map(|v| (*v as f64 - max).exp()).sum();
        row.iter().map(|v| *v as f64 - max - sum.ln()).collect()
    }

    #[test]
    fn far_tails_keep_their_digits_instead_of_becoming_minus_infinity() {
        // The report's row: -60 - 60 = -120, where log(softmax) gave -inf.
        let mut spread = vec![60.0, -60.0, -45.0, 0.0];
        spread.extend((0..29).map(|k| k as f32 * -3.9));
        let rows = vec![spread, vec![1.0, 2.0, 3.0, 4.0].into_iter().chain(std::iter::repeat_n(-100.0, 29)).collect(), (0..33).map(|k| k as f32 * 7.5 - 120.0).collect()];
        for opset in [9, 13] {
            for axis in [None, Some(1)] {
                let computed = run(&rows, opset, axis);
                for (row, got) in rows.iter().zip(computed.chunks(rows[0].len())) {
                    for (want, got) in reference(row).iter().zip(got) {
                        assert!(got.is_finite(), "opset {opset}: {got} for {want}");
                        assert!((*got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "opset {opset}: {got} vs {want}");
                    }
                }
            }
        }
    }
}
