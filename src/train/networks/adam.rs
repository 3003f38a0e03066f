//! Adam as `torch.optim.Adam` computes it (defaults: betas 0.9/0.999, eps 1e-8, no weight
//! decay), kept in our hands so that its moments and step count can be checkpointed by
//! variable name and restored on `--resume` (tch's optimizer does not expose its state).
//!
//! The moments of all variables live in two flat tensors and one step updates them with a
//! handful of whole-buffer operations: a policy has a few dozen small variables, and a few
//! hundred tiny tensor operations per step (a dozen per variable) cost more than the
//! arithmetic. The operations are element-wise, so every value is computed exactly as the
//! per-variable formula computes it. A small network's step (most of ML-Agents' shipped
//! configurations) runs in Rust on the tensors' memory instead: even a handful of libtorch
//! operations costs more than its arithmetic.

use super::to_weight;
use super::values::contiguous_slice;
use crate::checkpoint::{AdamState, ADAM_M_PREFIX, ADAM_V_PREFIX};
use crate::policy::Weights;
use tch::{nn, Tensor};

/// Up to this many trained values, a step runs in Rust ([`Adam::step_in_place`]); a larger
/// network's step is dominated by its arithmetic, which libtorch spreads over the cores.
const RUST_STEP_LIMIT: usize = 1 << 16;

/// A trainable variable and where its moments sit in the flat buffers.
struct Parameter {
    name: String,
    tensor: Tensor,
    offset: i64,
    numel: i64,
}

impl Parameter {
    /// The variable's part of a flat buffer, in its shape (a view: writes reach the buffer).
    fn part_of(&self, flat: &Tensor) -> Tensor {
        flat.narrow(0, self.offset, self.numel).view(self.tensor.size().as_slice())
    }
}

/// One Adam optimizer over trainable variables of a var store.
pub struct Adam {
    state: AdamState,
    /// Put before the variables' names in the moments' names (an optimizer of its own over
    /// variables another one also steps, as behavioral cloning's over the actor).
    moments_prefix: String,
    /// The trainable variables in name order.
    parameters: Vec<Parameter>,
    /// First and second moments of all variables, end to end.
    m: Tensor,
    v: Tensor,
}

impl Adam {
    /// An optimizer over every trainable variable of `vs`.
    pub fn new(vs: &nn::VarStore) -> Self {
        Self::over(vs, "", |_| true)
    }

    /// An optimizer over the trainable variables of `vs` whose names `keep` takes, its moments
    /// named `<moments_prefix>optimizer.m.<variable>`.
    pub fn over(vs: &nn::VarStore, moments_prefix: &str, keep: impl Fn(&str) -> bool) -> Self {
        let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().filter(|(name, t)| t.requires_grad() && keep(name)).collect();
        variables.sort_by(|a, b| a.0.cmp(&b.0));
        let mut offset = 0;
        let parameters: Vec<Parameter> = variables
            .into_iter()
            .map(|(name, tensor)| {
                let numel = tensor.numel() as i64;
                offset += numel;
                Parameter { name, tensor, offset: offset - numel, numel }
            })
            .collect();
        let zeros = || Tensor::zeros([offset], (tch::Kind::Float, vs.device()));
        Self { state: AdamState { step: 0, beta1: 0.9, beta2: 0.999, epsilon: 1e-8 }, moments_prefix: moments_prefix.into(), parameters, m: zeros(), v: zeros() }
    }

    /// Clears the gradients of every trainable variable.
    pub fn zero_grad(&mut self) {
        for p in &mut self.parameters {
            match contiguous_slice::<f32>(&p.tensor.grad()) {
                // SAFETY: a variable's gradient is its own buffer, and no other thread
                // touches it during an update.
                Some(grad) => unsafe { &mut *grad }.fill(0.0),
                None => p.tensor.zero_grad(),
            }
        }
    }

    /// One update with learning rate `lr` from the gradients in place. A variable without a
    /// gradient keeps its value and its moments (as torch skips it).
    pub fn step(&mut self, lr: f64) {
        self.state.step += 1;
        if !self.step_in_place(lr) {
            self.step_with_tensors(lr);
        }
    }

    /// [`Self::step`] with libtorch's operations on the flat buffers.
    fn step_with_tensors(&mut self, lr: f64) {
        tch::no_grad(|| {
            let gradients: Vec<Tensor> = self.parameters.iter().map(|p| p.tensor.grad()).collect();
            if gradients.iter().all(Tensor::defined) {
                let flat: Vec<Tensor> = gradients.iter().map(|g| g.reshape([-1])).collect();
                let update = self.moments_update(&self.m, &self.v, &Tensor::cat(&flat, 0), lr);
                let sizes: Vec<i64> = self.parameters.iter().map(|p| p.numel).collect();
                for (p, u) in self.parameters.iter_mut().zip(update.split_with_sizes(&sizes, 0)) {
                    let _ = p.tensor.g_sub_(&u.view(p.tensor.size().as_slice()));
                }
            } else {
                for (p, grad) in self.parameters.iter().zip(&gradients).filter(|(_, g)| g.defined()) {
                    let update = self.moments_update(&p.part_of(&self.m), &p.part_of(&self.v), grad, lr);
                    let _ = p.tensor.shallow_clone().g_sub_(&update);
                }
            }
        });
    }

    /// [`Self::step`] in Rust, on the tensors' memory: the same element-wise formula in the
    /// same float32 arithmetic, without the few dozen libtorch operations (a few µs of
    /// dispatch each) that cost a small network more than its arithmetic. False, with
    /// nothing changed, when a tensor is not a contiguous float32 CPU tensor.
    fn step_in_place(&mut self, lr: f64) -> bool {
        if self.m.numel() > RUST_STEP_LIMIT {
            return false;
        }
        let (Some(m), Some(v)) = (contiguous_slice::<f32>(&self.m), contiguous_slice::<f32>(&self.v)) else { return false };
        let mut parts = Vec::with_capacity(self.parameters.len());
        for p in &self.parameters {
            let grad = p.tensor.grad();
            if !grad.defined() {
                // No gradient: the variable keeps its value and its moments (as torch skips it).
                continue;
            }
            match (contiguous_slice::<f32>(&p.tensor), contiguous_slice::<f32>(&grad)) {
                (Some(values), Some(gradient)) if values.len() == p.numel as usize && gradient.len() == values.len() => parts.push((p.offset as usize, values, gradient, grad)),
                _ => return false,
            }
        }
        let AdamState { beta1, beta2, epsilon, step } = self.state;
        let (correction1, correction2) = (1.0 - beta1.powi(step as i32), 1.0 - beta2.powi(step as i32));
        // The scalars as libtorch applies them to float32 tensors.
        let (b1, one_minus_b1, b2, one_minus_b2) = (beta1 as f32, (1.0 - beta1) as f32, beta2 as f32, (1.0 - beta2) as f32);
        let (sqrt_correction2, eps, step_size) = (correction2.sqrt() as f32, epsilon as f32, (lr / correction1) as f32);
        // SAFETY: the moments are this optimizer's own buffers; the variables and their
        // gradients (kept alive in `parts`) are not touched by another thread during an update.
        let (m, v) = unsafe { (&mut *m, &mut *v) };
        for (offset, values, gradient, _alive) in parts {
            let (values, gradient) = unsafe { (&mut *values, &*gradient) };
            let (m, v) = (&mut m[offset..offset + values.len()], &mut v[offset..offset + values.len()]);
            for k in 0..values.len() {
                let g = gradient[k];
                m[k] = m[k] * b1 + g * one_minus_b1;
                v[k] = v[k] * b2 + g * g * one_minus_b2;
                let denominator = v[k].sqrt() / sqrt_correction2 + eps;
                values[k] -= m[k] / denominator * step_size;
            }
        }
        true
    }

    /// Advances the moments `m`, `v` (in place) by the gradient `grad` and returns the step
    /// to subtract from the variable (after `self.state.step` steps).
    fn moments_update(&self, m: &Tensor, v: &Tensor, grad: &Tensor, lr: f64) -> Tensor {
        let AdamState { beta1, beta2, epsilon, step } = self.state;
        let (correction1, correction2) = (1.0 - beta1.powi(step as i32), 1.0 - beta2.powi(step as i32));
        let _ = m.shallow_clone().g_mul_scalar_(beta1);
        let _ = m.shallow_clone().g_add_(&(grad * (1.0 - beta1)));
        let _ = v.shallow_clone().g_mul_scalar_(beta2);
        let _ = v.shallow_clone().g_add_(&(grad * grad * (1.0 - beta2)));
        let denominator = v.sqrt() / correction2.sqrt() + epsilon;
        m / denominator * (lr / correction1)
    }

    /// The step count and hyperparameters (for the checkpoint description).
    pub fn state(&self) -> &AdamState {
        &self.state
    }

    /// The moments as named tensors (`optimizer.m.<var>`, `optimizer.v.<var>`).
    pub fn moments(&self) -> Weights {
        let mut out = Weights::default();
        for p in &self.parameters {
            out.0.insert(format!("{}{ADAM_M_PREFIX}{}", self.moments_prefix, p.name), to_weight(&p.part_of(&self.m)));
            out.0.insert(format!("{}{ADAM_V_PREFIX}{}", self.moments_prefix, p.name), to_weight(&p.part_of(&self.v)));
        }
        out
    }

    /// Restores moments and step count; variables missing from `tensors` keep fresh moments
    /// (reported, as torch reports missing keys).
    pub fn restore(&mut self, state: &AdamState, tensors: &Weights) {
        self.state = state.clone();
        for p in &self.parameters {
            for (flat, prefix) in [(&self.m, ADAM_M_PREFIX), (&self.v, ADAM_V_PREFIX)] {
                let mut target = p.part_of(flat);
                match tensors.0.get(&format!("{}{prefix}{}", self.moments_prefix, p.name)) {
                    Some(w) if w.shape.iter().map(|d| *d as i64).collect::<Vec<_>>() == target.size() => {
                        tch::no_grad(|| target.copy_(&Tensor::from_slice(&w.data).reshape(target.size())));
                    }
                    _ => log::warn!("optimizer state for {} is missing or has another shape; starting it fresh", p.name),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// torch.optim.Adam's formula, one value at a time, after `steps` steps of gradient `g`.
    fn reference(start: f32, g: f32, steps: i32, lr: f64) -> f32 {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
        let (mut x, mut m, mut v) = (start as f64, 0.0, 0.0);
        for t in 1..=steps {
            m = b1 * m + (1.0 - b1) * g as f64;
            v = b2 * v + (1.0 - b2) * (g as f64).powi(2);
            let denominator = v.sqrt() / (1.0 - b2.powi(t)).sqrt() + eps;
            x -= lr / (1.0 - b1.powi(t)) * m / denominator;
        }
        x as f32
    }

    /// Two steps of a loss `sum(used * factors)` (+ `sum(other)` when `other_in_loss`).
    fn two_steps(other_in_loss: bool) -> (Adam, Tensor, Tensor) {
        let vs = nn::VarStore::new(Device::Cpu);
        let used = vs.root().var("used", &[3], nn::Init::Const(0.5));
        let other = vs.root().var("unused", &[2], nn::Init::Const(-1.0));
        let factors = Tensor::from_slice(&[1.0f32, -2.0, 0.25]);
        let mut adam = Adam::new(&vs);
        for _ in 0..2 {
            adam.zero_grad();
            let mut loss = (&used * &factors).sum(Kind::Float);
            if other_in_loss {
                loss = loss + other.sum(Kind::Float);
            }
            loss.backward();
            adam.step(0.1);
        }
        (adam, used, other)
    }

    fn assert_follows_torch(variable: &Tensor, start: f32, gradients: &[f32]) {
        let values = Vec::<f32>::try_from(variable).unwrap();
        for (value, gradient) in values.iter().zip(gradients) {
            let expected = reference(start, *gradient, 2, 0.1);
            assert!((value - expected).abs() <= 1e-6, "{value} vs {expected}");
        }
    }

    /// The step in Rust and the step with libtorch's operations agree on the variables and
    /// on both moments over a few steps with different gradients, to a few units in the
    /// last place: libtorch's float32 square root (a vector-math routine) is not always
    /// correctly rounded, Rust's is; every other operation is the same IEEE operation.
    #[test]
    fn the_step_in_rust_is_the_step_with_tensors() {
        let run = |in_rust: bool| {
            // Varied values, the same in both runs (the tests share libtorch's generator).
            let varied = |n: usize, seed: f32| Tensor::from_slice(&(0..n).map(|k| ((k as f32 + seed) * 0.731).sin() * 1.7).collect::<Vec<f32>>());
            let vs = nn::VarStore::new(Device::Cpu);
            let x = vs.root().var_copy("x", &varied(64, 0.0));
            let y = vs.root().var_copy("y", &varied(24, 5.0).reshape([8, 3]));
            let scale = varied(64, 9.0);
            let mut adam = Adam::new(&vs);
            for k in 0..5 {
                adam.zero_grad();
                ((&x * &x * &scale).sum(Kind::Float) + (&y * 0.1 * (k as f64 - 1.0)).exp().sum(Kind::Float)).backward();
                adam.state.step += 1;
                if in_rust {
                    assert!(adam.step_in_place(0.01));
                } else {
                    adam.step_with_tensors(0.01);
                }
            }
            let read = |t: &Tensor| Vec::<f32>::try_from(t).unwrap();
            [read(&x), read(&y.flatten(0, -1)), read(&adam.m), read(&adam.v)]
        };
        for (rust, torch) in run(true).iter().zip(run(false)) {
            assert_eq!(rust.len(), torch.len());
            for (a, b) in rust.iter().zip(&torch) {
                assert!((a - b).abs() <= 4.0 * f32::EPSILON * a.abs().max(b.abs()), "{a} vs {b}");
            }
        }
    }

    /// Every variable with a gradient (the flat path) moves as torch's formula says.
    #[test]
    fn steps_follow_torch() {
        let (_, used, other) = two_steps(true);
        assert_follows_torch(&used, 0.5, &[1.0, -2.0, 0.25]);
        assert_follows_torch(&other, -1.0, &[1.0, 1.0]);
    }

    /// A variable the loss does not use keeps its value and zero moments while the others
    /// move as torch's formula says; the moments come back by variable name.
    #[test]
    fn steps_skip_variables_without_gradient() {
        let (adam, used, unused) = two_steps(false);
        assert_follows_torch(&used, 0.5, &[1.0, -2.0, 0.25]);
        assert_eq!(Vec::<f32>::try_from(&unused).unwrap(), vec![-1.0, -1.0]);
        let moments = adam.moments();
        assert_eq!(moments.0[&format!("{ADAM_V_PREFIX}unused")].data, vec![0.0, 0.0]);
        assert!(moments.0[&format!("{ADAM_M_PREFIX}used")].data.iter().all(|m| *m != 0.0));
        assert_eq!(adam.state().step, 2);
    }
}
