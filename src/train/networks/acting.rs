//! Acting: sampling actions from an actor for one step of decisions, a recurrent actor
//! reading and keeping each agent's memory. The trainers and the self-play ghosts act
//! through it.

use super::memory::AgentMemories;
use super::values::values;
use super::Actor;
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::policy::PolicyDescription;
use crate::spec::model;
use crate::train::trajectory::Decision;
use tch::Tensor;

/// Actions an actor sampled for decision steps.
pub struct Sampled {
    /// What the environment is sent (PPO's continuous actions clipped to [-3, 3] and divided
    /// by 3, SAC's squashed ones as they are).
    pub actions: ActionTuple,
    /// What the trajectories record (the actor's continuous actions and the log-probabilities).
    pub decisions: Vec<Decision>,
    /// The policy's entropy for each agent.
    pub entropy: Vec<f32>,
    /// A recurrent actor's memories after acting, agent after agent (empty otherwise).
    pub memories: Vec<f32>,
}

/// Observation values from this magnitude up overflow a network's float32 products on the way
/// to its outputs (and their squares overflow the normaliser well before).
pub const OVERFLOWING_OBSERVATION: f32 = 1e18;

/// The observation value of largest magnitude among the deciding agents: agent id,
/// observation index and value.
pub fn largest_observation(steps: &DecisionSteps) -> Option<(i32, usize, f32)> {
    let mut largest: Option<(i32, usize, f32)> = None;
    for (k, batch) in steps.obs.iter().enumerate() {
        for (row, agent) in steps.agent_id.iter().enumerate() {
            for v in batch.agent(row) {
                if largest.is_none_or(|(.., l)| v.abs() > l.abs()) {
                    largest = Some((*agent, k, *v));
                }
            }
        }
    }
    largest
}

/// Samples actions from `actor` for every agent of `steps` (a recurrent actor from
/// `memories`, `m` floats per agent, agent after agent; each decision records the memory it
/// consumed); None when the outputs are not finite (a diverged network).
fn sample_actions(actor: &Actor, description: &PolicyDescription, steps: &DecisionSteps, memories: Option<&[f32]>) -> Option<Sampled> {
    let n = steps.len();
    if n == 0 {
        return Some(Sampled { actions: ActionTuple::zeros(&description.action_spec, 0), decisions: vec![], entropy: vec![], memories: vec![] });
    }
    let total = description.action_spec.mask_len();
    let c = description.action_spec.continuous_size;
    let nb = description.action_spec.discrete_size();
    let rust_sample = actor.acts_in_rust(n).then(|| {
        let observations: Vec<&[f32]> = steps.obs.iter().map(|b| b.data.as_slice()).collect();
        let masks = (total > 0).then(|| steps.allowed_actions());
        actor.sample_in_rust(&observations, masks.as_deref(), memories, n)
    });
    let (raw, discrete, log_probs, entropy, memories_out) = match rust_sample.flatten() {
        Some(s) => (s.continuous, s.discrete, s.log_probs, s.entropy, s.memories),
        None => {
            let obs: Vec<Tensor> = steps.obs.iter().map(|b| Tensor::from_slice(&b.data).reshape([n as i64, b.agent_len() as i64])).collect();
            let masks = (total > 0).then(|| Tensor::from_slice(&steps.allowed_actions()).reshape([n as i64, total as i64]));
            let memories = memories.map(|m| Tensor::from_slice(m).reshape([1, n as i64, (m.len() / n) as i64]));
            let out = tch::no_grad(|| actor.forward(&obs, memories.as_ref(), masks.as_ref(), None, false));
            (values(&out.continuous), values(&out.discrete), values(&out.log_probs), values(&out.entropy), out.memories.as_ref().map(values).unwrap_or_default())
        }
    };
    if raw.iter().chain(&log_probs).chain(&memories_out).any(|v| !v.is_finite()) {
        return None;
    }
    let k = c + nb;
    let m = description.memory_size;
    let consumed = memories.unwrap_or_default();
    let decisions = (0..n)
        .map(|a| Decision {
            continuous: raw[a * c..(a + 1) * c].to_vec(),
            discrete: discrete[a * nb..(a + 1) * nb].iter().map(|d| *d as i32).collect(),
            log_probs: log_probs[a * k..(a + 1) * k].to_vec(),
            memory: consumed.get(a * m..(a + 1) * m).map(<[f32]>::to_vec).unwrap_or_default(),
        })
        .collect();
    let actions = ActionTuple {
        // PPO's raw samples are clipped and scaled; SAC's come squashed already.
        continuous: if actor.squashes() { raw.clone() } else { raw.iter().map(|v| v.clamp(-model::ACTION_CLIP, model::ACTION_CLIP) / model::ACTION_CLIP).collect() },
        discrete: discrete.iter().map(|d| *d as i32).collect(),
    };
    Some(Sampled { actions, decisions, entropy, memories: memories_out })
}

/// [`sample_actions`] for one step of a source of agents (a worker, or one team of it): a
/// recurrent actor reads each agent's memory from `memories` (the agents whose episode ended
/// in `terminals` are forgotten first) and keeps there what it produced.
pub fn sample_with_memories(
    actor: &Actor,
    description: &PolicyDescription,
    memories: &mut AgentMemories,
    source: usize,
    steps: &DecisionSteps,
    terminals: &TerminalSteps,
) -> Option<Sampled> {
    if !description.is_recurrent() {
        return sample_actions(actor, description, steps, None);
    }
    let (agents, flat) = memories.for_decisions(source, steps, terminals);
    let sampled = sample_actions(actor, description, steps, Some(&flat))?;
    memories.store(&agents, &sampled.memories);
    Some(sampled)
}
