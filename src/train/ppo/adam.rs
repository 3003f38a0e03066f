//! Adam as `torch.optim.Adam` computes it (defaults: betas 0.9/0.999, eps 1e-8, no weight
//! decay), kept in our hands so that its moments and step count can be checkpointed by
//! variable name and restored on `--resume` (tch's optimizer does not expose its state).

use super::networks::to_weight;
use crate::policy::Weights;
use crate::checkpoint::{AdamState, ADAM_M_PREFIX, ADAM_V_PREFIX};
use std::collections::BTreeMap;
use tch::{nn, Tensor};

/// One Adam optimizer over every trainable variable of a var store.
pub struct Adam {
    state: AdamState,
    /// First and second moments by variable name.
    moments: BTreeMap<String, (Tensor, Tensor)>,
}

impl Adam {
    pub fn new(vs: &nn::VarStore) -> Self {
        let moments = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(name, t)| (name, (t.zeros_like().detach(), t.zeros_like().detach())))
            .collect();
        Self { state: AdamState { step: 0, beta1: 0.9, beta2: 0.999, epsilon: 1e-8 }, moments }
    }

    /// Clears the gradients of every trainable variable.
    pub fn zero_grad(&self, vs: &nn::VarStore) {
        for (name, mut t) in vs.variables() {
            if self.moments.contains_key(&name) {
                t.zero_grad();
            }
        }
    }

    /// One update with learning rate `lr` from the gradients in place.
    pub fn step(&mut self, vs: &nn::VarStore, lr: f64) {
        let AdamState { beta1, beta2, epsilon, .. } = self.state;
        self.state.step += 1;
        let t = self.state.step as i32;
        let (correction1, correction2) = (1.0 - beta1.powi(t), 1.0 - beta2.powi(t));
        tch::no_grad(|| {
            for (name, mut param) in vs.variables() {
                let Some((m, v)) = self.moments.get_mut(&name) else { continue };
                let grad = param.grad();
                if !grad.defined() {
                    continue;
                }
                let _ = m.g_mul_scalar_(beta1);
                let _ = m.g_add_(&(&grad * (1.0 - beta1)));
                let _ = v.g_mul_scalar_(beta2);
                let _ = v.g_add_(&(&grad * &grad * (1.0 - beta2)));
                let denominator = v.sqrt() / correction2.sqrt() + epsilon;
                let update = &*m / denominator * (lr / correction1);
                let _ = param.g_sub_(&update);
            }
        });
    }

    /// The step count and hyperparameters (for the checkpoint description).
    pub fn state(&self) -> &AdamState {
        &self.state
    }

    /// The moments as named tensors (`optimizer.m.<var>`, `optimizer.v.<var>`).
    pub fn moments(&self) -> Weights {
        let mut out = Weights::default();
        for (name, (m, v)) in &self.moments {
            out.0.insert(format!("{ADAM_M_PREFIX}{name}"), to_weight(m));
            out.0.insert(format!("{ADAM_V_PREFIX}{name}"), to_weight(v));
        }
        out
    }

    /// Restores moments and step count; variables missing from `tensors` keep fresh moments
    /// (reported, as torch reports missing keys).
    pub fn restore(&mut self, state: &AdamState, tensors: &Weights) {
        self.state = state.clone();
        for (name, (m, v)) in self.moments.iter_mut() {
            for (target, prefix) in [(m, ADAM_M_PREFIX), (v, ADAM_V_PREFIX)] {
                match tensors.0.get(&format!("{prefix}{name}")) {
                    Some(w) if w.shape.iter().map(|d| *d as i64).collect::<Vec<_>>() == target.size() => {
                        tch::no_grad(|| target.copy_(&Tensor::from_slice(&w.data).reshape(target.size())));
                    }
                    _ => log::warn!("optimizer state for {name} is missing or has another shape; starting it fresh"),
                }
            }
        }
    }
}

