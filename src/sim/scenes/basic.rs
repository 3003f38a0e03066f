//! `Basic` (envs.md §1): a one-hot position on a line; small goal at 7 (+0.1), large goal at
//! 17 (+1), -0.01 per decision, one decision per academy step.

use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::comm::side_channel::StatsAggregation;
use crate::spec::{ActionSpec, ObservationSpec};

const START: i32 = 10;
const SMALL_GOAL: i32 = 7;
const LARGE_GOAL: i32 = 17;
const MIN_POSITION: i32 = 0;
const MAX_POSITION: i32 = 20;
const OBSERVATION_SIZE: usize = 20;

/// The Basic scene.
pub struct Basic {
    position: i32,
    decisions: u32,
}

impl Basic {
    pub fn new() -> Self {
        Self { position: START, decisions: 0 }
    }
}

impl Default for Basic {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene for Basic {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        vec![BehaviorDef {
            name: "Basic?team=0".into(),
            observations: vec![ObservationDef::floats(ObservationSpec::vector(OBSERVATION_SIZE, "BasicSensor"))],
            actions: ActionSpec::discrete(&[3]),
        }]
    }

    fn agents(&self) -> Vec<AgentDef> {
        vec![AgentDef::every_step(0)]
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        self.episode_begin(0, ctx);
    }

    fn episode_begin(&mut self, _agent: usize, _ctx: &mut SceneContext) {
        self.position = START;
        self.decisions = 0;
    }

    fn observe(&mut self, _agent: usize) -> Vec<Vec<f32>> {
        let mut one_hot = vec![0.0; OBSERVATION_SIZE];
        if let Some(v) = one_hot.get_mut(self.position as usize) {
            *v = 1.0;
        }
        vec![one_hot]
    }

    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        let direction = match discrete.first() {
            Some(1) => -1,
            Some(2) => 1,
            _ => 0,
        };
        self.position = (self.position + direction).clamp(MIN_POSITION, MAX_POSITION);
        self.decisions += 1;
        ctx.add_reward(agent, -0.01);
        if self.position == SMALL_GOAL || self.position == LARGE_GOAL {
            ctx.add_reward(agent, if self.position == SMALL_GOAL { 0.1 } else { 1.0 });
            ctx.record_stat("Basic/Goal Position", self.position as f32, StatsAggregation::MostRecent);
            ctx.record_stat("Basic/Episode Decisions", self.decisions as f32, StatsAggregation::Average);
            ctx.end_episode(agent);
        }
    }
}
