//! The inference engine: it takes a tract model (an ONNX graph) and returns a plan that
//! computes the same numbers faster.
//!
//! It knows ONNX and tract, not ML-Agents: no tensor name, no behavior spec. The runner
//! ([`crate::run`]) decides what a policy's graph is (its inputs, its sampling, its
//! metadata) and comes through one door, the functions this module exports:
//!
//! - [`rewrite_graph`]: rewrites made on the protobuf before tract reads it ([`rewrite`]):
//!   the activations tract approximates as exact ops, recurrent nodes as ONNX defines them,
//!   one-step LSTMs as one product and a gate step, NHWC image inputs transposed while copied
//!   in, intermediate shape annotations dropped.
//! - [`build_plan`]: tract's optimized plan for one set of input shapes, with the plan
//!   rewrites that put dense layers, convolutions, input arithmetic, short softmaxes and
//!   arg-maxes on our own ops and [`kernels`].
//! - [`run_plan`]: runs a plan, clearing the wide vector registers tract's kernels leave
//!   dirty ([`vector_state`]); [`contain_tract_panics`] turns tract's errors and panics into
//!   one message.
//! - [`allocator::keep_freed_memory`]: the memory policy of a process that runs plans.

pub mod allocator;
mod kernels;
mod plan;
mod rewrite;
mod vector_state;

pub use plan::{build_plan, contain_tract_panics, framework, run_plan, PlanState};
pub use rewrite::layout_ops::{caller_dims, nchw_tensor};
pub use rewrite::rewrite_graph;
