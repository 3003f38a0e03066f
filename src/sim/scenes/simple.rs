//! The ML-Agents test-suite environments (envs.md §8.2-8.4), behind the protocol:
//! `SimpleEnvironment` (reach the side shown by the goal sign), `MemoryEnvironment` (the goal
//! is shown only for the first 3 observations) and the grouped multi-agent variant.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec, ObservationType};
use rand::Rng;

/// Penalty per step.
pub const TIME_PENALTY: f32 = 0.01;
/// Reward for reaching the goal side in every dimension: 1 + MIN_STEPS * TIME_PENALTY with
/// MIN_STEPS = int(1 / 0.2) + 1 = 6 (from the default step size, for every instance).
pub const SUCCESS_REWARD: f32 = 1.06;
/// The memory environment shows the goal while the step count is at most this.
const MEMORY_SHOW_STEPS: u32 = 2;

/// Configuration of a test-suite scene.
#[derive(Debug, Clone)]
pub struct SimpleConfig {
    /// Behavior names (fully qualified); one agent each unless grouped.
    pub behaviors: Vec<String>,
    pub continuous: usize,
    pub discrete: usize,
    pub step_size: f32,
    pub num_vector: usize,
    pub vector_size: usize,
    pub num_visual: usize,
    /// Each image's `[height, width, channels]` (the test suite's 20x20x3 by default).
    pub visual_shape: [usize; 3],
    /// The vector observations are GOAL_SIGNAL observations (0.28's `goal_indices`).
    pub goal_signal: bool,
    /// Hide the goal after the first steps (MemoryEnvironment).
    pub memory: bool,
    /// Agents per behavior, all in group 1 when more than one (MultiAgentEnvironment).
    pub group_size: usize,
    /// A BufferSensor-like observation first, `[max entities, entity size]` with dimension
    /// properties (VARIABLE_SIZE, NONE): a random number of real entities per episode (1 to
    /// max), each `[goal, noise.., 1]`, the rest zeros (masked by an attention encoder).
    pub entities: Option<[usize; 2]>,
}

impl SimpleConfig {
    /// One behavior `1D?team=0`, one vector observation of size 1, step 0.2.
    pub fn new(continuous: usize, discrete: usize) -> Self {
        Self {
            behaviors: vec!["1D?team=0".into()],
            continuous,
            discrete,
            step_size: 0.2,
            num_vector: 1,
            vector_size: 1,
            num_visual: 0,
            visual_shape: [20, 20, 3],
            goal_signal: false,
            memory: false,
            group_size: 1,
            entities: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct AgentState {
    goal: f32,
    position: Vec<f32>,
    step_count: u32,
    episode_return: f32,
    finished: bool,
    final_reward: f32,
    /// The entity observation of this episode (with [`SimpleConfig::entities`]).
    entities: Vec<f32>,
}

/// SimpleEnvironment / MemoryEnvironment / MultiAgentEnvironment.
pub struct SimpleScene {
    config: SimpleConfig,
    agents: Vec<AgentState>,
}

impl SimpleScene {
    pub fn new(config: SimpleConfig) -> Self {
        let n = config.behaviors.len() * config.group_size;
        Self { config, agents: vec![AgentState::default(); n] }
    }

    fn dims(&self) -> usize {
        self.config.continuous + self.config.discrete
    }

    fn group(&self, agent: usize) -> std::ops::Range<usize> {
        let g = agent / self.config.group_size;
        g * self.config.group_size..(g + 1) * self.config.group_size
    }

    fn shown_goal(&self, agent: usize) -> f32 {
        let a = &self.agents[agent];
        if self.config.memory && a.step_count > MEMORY_SHOW_STEPS {
            0.0
        } else {
            a.goal
        }
    }
}

impl Scene for SimpleScene {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        let c = &self.config;
        let mut observations: Vec<ObservationDef> = (0..c.num_vector)
            .map(|i| {
                let mut spec = ObservationSpec::vector(c.vector_size, &format!("VectorSensor_{i}"));
                if c.goal_signal {
                    spec.observation_type = ObservationType::GoalSignal;
                }
                ObservationDef::floats(spec)
            })
            .collect();
        observations.extend((0..c.num_visual).map(|i| {
            let [h, w, channels] = c.visual_shape;
            ObservationDef::floats(ObservationSpec::visual_hwc(h, w, channels, &format!("Visual_{i}")))
        }));
        if let Some([max, size]) = c.entities {
            observations.insert(0, ObservationDef::floats(ObservationSpec::entities(max, size, "BufferSensor")));
        }
        c.behaviors
            .iter()
            .map(|name| BehaviorDef {
                name: name.clone(),
                observations: observations.clone(),
                actions: ActionSpec::hybrid(c.continuous, &vec![2; c.discrete]),
            })
            .collect()
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..self.agents.len())
            .map(|i| AgentDef {
                group_id: if self.config.group_size > 1 { 1 } else { 0 },
                new_id_per_episode: true,
                ..AgentDef::every_step(i / self.config.group_size)
            })
            .collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        for i in 0..self.agents.len() {
            self.episode_begin(i, ctx);
        }
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        let goal = if ctx.rng.random_bool(0.5) { 1.0 } else { -1.0 };
        let dims = self.dims();
        // Grouped agents share the goal of their group's first agent.
        let group_goal = self.group(agent).start;
        let goal = if group_goal != agent && !self.agents[group_goal].position.is_empty() && !self.agents[group_goal].finished {
            self.agents[group_goal].goal
        } else {
            goal
        };
        let entities = match self.config.entities {
            Some([max, size]) => {
                let real = ctx.rng.random_range(1..=max);
                (0..max * size)
                    .map(|k| match (k / size < real, k % size) {
                        (false, _) => 0.0,
                        (true, 0) => goal,
                        (true, last) if last == size - 1 => 1.0,
                        (true, _) => ctx.rng.random_range(-1.0..1.0),
                    })
                    .collect()
            }
            None => vec![],
        };
        self.agents[agent] = AgentState { goal, position: vec![0.0; dims], entities, ..Default::default() };
    }

    fn wants_decision(&self, agent: usize) -> bool {
        !self.agents[agent].finished
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let c = &self.config;
        let g = self.shown_goal(agent);
        let mut out: Vec<Vec<f32>> = c.entities.map(|_| self.agents[agent].entities.clone()).into_iter().collect();
        out.extend((0..c.num_vector).map(|_| vec![g; c.vector_size]));
        out.extend((0..c.num_visual).map(|_| vec![g; c.visual_shape.iter().product()]));
        out
    }

    fn action_mask(&self, _agent: usize) -> Vec<bool> {
        vec![false; 2 * self.config.discrete]
    }

    fn act(&mut self, agent: usize, continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        let step = self.config.step_size;
        let deltas: Vec<f32> =
            continuous.iter().copied().chain(discrete.iter().map(|d| if *d == 1 { 1.0 } else { -1.0 })).collect();
        let a = &mut self.agents[agent];
        for (p, d) in a.position.iter_mut().zip(deltas) {
            *p = (*p + d.clamp(-step, step)).clamp(-1.0, 1.0);
            a.step_count += 1;
        }
        let done = a.position.iter().all(|p| p.abs() == 1.0);
        let reward = if done {
            a.position.iter().map(|p| SUCCESS_REWARD * p * a.goal).sum::<f32>() / a.position.len() as f32
        } else {
            -TIME_PENALTY
        };
        a.episode_return += reward;
        if !done {
            ctx.set_reward(agent, reward);
            return;
        }
        if self.config.group_size == 1 {
            ctx.set_reward(agent, reward);
            ctx.record_stat("Simple/Episode Return", a.episode_return, StatsAggregation::Average);
            ctx.record_stat("Simple/Episodes", 1.0, StatsAggregation::Sum);
            ctx.record_stat("Simple/Return Histogram", a.episode_return, StatsAggregation::Histogram);
            ctx.record_stat("Simple/Last Goal", a.goal, StatsAggregation::MostRecent);
            ctx.end_episode(agent);
            return;
        }
        // Grouped: wait for the others; the last finisher's reward goes to the whole group.
        a.finished = true;
        a.final_reward = reward;
        let group = self.group(agent);
        if group.clone().all(|i| self.agents[i].finished) {
            ctx.record_stat("Simple/Group Reward", reward, StatsAggregation::Average);
            for i in group {
                let own = if i == agent { reward } else { self.agents[i].final_reward.min(-TIME_PENALTY) };
                ctx.set_reward(i, own);
                ctx.add_group_reward(i, reward);
                ctx.end_episode(i);
            }
        }
    }
}
