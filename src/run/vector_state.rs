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
