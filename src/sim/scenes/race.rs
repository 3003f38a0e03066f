//! Two-team competitive scenes for self-play. `Race`: two agents (`Race?team=0`,
//! `Race?team=1`) start at 0 on a line and race to the side shown by the goal sign; the first
//! to arrive gets +1 and the other -1 (0 each on a tie or at the step limit). `RaceAsymmetric`:
//! a pair (`RaceDuo?team=0`, one group) against one faster runner (`RaceSolo?team=1`);
//! the pair wins when either of its agents arrives first.
//! Observation: [goal, own position, nearest opponent position]. Actions: one branch of 3
//! (stay, left, right).

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;

const MAX_STEP: u32 = 50;

#[derive(Debug, Clone)]
struct Runner {
    team: usize,
    speed: f32,
    position: f32,
}

/// A race between two teams.
pub struct Race {
    names: [&'static str; 2],
    runners: Vec<Runner>,
    goal: f32,
    /// Finish reached this tick, per team.
    arrived: [bool; 2],
}

impl Race {
    /// One runner per team, same speed.
    pub fn symmetric() -> Self {
        Self::build(["Race?team=0", "Race?team=1"], vec![(0, 0.2), (1, 0.2)])
    }

    /// Two runners in team 0 (a group) against one runner twice as fast in team 1.
    pub fn asymmetric() -> Self {
        Self::build(["RaceDuo?team=0", "RaceSolo?team=1"], vec![(0, 0.2), (0, 0.2), (1, 0.4)])
    }

    fn build(names: [&'static str; 2], runners: Vec<(usize, f32)>) -> Self {
        let runners = runners.into_iter().map(|(team, speed)| Runner { team, speed, position: 0.0 }).collect();
        Self { names, runners, goal: 1.0, arrived: [false; 2] }
    }

    fn team_size(&self, team: usize) -> usize {
        self.runners.iter().filter(|r| r.team == team).count()
    }
}

impl Scene for Race {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        self.names
            .iter()
            .map(|name| BehaviorDef {
                name: (*name).into(),
                observations: vec![ObservationDef::floats(ObservationSpec::vector(3, "VectorSensor_size3"))],
                actions: ActionSpec::discrete(&[3]),
            })
            .collect()
    }

    fn agents(&self) -> Vec<AgentDef> {
        self.runners
            .iter()
            .map(|r| AgentDef {
                max_step: MAX_STEP,
                group_id: if self.team_size(r.team) > 1 { 1 } else { 0 },
                ..AgentDef::every_step(r.team)
            })
            .collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        self.goal = if ctx.rng.random_bool(0.5) { 1.0 } else { -1.0 };
        self.arrived = [false; 2];
        for r in &mut self.runners {
            r.position = 0.0;
        }
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        // The race restarts once the last runner's episode has ended (the others' final
        // observations were taken before).
        if agent == self.runners.len() - 1 {
            self.reset(ctx);
        }
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let me = &self.runners[agent];
        let opponent = self
            .runners
            .iter()
            .filter(|r| r.team != me.team)
            .map(|r| r.position)
            .min_by(|a, b| (self.goal - a).abs().total_cmp(&(self.goal - b).abs()))
            .unwrap_or(0.0);
        vec![vec![self.goal, me.position, opponent]]
    }

    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], _ctx: &mut SceneContext) {
        let r = &mut self.runners[agent];
        let direction = match discrete.first() {
            Some(1) => -1.0,
            Some(2) => 1.0,
            _ => 0.0,
        };
        r.position = (r.position + direction * r.speed).clamp(-1.0, 1.0);
        if (r.position - self.goal).abs() < 1e-6 {
            self.arrived[r.team] = true;
        }
    }

    fn physics_step(&mut self, ctx: &mut SceneContext) {
        if !self.arrived.iter().any(|a| *a) {
            return;
        }
        let result = match self.arrived {
            [true, false] => [1.0, -1.0],
            [false, true] => [-1.0, 1.0],
            _ => [0.0, 0.0],
        };
        ctx.record_stat("Race/Team 0 Result", result[0], StatsAggregation::Average);
        for (i, r) in self.runners.iter().enumerate() {
            if self.team_size(r.team) > 1 {
                ctx.add_group_reward(i, result[r.team]);
            }
            ctx.set_reward(i, result[r.team]);
            ctx.end_episode(i);
        }
        self.arrived = [false; 2];
    }
}
