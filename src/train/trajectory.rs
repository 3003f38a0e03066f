//! Turning decision and terminal steps into trajectories (training.md §6): each agent's
//! previous decision plus the reward that followed is one experience; a trajectory is cut
//! at `time_horizon` experiences or at the episode's end and never spans two episodes.

use crate::env::{DecisionSteps, ObservationBatch, TerminalSteps};
use std::collections::HashMap;

/// An agent across workers: (worker index, agent id).
pub type AgentKey = (usize, i32);

/// Teams one environment may hold apart in [`agent_source`].
const TEAMS_PER_WORKER: usize = 1 << 16;

/// Where an agent's steps come from, for the trajectory assembly: its environment (worker)
/// and its team, so that agents of two teams of one behavior never mix.
pub fn agent_source(worker: usize, team_id: i32) -> usize {
    worker * TEAMS_PER_WORKER + team_id.clamp(0, TEAMS_PER_WORKER as i32 - 1) as usize
}

/// Which episodes in progress end before their agents finish them: every one (the
/// environments are reset under them) or those of one environment (it was replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedEpisodes {
    All,
    OfWorker(usize),
}

impl EndedEpisodes {
    /// Whether an agent's episode is among them.
    pub fn covers(self, agent: &AgentKey) -> bool {
        match self {
            Self::All => true,
            Self::OfWorker(worker) => agent.0 / TEAMS_PER_WORKER == worker,
        }
    }
}

/// What the policy chose for one agent (in `DecisionSteps` order).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub continuous: Vec<f32>,
    pub discrete: Vec<i32>,
    /// Log-probability of each continuous action, then of each discrete branch's choice.
    pub log_probs: Vec<f32>,
    /// The memory a recurrent network read when it chose (empty for a feed-forward one).
    pub memory: Vec<f32>,
}

/// One transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Experience {
    pub obs: Vec<Vec<f32>>,
    /// Per discrete branch flags, `true` = not allowed.
    pub action_mask: Vec<bool>,
    pub decision: Decision,
    /// Environment reward (plus group reward) that followed the action.
    pub reward: f32,
    pub done: bool,
}

/// A piece of one agent's episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub agent: AgentKey,
    pub steps: Vec<Experience>,
    /// The observation after the last step (to bootstrap from).
    pub next_obs: Vec<Vec<f32>>,
    /// The episode really ended (no bootstrap).
    pub terminal: bool,
    /// The episode was cut (MaxStep): bootstrap.
    pub interrupted: bool,
}

/// A finished episode's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeStats {
    pub agent: AgentKey,
    /// Sum of the rewards of all its transitions (`Environment/Cumulative Reward`).
    pub cumulative_reward: f32,
    /// Non-terminal transitions (`Environment/Episode Length`).
    pub length: usize,
}

#[derive(Debug, Default)]
struct AgentState {
    last: Option<(Vec<Vec<f32>>, Vec<bool>, Decision)>,
    experiences: Vec<Experience>,
    /// Summed in f64 as ML-Agents sums in Python floats (1000 rewards of 0.1 make 100.0,
    /// not f32's 99.999).
    episode_reward: f64,
    episode_length: usize,
}

/// Assembles trajectories for one behavior.
#[derive(Debug)]
pub struct AgentProcessor {
    time_horizon: usize,
    agents: HashMap<AgentKey, AgentState>,
}

fn agent_obs(obs: &[ObservationBatch], i: usize) -> Vec<Vec<f32>> {
    obs.iter().map(|b| b.agent(i).to_vec()).collect()
}

impl AgentProcessor {
    pub fn new(time_horizon: usize) -> Self {
        Self { time_horizon: time_horizon.max(1), agents: HashMap::new() }
    }

    /// Agents with an episode in progress.
    pub fn active_agents(&self) -> usize {
        self.agents.len()
    }

    /// Takes one environment step of one worker: the terminal steps close their episodes,
    /// the decision steps extend them and record `decisions` (one per decision step, in
    /// order) for the next call. Returns the trajectories and episodes completed.
    ///
    /// Panics if `decisions` and `decision_steps` differ in length (a trainer bug).
    pub fn add_steps(
        &mut self,
        worker: usize,
        decision_steps: &DecisionSteps,
        terminal_steps: &TerminalSteps,
        decisions: Vec<Decision>,
    ) -> (Vec<Trajectory>, Vec<EpisodeStats>) {
        assert_eq!(decisions.len(), decision_steps.len(), "one decision per decision step");
        let mut trajectories = vec![];
        let mut episodes = vec![];
        for i in 0..terminal_steps.len() {
            let key = (worker, terminal_steps.agent_id[i]);
            let Some(mut state) = self.agents.remove(&key) else { continue };
            let reward = terminal_steps.reward[i] + terminal_steps.group_reward[i];
            if let Some((obs, mask, decision)) = state.last.take() {
                state.experiences.push(Experience { obs, action_mask: mask, decision, reward, done: true });
                state.episode_reward += reward as f64;
            }
            if !state.experiences.is_empty() {
                trajectories.push(Trajectory {
                    agent: key,
                    steps: std::mem::take(&mut state.experiences),
                    next_obs: agent_obs(&terminal_steps.obs, i),
                    terminal: !terminal_steps.interrupted[i],
                    interrupted: terminal_steps.interrupted[i],
                });
            }
            episodes.push(EpisodeStats { agent: key, cumulative_reward: state.episode_reward as f32, length: state.episode_length });
        }
        for (i, decision) in decisions.into_iter().enumerate() {
            let key = (worker, decision_steps.agent_id[i]);
            let obs = agent_obs(&decision_steps.obs, i);
            let mask = decision_steps.agent_mask(i);
            let state = self.agents.entry(key).or_default();
            if let Some((prev_obs, prev_mask, prev)) = state.last.take() {
                let reward = decision_steps.reward[i] + decision_steps.group_reward[i];
                state.experiences.push(Experience { obs: prev_obs, action_mask: prev_mask, decision: prev, reward, done: false });
                state.episode_reward += reward as f64;
                state.episode_length += 1;
                if state.experiences.len() >= self.time_horizon {
                    trajectories.push(Trajectory {
                        agent: key,
                        steps: std::mem::take(&mut state.experiences),
                        next_obs: obs.clone(),
                        terminal: false,
                        interrupted: false,
                    });
                }
            }
            state.last = Some((obs, mask, decision));
        }
        (trajectories, episodes)
    }

    /// Drops every episode in progress, untrained (the environment was reset under them, as
    /// 0.28's `AgentProcessor.end_episode` does on a forced reset).
    pub fn drop_episodes_in_progress(&mut self, ended: EndedEpisodes) {
        self.agents.retain(|agent, _| !ended.covers(agent));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision_steps(ids: &[i32], rewards: &[f32], obs: &[f32]) -> DecisionSteps {
        DecisionSteps {
            obs: vec![ObservationBatch { shape: vec![1], data: obs.to_vec() }],
            reward: rewards.to_vec(),
            agent_id: ids.to_vec(),
            action_mask: None,
            group_id: vec![0; ids.len()],
            group_reward: vec![0.0; ids.len()],
        }
    }

    fn terminal_steps(ids: &[i32], rewards: &[f32], interrupted: &[bool]) -> TerminalSteps {
        TerminalSteps {
            obs: vec![ObservationBatch { shape: vec![1], data: vec![9.0; ids.len()] }],
            reward: rewards.to_vec(),
            interrupted: interrupted.to_vec(),
            agent_id: ids.to_vec(),
            group_id: vec![0; ids.len()],
            group_reward: vec![0.0; ids.len()],
        }
    }

    fn act(a: f32) -> Decision {
        Decision { continuous: vec![a], discrete: vec![], log_probs: vec![-1.0], memory: vec![] }
    }

    #[test]
    fn rewards_attach_to_the_action_that_led_to_them() {
        let mut p = AgentProcessor::new(100);
        let none = terminal_steps(&[], &[], &[]);
        // The first decision's reward (5.0) belongs to no transition.
        assert!(p.add_steps(0, &decision_steps(&[7], &[5.0], &[0.0]), &none, vec![act(0.1)]).0.is_empty());
        p.add_steps(0, &decision_steps(&[7], &[1.0], &[1.0]), &none, vec![act(0.2)]);
        let (t, e) = p.add_steps(0, &DecisionSteps::default(), &terminal_steps(&[7], &[10.0], &[false]), vec![]);
        assert_eq!(t.len(), 1);
        let steps = &t[0].steps;
        assert_eq!(steps.iter().map(|s| (s.obs[0][0], s.decision.continuous[0], s.reward, s.done)).collect::<Vec<_>>(),
            vec![(0.0, 0.1, 1.0, false), (1.0, 0.2, 10.0, true)]);
        assert!(t[0].terminal && !t[0].interrupted);
        assert_eq!(t[0].next_obs, vec![vec![9.0]]);
        assert_eq!(e, vec![EpisodeStats { agent: (0, 7), cumulative_reward: 11.0, length: 1 }]);
        assert_eq!(p.active_agents(), 0);
    }

    #[test]
    fn time_horizon_cuts_and_bootstraps_from_the_next_observation() {
        let mut p = AgentProcessor::new(2);
        let none = terminal_steps(&[], &[], &[]);
        let mut cut = vec![];
        for k in 0..5 {
            let (t, _) = p.add_steps(0, &decision_steps(&[1], &[1.0], &[k as f32]), &none, vec![act(k as f32)]);
            cut.extend(t);
        }
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[0].steps.len(), 2);
        assert_eq!(cut[0].next_obs, vec![vec![2.0]]);
        assert!(!cut[0].terminal);
        // An interrupted episode bootstraps.
        let (t, e) = p.add_steps(0, &DecisionSteps::default(), &terminal_steps(&[1], &[0.5], &[true]), vec![]);
        assert!(t[0].interrupted && !t[0].terminal);
        assert_eq!(e[0].length, 4);
    }

    #[test]
    fn workers_keep_agents_apart() {
        let mut p = AgentProcessor::new(10);
        let none = terminal_steps(&[], &[], &[]);
        p.add_steps(0, &decision_steps(&[1], &[0.0], &[0.0]), &none, vec![act(0.0)]);
        p.add_steps(1, &decision_steps(&[1], &[0.0], &[0.0]), &none, vec![act(0.0)]);
        assert_eq!(p.active_agents(), 2);
    }
}
