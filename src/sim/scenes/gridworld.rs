//! `GridWorld` (envs.md §3, the 0.17-era scene the shipped GridWorld.nn was trained on):
//! 9 areas, each a grid with one agent, one goal (+1) and one pit (-1); -0.01 per decision;
//! moves that leave the grid are masked; MaxStep 100. Observed through a top-down camera
//! (64x84 RGB, PNG on the wire) or, in `GridWorldVector`, as 6 coordinates.

use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;

const AREAS: usize = 9;
const MAX_STEP: u32 = 100;
const HEIGHT: usize = 64;
const WIDTH: usize = 84;
const AGENT_COLOR: [f32; 3] = [0.1, 0.2, 0.9];
const GOAL_COLOR: [f32; 3] = [0.1, 0.9, 0.1];
const PIT_COLOR: [f32; 3] = [0.9, 0.1, 0.1];
const FLOOR_COLOR: [f32; 3] = [0.75, 0.75, 0.75];
const WALL_COLOR: [f32; 3] = [0.3, 0.3, 0.3];

#[derive(Debug, Clone, Copy, Default)]
struct Area {
    agent: (i32, i32),
    goal: (i32, i32),
    pit: (i32, i32),
}

/// The GridWorld scene, visual or vector.
pub struct GridWorld {
    visual: bool,
    size: i32,
    areas: Vec<Area>,
}

impl GridWorld {
    pub fn new(visual: bool) -> Self {
        Self { visual, size: 5, areas: vec![Area::default(); AREAS] }
    }

    fn render(&self, a: &Area) -> Vec<f32> {
        let cells = self.size + 2; // the grid plus a wall ring
        let cell = (HEIGHT as i32 / cells).max(1);
        let x0 = (WIDTH as i32 - cell * cells) / 2;
        let y0 = (HEIGHT as i32 - cell * cells) / 2;
        let mut image = vec![0.0; HEIGHT * WIDTH * 3];
        for row in 0..HEIGHT as i32 {
            for col in 0..WIDTH as i32 {
                let (cx, cy) = ((col - x0).div_euclid(cell), (row - y0).div_euclid(cell));
                if cx < 0 || cy < 0 || cx >= cells || cy >= cells {
                    continue;
                }
                // Image row 0 is the far side (+z), as a camera looking down with z up the screen.
                let (gx, gz) = (cx - 1, self.size - 1 - (cy - 1));
                let color = if cx == 0 || cy == 0 || cx == cells - 1 || cy == cells - 1 {
                    WALL_COLOR
                } else if (gx, gz) == a.agent {
                    AGENT_COLOR
                } else if (gx, gz) == a.goal {
                    GOAL_COLOR
                } else if (gx, gz) == a.pit {
                    PIT_COLOR
                } else {
                    FLOOR_COLOR
                };
                let p = ((row as usize) * WIDTH + col as usize) * 3;
                image[p..p + 3].copy_from_slice(&color);
            }
        }
        image
    }
}

impl Scene for GridWorld {
    fn behaviors(&self) -> Vec<BehaviorDef> {
        let observation = if self.visual {
            ObservationDef::png(ObservationSpec::visual_hwc(HEIGHT, WIDTH, 3, "CameraSensor"))
        } else {
            ObservationDef::floats(ObservationSpec::vector(6, "VectorSensor_size6"))
        };
        vec![BehaviorDef { name: "GridWorld?team=0".into(), observations: vec![observation], actions: ActionSpec::discrete(&[5]) }]
    }

    fn agents(&self) -> Vec<AgentDef> {
        (0..AREAS).map(|_| AgentDef { max_step: MAX_STEP, ..AgentDef::every_step(0) }).collect()
    }

    fn reset(&mut self, ctx: &mut SceneContext) {
        self.size = (ctx.parameter("gridSize", 5.0).round() as i32).clamp(2, 20);
        for i in 0..AREAS {
            self.episode_begin(i, ctx);
        }
    }

    fn episode_begin(&mut self, agent: usize, ctx: &mut SceneContext) {
        let n = self.size * self.size;
        let mut cells: Vec<i32> = Vec::with_capacity(3);
        while cells.len() < 3 {
            let c = ctx.rng.random_range(0..n);
            if !cells.contains(&c) {
                cells.push(c);
            }
        }
        let at = |c: i32| (c % self.size, c / self.size);
        self.areas[agent] = Area { agent: at(cells[0]), goal: at(cells[1]), pit: at(cells[2]) };
    }

    fn observe(&mut self, agent: usize) -> Vec<Vec<f32>> {
        let a = &self.areas[agent];
        if self.visual {
            return vec![self.render(a)];
        }
        let scale = (self.size - 1).max(1) as f32;
        let coords = [a.agent, a.goal, a.pit];
        vec![coords.iter().flat_map(|(x, z)| [*x as f32 / scale, *z as f32 / scale]).collect()]
    }

    fn action_mask(&self, agent: usize) -> Vec<bool> {
        let (x, z) = self.areas[agent].agent;
        let max = self.size - 1;
        vec![false, z == max, z == 0, x == 0, x == max]
    }

    fn act(&mut self, agent: usize, _continuous: &[f32], discrete: &[i32], ctx: &mut SceneContext) {
        ctx.add_reward(agent, -0.01);
        let a = &mut self.areas[agent];
        let (dx, dz) = match discrete.first() {
            Some(1) => (0, 1),
            Some(2) => (0, -1),
            Some(3) => (-1, 0),
            Some(4) => (1, 0),
            _ => (0, 0),
        };
        let target = (a.agent.0 + dx, a.agent.1 + dz);
        if target.0 < 0 || target.1 < 0 || target.0 >= self.size || target.1 >= self.size {
            return; // a wall: the move is ignored
        }
        a.agent = target;
        if target == a.goal {
            ctx.set_reward(agent, 1.0);
            ctx.end_episode(agent);
        } else if target == a.pit {
            ctx.set_reward(agent, -1.0);
            ctx.end_episode(agent);
        }
    }
}
