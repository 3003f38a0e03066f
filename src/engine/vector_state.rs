//! Leaves the vector registers clean after each step of a tract plan.
//!
//! tract 0.23's assembly matrix kernels (AVX-512 and FMA alike) return without `vzeroupper`,
//! so the upper halves of the vector registers stay "dirty" after every matrix product. On
//! Intel cores, code compiled for the x86-64 baseline (legacy SSE: most of tract's own Rust
//! ops, ours, the standard library's scalar math) then runs with a false dependency or a
//! transition on every SSE instruction. Measured on an AVX-512 Xeon: the softmax of the
//! recurrent benchmark network, 64 rows of 5 values, took about 110 µs after a matrix kernel
//! and 2 µs after `vzeroupper`. AMD cores have no such penalty; `vzeroupper` costs them a
//! cycle.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::model::TypedSimpleState;

/// Runs a plan as `state.run` does, clearing the upper vector state after every node.
pub fn run_plan(state: &mut TypedSimpleState, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
    state.run_plan_with_eval(inputs, |context, op_state, node, inputs| {
        let outputs = tract_onnx::tract_core::plan::eval(context, op_state, node, inputs);
        clear_upper_vector_state();
        outputs
    })
}

/// `vzeroupper` where the CPU has AVX (a no-op elsewhere): what a compiler emits at the end
/// of a function that used the wide registers, and tract's kernels do not.
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present (checked above).
        unsafe { zero_upper() }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn zero_upper() {
    std::arch::x86_64::_mm256_zeroupper();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{attr_int, value_info, GraphBuilder, FLOAT};

    /// A matrix product (tract's assembly kernel) then a softmax: the plan run node by node
    /// with the registers cleared gives tract's own run, value for value.
    #[test]
    fn a_plan_run_with_clean_registers_gives_tracts_own_outputs() {
        let mut g = GraphBuilder::default();
        let w = g.constant("W", &[24, 5], (0..120).map(|k| (k % 13) as f32 / 13.0 - 0.4).collect());
        let logits = g.node("MatMul", vec!["x".into(), w], vec![], "logits");
        g.node_into("Softmax", vec![logits], vec![attr_int("axis", 1)], "y");
        let proto = g.finish("clean", 13, vec![value_info("x", FLOAT, &[16, 24])], vec![value_info("y", FLOAT, &[])], "test");
        let plan = tract_onnx::onnx().model_for_proto_model(&proto).unwrap().into_optimized().unwrap().into_runnable().unwrap();
        let x = Tensor::from_shape(&[16, 24], &(0..384).map(|k| ((k * 37) % 101) as f32 / 50.0 - 1.0).collect::<Vec<f32>>()).unwrap();
        let tracts = plan.run(tvec![x.clone().into_tvalue()]).unwrap();
        let mut state = TypedSimpleState::new(&plan).unwrap();
        let ours = run_plan(&mut state, tvec![x.into_tvalue()]).unwrap();
        assert_eq!(tracts[0].try_as_plain_ram().unwrap().as_slice::<f32>().unwrap(), ours[0].try_as_plain_ram().unwrap().as_slice::<f32>().unwrap());
    }
}
