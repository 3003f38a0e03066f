//! `SparseSwitch` (Pyramids-like: a switch to find before the goal appears), the sparse-reward
//! scene of the curiosity, RND, GAIL and behavioral-cloning tests. Eight agents, each in its own
//! corridor of 12 cells behind a combination lock: at each cell one of the four actions (the
//! same in every episode) steps forward and the three others send the agent back to cell 0. The
//! last cell holds the switch: pressing it (arriving there) makes the goal appear at cell 0, and
//! from then on action 0 walks one cell back and the others wait. Reaching the goal gives +2 and
//! ends the episode (Pyramids' gold brick); every decision costs 1/100 (Pyramids' -1/MaxStep),
//! and episodes are interrupted after 100 decisions. The best return is 2 - 0.22 = 1.78 (the
//! Pyramids benchmark is 1.75); an agent that never finds the switch gets -1.
//!
//! Random actions open the lock with probability 4^-11 (2.4e-7) per attempt, so the extrinsic reward
//! alone almost never appears; the cells are observed one-hot (plus the switch's state), so a
//! cell never visited is new to the curiosity and RND networks.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};

const AGENTS: usize = 8;
/// Cells of each corridor; the switch is the last one.
pub const CELLS: usize = 12;
/// The action that steps forward from each cell (the last cell's entry is never used).
const COMBINATION: [i32; CELLS] = [2, 0, 3, 1, 2, 0, 3, 1, 0, 3, 1, 2];
/// Decisions per episode before it is interrupted.
const MAX_DECISIONS: u32 = 100;
const GOAL_REWARD: f32 = 2.0;
const STEP_PENALTY: f32 = 1.0 / MAX_DECISIONS as f32;

#[derive(Debug, Clone, Copy, Default)]
struct Explorer {
    cell: usize,
    switch_on: bool,
}

/// The SparseSwitch scene.
#[derive(Default)]
pub struct SparseSwitch {
    explorers: [Explorer; AGENTS],
}

impl SparseSwitch {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scene for SparseSwitch {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        vec![BehaviorDef {
            name: "SparseSwitch?team=0".into(),
            observations: vec![ObservationDef::floats(ObservationSpec::vector(CELLS + 1, "SwitchSensor"))],
            actions: ActionSpec::discrete(&[4]),
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

    fn episode_begin(&mut self, agent: usize, _ctx: &mut SceneContext) {
        self.explorers[agent] = Explorer::default();
    }

    /// The cell one-hot, then 1 once the switch is on.
    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let e = self.explorers[agent];
        let mut observation = vec![0.0; CELLS + 1];
        observation[e.cell] = 1.0;
        observation[CELLS] = e.switch_on as u8 as f32;
        vec![observation]
    }

    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        ctx.add_reward(agent, -STEP_PENALTY);
        let action = discrete.first().copied().unwrap_or(0);
        let e = &mut self.explorers[agent];
        if !e.switch_on {
            e.cell = if action == COMBINATION[e.cell] { e.cell + 1 } else { 0 };
            if e.cell == CELLS - 1 {
                e.switch_on = true;
                ctx.record_stat("SparseSwitch/Switch Pressed", 1.0, StatsAggregation::Sum);
            }
        } else if action == 0 {
            e.cell -= 1;
            if e.cell == 0 {
                ctx.add_reward(agent, GOAL_REWARD);
                ctx.end_episode(agent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::side_channel::{shared, EnvironmentParametersChannel, StatsSideChannel};
    use rand::SeedableRng;

    fn context() -> SceneContext {
        let parameters = shared(EnvironmentParametersChannel::new());
        SceneContext::new(AGENTS, rand_chacha::ChaCha8Rng::seed_from_u64(0), parameters, shared(StatsSideChannel::new()))
    }

    /// The combination opens the lock in 11 decisions, the walk back takes 11 more: 2 - 0.22.
    /// A wrong action sends the agent back to cell 0; after the switch, only action 0 moves.
    #[test]
    fn the_combination_then_the_walk_back_reaches_the_goal() {
        let (mut scene, mut ctx) = (SparseSwitch::new(), context());
        scene.reset(&mut ctx);
        scene.act(0, &[], &[COMBINATION[0]], &mut ctx);
        let wrong = (COMBINATION[1] + 1) % 4;
        scene.act(0, &[], &[wrong], &mut ctx);
        assert_eq!(scene.observe(0)[0][0], 1.0, "a wrong action sends the agent back to cell 0");
        for cell in 0..CELLS - 1 {
            assert!(!scene.explorers[0].switch_on);
            scene.act(0, &[], &[COMBINATION[cell]], &mut ctx);
        }
        let seen = scene.observe(0).remove(0);
        assert_eq!((seen[CELLS - 1], seen[CELLS]), (1.0, 1.0));
        scene.act(0, &[], &[1], &mut ctx);
        assert_eq!(scene.explorers[0].cell, CELLS - 1, "after the switch only action 0 moves");
        for _ in 0..CELLS - 1 {
            scene.act(0, &[], &[0], &mut ctx);
        }
        assert_eq!(ctx.take_ended(0), Some(false));
        let total = ctx.take_reward(0).0;
        assert!((total - (GOAL_REWARD - 25.0 * STEP_PENALTY)).abs() < 1e-5, "{total}");
    }
}
