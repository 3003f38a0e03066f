//! `Corridor`: a scene whose difficulty is an environment parameter, so that a curriculum
//! matters (as WallJump's wall height does). Eight agents, each in its own corridor, start at
//! cell 0 and must reach the goal `goal_distance` cells away (env parameter, read at each
//! episode start; default 90, the hardest) within 100 decisions: +1 at the goal, +0.1 at a
//! small goal 3 cells behind the start (a local optimum, as Basic's small goal), -0.005 per
//! decision. A random policy reaches a goal 5 cells away often; one 90 cells away takes an
//! almost deterministic walk forward, which only reaching nearer goals teaches: without a
//! curriculum the policy settles for the small goal.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};

/// The environment parameter that sets the goal's distance (cells).
pub const GOAL_DISTANCE_PARAMETER: &str = "goal_distance";
/// The goal distance when the parameter is not sent.
pub const DEFAULT_GOAL_DISTANCE: f32 = 90.0;
const MAX_GOAL_DISTANCE: i32 = 100;
const AGENTS: usize = 8;
/// Decisions per episode before it is interrupted.
const MAX_DECISIONS: u32 = 100;
const STEP_PENALTY: f32 = 0.005;
/// The small goal's cell (behind the start) and reward.
const SMALL_GOAL: i32 = -3;
const SMALL_GOAL_REWARD: f32 = 0.1;
/// Observations are cell numbers divided by this.
const SCALE: f32 = 100.0;

#[derive(Debug, Clone, Copy, Default)]
struct Walker {
    position: i32,
    goal: i32,
}

/// The Corridor scene.
pub struct Corridor {
    walkers: [Walker; AGENTS],
}

impl Corridor {
    pub fn new() -> Self {
        Self { walkers: [Walker::default(); AGENTS] }
    }
}

impl Default for Corridor {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene for Corridor {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        vec![BehaviorDef {
            name: "Corridor?team=0".into(),
            observations: vec![ObservationDef::floats(ObservationSpec::vector(3, "CorridorSensor"))],
            actions: ActionSpec::discrete(&[3]),
        }]
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..AGENTS).map(|_| AgentDef { max_step: MAX_DECISIONS, ..AgentDef::every_step(0) }).collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        for agent in 0..AGENTS {
            self.episode_begin(agent, ctx);
        }
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        let goal = (ctx.parameter(GOAL_DISTANCE_PARAMETER, DEFAULT_GOAL_DISTANCE).round() as i32).clamp(1, MAX_GOAL_DISTANCE);
        ctx.record_stat("Corridor/Goal Distance", goal as f32, StatsAggregation::Average);
        self.walkers[agent] = Walker { position: 0, goal };
    }

    /// Position, goal and the distance left, in units of 100 cells.
    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let w = self.walkers[agent];
        vec![vec![w.position as f32 / SCALE, w.goal as f32 / SCALE, (w.goal - w.position) as f32 / SCALE]]
    }

    /// 0 stays, 1 steps back, 2 steps forward.
    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        let w = &mut self.walkers[agent];
        match discrete.first() {
            Some(1) => w.position -= 1,
            Some(2) => w.position += 1,
            _ => {}
        }
        ctx.add_reward(agent, -STEP_PENALTY);
        let reward = if w.position >= w.goal {
            1.0
        } else if w.position <= SMALL_GOAL {
            SMALL_GOAL_REWARD
        } else {
            return;
        };
        ctx.add_reward(agent, reward);
        ctx.record_stat("Corridor/Reached Goal", (reward == 1.0) as u8 as f32, StatsAggregation::Average);
        ctx.end_episode(agent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::side_channel::{shared, EnvironmentParametersChannel, ParameterValue, StatsSideChannel};
    use rand::SeedableRng;

    fn context(goal_distance: Option<f32>) -> SceneContext {
        let parameters = shared(EnvironmentParametersChannel::new());
        if let Some(d) = goal_distance {
            crate::comm::side_channel::lock(&parameters).receive(GOAL_DISTANCE_PARAMETER, ParameterValue::Float(d));
        }
        SceneContext::new(AGENTS, rand_chacha::ChaCha8Rng::seed_from_u64(0), parameters, shared(StatsSideChannel::new()))
    }

    /// The goal comes from the parameter (default 20); walking forward reaches it in that
    /// many decisions, for 1 - 0.005 per decision; three steps back reach the small goal.
    #[test]
    fn the_goal_distance_is_the_parameter() {
        let mut scene = Corridor::new();
        let mut ctx = context(None);
        scene.reset(&mut ctx);
        assert_eq!(scene.observe(0), vec![vec![0.0, 0.9, 0.9]]);
        let mut ctx = context(Some(3.0));
        scene.reset(&mut ctx);
        assert_eq!(scene.observe(0), vec![vec![0.0, 0.03, 0.03]]);
        let mut total = 0.0;
        for _ in 0..3 {
            assert_eq!(ctx.take_ended(0), None);
            scene.act(0, &[], &[2], &mut ctx);
            total += ctx.take_reward(0).0;
        }
        assert_eq!(ctx.take_ended(0), Some(false));
        assert!((total - (1.0 - 3.0 * STEP_PENALTY)).abs() < 1e-6, "{total}");
        scene.reset(&mut ctx);
        for _ in 0..3 {
            assert_eq!(ctx.take_ended(1), None);
            scene.act(1, &[], &[1], &mut ctx);
        }
        assert_eq!(ctx.take_ended(1), Some(false));
        assert!((ctx.take_reward(1).0 - (SMALL_GOAL_REWARD - 3.0 * STEP_PENALTY)).abs() < 1e-6);
    }
}
