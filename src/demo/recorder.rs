//! Recording a policy's play as Unity's `DemonstrationRecorder` records an agent
//! (reward-signals.md §7.3, §7.8): one record per decision with the reward since the previous
//! decision and the action that led into it (zeros at an episode's first decision), and one
//! terminal record per episode end with the episode's last action. Every agent of the behavior
//! is recorded; its episodes enter the recording whole, when they end.

use super::{write, DemoError, DemoRecord};
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::spec::BehaviorSpec;
use std::collections::HashMap;
use std::path::Path;

/// One agent's episode in progress.
#[derive(Debug, Default)]
struct EpisodeInProgress {
    /// The action chosen at the agent's last decision (None before its first).
    last_action: Option<(Vec<f32>, Vec<i32>)>,
    records: Vec<DemoRecord>,
}

/// The recording of one behavior's agents.
#[derive(Debug)]
pub struct DemoRecorder {
    spec: BehaviorSpec,
    agents: HashMap<i32, EpisodeInProgress>,
    /// Finished episodes, one after the other.
    records: Vec<DemoRecord>,
    episodes: usize,
}

impl DemoRecorder {
    pub fn new(spec: &BehaviorSpec) -> Self {
        Self { spec: spec.clone(), agents: HashMap::new(), records: vec![], episodes: 0 }
    }

    /// Episodes recorded whole so far.
    pub fn episodes(&self) -> usize {
        self.episodes
    }

    /// The records of the episodes recorded whole, in the order they ended.
    pub fn records(&self) -> &[DemoRecord] {
        &self.records
    }

    fn zero_action(&self) -> (Vec<f32>, Vec<i32>) {
        super::zero_action(&self.spec.action_spec)
    }

    /// The agents whose episodes ended in `terminals`: their terminal records close them.
    pub fn add_terminals(&mut self, terminals: &TerminalSteps) {
        for (i, id) in terminals.agent_id.iter().enumerate() {
            let Some(mut episode) = self.agents.remove(id) else { continue };
            let (continuous, discrete) = episode.last_action.take().unwrap_or_else(|| self.zero_action());
            episode.records.push(DemoRecord {
                observations: terminals.obs.iter().map(|o| o.agent(i).to_vec()).collect(),
                reward: terminals.reward[i] + terminals.group_reward[i],
                done: true,
                interrupted: terminals.interrupted[i],
                agent_id: *id,
                action_mask: vec![],
                continuous,
                discrete,
            });
            self.records.extend(episode.records);
            self.episodes += 1;
        }
    }

    /// The agents asking for decisions, and the actions they got (`actions`, in `decisions`'
    /// order, as sent to the environment).
    pub fn add_decisions(&mut self, decisions: &DecisionSteps, actions: &ActionTuple) {
        let (c, b) = (self.spec.action_spec.continuous_size, self.spec.action_spec.discrete_branches.len());
        for (i, id) in decisions.agent_id.iter().enumerate() {
            let zero = self.zero_action();
            let episode = self.agents.entry(*id).or_default();
            let (continuous, discrete) = episode.last_action.take().unwrap_or(zero);
            episode.records.push(DemoRecord {
                observations: decisions.obs.iter().map(|o| o.agent(i).to_vec()).collect(),
                reward: decisions.reward[i] + decisions.group_reward[i],
                done: false,
                interrupted: false,
                agent_id: *id,
                action_mask: decisions.agent_mask(i),
                continuous,
                discrete,
            });
            let chosen = (actions.continuous[i * c..(i + 1) * c].to_vec(), actions.discrete[i * b..(i + 1) * b].to_vec());
            episode.last_action = Some(chosen);
        }
    }

    /// Writes the first `episodes` episodes recorded whole (all with None) as a `.demo` file.
    pub fn write(&self, path: &Path, name: &str, behavior_name: &str, episodes: Option<usize>) -> Result<(), DemoError> {
        let mut end = self.records.len();
        if let Some(limit) = episodes {
            let mut ended = 0;
            end = self.records.iter().position(|r| {
                ended += usize::from(r.done);
                ended == limit
            }).map_or(end, |k| k + 1);
        }
        write(path, name, behavior_name, &self.spec, &self.records[..end])
    }
}
