//! Turning a policy's outputs into actions as Unity's inference does: continuous actions from
//! the model (clipped to [-1, 1]); discrete ones as branch indices (model API 3), or sampled
//! from each branch's log-probabilities (model API 2 and `.nn`; argmax when deterministic).

use crate::spec::model;
use crate::spec::ActionSpec;
use super::super::{NamedTensors, TensorData};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How to read a model's action outputs.
pub(super) struct ActionDecoder {
    pub action_spec: ActionSpec,
    /// The model's `version_number` (3: discrete outputs are branch indices).
    pub version: Option<f32>,
    pub deterministic: bool,
}

impl ActionDecoder {
    /// The outputs [`Self::continuous`] and [`Self::discrete`] read from a model with these
    /// outputs.
    pub fn outputs_read(&self, available: &[String]) -> Vec<&'static str> {
        let mut read = vec![];
        let mut pick = |deterministic: &'static str, sampled: &'static str| {
            let preferred = if self.deterministic { Some(deterministic) } else { None };
            if let Some(name) = preferred.into_iter().chain([sampled, model::ACTION]).find(|k| available.iter().any(|a| a == k)) {
                read.push(name);
            }
        };
        if self.action_spec.continuous_size > 0 {
            pick(model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::CONTINUOUS_ACTIONS);
        }
        if !self.action_spec.discrete_branches.is_empty() {
            pick(model::DETERMINISTIC_DISCRETE_ACTIONS, model::DISCRETE_ACTIONS);
        }
        read
    }

    /// The action output to read, with its width per agent: the deterministic one (when
    /// deterministic), else the sampled one, else the legacy `action`.
    fn output<'a>(&self, outputs: &'a NamedTensors, n: usize, deterministic: &'static str, sampled: &'static str, kind: &str) -> Result<(&'static str, &'a TensorData, usize), String> {
        let preferred = if self.deterministic { Some(deterministic) } else { None };
        let (name, t) = preferred
            .into_iter()
            .chain([sampled, model::ACTION])
            .find_map(|k| outputs.get(k).map(|t| (k, t)))
            .ok_or_else(|| format!("no {kind} action output"))?;
        Ok((name, t, t.data.len() / n.max(1)))
    }

    /// The continuous actions of `n` agents (empty when the behavior has none).
    pub fn continuous(&self, outputs: &NamedTensors, n: usize) -> Result<Vec<f32>, String> {
        let c = self.action_spec.continuous_size;
        if c == 0 {
            return Ok(vec![]);
        }
        let (name, t, width) = self.output(outputs, n, model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::CONTINUOUS_ACTIONS, "continuous")?;
        if width < c {
            return Err(format!("output {name} has {width} values per agent, the behavior needs {c} continuous actions"));
        }
        Ok((0..n).flat_map(|a| t.data[a * width..a * width + c].iter().map(|v| v.clamp(-1.0, 1.0))).collect())
    }

    /// The discrete actions of `n` agents, one index per branch (empty when the behavior has
    /// no branch); log-probabilities are sampled from `rng`.
    pub fn discrete(&self, outputs: &NamedTensors, n: usize, rng: &mut ChaCha8Rng) -> Result<Vec<i32>, String> {
        let branches = &self.action_spec.discrete_branches;
        if branches.is_empty() {
            return Ok(vec![]);
        }
        let (name, t, width) = self.output(outputs, n, model::DETERMINISTIC_DISCRETE_ACTIONS, model::DISCRETE_ACTIONS, "discrete")?;
        let total: usize = branches.iter().sum();
        // Version 3 outputs branch indices; version 2 and .nn output log-probabilities.
        let indices = self.version == Some(3.0) && width == branches.len();
        let offset = if name == model::ACTION && self.action_spec.continuous_size > 0 { self.action_spec.continuous_size } else { 0 };
        if !indices && width < offset + total {
            return Err(format!("output {name} has {width} values per agent, the branches need {total}"));
        }
        let mut discrete = Vec::with_capacity(n * branches.len());
        for a in 0..n {
            let row = &t.data[a * width..(a + 1) * width];
            if indices {
                discrete.extend(branches.iter().enumerate().map(|(b, size)| row[b].round().clamp(0.0, (*size - 1) as f32) as i32));
                continue;
            }
            for logits in split_branches(&row[offset..], branches) {
                discrete.push(if self.deterministic { argmax(logits) as i32 } else { sample(logits, rng) });
            }
        }
        Ok(discrete)
    }
}

/// Index of the largest value (the first of equals).
pub(in crate::run) fn argmax(values: &[f32]) -> usize {
    values.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, v)| if *v > best.1 { (i, *v) } else { best }).0
}

/// One row of per-branch values laid side by side (`.nn` and model API 2 log-probabilities)
/// as one slice per branch; a short row gives short or empty slices.
pub(in crate::run) fn split_branches<'a>(row: &'a [f32], branches: &'a [usize]) -> impl Iterator<Item = &'a [f32]> + 'a {
    branches.iter().scan(0usize, move |start, size| {
        let slice = &row[(*start).min(row.len())..(*start + size).min(row.len())];
        *start += size;
        Some(slice)
    })
}

/// Samples a class from log-probabilities as Unity does (exp(x - max), cumulative).
fn sample(log_probs: &[f32], rng: &mut ChaCha8Rng) -> i32 {
    let max = log_probs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f32> = log_probs.iter().map(|l| (l - max).exp()).collect();
    let total: f32 = weights.iter().sum();
    let mut pick = rng.random::<f32>() * total;
    for (i, w) in weights.iter().enumerate() {
        if pick < *w {
            return i as i32;
        }
        pick -= w;
    }
    (weights.len() - 1) as i32
}
