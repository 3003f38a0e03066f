//! Plans: tract-onnx with the engine's ops, an optimized plan for one set of input shapes
//! with the plan rewrites, its run, and tract's failures as messages.

use super::rewrite;
use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::*;

/// A running state of an optimized plan, kept between runs: no per-run allocation, and
/// random ops continue their stream instead of restarting it.
pub type PlanState = tract_onnx::tract_core::model::TypedSimpleState;

/// tract-onnx with the ops the rewrites write ([`super::kernels::exact_ops`],
/// [`rewrite::layout_ops`], [`rewrite::lstm_step`]) and the stable `LogSoftmax`
/// ([`rewrite::log_softmax`]).
pub fn framework() -> tract_onnx::Onnx {
    let mut framework = tract_onnx::onnx();
    super::kernels::exact_ops::register(&mut framework.op_register);
    rewrite::layout_ops::register(&mut framework.op_register);
    rewrite::lstm_step::register(&mut framework.op_register);
    rewrite::log_softmax::register(&mut framework.op_register);
    framework
}

/// The optimized plan of a graph [`rewrite::rewrite_graph`] prepared, for float inputs of
/// `shapes` (in the graph's input order): tract's, with the plan rewrites before and after
/// its optimisation. A leading dimension over 1 of the first input runs convolutions image
/// by image ([`rewrite::conv_batch`]).
pub fn build_plan(proto: &ModelProto, shapes: &[Vec<usize>]) -> Result<PlanState, String> {
    contain_tract_panics(|| {
        let framework = framework();
        let read = |proto: &ModelProto| -> TractResult<InferenceModel> {
            let mut model = framework.model_for_proto_model(proto)?;
            for (i, shape) in shapes.iter().enumerate() {
                model.set_input_fact(i, InferenceFact::dt_shape(f32::datum_type(), shape.clone()))?;
            }
            Ok(model)
        };
        let mut model = read(proto)?;
        let leading = shapes.first().and_then(|s| s.first()).copied().unwrap_or(1);
        if leading > 1 {
            if let Some(rewritten) = rewrite::conv_batch::per_image_convolutions(proto, &model) {
                model = read(&rewritten)?;
            }
        }
        let mut plan = model.into_typed()?.into_decluttered()?;
        rewrite::before_optimizing(&mut plan)?;
        let mut plan = plan.into_optimized()?;
        rewrite::after_optimizing(&mut plan)?;
        PlanState::new(&plan.into_runnable()?)
    })
}

/// Runs a plan on `inputs` ([`super::vector_state::run_plan`]), tract's failures as one
/// message ([`contain_tract_panics`]).
pub fn run_plan(state: &mut PlanState, inputs: TVec<TValue>) -> Result<TVec<TValue>, String> {
    contain_tract_panics(|| super::vector_state::run_plan(state, inputs))
}

/// Runs tract, turning its errors and its panics (tract 0.23 still unwraps on some malformed
/// graphs, e.g. a Reduce axis outside the rank) into one message.
pub fn contain_tract_panics<T>(f: impl FnOnce() -> TractResult<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(|e| format!("{e:#}")),
        Err(payload) => {
            let message = payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(format!("tract failed on this model (an internal error: {}); the model is malformed or uses an op in a way tract does not support", message.unwrap_or_default()))
        }
    }
}
