//! `Pong`: a symmetric 1-vs-1 game for self-play where skill matters. Two paddles
//! (`Pong?team=0` on the left, `Pong?team=1` on the right) and a ball that bounces off the top
//! and bottom walls and speeds up at every hit. A paddle that misses the ball loses the point:
//! +1 to the winner and -1 to the loser on the last step; a rally longer than the step limit
//! is interrupted. Each side observes the field mirrored into its own frame (its own goal on
//! the left), as Unity's Tennis and Soccer do, so one policy can play either side:
//! [own paddle y, opponent paddle y, ball x, ball y, ball vx, ball vy]. One branch of 3
//! actions: stay, up, down.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;

/// Decisions before a rally is interrupted.
const MAX_STEP: u32 = 400;
/// Half the paddle's height (the field is [-1, 1] in both directions).
const PADDLE_HALF_HEIGHT: f32 = 0.2;
const PADDLE_SPEED: f32 = 0.06;
const SERVE_SPEED: f32 = 0.04;
/// Each hit multiplies the ball's horizontal speed by this, up to `MAX_SPEED`.
const SPEED_UP: f32 = 1.08;
const MAX_SPEED: f32 = 0.12;
/// Where the paddles stand (the ball is hit or missed when it reaches this x).
const PADDLE_X: f32 = 0.95;

/// The Pong scene.
pub struct Pong {
    paddles: [f32; 2],
    ball: [f32; 2],
    velocity: [f32; 2],
    /// The point was won by this team this step.
    point: Option<usize>,
}

impl Pong {
    pub fn new() -> Self {
        Self { paddles: [0.0; 2], ball: [0.0; 2], velocity: [SERVE_SPEED, 0.0], point: None }
    }

    fn serve(&mut self, ctx: &mut SceneContext) {
        self.paddles = [0.0; 2];
        self.ball = [0.0, ctx.rng.random_range(-0.5f32..0.5)];
        let direction = if ctx.rng.random_bool(0.5) { 1.0 } else { -1.0 };
        self.velocity = [direction * SERVE_SPEED, ctx.rng.random_range(-0.03f32..0.03)];
        self.point = None;
    }

    /// Moves the ball one step; a paddle at the side it reaches returns it (faster, with
    /// spin from where it hit), otherwise the other team wins the point.
    fn move_ball(&mut self) {
        self.ball[0] += self.velocity[0];
        self.ball[1] += self.velocity[1];
        if self.ball[1].abs() > 1.0 {
            self.ball[1] = self.ball[1].signum() * 2.0 - self.ball[1];
            self.velocity[1] = -self.velocity[1];
        }
        if self.ball[0].abs() < PADDLE_X {
            return;
        }
        let side = if self.ball[0] < 0.0 { 0 } else { 1 };
        let offset = self.ball[1] - self.paddles[side];
        if offset.abs() <= PADDLE_HALF_HEIGHT {
            let speed = (self.velocity[0].abs() * SPEED_UP).min(MAX_SPEED);
            self.velocity[0] = if side == 0 { speed } else { -speed };
            self.velocity[1] = (self.velocity[1] + offset * 0.1).clamp(-0.06, 0.06);
            self.ball[0] = self.ball[0].signum() * PADDLE_X;
        } else {
            self.point = Some(1 - side);
        }
    }
}

impl Default for Pong {
    fn default() -> Self {
        Self::new()
    }
}

impl Scene for Pong {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        ["Pong?team=0", "Pong?team=1"]
            .into_iter()
            .map(|name| BehaviorDef {
                name: name.into(),
                observations: vec![ObservationDef::floats(ObservationSpec::vector(6, "VectorSensor_size6"))],
                actions: ActionSpec::discrete(&[3]),
            })
            .collect()
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..2).map(|team| AgentDef { max_step: MAX_STEP, ..AgentDef::every_step(team) }).collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        self.serve(ctx);
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        // A new rally once the second paddle's episode has ended too.
        if agent == 1 {
            self.serve(ctx);
        }
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        // Team 1 sees the field mirrored left to right.
        let mirror = if agent == 0 { 1.0 } else { -1.0 };
        vec![vec![self.paddles[agent], self.paddles[1 - agent], mirror * self.ball[0], self.ball[1], mirror * self.velocity[0] * 10.0, self.velocity[1] * 10.0]]
    }

    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], _ctx: &mut SceneContext) {
        let direction = match discrete.first() {
            Some(1) => 1.0,
            Some(2) => -1.0,
            _ => 0.0,
        };
        self.paddles[agent] = (self.paddles[agent] + direction * PADDLE_SPEED).clamp(-1.0 + PADDLE_HALF_HEIGHT, 1.0 - PADDLE_HALF_HEIGHT);
    }

    fn physics_step(&mut self, ctx: &mut SceneContext) {
        if self.point.is_some() {
            return;
        }
        self.move_ball();
        if let Some(winner) = self.point {
            ctx.record_stat("Pong/Team 0 Wins", (winner == 0) as u8 as f32, StatsAggregation::Average);
            for agent in 0..2 {
                ctx.set_reward(agent, if agent == winner { 1.0 } else { -1.0 });
                ctx.end_episode(agent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A paddle in the ball's way returns it faster; one out of the way loses the point.
    #[test]
    fn hits_speed_the_ball_up_and_misses_lose_the_point() {
        let mut pong = Pong::new();
        pong.ball = [-0.93, 0.1];
        pong.velocity = [-0.04, 0.0];
        pong.move_ball();
        assert!(pong.point.is_none() && pong.velocity[0] > 0.04, "{:?}", pong.velocity);
        pong.ball = [0.93, 0.9];
        pong.velocity = [0.05, 0.0];
        pong.move_ball();
        assert_eq!(pong.point, Some(0));
        // Walls reflect.
        let mut pong = Pong::new();
        pong.ball = [0.0, 0.99];
        pong.velocity = [0.01, 0.03];
        pong.move_ball();
        assert!(pong.ball[1] < 1.0 && pong.velocity[1] < 0.0);
        // The two sides see mirrored fields.
        pong.paddles = [0.3, -0.2];
        let (left, right) = (pong.observe(0)[0].clone(), pong.observe(1)[0].clone());
        assert_eq!((left[0], right[0], left[2], right[2]), (0.3, -0.2, pong.ball[0], -pong.ball[0]));
    }
}
