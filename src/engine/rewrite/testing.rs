//! What the tests of the rewrites of a decluttered model ([`super::dense`],
//! [`super::dense_conv`], [`super::fused_activation`], [`super::input_arithmetic`]) share:
//! a model's plan run with or without a rewrite.

use tract_onnx::pb::ModelProto;
use tract_onnx::prelude::*;

/// `model`'s outputs on `input` (its input fact set to the input's shape), read with the
/// runner's framework, decluttered, passed to `rewrite`, optimised and run; with what
/// `rewrite` returned (how many nodes it replaced, or what it counted).
pub fn run_rewritten(model: &ModelProto, input: &Tensor, rewrite: impl FnOnce(&mut TypedModel) -> TractResult<usize>) -> TractResult<(Vec<Vec<f32>>, usize)> {
    let mut inference = crate::engine::framework().model_for_proto_model(model)?;
    inference.set_input_fact(0, InferenceFact::dt_shape(input.datum_type(), input.shape()))?;
    let mut typed = inference.into_typed()?.into_decluttered()?;
    let counted = rewrite(&mut typed)?;
    let outputs = typed.into_optimized()?.into_runnable()?.run(tvec![input.clone().into_tvalue()])?;
    let outputs = outputs.iter().map(|o| Ok(o.try_as_plain_ram()?.as_slice::<f32>()?.to_vec())).collect::<TractResult<_>>()?;
    Ok((outputs, counted))
}
