//! `3DBall` and `3DBallHard` (envs.md §2): 12 platforms, each balancing a ball.
//! 3DBallHard observes no velocity: two stacked observations of 9 decisions, the ball's
//! position relative to the platform (27) and the platform rotation's z, x (18), in that
//! order (Unity sorts sensors by name). Checked with the Unity-trained 3DBallHard.onnx, which
//! balances every ball with this layout and none with 9 interleaved blocks of 5. The platform
//! is rotated kinematically by the actions (2 degrees per tick per unit action, within a tilt
//! limit); the ball is a rigid sphere under gravity that rolls without slipping on the
//! platform's top face (acceleration 5/7 g sin θ), lands without bouncing and falls off
//! past the edges. One academy step is one 0.02 s physics tick.

use crate::comm::side_channel::StatsAggregation;
use crate::sim::math::{Quat, Vec3};
use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;

const AGENTS: usize = 12;
const DT: f32 = 0.02;
const HALF_SIZE: f32 = 2.5;
const BALL_RADIUS: f32 = 0.5;
/// PhysX's default contact offset: contact starts this close to the surface.
const CONTACT_OFFSET: f32 = 0.01;
const MAX_STEP: u32 = 5000;
const DECISION_PERIOD: u32 = 5;
/// 3DBallHard stacks this many decisions.
const HARD_STACK: usize = 9;
const X_AXIS: Vec3 = Vec3::new(1.0, 0.0, 0.0);
const Z_AXIS: Vec3 = Vec3::new(0.0, 0.0, 1.0);

#[derive(Debug, Clone, Copy)]
struct Area {
    rotation: Quat,
    /// Ball centre relative to the platform centre (world axes).
    ball: Vec3,
    velocity: Vec3,
    decisions: u32,
}

/// Which observations a 3DBall scene sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BallObservations {
    /// 3DBall: rotation z, x, ball position, ball velocity (8).
    Full,
    /// 3DBallHard, ML-Agents >= 1.x scenes: stacked positions (27), then stacked rotations (18).
    Stacked,
    /// 3DBallHard, 0.1x-era scenes: one vector sensor of 5 features stacked 9 times
    /// (oldest first), 45 floats.
    StackedLegacy,
}

/// 3DBall (8 observations) or 3DBallHard (stacked positions and rotations, no velocity).
pub struct Ball3D {
    observations: BallObservations,
    areas: Vec<Area>,
    stacks: Vec<Vec<[f32; 5]>>,
    gravity: f32,
    scale: f32,
}

impl Ball3D {
    pub fn new(observations: BallObservations) -> Self {
        let area = Area { rotation: Quat::IDENTITY, ball: Vec3::default(), velocity: Vec3::default(), decisions: 0 };
        Self { observations, areas: vec![area; AGENTS], stacks: vec![vec![]; AGENTS], gravity: 9.81, scale: 1.0 }
    }

    fn behavior_name(&self) -> &'static str {
        match self.observations {
            BallObservations::Full => "3DBall?team=0",
            _ => "3DBallHard?team=0",
        }
    }

    fn radius(&self) -> f32 {
        BALL_RADIUS * self.scale
    }

    fn step_ball(&self, a: &mut Area) {
        let gravity = Vec3::new(0.0, -self.gravity, 0.0);
        a.velocity = a.velocity + gravity * DT;
        a.ball = a.ball + a.velocity * DT;
        let local = a.rotation.conjugate().rotate(a.ball);
        let r = self.radius();
        let over_face = local.x.abs() <= HALF_SIZE && local.z.abs() <= HALF_SIZE && local.y >= 0.0;
        if over_face && local.y <= HALF_SIZE + r + CONTACT_OFFSET {
            let normal = a.rotation.rotate(Vec3::new(0.0, 1.0, 0.0));
            let into = a.velocity.dot(normal);
            if into < 0.0 {
                // Bounciness 0: the normal velocity is absorbed.
                a.velocity = a.velocity - normal * into;
            }
            // Rolling without slipping: friction takes 2/7 of gravity's tangential pull.
            let tangential = gravity - normal * gravity.dot(normal);
            a.velocity = a.velocity - tangential * (2.0 / 7.0 * DT);
            // Depenetrate: the ball rests on the face.
            if local.y < HALF_SIZE + r {
                a.ball = a.rotation.rotate(Vec3::new(local.x, HALF_SIZE + r, local.z));
            }
        }
    }

    fn features(a: &Area) -> [f32; 5] {
        [a.rotation.z, a.rotation.x, a.ball.x, a.ball.y, a.ball.z]
    }
}

impl Scene for Ball3D {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        let observations = match self.observations {
            BallObservations::Full => vec![ObservationSpec::vector(8, "VectorSensor_size8")],
            BallObservations::Stacked => vec![
                ObservationSpec::vector(3 * HARD_STACK, "StackingSensor_size9_ObservableAttribute:Ball3DHardAgent.PositionDelta"),
                ObservationSpec::vector(2 * HARD_STACK, "StackingSensor_size9_ObservableAttribute:Ball3DHardAgent.Rotation"),
            ],
            BallObservations::StackedLegacy => vec![ObservationSpec::vector(5 * HARD_STACK, "StackingSensor_size9_VectorSensor_size5")],
        };
        vec![BehaviorDef {
            name: self.behavior_name().into(),
            observations: observations.into_iter().map(ObservationDef::floats).collect(),
            actions: ActionSpec::continuous(2),
        }]
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..AGENTS)
            .map(|_| AgentDef {
                behavior: 0,
                decision_period: DECISION_PERIOD,
                take_actions_between_decisions: true,
                max_step: MAX_STEP,
                group_id: 0,
                new_id_per_episode: false,
            })
            .collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        for i in 0..AGENTS {
            self.episode_begin(i, ctx);
        }
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        self.gravity = ctx.parameter("gravity", 9.81);
        self.scale = ctx.parameter("scale", 1.0);
        ctx.record_stat("3DBall/Scale", self.scale, StatsAggregation::Average);
        // Mass does not change how a ball rolls on a kinematic platform; it is drawn (one
        // draw per episode, as Unity's SetBall) and recorded.
        ctx.record_stat("3DBall/Mass", ctx.parameter("mass", 1.0), StatsAggregation::Average);
        let rx = ctx.rng.random_range(-10.0f32..10.0);
        let rz = ctx.rng.random_range(-10.0f32..10.0);
        let rotation = Quat::IDENTITY.rotate_self(X_AXIS, rx).rotate_self(Z_AXIS, rz);
        let ball = Vec3::new(ctx.rng.random_range(-1.5f32..1.5), 4.0, ctx.rng.random_range(-1.5f32..1.5));
        self.areas[agent] = Area { rotation, ball, velocity: Vec3::default(), decisions: 0 };
        self.stacks[agent] = vec![[0.0; 5]; HARD_STACK];
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let a = self.areas[agent];
        if self.observations == BallObservations::Full {
            return vec![vec![a.rotation.z, a.rotation.x, a.ball.x, a.ball.y, a.ball.z, a.velocity.x, a.velocity.y, a.velocity.z]];
        }
        let stack = &mut self.stacks[agent];
        stack.remove(0);
        stack.push(Self::features(&a));
        if self.observations == BallObservations::StackedLegacy {
            return vec![stack.iter().flatten().copied().collect()];
        }
        let positions = stack.iter().flat_map(|f| [f[2], f[3], f[4]]).collect();
        let rotations = stack.iter().flat_map(|f| [f[0], f[1]]).collect();
        vec![positions, rotations]
    }

    fn act(&mut self, agent: usize, continuous: &[f32], _discrete: &[i32], ctx: &mut SceneContext) {
        let a = &mut self.areas[agent];
        let action_z = 2.0 * continuous.first().copied().unwrap_or(0.0).clamp(-1.0, 1.0);
        let action_x = 2.0 * continuous.get(1).copied().unwrap_or(0.0).clamp(-1.0, 1.0);
        if (a.rotation.z < 0.25 && action_z > 0.0) || (a.rotation.z > -0.25 && action_z < 0.0) {
            a.rotation = a.rotation.rotate_self(Z_AXIS, action_z);
        }
        if (a.rotation.x < 0.25 && action_x > 0.0) || (a.rotation.x > -0.25 && action_x < 0.0) {
            a.rotation = a.rotation.rotate_self(X_AXIS, action_x);
        }
        a.decisions += 1;
        if a.ball.y < -2.0 || a.ball.x.abs() > 3.0 || a.ball.z.abs() > 3.0 {
            ctx.set_reward(agent, -1.0);
            ctx.record_stat("3DBall/Ticks Balanced", a.decisions as f32, StatsAggregation::Average);
            ctx.end_episode(agent);
        } else {
            ctx.set_reward(agent, 0.1);
        }
    }

    fn physics_step(&mut self, _ctx: &mut SceneContext) {
        for i in 0..AGENTS {
            let mut a = self.areas[i];
            self.step_ball(&mut a);
            self.areas[i] = a;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ball_comes_to_rest_on_a_level_platform() {
        let scene = Ball3D::new(BallObservations::Full);
        let mut a = Area { rotation: Quat::IDENTITY, ball: Vec3::new(0.5, 4.0, 0.0), velocity: Vec3::default(), decisions: 0 };
        for _ in 0..200 {
            scene.step_ball(&mut a);
        }
        assert!((a.ball.y - 3.0).abs() < 0.01, "{:?}", a.ball);
        assert!(a.velocity.x.abs() < 1e-4);
    }

    #[test]
    fn ball_rolls_downhill_at_five_sevenths_g() {
        let scene = Ball3D::new(BallObservations::Full);
        // Rotating about +z tilts the top face's normal towards -x: the ball rolls to -x.
        let rotation = Quat::IDENTITY.rotate_self(Z_AXIS, 10.0);
        let ball = rotation.rotate(Vec3::new(0.0, 3.0, 0.0));
        let mut a = Area { rotation, ball, velocity: Vec3::default(), decisions: 0 };
        for _ in 0..50 {
            scene.step_ball(&mut a);
        }
        let expected = 5.0 / 7.0 * 9.81 * 10f32.to_radians().sin() * 1.0;
        let speed = (a.velocity.x * a.velocity.x + a.velocity.y * a.velocity.y).sqrt();
        assert!(a.velocity.x < 0.0);
        assert!((speed - expected).abs() < 0.05 * expected, "{speed} vs {expected}");
    }
}
