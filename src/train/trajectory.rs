//! Turning decision and terminal steps into trajectories (training.md §6): each agent's
//! previous decision plus the reward that followed is one experience; a trajectory is cut
//! at `time_horizon` experiences or at the episode's end and never spans two episodes.
//!
//! Agents in a multi-agent group (`group_id` > 0) also carry their groupmates' steps (poca.md
//! §1.4): each experience holds every other member's status (the observation it acted on, its
//! action, the individual reward that followed, whether its episode ended), and a trajectory
//! the members' latest observations. A member leaves its group's table when its episode ends.
//! All statuses of a message are gathered before any experience is built, so an agent that
//! ends beside living mates sees their fresh steps; 0.28 builds the ending agents' experiences
//! first, from the mates' statuses of the message before (one step old, a mate's reward
//! counted twice), which [`AgentProcessor::with_stale_terminal_statuses`] reproduces for
//! parity runs (poca.md §8 #2).

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

/// A groupmate's step beside an agent's.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupmateStatus {
    /// The observation it acted on.
    pub obs: Vec<Vec<f32>>,
    pub continuous: Vec<f32>,
    pub discrete: Vec<i32>,
    /// Its individual reward that followed (no group reward).
    pub reward: f32,
    /// Its episode ended with this step.
    pub done: bool,
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
    /// The group reward within `reward`.
    pub group_reward: f32,
    pub done: bool,
    /// The other members of the agent's group at this step (empty outside a group).
    pub group_status: Vec<GroupmateStatus>,
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
    /// The other members' latest observations after the last step (empty outside a group).
    pub next_group_obs: Vec<Vec<Vec<f32>>>,
}

/// A finished episode's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeStats {
    pub agent: AgentKey,
    /// Sum of the individual rewards of all its transitions (`Environment/Cumulative Reward`:
    /// without group rewards, as 0.28 reports it).
    pub cumulative_reward: f32,
    /// Sum of its group rewards.
    pub group_reward: f32,
    /// Non-terminal transitions (`Environment/Episode Length`).
    pub length: usize,
    /// Every groupmate beside its last step ended with it (true outside a group): 0.28's
    /// condition for `Environment/Group Cumulative Reward`.
    pub group_complete: bool,
    /// The group's episode, when this agent's end closed it (its last member left).
    pub group_episode: Option<GroupEpisode>,
}

/// A group's episode, from its first member's first action to its last member's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupEpisode {
    /// The members' individual rewards, plus each group reward once (every member receives
    /// the same one).
    pub group_return: f32,
    /// The members that acted in it.
    pub size: usize,
}

/// One group's members, in the order they first appeared.
#[derive(Debug, Default)]
struct GroupTable {
    /// Each member's latest status.
    statuses: Vec<(i32, GroupmateStatus)>,
    /// Each member's latest observation.
    latest_obs: Vec<(i32, Vec<Vec<f32>>)>,
    /// The group episode's return so far ([`GroupEpisode`]).
    episode_return: f64,
    /// Every member that acted in this group episode.
    members: Vec<i32>,
    /// The last message whose group reward is in `episode_return`.
    group_reward_message: Option<u64>,
}

impl GroupTable {
    /// Records a member's status, and its rewards in the group's return (the group reward of
    /// a message once).
    fn record(&mut self, agent: i32, status: GroupmateStatus, latest: Vec<Vec<f32>>, group_reward: f32, message: u64) {
        self.episode_return += status.reward as f64;
        if group_reward != 0.0 && self.group_reward_message != Some(message) {
            self.episode_return += group_reward as f64;
            self.group_reward_message = Some(message);
        }
        if !self.members.contains(&agent) {
            self.members.push(agent);
        }
        match self.statuses.iter_mut().find(|(a, _)| *a == agent) {
            Some(entry) => entry.1 = status,
            None => self.statuses.push((agent, status)),
        }
        match self.latest_obs.iter_mut().find(|(a, _)| *a == agent) {
            Some(entry) => entry.1 = latest,
            None => self.latest_obs.push((agent, latest)),
        }
    }

    fn mates_of(&self, agent: i32) -> Vec<GroupmateStatus> {
        self.statuses.iter().filter(|(a, _)| *a != agent).map(|(_, s)| s.clone()).collect()
    }

    fn mates_latest_obs(&self, agent: i32) -> Vec<Vec<Vec<f32>>> {
        self.latest_obs.iter().filter(|(a, _)| *a != agent).map(|(_, o)| o.clone()).collect()
    }

    fn remove(&mut self, agent: i32) {
        self.statuses.retain(|(a, _)| *a != agent);
        self.latest_obs.retain(|(a, _)| *a != agent);
    }
}

#[derive(Debug, Default)]
struct AgentState {
    last: Option<(Vec<Vec<f32>>, Vec<bool>, Decision)>,
    experiences: Vec<Experience>,
    /// Summed in f64 as ML-Agents sums in Python floats (1000 rewards of 0.1 make 100.0,
    /// not f32's 99.999).
    episode_reward: f64,
    episode_group_reward: f64,
    episode_length: usize,
}

/// Assembles trajectories for one behavior.
#[derive(Debug)]
pub struct AgentProcessor {
    time_horizon: usize,
    agents: HashMap<AgentKey, AgentState>,
    /// By (worker and team, group id).
    groups: HashMap<(usize, i32), GroupTable>,
    /// 0.28's order: ending agents' experiences before this message's statuses.
    stale_terminal_statuses: bool,
    /// Messages taken so far.
    messages: u64,
}

/// What [`AgentProcessor::record_status`] reads of decision or terminal steps.
#[derive(Clone, Copy)]
struct StepsOf<'a> {
    ids: &'a [i32],
    group_ids: &'a [i32],
    rewards: &'a [f32],
    group_rewards: &'a [f32],
    obs: &'a [ObservationBatch],
}

impl<'a> StepsOf<'a> {
    fn decisions(d: &'a DecisionSteps) -> Self {
        Self { ids: &d.agent_id, group_ids: &d.group_id, rewards: &d.reward, group_rewards: &d.group_reward, obs: &d.obs }
    }

    fn terminals(t: &'a TerminalSteps) -> Self {
        Self { ids: &t.agent_id, group_ids: &t.group_id, rewards: &t.reward, group_rewards: &t.group_reward, obs: &t.obs }
    }
}

fn agent_obs(obs: &[ObservationBatch], i: usize) -> Vec<Vec<f32>> {
    obs.iter().map(|b| b.agent(i).to_vec()).collect()
}

impl AgentProcessor {
    pub fn new(time_horizon: usize) -> Self {
        Self { time_horizon: time_horizon.max(1), agents: HashMap::new(), groups: HashMap::new(), stale_terminal_statuses: false, messages: 0 }
    }

    /// Builds the experiences of agents that end beside living groupmates from the mates'
    /// statuses of the message before, as 0.28 does (for parity runs).
    pub fn with_stale_terminal_statuses(mut self) -> Self {
        self.stale_terminal_statuses = true;
        self
    }

    /// Records the status of agent `i` of `steps` in its group's table, if it is in a group
    /// and has acted before (its previous decision and the reward that followed it).
    fn record_status(&mut self, worker: usize, steps: StepsOf, i: usize, done: bool) {
        if steps.group_ids[i] <= 0 {
            return;
        }
        let Some((last_obs, _, decision)) = self.agents.get(&(worker, steps.ids[i])).and_then(|s| s.last.as_ref()) else { return };
        let status = GroupmateStatus { obs: last_obs.clone(), continuous: decision.continuous.clone(), discrete: decision.discrete.clone(), reward: steps.rewards[i], done };
        let latest = agent_obs(steps.obs, i);
        self.groups.entry((worker, steps.group_ids[i])).or_default().record(steps.ids[i], status, latest, steps.group_rewards[i], self.messages);
    }

    fn mates(&self, worker: usize, group_id: i32, agent: i32) -> (Vec<GroupmateStatus>, Vec<Vec<Vec<f32>>>) {
        match self.groups.get(&(worker, group_id)).filter(|_| group_id > 0) {
            Some(table) => (table.mates_of(agent), table.mates_latest_obs(agent)),
            None => (vec![], vec![]),
        }
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
        let t = terminal_steps;
        let d = decision_steps;
        self.messages += 1;
        for i in 0..t.len() {
            self.record_status(worker, StepsOf::terminals(t), i, true);
        }
        // An agent that ends and begins again in one message (Unity's EndEpisode) has no
        // status in its new episode until it acts there: its end stays what its mates see.
        let restarting = |i: usize| t.agent_id.contains(&d.agent_id[i]);
        if !self.stale_terminal_statuses {
            for i in (0..d.len()).filter(|i| !restarting(*i)) {
                self.record_status(worker, StepsOf::decisions(d), i, false);
            }
        }
        let mut trajectories = vec![];
        let mut episodes = vec![];
        for i in 0..t.len() {
            let key = (worker, t.agent_id[i]);
            let Some(mut state) = self.agents.remove(&key) else { continue };
            let (group_status, next_group_obs) = self.mates(worker, t.group_id[i], t.agent_id[i]);
            let reward = t.reward[i] + t.group_reward[i];
            let group_complete = group_status.iter().all(|m| m.done);
            if let Some((obs, mask, decision)) = state.last.take() {
                state.experiences.push(Experience { obs, action_mask: mask, decision, reward, group_reward: t.group_reward[i], done: true, group_status });
                state.episode_reward += t.reward[i] as f64;
                state.episode_group_reward += t.group_reward[i] as f64;
            }
            if !state.experiences.is_empty() {
                trajectories.push(Trajectory {
                    agent: key,
                    steps: std::mem::take(&mut state.experiences),
                    next_obs: agent_obs(&t.obs, i),
                    terminal: !t.interrupted[i],
                    interrupted: t.interrupted[i],
                    next_group_obs,
                });
            }
            episodes.push(EpisodeStats {
                agent: key,
                cumulative_reward: state.episode_reward as f32,
                group_reward: state.episode_group_reward as f32,
                length: state.episode_length,
                group_complete,
                group_episode: None,
            });
        }
        if self.stale_terminal_statuses {
            for i in (0..d.len()).filter(|i| !restarting(*i)) {
                self.record_status(worker, StepsOf::decisions(d), i, false);
            }
        }
        for (i, decision) in decisions.into_iter().enumerate() {
            let key = (worker, d.agent_id[i]);
            let obs = agent_obs(&d.obs, i);
            let mask = d.agent_mask(i);
            let (group_status, next_group_obs) = self.mates(worker, d.group_id[i], d.agent_id[i]);
            let time_horizon = self.time_horizon;
            let state = self.agents.entry(key).or_default();
            if let Some((prev_obs, prev_mask, prev)) = state.last.take() {
                let reward = d.reward[i] + d.group_reward[i];
                state.experiences.push(Experience { obs: prev_obs, action_mask: prev_mask, decision: prev, reward, group_reward: d.group_reward[i], done: false, group_status });
                state.episode_reward += d.reward[i] as f64;
                state.episode_group_reward += d.group_reward[i] as f64;
                state.episode_length += 1;
                if state.experiences.len() >= time_horizon {
                    trajectories.push(Trajectory { agent: key, steps: std::mem::take(&mut state.experiences), next_obs: obs.clone(), terminal: false, interrupted: false, next_group_obs });
                }
            }
            state.last = Some((obs, mask, decision));
        }
        // Members whose episode ended leave their group; the last one to leave closes the
        // group's episode.
        for i in 0..t.len() {
            let Some(table) = self.groups.get_mut(&(worker, t.group_id[i])).filter(|_| t.group_id[i] > 0) else { continue };
            table.remove(t.agent_id[i]);
            if table.statuses.is_empty() && !table.members.is_empty() {
                let closed = GroupEpisode { group_return: table.episode_return as f32, size: table.members.len() };
                *table = GroupTable::default();
                if let Some(e) = episodes.iter_mut().find(|e| e.agent == (worker, t.agent_id[i])) {
                    e.group_episode = Some(closed);
                }
            }
        }
        self.groups.retain(|_, table| !table.statuses.is_empty() || !table.latest_obs.is_empty());
        (trajectories, episodes)
    }

    /// Drops every episode in progress, untrained (the environment was reset under them, as
    /// 0.28's `AgentProcessor.end_episode` does on a forced reset).
    pub fn drop_episodes_in_progress(&mut self, ended: EndedEpisodes) {
        self.agents.retain(|agent, _| !ended.covers(agent));
        self.groups.retain(|(source, _), _| !ended.covers(&(*source, 0)));
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
        assert_eq!(e, vec![EpisodeStats { agent: (0, 7), cumulative_reward: 11.0, group_reward: 0.0, length: 1, group_complete: true, group_episode: None }]);
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

    /// Decision steps of agents in group 1: agent a's observation at message k is k·10 + a,
    /// the reward that follows is k·100 + a, its action k + a / 10.
    fn grouped_decisions(ids: &[i32], k: i32) -> DecisionSteps {
        DecisionSteps { group_id: vec![1; ids.len()], ..decision_steps(ids, &ids.iter().map(|a| (k * 100 + a) as f32).collect::<Vec<_>>(), &ids.iter().map(|a| (k * 10 + a) as f32).collect::<Vec<_>>()) }
    }

    fn grouped_terminals(ids: &[i32], k: i32) -> TerminalSteps {
        TerminalSteps {
            obs: vec![ObservationBatch { shape: vec![1], data: ids.iter().map(|a| (k * 10 + a) as f32).collect() }],
            group_id: vec![1; ids.len()],
            group_reward: vec![0.5; ids.len()],
            ..terminal_steps(ids, &ids.iter().map(|a| (k * 100 + a) as f32).collect::<Vec<_>>(), &vec![false; ids.len()])
        }
    }

    /// Plays upstream's `test_group_statuses`: four agents of group 1, agents 2 and 3 end at
    /// message 3, agents 0 and 1 at message 5. Returns the trajectories by agent, and the
    /// episodes.
    fn play_group(mut p: AgentProcessor) -> (HashMap<i32, Trajectory>, Vec<EpisodeStats>) {
        let mut out = HashMap::new();
        let mut episodes = vec![];
        for k in 0..=5 {
            let (alive, ending): (&[i32], &[i32]) = match k {
                0..=2 => (&[0, 1, 2, 3], &[]),
                3 => (&[0, 1], &[2, 3]),
                4 => (&[0, 1], &[]),
                _ => (&[], &[0, 1]),
            };
            let decisions = grouped_decisions(alive, k);
            let acts = alive.iter().map(|a| act(k as f32 + *a as f32 / 10.0)).collect();
            let (trajectories, ended) = p.add_steps(0, &decisions, &grouped_terminals(ending, k), acts);
            out.extend(trajectories.into_iter().map(|t| (t.agent.1, t)));
            episodes.extend(ended);
        }
        (out, episodes)
    }

    /// upstream `test_group_statuses`: the agents that end early have 3 steps with 3 mates
    /// each, the survivors 5 steps with 3, 3, 3, 1, 1; a mate's status is the observation it
    /// acted on, its action, its individual reward that followed and whether it ended. The
    /// group reward is kept apart too.
    #[test]
    fn groupmates_statuses_follow_the_group() {
        let (t, _) = play_group(AgentProcessor::new(100));
        let mates = |a: i32| t[&a].steps.iter().map(|s| s.group_status.len()).collect::<Vec<_>>();
        assert_eq!((mates(2), mates(3)), (vec![3, 3, 3], vec![3, 3, 3]));
        assert_eq!((mates(0), mates(1)), (vec![3, 3, 3, 1, 1], vec![3, 3, 3, 1, 1]));
        // Agent 0's step at message 3 (acted at 2): agent 2 ended there, with its reward of 3.
        let at_3 = &t[&0].steps[2].group_status;
        assert_eq!(at_3.iter().map(|m| (m.obs[0][0], m.continuous[0], m.reward, m.done)).collect::<Vec<_>>(), vec![(21.0, 2.1, 301.0, false), (22.0, 2.2, 302.0, true), (23.0, 2.3, 303.0, true)]);
        assert_eq!((t[&0].steps[4].group_reward, t[&0].steps[4].reward), (0.5, 500.5), "the trainers' reward holds the group reward");
        assert_eq!(t[&0].next_group_obs, vec![vec![vec![51.0]]], "agent 1's terminal observation");
    }

    /// An agent that ends beside living mates sees their steps of the same message (ours), or
    /// of the message before (0.28's order, kept for parity runs: a step old, a mate's reward
    /// of the message before).
    #[test]
    fn an_ending_agent_sees_its_mates_fresh_or_as_0_28_does() {
        let (fresh, _) = play_group(AgentProcessor::new(100));
        let last = |t: &HashMap<i32, Trajectory>| {
            let step = t[&2].steps.last().unwrap();
            (step.group_status.iter().map(|m| (m.obs[0][0], m.reward)).collect::<Vec<_>>(), t[&2].next_group_obs.clone())
        };
        let (statuses, next) = last(&fresh);
        assert_eq!(statuses, vec![(20.0, 300.0), (21.0, 301.0), (23.0, 303.0)]);
        assert_eq!(next, vec![vec![vec![30.0]], vec![vec![31.0]], vec![vec![33.0]]]);
        let (stale, _) = play_group(AgentProcessor::new(100).with_stale_terminal_statuses());
        let (statuses, next) = last(&stale);
        assert_eq!(statuses, vec![(10.0, 200.0), (11.0, 201.0), (23.0, 303.0)], "0.28: the living mates one step old");
        assert_eq!(next, vec![vec![vec![20.0]], vec![vec![21.0]], vec![vec![33.0]]]);
    }

    /// `Environment/Cumulative Reward` counts individual rewards only (0.28); the trainers'
    /// reward holds the group reward too.
    #[test]
    fn episode_returns_leave_group_rewards_apart() {
        let mut p = AgentProcessor::new(100);
        p.add_steps(0, &grouped_decisions(&[4], 0), &grouped_terminals(&[], 0), vec![act(0.0)]);
        let (t, e) = p.add_steps(0, &DecisionSteps::default(), &grouped_terminals(&[4], 1), vec![]);
        assert_eq!((e[0].cumulative_reward, e[0].group_reward), (104.0, 0.5));
        assert_eq!(t[0].steps[0].reward, 104.5);
    }

    /// The group's episode closes with its last member: its return sums every member's
    /// individual rewards and each message's group reward once; agents that end beside
    /// living mates do not complete the group, the last ones do.
    #[test]
    fn the_last_member_closes_the_group_episode() {
        let (_, episodes) = play_group(AgentProcessor::new(100));
        let by_agent = |a: i32| episodes.iter().find(|e| e.agent == (0, a)).unwrap();
        assert!(!by_agent(2).group_complete && !by_agent(3).group_complete);
        assert!(by_agent(0).group_complete && by_agent(1).group_complete);
        let closed: Vec<GroupEpisode> = episodes.iter().filter_map(|e| e.group_episode).collect();
        // Individual rewards k·100 + a of messages 1-5 (agents 0, 1) and 1-3 (agents 2, 3);
        // the group reward 0.5 at messages 3 and 5.
        assert_eq!(closed, vec![GroupEpisode { group_return: 1500.0 + 1505.0 + 606.0 + 609.0 + 1.0, size: 4 }]);
        assert_eq!(by_agent(1).group_episode, closed.first().copied(), "agent 1 left last");
    }

    /// Unity's EndGroupEpisode: every member's terminal and its next episode's first decision
    /// come in one message. The members see each other ended (not the new episode's step),
    /// so the group's returns stop there.
    #[test]
    fn a_group_ending_and_beginning_in_one_message_is_seen_ended() {
        let mut p = AgentProcessor::new(100);
        p.add_steps(0, &grouped_decisions(&[0, 1], 0), &grouped_terminals(&[], 0), vec![act(0.0), act(0.1)]);
        let (t, e) = p.add_steps(0, &grouped_decisions(&[0, 1], 1), &grouped_terminals(&[0, 1], 1), vec![act(1.0), act(1.1)]);
        assert_eq!(t.len(), 2);
        for trajectory in &t {
            let mates = &trajectory.steps[0].group_status;
            assert_eq!(mates.len(), 1);
            assert!(mates[0].done && mates[0].reward >= 100.0, "{mates:?}");
        }
        assert!(e.iter().all(|e| e.group_complete));
        assert_eq!(e.iter().filter_map(|e| e.group_episode).collect::<Vec<_>>(), vec![GroupEpisode { group_return: 100.0 + 101.0 + 0.5, size: 2 }]);
    }

    /// Agents outside a group carry no groupmates.
    #[test]
    fn ungrouped_agents_have_no_mates() {
        let mut p = AgentProcessor::new(100);
        let none = terminal_steps(&[], &[], &[]);
        p.add_steps(0, &decision_steps(&[1, 2], &[0.0, 0.0], &[0.0, 0.0]), &none, vec![act(0.0), act(0.0)]);
        let (t, _) = p.add_steps(0, &DecisionSteps::default(), &terminal_steps(&[1, 2], &[1.0, 1.0], &[false, false]), vec![]);
        assert!(t.iter().all(|t| t.next_group_obs.is_empty() && t.steps.iter().all(|s| s.group_status.is_empty())));
    }
}
