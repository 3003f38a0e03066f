//! What a stand-in scene implements, and what the academy offers it.

use crate::comm::side_channel::{EnvironmentParametersChannel, StatsAggregation, StatsSideChannel};
use crate::spec::{ActionSpec, ObservationSpec};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};

/// How one observation travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Floats,
    /// PNG-compressed, as a Unity camera sensor with compression on (values in [0, 1]).
    Png,
}

/// One observation of a behavior.
#[derive(Debug, Clone)]
pub struct ObservationDef {
    pub spec: ObservationSpec,
    pub encoding: Encoding,
}

impl ObservationDef {
    pub fn floats(spec: ObservationSpec) -> Self {
        Self { spec, encoding: Encoding::Floats }
    }

    pub fn png(spec: ObservationSpec) -> Self {
        Self { spec, encoding: Encoding::Png }
    }
}

/// A behavior of the scene (Unity's `BehaviorParameters`).
#[derive(Debug, Clone)]
pub struct BehaviorDef {
    /// Fully qualified name, `Name?team=N`.
    pub name: String,
    pub observations: Vec<ObservationDef>,
    pub actions: ActionSpec,
}

/// One agent of the scene (Unity's `Agent` + `DecisionRequester`).
#[derive(Debug, Clone)]
pub struct AgentDef {
    /// Index into [`Scene::behaviors`].
    pub behavior: usize,
    /// Request a decision every this many academy steps.
    pub decision_period: u32,
    /// Re-apply the last action on the steps in between.
    pub take_actions_between_decisions: bool,
    /// Academy steps after which the episode is interrupted (0 = never).
    pub max_step: u32,
    /// Multi-agent group (0 = none).
    pub group_id: i32,
    /// Take a new agent id at every episode (scenes reloaded per episode, and the ML-Agents
    /// test-suite environments).
    pub new_id_per_episode: bool,
}

impl AgentDef {
    /// An agent that decides at every academy step, with no step limit.
    pub fn every_step(behavior: usize) -> Self {
        Self {
            behavior,
            decision_period: 1,
            take_actions_between_decisions: false,
            max_step: 0,
            group_id: 0,
            new_id_per_episode: false,
        }
    }
}

/// A stand-in scene. Agents are numbered by their index in [`Scene::agents`].
pub trait Scene: Send {
    fn behaviors(&self) -> Vec<BehaviorDef>;
    fn agents(&self) -> Vec<AgentDef>;
    /// Academy reset: read the environment parameters and restart every agent's episode.
    fn reset(&mut self, ctx: &mut SceneContext);
    /// `OnEpisodeBegin` of one agent (after its episode ended).
    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext);
    /// `CollectObservations`: one float buffer per observation of the agent's behavior.
    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>>;
    /// Whether an agent whose decision period has come asks for a decision (an agent that
    /// finished and waits for its group does not).
    fn wants_decision(&self, _agent: usize) -> bool {
        true
    }
    /// Action mask (true = not allowed), `sum(branches)` long, or empty for none.
    fn action_mask(&self, _agent: usize) -> Vec<bool> {
        vec![]
    }
    /// `OnActionReceived`.
    fn act(&mut self, agent: usize, continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext);
    /// One physics tick after every agent acted.
    fn physics_step(&mut self, _ctx: &mut SceneContext) {}
}

/// The academy as a scene sees it: rewards, episode ends, random numbers, parameters, stats.
pub struct SceneContext {
    pub rng: ChaCha8Rng,
    rewards: Vec<f32>,
    group_rewards: Vec<f32>,
    /// Agents whose episode ends this step: Some(interrupted).
    ended: Vec<Option<bool>>,
    parameters: Arc<Mutex<EnvironmentParametersChannel>>,
    stats: Arc<Mutex<StatsSideChannel>>,
}

impl SceneContext {
    pub(crate) fn new(
        agents: usize,
        rng: ChaCha8Rng,
        parameters: Arc<Mutex<EnvironmentParametersChannel>>,
        stats: Arc<Mutex<StatsSideChannel>>,
    ) -> Self {
        Self { rng, rewards: vec![0.0; agents], group_rewards: vec![0.0; agents], ended: vec![None; agents], parameters, stats }
    }

    /// `Agent.AddReward`.
    pub fn add_reward(&mut self, agent: usize, reward: f32) {
        self.rewards[agent] += reward;
    }

    /// `Agent.SetReward`: replaces the reward accumulated since the last decision.
    pub fn set_reward(&mut self, agent: usize, reward: f32) {
        self.rewards[agent] = reward;
    }

    /// `SimpleMultiAgentGroup.AddGroupReward`, for one member.
    pub fn add_group_reward(&mut self, agent: usize, reward: f32) {
        self.group_rewards[agent] += reward;
    }

    /// `Agent.EndEpisode` (also what Unity sends for an agent disabled mid-episode).
    pub fn end_episode(&mut self, agent: usize) {
        self.ended[agent] = Some(false);
    }

    /// `Agent.EpisodeInterrupted` (a group's `GroupEpisodeInterrupted`, for one member).
    pub fn interrupt_episode(&mut self, agent: usize) {
        self.ended[agent] = Some(true);
    }

    /// `EnvironmentParameters.GetWithDefault`.
    pub fn parameter(&self, key: &str, default: f32) -> f32 {
        crate::comm::side_channel::lock(&self.parameters).get_with_default(key, default)
    }

    /// `StatsRecorder.Add`.
    pub fn record_stat(&self, key: &str, value: f32, aggregation: StatsAggregation) {
        crate::comm::side_channel::lock(&self.stats).add(key, value, aggregation);
    }

    pub(crate) fn take_reward(&mut self, agent: usize) -> (f32, f32) {
        (std::mem::take(&mut self.rewards[agent]), std::mem::take(&mut self.group_rewards[agent]))
    }

    /// Whether agent's episode ends this step, and if so whether it was interrupted.
    pub(crate) fn take_ended(&mut self, agent: usize) -> Option<bool> {
        self.ended[agent].take()
    }

    pub(crate) fn clear_agent(&mut self, agent: usize) {
        self.rewards[agent] = 0.0;
        self.group_rewards[agent] = 0.0;
        self.ended[agent] = None;
    }
}
