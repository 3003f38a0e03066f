//! The stand-in scenes and their names (`--scene NAME`).

mod ball3d;
mod basic;
mod coop;
mod corridor;
mod gridworld;
mod pong;
mod race;
mod simple;
mod switch;

pub use ball3d::{Ball3D, BallObservations};
pub use basic::Basic;
pub use coop::{CoopConfig, CoopScene, CoopTask, COOP_BEHAVIOR, DOOR_REWARD};
pub use corridor::{Corridor, DEFAULT_GOAL_DISTANCE, GOAL_DISTANCE_PARAMETER};
pub use gridworld::GridWorld;
pub use pong::Pong;
pub use race::Race;
pub use simple::{SimpleConfig, SimpleScene, SUCCESS_REWARD, TIME_PENALTY};
pub use switch::SparseSwitch;

use super::scene::Scene;

/// A scene name with a one-line description.
pub struct SceneInfo {
    pub name: &'static str,
    pub description: &'static str,
}

/// Every scene, in the order `--scene list` prints them.
pub const SCENES: &[SceneInfo] = &[
    SceneInfo { name: "Basic", description: "Unity example: 1-D one-hot position, goals at 7 (+0.1) and 17 (+1)" },
    SceneInfo { name: "3DBall", description: "Unity example: 12 platforms balancing a ball, 8 observations, 2 continuous actions" },
    SceneInfo { name: "3DBallHard", description: "Unity example: 3DBall without velocity; stacked positions (27) and rotations (18)" },
    SceneInfo { name: "3DBallHardLegacy", description: "3DBallHard as 0.1x-era scenes observed it: 5 features stacked 9 times (45)" },
    SceneInfo { name: "GridWorld", description: "Unity example (0.17): 9 grids, 64x84 RGB camera (PNG), 5 masked discrete actions" },
    SceneInfo { name: "GridWorldVector", description: "GridWorld observed as 6 coordinates instead of a camera" },
    SceneInfo { name: "Simple1DDiscrete", description: "test suite SimpleEnvironment, 1 branch of 2, step 0.2" },
    SceneInfo { name: "Simple1DContinuous", description: "test suite SimpleEnvironment, 1 continuous action, step 0.2" },
    SceneInfo { name: "Simple2DDiscrete", description: "test suite SimpleEnvironment, 2 branches of 2, step 0.8" },
    SceneInfo { name: "Simple2DContinuous", description: "test suite SimpleEnvironment, 2 continuous actions, step 0.8" },
    SceneInfo { name: "SimpleHybrid", description: "test suite SimpleEnvironment, 1 continuous + 1 branch, step 0.8" },
    SceneInfo { name: "SimpleHybrid2x2", description: "test suite SimpleEnvironment, 2 continuous + 2 branches, step 0.8" },
    SceneInfo { name: "SimpleVisualDiscrete", description: "test suite SimpleEnvironment, one 20x20x3 image, 1 branch of 2" },
    SceneInfo { name: "SimpleVisualContinuous", description: "test suite SimpleEnvironment, one 20x20x3 image, 1 continuous action" },
    SceneInfo { name: "SimpleVisualHybrid", description: "test suite SimpleEnvironment, one 20x20x3 image, 1 continuous + 1 branch of 2" },
    SceneInfo { name: "SimpleVisualAdvanced", description: "test suite SimpleEnvironment, one 36x36x3 image (nature_cnn, resnet), 1 branch of 2, step 0.5" },
    SceneInfo { name: "SimpleVisualVector", description: "test suite SimpleEnvironment, two 20x20x3 images and the vector position, 1 branch of 2 (the gym wrapper's several-observation cases)" },
    SceneInfo { name: "SimpleVisualBoard", description: "test suite SimpleEnvironment, one 5x5x5 image (match3's board size), 1 branch of 2, step 0.5" },
    SceneInfo { name: "Goal1DDiscrete", description: "test suite SimpleEnvironment, the goal sign a GOAL_SIGNAL observation (hypernetwork conditioning), 1 branch of 2" },
    SceneInfo { name: "Goal1DContinuous", description: "test suite SimpleEnvironment, the goal sign a GOAL_SIGNAL observation (hypernetwork conditioning), 1 continuous action" },
    SceneInfo { name: "Memory1DDiscrete", description: "test suite MemoryEnvironment (goal shown 3 steps), 1 branch of 2" },
    SceneInfo { name: "Memory1DContinuous", description: "test suite MemoryEnvironment (goal shown 3 steps), 1 continuous action" },
    SceneInfo { name: "Memory1DContinuousWide", description: "Memory1DContinuous with step 0.5 (test_recurrent_sac's continuous case)" },
    SceneInfo { name: "MemoryHybrid", description: "test suite MemoryEnvironment (goal shown 3 steps), 1 continuous + 1 branch of 2, step 0.5" },
    SceneInfo { name: "MultiAgentGroup", description: "test suite MultiAgentEnvironment: 2 agents in group 1, group reward" },
    SceneInfo { name: "CoopReach1D", description: "POCA test scene: 2 agents in group 1 each reach their own goal side (1 branch of 2); an early finisher's episode ends, the last one's reward goes to the group" },
    SceneInfo { name: "CoopReach1DContinuous", description: "CoopReach1D with 1 continuous action" },
    SceneInfo { name: "CoopReach1DSameIds", description: "CoopReach1D whose agents keep their ids from one group episode to the next (EndGroupEpisode)" },
    SceneInfo { name: "CoopTimeout", description: "CoopReach1D in 2 areas (groups 1, 2) whose group episodes are interrupted after 8 steps" },
    SceneInfo { name: "CoopSacrifice", description: "cooperative, DungeonEscape-like: 4 groups of 3; one member must go to the dragon (its episode ends with nothing) for the door to give the rest +1" },
    SceneInfo { name: "EntityGoal1D", description: "test suite SimpleEnvironment whose goal sign is only in a BufferSensor-like [10, 5] observation of 1 to 10 real entities, 1 branch of 2" },
    SceneInfo { name: "EntityGoal1DGroup", description: "EntityGoal1D with 2 agents in group 1 sharing the goal: a finisher waits, the last one's reward goes to the group (POCA with attention)" },
    SceneInfo { name: "Ghost1D", description: "test suite ghost scene: `1D?team=0` and `1D?team=1`, 1 branch of 2" },
    SceneInfo { name: "AsymmetricGhost1D", description: "test suite asymmetric ghost scene: `1D?team=0` and `1DOpp?team=1`" },
    SceneInfo { name: "Ghost1DContinuous", description: "Ghost1D with 1 continuous action (the upstream ghost tests' (1, 0) case)" },
    SceneInfo { name: "AsymmetricGhost1DContinuous", description: "AsymmetricGhost1D with 1 continuous action" },
    SceneInfo { name: "Corridor", description: "curriculum scene: 8 agents walk to a goal `goal_distance` cells ahead (env parameter, default 90) or a small one 3 behind" },
    SceneInfo { name: "SparseSwitch", description: "sparse reward (Pyramids-like): 8 agents open a 12-cell combination lock (4 actions) to a switch, then walk back to the goal it reveals (+2)" },
    SceneInfo { name: "Pong", description: "competitive, symmetric: `Pong?team=0` vs `Pong?team=1`, each sees the field mirrored, +1/-1 per point" },
    SceneInfo { name: "Race", description: "competitive, symmetric: `Race?team=0` vs `Race?team=1`, first to the goal wins" },
    SceneInfo { name: "RaceAsymmetric", description: "competitive, 2 vs 1: `RaceDuo?team=0` (group) vs a faster `RaceSolo?team=1`" },
];

/// Builds a scene by name.
pub fn build(name: &str) -> Option<Box<dyn Scene>> {
    let simple = |c: usize, d: usize, step: f32| SimpleConfig { step_size: step, ..SimpleConfig::new(c, d) };
    let scene: Box<dyn Scene> = match name {
        "Basic" => Box::new(Basic::new()),
        "3DBall" => Box::new(Ball3D::new(BallObservations::Full)),
        "3DBallHard" => Box::new(Ball3D::new(BallObservations::Stacked)),
        "3DBallHardLegacy" => Box::new(Ball3D::new(BallObservations::StackedLegacy)),
        "GridWorld" => Box::new(GridWorld::new(true)),
        "SparseSwitch" => Box::new(SparseSwitch::new()),
        "GridWorldVector" => Box::new(GridWorld::new(false)),
        "Simple1DDiscrete" => Box::new(SimpleScene::new(simple(0, 1, 0.2))),
        "Simple1DContinuous" => Box::new(SimpleScene::new(simple(1, 0, 0.2))),
        "Simple2DDiscrete" => Box::new(SimpleScene::new(simple(0, 2, 0.8))),
        "Simple2DContinuous" => Box::new(SimpleScene::new(simple(2, 0, 0.8))),
        "SimpleHybrid" => Box::new(SimpleScene::new(simple(1, 1, 0.8))),
        "SimpleHybrid2x2" => Box::new(SimpleScene::new(simple(2, 2, 0.8))),
        "SimpleVisualDiscrete" | "SimpleVisualContinuous" | "SimpleVisualHybrid" => {
            let (c, d) = match name {
                "SimpleVisualDiscrete" => (0, 1),
                "SimpleVisualContinuous" => (1, 0),
                _ => (1, 1),
            };
            Box::new(SimpleScene::new(SimpleConfig { num_vector: 0, num_visual: 1, ..simple(c, d, 0.2) }))
        }
        "SimpleVisualVector" => Box::new(SimpleScene::new(SimpleConfig { num_vector: 1, num_visual: 2, ..simple(0, 1, 0.2) })),
        "SimpleVisualAdvanced" | "SimpleVisualBoard" => {
            let visual_shape = if name == "SimpleVisualAdvanced" { [36, 36, 3] } else { [5, 5, 5] };
            Box::new(SimpleScene::new(SimpleConfig { num_vector: 0, num_visual: 1, visual_shape, ..simple(0, 1, 0.5) }))
        }
        "Goal1DDiscrete" => Box::new(SimpleScene::new(SimpleConfig { goal_signal: true, ..simple(0, 1, 0.2) })),
        "Goal1DContinuous" => Box::new(SimpleScene::new(SimpleConfig { goal_signal: true, ..simple(1, 0, 0.2) })),
        "Memory1DDiscrete" => Box::new(SimpleScene::new(SimpleConfig { memory: true, ..simple(0, 1, 0.2) })),
        "Memory1DContinuous" => Box::new(SimpleScene::new(SimpleConfig { memory: true, ..simple(1, 0, 0.2) })),
        "Memory1DContinuousWide" => Box::new(SimpleScene::new(SimpleConfig { memory: true, ..simple(1, 0, 0.5) })),
        "MemoryHybrid" => Box::new(SimpleScene::new(SimpleConfig { memory: true, ..simple(1, 1, 0.5) })),
        "MultiAgentGroup" => Box::new(SimpleScene::new(SimpleConfig { group_size: 2, ..simple(1, 0, 0.2) })),
        "Ghost1D" | "Ghost1DContinuous" | "AsymmetricGhost1D" | "AsymmetricGhost1DContinuous" => {
            let opponent = if name.starts_with("Asymmetric") { "1DOpp?team=1" } else { "1D?team=1" };
            let (c, d) = if name.ends_with("Continuous") { (1, 0) } else { (0, 1) };
            Box::new(SimpleScene::new(SimpleConfig { behaviors: vec!["1D?team=0".into(), opponent.into()], ..simple(c, d, 0.2) }))
        }
        "CoopReach1D" => Box::new(CoopScene::new(CoopConfig::reach(false))),
        "CoopReach1DContinuous" => Box::new(CoopScene::new(CoopConfig::reach(true))),
        "CoopReach1DSameIds" => Box::new(CoopScene::new(CoopConfig { keep_ids: true, ..CoopConfig::reach(false) })),
        "CoopTimeout" => Box::new(CoopScene::new(CoopConfig { areas: 2, group_step_limit: 8, ..CoopConfig::reach(false) })),
        "CoopSacrifice" => Box::new(CoopScene::new(CoopConfig::sacrifice())),
        "EntityGoal1D" => Box::new(SimpleScene::new(SimpleConfig { num_vector: 0, entities: Some([10, 5]), ..simple(0, 1, 0.2) })),
        "EntityGoal1DGroup" => Box::new(SimpleScene::new(SimpleConfig { num_vector: 0, entities: Some([10, 5]), group_size: 2, ..simple(0, 1, 0.2) })),
        "Corridor" => Box::new(Corridor::new()),
        "Pong" => Box::new(Pong::new()),
        "Race" => Box::new(Race::symmetric()),
        "RaceAsymmetric" => Box::new(Race::asymmetric()),
        _ => return None,
    };
    Some(scene)
}

/// The scene names.
pub fn names() -> Vec<&'static str> {
    SCENES.iter().map(|s| s.name).collect()
}
