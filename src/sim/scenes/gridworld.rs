//! `GridWorld` (envs.md §3, the 0.17-era scene the shipped GridWorld.nn was trained on):
//! 9 areas, each a grid with one agent, one goal (+1) and one pit (-1); -0.01 per decision;
//! moves that leave the grid are masked; MaxStep 100. Observed through a top-down camera
//! (64x84 RGB, PNG on the wire) or, in `GridWorldVector`, as 6 coordinates.

use crate::sim::scene::{AgentDef, BehaviorDef, ObservationDef, Scene, SceneContext};
use crate::spec::{ActionSpec, ObservationSpec};
use rand::Rng;
use std::f32::consts::FRAC_1_SQRT_2;

const AREAS: usize = 9;
const MAX_STEP: u32 = 100;
const HEIGHT: usize = 64;
const WIDTH: usize = 84;
// Flat colours (the scene's materials and lighting were not available to reproduce): a dark
// floor, grey walls, a blue agent, a green goal and a red pit. The geometry comes from Unity's
// GridArea and prefabs; the floor's darkness and the agent's outline were inferred from Unity's
// GridWorld.nn, which plays this image at 0.87-0.94 for floors from black to 0.2 grey and walls
// from 0.3 to 0.6 grey (450 episodes each), but at -0.73 on a light floor and 0.65 with a
// solid agent square.
const AGENT_COLOR: [f32; 3] = [0.2, 0.4, 1.0];
const GOAL_COLOR: [f32; 3] = [0.2, 0.8, 0.2];
const PIT_COLOR: [f32; 3] = [0.8, 0.2, 0.2];
const FLOOR_COLOR: [f32; 3] = [0.0, 0.0, 0.0];
const WALL_COLOR: [f32; 3] = [0.5, 0.5, 0.5];

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

    /// Renders one area as Unity's `agentCam` sees it (GridArea.SetEnvironment): an orthographic
    /// camera looking straight down on the grid's centre with orthographic size gridSize/2, so the
    /// grid fills the image's height and a strip of the east and west walls shows at the sides.
    /// Each pixel is sampled at its centre (the camera has no anti-aliasing); image row 0 is the
    /// far side (+z). The goal is Unity's green plus (two 1 x 0.2 bars), the pit its red cross
    /// (the same bars turned by 45 degrees), the agent the outline of its cell (the four 0.2-wide
    /// bars of the agent in ML-Agents' current Area prefab).
    fn render(&self, a: &Area) -> Vec<f32> {
        let size = self.size as f32;
        let pixels_per_unit = HEIGHT as f32 / size;
        let centre = (size - 1.0) / 2.0;
        let mut image = vec![0.0; HEIGHT * WIDTH * 3];
        for row in 0..HEIGHT {
            for col in 0..WIDTH {
                let x = centre + (col as f32 + 0.5 - WIDTH as f32 / 2.0) / pixels_per_unit;
                let z = centre + (HEIGHT as f32 / 2.0 - row as f32 - 0.5) / pixels_per_unit;
                let color = self.color_at(a, x, z);
                let p = (row * WIDTH + col) * 3;
                image[p..p + 3].copy_from_slice(&color);
            }
        }
        image
    }

    /// The colour of the top-most surface at world point (x, z) of an area.
    fn color_at(&self, a: &Area, x: f32, z: f32) -> [f32; 3] {
        let limit = self.size as f32 - 0.5;
        if x < -0.5 || x > limit || z < -0.5 || z > limit {
            return WALL_COLOR;
        }
        let cell = ((x + 0.5).floor() as i32, (z + 0.5).floor() as i32);
        // Offsets from the cell's centre.
        let (dx, dz) = (x - cell.0 as f32, z - cell.1 as f32);
        if cell == a.agent && dx.abs().max(dz.abs()) >= 0.3 {
            AGENT_COLOR
        } else if cell == a.goal && is_plus(dx, dz) {
            GOAL_COLOR
        } else if cell == a.pit && is_plus((dx + dz) * FRAC_1_SQRT_2, (dx - dz) * FRAC_1_SQRT_2) {
            PIT_COLOR
        } else {
            FLOOR_COLOR
        }
    }
}

/// Whether a point (offsets from a cell's centre) lies on a plus of two 1 x 0.2 bars.
fn is_plus(dx: f32, dz: f32) -> bool {
    let on_bar = |along: f32, across: f32| along.abs() <= 0.5 && across.abs() <= 0.1;
    on_bar(dx, dz) || on_bar(dz, dx)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pixel(image: &[f32], row: usize, col: usize) -> [f32; 3] {
        let p = (row * WIDTH + col) * 3;
        [image[p], image[p + 1], image[p + 2]]
    }

    /// Unity's camera framing for a 5x5 grid: 12.8 pixels per cell, the grid spanning the
    /// image's height and columns 10..74, the walls in the 10 columns at each side. The agent is
    /// an outline (its cell's centre shows the floor), the goal a plus, the pit a cross.
    #[test]
    fn the_camera_frames_the_grid_as_unitys_agent_camera() {
        let scene = GridWorld::new(true);
        let area = Area { agent: (0, 4), goal: (2, 2), pit: (4, 0) };
        let image = scene.render(&area);
        // Cell (x, z) has its centre at column 10 + 12.8 (x + 0.5), row 12.8 (4.5 - z).
        let centre = |x: f32, z: f32| ((12.8 * (4.5 - z)) as usize, (10.0 + 12.8 * (x + 0.5)) as usize);
        assert_eq!(pixel(&image, 32, 5), WALL_COLOR);
        assert_eq!(pixel(&image, 32, 80), WALL_COLOR);
        assert_eq!(pixel(&image, 0, 40), FLOOR_COLOR, "no wall above or below the grid");
        let (row, col) = centre(0.0, 4.0);
        assert_eq!(pixel(&image, row, col), FLOOR_COLOR, "the agent is an outline");
        assert_eq!(pixel(&image, row, col - 5), AGENT_COLOR);
        let (row, col) = centre(2.0, 2.0);
        assert_eq!(pixel(&image, row, col), GOAL_COLOR);
        assert_eq!(pixel(&image, row, col + 5), GOAL_COLOR, "the plus's arm");
        assert_eq!(pixel(&image, row - 4, col + 4), FLOOR_COLOR, "beside the plus's arms");
        let (row, col) = centre(4.0, 0.0);
        assert_eq!(pixel(&image, row, col), PIT_COLOR);
        assert_eq!(pixel(&image, row - 4, col + 4), PIT_COLOR, "the cross's arm");
        assert_eq!(pixel(&image, row, col + 5), FLOOR_COLOR, "beside the cross's arms");
    }
}
