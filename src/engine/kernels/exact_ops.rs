//! The exact activations of [`crate::engine::rewrite::exact`] as tract element-wise ops: one node and one pass
//! over the data each, where the same formulas written with ONNX ops took four to twelve
//! nodes (every node is a pass over the tensor and a step of tract's plan loop; on a small
//! MLP the Swish alone was half of the plan's nodes).
//!
//! The formulas are those of [`crate::engine::rewrite::exact`]'s docs, with tract's vectorised `Exp` (accurate
//! to an ulp or two) and one rounded division. float32 runs them in chunks on the stack;
//! float64 uses the standard library's functions; float16 is computed in float32.

use tract_onnx::model::{OnnxOpRegister, ParsingContext};
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::ops::element_wise::ElementWiseMiniOp;
use tract_onnx::tract_core::tract_linalg::element_wise::ElementWise;
use tract_onnx::tract_core::tract_linalg::Func;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::element_wise::ElementWiseOp as HirElementWiseOp;

/// The op types the rewrite writes (a prefix no ONNX domain uses).
pub const SWISH: &str = "MlAgentsExactSwish";
pub const SIGMOID: &str = "MlAgentsExactSigmoid";
pub const TANH: &str = "MlAgentsExactTanh";
pub const ELU: &str = "MlAgentsExactElu";
/// `alpha x + beta` ([`crate::engine::rewrite::recurrent`]'s Affine and ScaledTanh): one op whose output tract
/// never folds into a constant, which a `Mul` by a zero alpha became, and which tract's scans
/// then refused as a state.
pub const AFFINE: &str = "MlAgentsAffine";

/// Adds the exact activations to a tract-onnx op register.
pub fn register(register: &mut OnnxOpRegister) {
    register.insert(SWISH, |_, _| Ok((wrap(Activation::Swish), vec![])));
    register.insert(SIGMOID, |_, _| Ok((wrap(Activation::Sigmoid), vec![])));
    register.insert(TANH, |_, _| Ok((wrap(Activation::Tanh), vec![])));
    register.insert(ELU, elu);
    register.insert(AFFINE, affine);
}

fn affine(_: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let alpha: f32 = node.get_attr_opt("alpha")?.unwrap_or(1.0);
    let beta: f32 = node.get_attr_opt("beta")?.unwrap_or(0.0);
    Ok((wrap(Activation::Affine { alpha_bits: alpha.to_bits(), beta_bits: beta.to_bits() }), vec![]))
}

fn elu(_: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let alpha: f32 = node.get_attr_opt("alpha")?.unwrap_or(1.0);
    Ok((wrap(Activation::Elu { alpha_bits: alpha.to_bits() }), vec![]))
}

fn wrap(activation: Activation) -> Box<dyn InferenceOp> {
    expand(HirElementWiseOp(Box::new(activation)))
}

/// One exact activation (Elu's alpha kept as bits, so that the op compares equal to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Activation {
    Swish,
    Sigmoid,
    Tanh,
    Elu { alpha_bits: u32 },
    Affine { alpha_bits: u32, beta_bits: u32 },
}

/// Values computed per step of the float32 path (two buffers of this size on the stack; a
/// multiple of the 32 values tract's exp and tanh kernels take per step).
const CHUNK: usize = 256;

/// A chunk's buffer, aligned as tract's kernels want their data: they run an unaligned
/// slice's ends through a temporary copy (on 256 values, two extra kernel steps of 32).
#[repr(C, align(64))]
struct ChunkBuffer([f32; CHUNK]);

impl ChunkBuffer {
    fn zeroed() -> Self {
        Self([0.0; CHUNK])
    }
}

impl ElementWiseMiniOp for Activation {
    fn name(&self) -> String {
        match self {
            Activation::Swish => SWISH,
            Activation::Sigmoid => SIGMOID,
            Activation::Tanh => TANH,
            Activation::Elu { .. } => ELU,
            Activation::Affine { .. } => AFFINE,
        }
        .into()
    }

    fn eval_in_place(&self, t: &mut Tensor, _: Option<DatumType>) -> TractResult<()> {
        match t.datum_type() {
            DatumType::F32 => {
                let mut plain = t.try_as_plain_ram_mut()?;
                self.run_f32(plain.as_slice_mut::<f32>()?)
            }
            DatumType::F64 => {
                let mut plain = t.try_as_plain_ram_mut()?;
                plain.as_slice_mut::<f64>()?.iter_mut().for_each(|x| *x = self.value_f64(*x));
                Ok(())
            }
            DatumType::F16 => {
                let mut wide = t.cast_to::<f32>()?.into_owned();
                self.run_f32(wide.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?)?;
                *t = wide.cast_to_dt(DatumType::F16)?.into_owned();
                Ok(())
            }
            other => bail!("{} takes float tensors, not {other:?}", self.name()),
        }
    }
}

impl Activation {
    /// [`Self::run_body_f32`], with its own loops compiled for AVX2 where the CPU has it
    /// (the crate is built for baseline x86-64; tract's kernels pick their own).
    pub(crate) fn run_f32(&self, xs: &mut [f32]) -> TractResult<()> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { self.run_f32_avx2(xs) };
        }
        self.run_body_f32(xs)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_f32_avx2(&self, xs: &mut [f32]) -> TractResult<()> {
        self.run_body_f32(xs)
    }

    #[inline(always)]
    fn run_body_f32(&self, xs: &mut [f32]) -> TractResult<()> {
        // tract's kernels, looked up once per evaluation (not per chunk).
        let exp = Func::Exp.ew_f32()?;
        let tract_tanh = || Func::Tanh.ew_f32();
        let mut e = ChunkBuffer::zeroed();
        let e = &mut e.0;
        match *self {
            Activation::Swish | Activation::Sigmoid => {
                for chunk in xs.chunks_mut(CHUNK) {
                    let e = &mut e[..chunk.len()];
                    e.iter_mut().zip(chunk.iter()).for_each(|(e, x)| *e = -*x);
                    exp.run(e)?;
                    if *self == Activation::Swish {
                        chunk.iter_mut().zip(e.iter()).for_each(|(x, e)| *x /= 1.0 + *e);
                    } else {
                        chunk.iter_mut().zip(e.iter()).for_each(|(x, e)| *x = 1.0 / (1.0 + *e));
                    }
                }
            }
            Activation::Tanh => {
                let tract_tanh = tract_tanh()?;
                for chunk in xs.chunks_mut(CHUNK) {
                    tanh_f32(chunk, &mut e[..chunk.len()], &*tract_tanh, &*exp)?;
                }
            }
            Activation::Elu { alpha_bits } => {
                let alpha = f32::from_bits(alpha_bits);
                let tract_tanh = tract_tanh()?;
                let mut half = ChunkBuffer::zeroed();
                let half = &mut half.0;
                for chunk in xs.chunks_mut(CHUNK) {
                    let (e, half) = (&mut e[..chunk.len()], &mut half[..chunk.len()]);
                    half.iter_mut().zip(chunk.iter()).for_each(|(h, x)| *h = *x * 0.5);
                    tanh_f32(half, e, &*tract_tanh, &*exp)?;
                    e.copy_from_slice(chunk);
                    exp.run(e)?;
                    for ((x, tanh), e) in chunk.iter_mut().zip(half.iter()).zip(e.iter()) {
                        if *x < 0.0 {
                            *x = tanh * (*e + 1.0) * alpha;
                        }
                    }
                }
            }
            Activation::Affine { alpha_bits, beta_bits } => {
                let (alpha, beta) = (f32::from_bits(alpha_bits), f32::from_bits(beta_bits));
                xs.iter_mut().for_each(|x| *x = alpha * *x + beta);
            }
        }
        Ok(())
    }

    fn value_f64(&self, x: f64) -> f64 {
        match *self {
            Activation::Swish => x / (1.0 + (-x).exp()),
            Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Activation::Tanh => x.tanh(),
            Activation::Elu { alpha_bits } => {
                if x < 0.0 {
                    f32::from_bits(alpha_bits) as f64 * x.exp_m1()
                } else {
                    x
                }
            }
            Activation::Affine { alpha_bits, beta_bits } => f32::from_bits(alpha_bits) as f64 * x + f32::from_bits(beta_bits) as f64,
        }
    }
}

/// `tanh` in place: tract's where `|x| < 1` (accurate there), `sign(x) (1 - e) / (1 + e)`
/// with `e = exp(-2|x|)` elsewhere; `scratch` is as long as `xs`; `tract_tanh` and `exp` are
/// tract's kernels.
#[inline(always)]
fn tanh_f32(xs: &mut [f32], scratch: &mut [f32], tract_tanh: &dyn ElementWise<f32>, exp: &dyn ElementWise<f32>) -> TractResult<()> {
    let mut near = ChunkBuffer::zeroed();
    let near = &mut near.0[..xs.len()];
    near.copy_from_slice(xs);
    tract_tanh.run(near)?;
    scratch.iter_mut().zip(xs.iter()).for_each(|(e, x)| *e = -2.0 * x.abs());
    exp.run(scratch)?;
    for ((x, near), e) in xs.iter_mut().zip(near.iter()).zip(scratch.iter()) {
        *x = if x.abs() < 1.0 {
            *near
        } else {
            let magnitude = (1.0 - e) / (1.0 + e);
            if *x < 0.0 { -magnitude } else { magnitude }
        };
    }
    Ok(())
}
