//! The parity record of a checkpoint: recent decisions' inputs and what the training network
//! computes on them (deterministic actions, and sampled actions with recorded noise), so that
//! an export can prove it computes the same.

use crate::checkpoint::ROLLOUT_PREFIX;
use crate::policy::{PolicyDescription, WeightTensor, Weights};
use crate::spec::model::{self, ModelInput};
use crate::train::networks::Actor;
use rand::SeedableRng;
use std::collections::VecDeque;
use tch::Tensor;

/// How many recent decisions are kept for the parity record of a checkpoint.
pub const PARITY_ROWS: usize = 16;

/// One decision's inputs kept for the parity record.
pub struct RecentInput {
    pub observations: Vec<Vec<f32>>,
    /// 1 = allowed.
    pub mask: Vec<f32>,
    /// The memory the actor read (recurrent networks).
    pub memory: Vec<f32>,
}

/// The recent decisions' inputs and the training network's outputs on them: deterministic
/// actions, and actions sampled with recorded standard-normal noise (continuous) and uniform
/// draws (discrete), both seeded by `step`.
pub fn parity_record(actor: &Actor, description: &PolicyDescription, recent: &VecDeque<RecentInput>, step: u64) -> Weights {
    let n = recent.len();
    let mut out = Weights::default();
    if n == 0 {
        return out;
    }
    let mut put = |name: &str, shape: Vec<usize>, data: Vec<f32>| {
        out.0.insert(format!("{ROLLOUT_PREFIX}{name}"), WeightTensor { shape, data });
    };
    let mut obs = vec![];
    for (i, size) in description.observation_sizes().into_iter().enumerate() {
        let data: Vec<f32> = recent.iter().flat_map(|r| r.observations[i].iter().copied()).collect();
        obs.push(Tensor::from_slice(&data).reshape([n as i64, size as i64]));
        put(&ModelInput::Observation(i).name(), vec![n, size], data);
    }
    let total = description.action_spec.mask_len();
    let masks = (total > 0).then(|| {
        let data: Vec<f32> = recent.iter().flat_map(|r| r.mask.iter().copied()).collect();
        put(model::ACTION_MASKS, vec![n, total], data.clone());
        Tensor::from_slice(&data).reshape([n as i64, total as i64])
    });
    // A recurrent actor: the rows are one agent's consecutive decisions, replayed with this
    // network's own memory carried from row to row.
    let m = description.memory_size;
    let memories = description.is_recurrent().then(|| {
        let data = carried_memories(actor, description, recent, &obs, masks.as_ref());
        put(model::RECURRENT_IN, vec![n, m], data.clone());
        Tensor::from_slice(&data).reshape([1, n as i64, m as i64])
    });
    let out_det = tch::no_grad(|| actor.forward(&obs, memories.as_ref(), masks.as_ref(), None, true));
    if let Some(after) = &out_det.memories {
        put(model::RECURRENT_OUT, vec![n, m], Vec::<f32>::try_from(after.flatten(0, -1)).unwrap_or_default());
    }
    let c = description.action_spec.continuous_size;
    if c > 0 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(step);
        let noise: Vec<f32> = (0..n * c).map(|_| rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng)).collect();
        let noise_t = Tensor::from_slice(&noise).reshape([n as i64, c as i64]);
        let (deterministic, sampled) = actor.continuous_with_noise(&obs, memories.as_ref(), &noise_t).expect("the actor has continuous actions");
        let values = |t: &Tensor| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap_or_default();
        put("noise", vec![n, c], noise);
        put(model::DETERMINISTIC_CONTINUOUS_ACTIONS, vec![n, c], values(&deterministic));
        put(model::CONTINUOUS_ACTIONS, vec![n, c], values(&sampled));
    }
    let b = description.action_spec.discrete_size();
    if b > 0 {
        let choices: Vec<i64> = Vec::<i64>::try_from(out_det.discrete.flatten(0, -1)).unwrap_or_default();
        put(model::DETERMINISTIC_DISCRETE_ACTIONS, vec![n, b], choices.iter().map(|v| *v as f32).collect());
        // Sampled with recorded uniform draws: the inverse CDF of each branch's probabilities.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(step.wrapping_add(1));
        let uniform: Vec<f32> = (0..n * b).map(|_| rand::Rng::random::<f32>(&mut rng)).collect();
        let probabilities = actor.branch_probabilities(&obs, memories.as_ref(), masks.as_ref());
        let mut sampled = vec![0.0f32; n * b];
        for (branch, p) in probabilities.iter().enumerate() {
            let rows: Vec<f32> = Vec::<f32>::try_from(p.flatten(0, -1)).unwrap_or_default();
            let k = rows.len() / n;
            for r in 0..n {
                let choice = crate::policy::parity::inverse_cdf(&rows[r * k..(r + 1) * k], uniform[r * b + branch]);
                sampled[r * b + branch] = choice as f32;
            }
        }
        put("uniform", vec![n, b], uniform);
        put(model::DISCRETE_ACTIONS, vec![n, b], sampled);
    }
    out
}

/// The memory each recorded row starts from when the current actor replays the rows in
/// order: the first row's, and a new episode's (zeros), as recorded; every other row's what
/// the actor produced on the row before (`[n, m]` flat).
fn carried_memories(actor: &Actor, description: &PolicyDescription, recent: &VecDeque<RecentInput>, observations: &[Tensor], masks: Option<&Tensor>) -> Vec<f32> {
    let m = description.memory_size;
    let mut carried = Vec::with_capacity(recent.len() * m);
    let mut memory = vec![0.0f32; m];
    for (r, input) in recent.iter().enumerate() {
        if crate::policy::parity::starts_sequence(r, &input.memory) {
            memory = input.memory.clone();
        }
        carried.extend_from_slice(&memory);
        let row: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, r as i64, 1)).collect();
        let mask = masks.map(|t| t.narrow(0, r as i64, 1));
        let before = Tensor::from_slice(&memory).reshape([1, 1, m as i64]);
        let out = tch::no_grad(|| actor.forward(&row, Some(&before), mask.as_ref(), None, true));
        memory = out.memories.map(|t| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap_or_default()).unwrap_or_default();
    }
    carried
}
