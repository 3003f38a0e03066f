//! Recurrent memories while training (lstm.md §2, §10.1): each agent's actor memory between
//! decisions, each agent's critic memory between trajectories, and the critic's pass over a
//! trajectory sequence by sequence (which gives every step the memory its sequence starts
//! from, as the update needs).

use super::Critic;
use crate::env::{DecisionSteps, TerminalSteps};
use crate::train::trajectory::AgentKey;
use std::collections::HashMap;
use tch::Tensor;

/// One memory vector (`[h | c]`, `memory_size` floats) per agent.
#[derive(Debug, Default)]
pub struct AgentMemories {
    size: usize,
    memories: HashMap<AgentKey, Vec<f32>>,
}

impl AgentMemories {
    /// A store of `size`-float memories (0: a feed-forward network, nothing is stored).
    pub fn new(size: usize) -> Self {
        Self { size, memories: HashMap::new() }
    }

    /// Each agent's memory (zeros for an agent without one), agent after agent.
    pub fn batch(&self, agents: &[AgentKey]) -> Vec<f32> {
        let mut flat = Vec::with_capacity(agents.len() * self.size);
        for agent in agents {
            match self.memories.get(agent) {
                Some(m) => flat.extend_from_slice(m),
                None => flat.resize(flat.len() + self.size, 0.0),
            }
        }
        flat
    }

    /// The memories for a step of one source of agents (a worker, or a team of it): the
    /// agents whose episode ended in `terminals` are forgotten first (their next episode starts
    /// from zeros), then each agent of `decisions` gets its memory. Returns the agents, in
    /// `decisions` order, and their memories as [`Self::batch`] gives them.
    pub fn for_decisions(&mut self, source: usize, decisions: &DecisionSteps, terminals: &TerminalSteps) -> (Vec<AgentKey>, Vec<f32>) {
        for id in &terminals.agent_id {
            self.forget(&(source, *id));
        }
        let agents: Vec<AgentKey> = decisions.agent_id.iter().map(|id| (source, *id)).collect();
        let batch = self.batch(&agents);
        (agents, batch)
    }

    /// Stores the memories a network produced (`flat`: agent after agent).
    pub fn store(&mut self, agents: &[AgentKey], flat: &[f32]) {
        for (agent, memory) in agents.iter().zip(flat.chunks_exact(self.size.max(1))) {
            self.memories.insert(*agent, memory.to_vec());
        }
    }

    /// The memory of one agent, if it has one.
    pub fn get(&self, agent: &AgentKey) -> Option<&Vec<f32>> {
        self.memories.get(agent)
    }

    /// Forgets an agent (its episode ended: the next one starts from zeros).
    pub fn forget(&mut self, agent: &AgentKey) {
        self.memories.remove(agent);
    }

    /// Forgets the memories of agents whose episodes ended early.
    pub fn forget_episodes(&mut self, ended: crate::train::trajectory::EndedEpisodes) {
        self.memories.retain(|agent, _| !ended.covers(agent));
    }
}

/// What the recurrent critic computed for one trajectory.
pub struct SequencedValues {
    /// V of every step, then of the observation after the last (the bootstrap); with several
    /// value heads, each row's heads side by side.
    pub values: Vec<f32>,
    /// For every step, the critic memory its sequence starts from (`steps * size` floats).
    pub initial_memories: Vec<f32>,
    /// The memory after the last step.
    pub final_memory: Vec<f32>,
}

/// The critic over a trajectory of `steps` rows (`observations` hold `steps + 1` rows: the
/// last is the observation to bootstrap from), in sequences of `sequence_length` from its
/// start, the last one shorter and unpadded, each continuing from the memory the previous one
/// left, starting from `initial` (0.28's `_evaluate_by_sequence`); the bootstrap value comes
/// from the memory after the last step.
pub fn critic_by_sequence(critic: &Critic, observations: &[Tensor], steps: usize, sequence_length: usize, initial: Vec<f32>) -> SequencedValues {
    let size = initial.len() as i64;
    let mut memory = initial;
    let mut values = Vec::with_capacity(steps + 1);
    let mut initial_memories = Vec::with_capacity(steps * memory.len());
    let mut start = 0;
    tch::no_grad(|| {
        while start <= steps {
            // The bootstrap row is a sequence of its own (length 1) after the last step.
            let length = if start == steps { 1 } else { sequence_length.min(steps - start) };
            let rows: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, start as i64, length as i64)).collect();
            let m = Tensor::from_slice(&memory).reshape([1, 1, size]);
            let (v, after) = critic.forward(&rows, Some(&m));
            values.extend(super::values::values::<f32>(&v));
            if start < steps {
                for _ in 0..length {
                    initial_memories.extend_from_slice(&memory);
                }
                if let Some(after) = after {
                    memory = super::values::values(&after);
                }
            }
            start += length;
        }
    });
    SequencedValues { values, initial_memories, final_memory: memory }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyDescription, POLICY_FORMAT_VERSION};
    use crate::spec::ActionSpec;
    use tch::{nn, Device};

    /// upstream test_ppo_get_value_estimates' shape: a 30-step trajectory in sequences of 16
    /// (one full, 14 left over, unpadded): 30 values plus the bootstrap, each step given its
    /// sequence's initial memory, and the values the same as one pass over the whole
    /// trajectory (the memory carries across the sequences).
    #[test]
    fn the_critic_runs_a_trajectory_sequence_by_sequence() {
        tch::manual_seed(3);
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![4]],
            action_spec: ActionSpec::discrete(&[2]),
            hidden_units: 8,
            num_layers: 1,
            normalize: false,
            memory_size: 10,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: crate::policy::ContinuousHead::default(),
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let critic = Critic::new(&(vs.root() / "critic"), &description);
        let observations = vec![Tensor::randn([31, 4], (tch::Kind::Float, Device::Cpu))];
        let initial: Vec<f32> = (0..10).map(|k| k as f32 / 20.0).collect();
        let sequenced = critic_by_sequence(&critic, &observations, 30, 16, initial.clone());
        assert_eq!(sequenced.values.len(), 31);
        assert_eq!(sequenced.initial_memories.len(), 30 * 10);
        let memory_of = |step: usize| &sequenced.initial_memories[step * 10..(step + 1) * 10];
        assert!((0..16).all(|s| memory_of(s) == initial.as_slice()));
        assert!((16..30).all(|s| memory_of(s) == memory_of(16)) && memory_of(16) != initial.as_slice());
        let whole = tch::no_grad(|| {
            let start = Tensor::from_slice(&initial).reshape([1, 1, 10]);
            let (values, after) = critic.forward(&[observations[0].narrow(0, 0, 30)], Some(&start));
            (Vec::<f32>::try_from(values).unwrap(), Vec::<f32>::try_from(after.unwrap().flatten(0, -1)).unwrap())
        });
        for (a, b) in sequenced.values[..30].iter().zip(&whole.0) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        for (a, b) in sequenced.final_memory.iter().zip(&whole.1) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn unknown_agents_read_zeros_and_forgotten_agents_start_again() {
        let mut store = AgentMemories::new(2);
        store.store(&[(0, 1)], &[1.0, 2.0]);
        let flat = store.batch(&[(0, 1), (0, 2)]);
        assert_eq!(flat, vec![1.0, 2.0, 0.0, 0.0]);
        store.forget(&(0, 1));
        assert_eq!(store.batch(&[(0, 1)]), vec![0.0, 0.0]);
    }
}
