//! Every stand-in scene, launched as a real `mlagents-sim` child process over a real socket:
//! handshake, specs as envs.md documents them, reset, hundreds of steps with random valid
//! actions, episode ends, close. Plus scene-specific checks of rewards and dynamics.

mod common;

use mlagents::env::{ActionTuple, DecisionSteps, UnityEnvironment};
use mlagents::spec::{ActionSpec, ObservationType};
use rand::SeedableRng;
use std::collections::BTreeMap;

/// What envs.md says each scene has: (behavior, observation shapes, action spec, agents).
fn expected(scene: &str) -> Vec<(&'static str, Vec<Vec<usize>>, ActionSpec, usize)> {
    let one = vec![vec![1]];
    match scene {
        "Basic" => vec![("Basic?team=0", vec![vec![20]], ActionSpec::discrete(&[3]), 1)],
        "3DBall" => vec![("3DBall?team=0", vec![vec![8]], ActionSpec::continuous(2), 12)],
        "3DBallHard" => vec![("3DBallHard?team=0", vec![vec![27], vec![18]], ActionSpec::continuous(2), 12)],
        "3DBallHardLegacy" => vec![("3DBallHard?team=0", vec![vec![45]], ActionSpec::continuous(2), 12)],
        "GridWorld" => vec![("GridWorld?team=0", vec![vec![64, 84, 3]], ActionSpec::discrete(&[5]), 9)],
        "GridWorldVector" => vec![("GridWorld?team=0", vec![vec![6]], ActionSpec::discrete(&[5]), 9)],
        "Simple1DDiscrete" | "Memory1DDiscrete" => vec![("1D?team=0", one, ActionSpec::discrete(&[2]), 1)],
        "Simple1DContinuous" | "Memory1DContinuous" | "Memory1DContinuousWide" => vec![("1D?team=0", one, ActionSpec::continuous(1), 1)],
        "Simple2DDiscrete" => vec![("1D?team=0", one, ActionSpec::discrete(&[2, 2]), 1)],
        "Simple2DContinuous" => vec![("1D?team=0", one, ActionSpec::continuous(2), 1)],
        "SimpleHybrid" => vec![("1D?team=0", one, ActionSpec::hybrid(1, &[2]), 1)],
        "SimpleHybrid2x2" => vec![("1D?team=0", one, ActionSpec::hybrid(2, &[2, 2]), 1)],
        "SimpleVisualDiscrete" => vec![("1D?team=0", vec![vec![20, 20, 3]], ActionSpec::discrete(&[2]), 1)],
        "SimpleVisualContinuous" => vec![("1D?team=0", vec![vec![20, 20, 3]], ActionSpec::continuous(1), 1)],
        "SimpleVisualHybrid" => vec![("1D?team=0", vec![vec![20, 20, 3]], ActionSpec::hybrid(1, &[2]), 1)],
        "SimpleVisualAdvanced" => vec![("1D?team=0", vec![vec![36, 36, 3]], ActionSpec::discrete(&[2]), 1)],
        "SimpleVisualBoard" => vec![("1D?team=0", vec![vec![5, 5, 5]], ActionSpec::discrete(&[2]), 1)],
        "SimpleVisualVector" => vec![("1D?team=0", vec![vec![1], vec![20, 20, 3], vec![20, 20, 3]], ActionSpec::discrete(&[2]), 1)],
        "Goal1DDiscrete" => vec![("1D?team=0", one.clone(), ActionSpec::discrete(&[2]), 1)],
        "Goal1DContinuous" => vec![("1D?team=0", one.clone(), ActionSpec::continuous(1), 1)],
        "MemoryHybrid" => vec![("1D?team=0", one, ActionSpec::hybrid(1, &[2]), 1)],
        "MultiAgentGroup" => vec![("1D?team=0", one, ActionSpec::continuous(1), 2)],
        "CoopReach1D" | "CoopReach1DSameIds" => vec![("1D?team=0", one, ActionSpec::discrete(&[2]), 2)],
        "CoopReach1DContinuous" => vec![("1D?team=0", one, ActionSpec::continuous(1), 2)],
        "CoopTimeout" => vec![("1D?team=0", one, ActionSpec::discrete(&[2]), 4)],
        "CoopSacrifice" => vec![("1D?team=0", vec![vec![5]], ActionSpec::discrete(&[2]), 12)],
        "EntityGoal1D" => vec![("1D?team=0", vec![vec![10, 5]], ActionSpec::discrete(&[2]), 1)],
        "EntityGoal1DGroup" => vec![("1D?team=0", vec![vec![10, 5]], ActionSpec::discrete(&[2]), 2)],
        "Ghost1D" => vec![
            ("1D?team=0", one.clone(), ActionSpec::discrete(&[2]), 1),
            ("1D?team=1", one, ActionSpec::discrete(&[2]), 1),
        ],
        "AsymmetricGhost1D" => vec![
            ("1D?team=0", one.clone(), ActionSpec::discrete(&[2]), 1),
            ("1DOpp?team=1", one, ActionSpec::discrete(&[2]), 1),
        ],
        "Ghost1DContinuous" => vec![
            ("1D?team=0", one.clone(), ActionSpec::continuous(1), 1),
            ("1D?team=1", one, ActionSpec::continuous(1), 1),
        ],
        "AsymmetricGhost1DContinuous" => vec![
            ("1D?team=0", one.clone(), ActionSpec::continuous(1), 1),
            ("1DOpp?team=1", one, ActionSpec::continuous(1), 1),
        ],
        "Corridor" => vec![("Corridor?team=0", vec![vec![3]], ActionSpec::discrete(&[3]), 8)],
        "SparseSwitch" => vec![("SparseSwitch?team=0", vec![vec![13]], ActionSpec::discrete(&[4]), 8)],
        "Pong" => vec![
            ("Pong?team=0", vec![vec![6]], ActionSpec::discrete(&[3]), 1),
            ("Pong?team=1", vec![vec![6]], ActionSpec::discrete(&[3]), 1),
        ],
        "Race" => vec![
            ("Race?team=0", vec![vec![3]], ActionSpec::discrete(&[3]), 1),
            ("Race?team=1", vec![vec![3]], ActionSpec::discrete(&[3]), 1),
        ],
        "RaceAsymmetric" => vec![
            ("RaceDuo?team=0", vec![vec![3]], ActionSpec::discrete(&[3]), 2),
            ("RaceSolo?team=1", vec![vec![3]], ActionSpec::discrete(&[3]), 1),
        ],
        other => panic!("no expectation written for scene {other}"),
    }
}

/// Episode ends seen per behavior, and the number of steps.
struct Run {
    terminals: BTreeMap<String, usize>,
    interrupted: usize,
}

/// Plays `steps` steps with random valid actions, checking masks and shapes on the way.
fn play_random(env: &mut UnityEnvironment, steps: usize, seed: u64) -> Run {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut run = Run { terminals: BTreeMap::new(), interrupted: 0 };
    for _ in 0..steps {
        for name in env.behavior_names() {
            let spec = env.behavior_specs()[&name].clone();
            let (decisions, terminals) = env.get_steps(&name).unwrap();
            *run.terminals.entry(name.clone()).or_default() += terminals.len();
            run.interrupted += terminals.interrupted.iter().filter(|i| **i).count();
            for (batch, o) in decisions.obs.iter().zip(&spec.observation_specs) {
                assert_eq!(batch.data.len(), decisions.len() * o.len());
            }
            if spec.action_spec.discrete_size() > 0 {
                let masks = decisions.action_mask.as_ref().expect("discrete behaviors carry masks");
                assert_eq!(masks.len(), spec.action_spec.discrete_size());
            }
            env.set_actions(&name, ActionTuple::random(&spec.action_spec, &decisions, &mut rng)).unwrap();
        }
        env.step().unwrap();
    }
    run
}

fn check_scene(scene: &str, steps: usize) -> (UnityEnvironment, Run) {
    let mut env = common::start(scene);
    assert_eq!(env.academy_name(), "AcademySingleton");
    assert!(env.behavior_specs().is_empty(), "specs are known only after the first reset");
    env.reset().unwrap();
    let want = expected(scene);
    assert_eq!(env.behavior_names(), want.iter().map(|w| w.0.to_string()).collect::<Vec<_>>(), "{scene}");
    for (name, shapes, actions, agents) in &want {
        let spec = &env.behavior_specs()[*name];
        let got: Vec<Vec<usize>> = spec.observation_specs.iter().map(|o| o.shape.clone()).collect();
        assert_eq!(&got, shapes, "{scene} {name} observation shapes");
        assert_eq!(&spec.action_spec, actions, "{scene} {name} actions");
        let (decisions, terminals) = env.get_steps(name).unwrap();
        assert_eq!(decisions.len(), *agents, "{scene} {name}: agents deciding after reset");
        assert!(terminals.is_empty());
    }
    let run = play_random(&mut env, steps, 11);
    for (name, ..) in &want {
        assert!(run.terminals[*name] > 0, "{scene} {name}: no episode ended in {steps} random steps");
    }
    (env, run)
}

macro_rules! scene_tests {
    ($($test:ident: $scene:literal, $steps:literal;)*) => {$(
        #[test]
        fn $test() {
            let (mut env, _) = check_scene($scene, $steps);
            env.close().unwrap();
        }
    )*};
}

scene_tests! {
    basic_scene: "Basic", 300;
    ball_hard_scene: "3DBallHard", 300;
    ball_hard_legacy_scene: "3DBallHardLegacy", 300;
    gridworld_vector_scene: "GridWorldVector", 300;
    sparse_switch_scene: "SparseSwitch", 300;
    simple_1d_discrete_scene: "Simple1DDiscrete", 300;
    simple_1d_continuous_scene: "Simple1DContinuous", 300;
    simple_2d_discrete_scene: "Simple2DDiscrete", 300;
    simple_2d_continuous_scene: "Simple2DContinuous", 300;
    simple_hybrid_scene: "SimpleHybrid", 300;
    simple_hybrid_2x2_scene: "SimpleHybrid2x2", 300;
    simple_visual_discrete_scene: "SimpleVisualDiscrete", 300;
    simple_visual_continuous_scene: "SimpleVisualContinuous", 300;
    simple_visual_hybrid_scene: "SimpleVisualHybrid", 300;
    memory_hybrid_scene: "MemoryHybrid", 300;
    memory_continuous_wide_scene: "Memory1DContinuousWide", 300;
    memory_discrete_scene: "Memory1DDiscrete", 300;
    memory_continuous_scene: "Memory1DContinuous", 300;
    multi_agent_group_scene: "MultiAgentGroup", 300;
    coop_reach_scene: "CoopReach1D", 300;
    coop_reach_continuous_scene: "CoopReach1DContinuous", 300;
    coop_reach_same_ids_scene: "CoopReach1DSameIds", 300;
    coop_timeout_scene: "CoopTimeout", 300;
    coop_sacrifice_scene: "CoopSacrifice", 300;
    entity_goal_scene: "EntityGoal1D", 300;
    entity_goal_group_scene: "EntityGoal1DGroup", 300;
    ghost_scene: "Ghost1D", 300;
    asymmetric_ghost_scene: "AsymmetricGhost1D", 300;
    ghost_continuous_scene: "Ghost1DContinuous", 300;
    asymmetric_ghost_continuous_scene: "AsymmetricGhost1DContinuous", 300;
    corridor_scene: "Corridor", 300;
    pong_scene: "Pong", 600;
    race_scene: "Race", 300;
    race_asymmetric_scene: "RaceAsymmetric", 300;
}

#[test]
fn every_listed_scene_has_a_test_expectation() {
    for info in mlagents::sim::scenes::SCENES {
        let _ = expected(info.name);
    }
}

#[test]
fn gridworld_camera_is_a_decoded_png_and_max_step_interrupts() {
    let (mut env, run) = check_scene("GridWorld", 400);
    assert!(run.interrupted > 0, "GridWorld's MaxStep 100 should interrupt some random episodes");
    let (decisions, _) = env.get_steps("GridWorld?team=0").unwrap();
    let pixels = &decisions.obs[0].data;
    assert!(pixels.iter().all(|p| (0.0..=1.0).contains(p)));
    assert!(pixels.iter().any(|p| *p > 0.5), "the image is not blank");
    env.close().unwrap();
}

#[test]
fn gridworld_masks_follow_the_walls() {
    let mut env = common::start("GridWorldVector");
    env.reset().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let spec = env.behavior_specs()["GridWorld?team=0"].action_spec.clone();
    for _ in 0..200 {
        let (d, _) = env.get_steps("GridWorld?team=0").unwrap();
        let mask = &d.action_mask.as_ref().unwrap()[0];
        for i in 0..d.len() {
            let obs = d.obs[0].agent(i);
            let (x, z) = (obs[0], obs[1]); // normalized agent coordinates
            let m = &mask[i * 5..(i + 1) * 5];
            assert_eq!(m, &[false, z == 1.0, z == 0.0, x == 0.0, x == 1.0], "agent at ({x}, {z})");
        }
        env.set_actions("GridWorld?team=0", ActionTuple::random(&spec, &d, &mut rng)).unwrap();
        env.step().unwrap();
    }
    env.close().unwrap();
}

fn argmax_goal_action(d: &DecisionSteps, right: i32, left: i32) -> Vec<i32> {
    (0..d.len()).map(|i| if d.obs[0].agent(i)[0] > 0.0 { right } else { left }).collect()
}

#[test]
fn basic_optimal_policy_earns_the_benchmark() {
    let mut env = common::start("Basic");
    env.reset().unwrap();
    let mut returns = vec![];
    let mut current = 0.0;
    for _ in 0..40 {
        let (d, t) = env.get_steps("Basic?team=0").unwrap();
        if !t.is_empty() {
            returns.push(current + t.reward[0]);
            current = 0.0;
        }
        if !d.is_empty() {
            current += d.reward[0];
            env.set_actions("Basic?team=0", ActionTuple { continuous: vec![], discrete: vec![2] }).unwrap();
        }
        env.step().unwrap();
    }
    assert!(returns.len() >= 4);
    for r in returns {
        assert!((r - 0.93).abs() < 1e-5, "optimal Basic return {r}, benchmark 0.93");
    }
    env.close().unwrap();
}

#[test]
fn simple_optimal_policy_returns_1_02_and_ids_change_per_episode() {
    let mut env = common::start("Simple1DDiscrete");
    env.reset().unwrap();
    let mut ids = vec![];
    let mut returns = vec![];
    let mut current = 0.0;
    for _ in 0..60 {
        let (d, t) = env.get_steps("1D?team=0").unwrap();
        if !t.is_empty() {
            assert!(!t.interrupted[0]);
            returns.push(current + t.reward[0]);
            current = 0.0;
        }
        current += d.reward[0];
        ids.push(d.agent_id[0]);
        env.set_actions("1D?team=0", ActionTuple { continuous: vec![], discrete: argmax_goal_action(&d, 1, 0) }).unwrap();
        env.step().unwrap();
    }
    assert!(returns.len() >= 10);
    for r in &returns {
        assert!((r - 1.02).abs() < 1e-5, "optimal 1-D return {r}, expected 1.02");
    }
    ids.dedup();
    assert!(ids.len() >= 10, "a new agent id every episode");
    env.close().unwrap();
}

#[test]
fn memory_scene_hides_the_goal_after_three_observations() {
    let mut env = common::start("Memory1DContinuous");
    env.reset().unwrap();
    let mut shown = vec![];
    for _ in 0..5 {
        let (d, _) = env.get_steps("1D?team=0").unwrap();
        shown.push(d.obs[0].agent(0)[0]);
        env.set_actions("1D?team=0", ActionTuple { continuous: vec![0.0], discrete: vec![] }).unwrap();
        env.step().unwrap();
    }
    assert!(shown[0].abs() == 1.0 && shown[1] == shown[0] && shown[2] == shown[0], "{shown:?}");
    assert_eq!(&shown[3..], &[0.0, 0.0]);
    env.close().unwrap();
}

#[test]
fn group_agents_share_a_group_and_a_group_reward() {
    let mut env = common::start("MultiAgentGroup");
    env.reset().unwrap();
    let mut group_rewards = vec![];
    for _ in 0..50 {
        let (d, t) = env.get_steps("1D?team=0").unwrap();
        assert!(d.group_id.iter().chain(&t.group_id).all(|g| *g == 1));
        group_rewards.extend(t.group_reward.iter().copied());
        let actions: Vec<f32> = (0..d.len()).map(|i| d.obs[0].agent(i)[0]).collect();
        env.set_actions("1D?team=0", ActionTuple { continuous: actions, discrete: vec![] }).unwrap();
        env.step().unwrap();
    }
    assert!(!group_rewards.is_empty() && group_rewards.iter().all(|r| (*r - 1.06).abs() < 1e-5), "{group_rewards:?}");
    env.close().unwrap();
}

#[test]
fn race_is_zero_sum() {
    let mut env = common::start("Race");
    env.reset().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut finals: Vec<(f32, f32)> = vec![];
    for _ in 0..300 {
        let (_, t0) = env.get_steps("Race?team=0").unwrap();
        let (_, t1) = env.get_steps("Race?team=1").unwrap();
        if !t0.is_empty() && !t1.is_empty() && !t0.interrupted[0] {
            finals.push((t0.reward[0], t1.reward[0]));
        }
        for name in ["Race?team=0", "Race?team=1"] {
            let (d, _) = env.get_steps(name).unwrap();
            let spec = env.behavior_specs()[name].action_spec.clone();
            env.set_actions(name, ActionTuple::random(&spec, &d, &mut rng)).unwrap();
        }
        env.step().unwrap();
    }
    assert!(!finals.is_empty());
    assert!(finals.iter().all(|(a, b)| a + b == 0.0), "{finals:?}");
    assert!(finals.iter().any(|(a, _)| *a != 0.0));
    env.close().unwrap();
}

/// A hand-written PD controller keeps every ball up for the full 5000-tick episode, so the
/// dynamics are balanceable and episodes are interrupted at MaxStep with a return near 100.
#[test]
fn ball3d_can_be_balanced_for_a_whole_episode() {
    let mut env = common::start("3DBall");
    env.reset().unwrap();
    let name = "3DBall?team=0";
    let mut returns: BTreeMap<i32, f32> = BTreeMap::new();
    let mut finished = vec![];
    for _ in 0..1005 {
        let (d, t) = env.get_steps(name).unwrap();
        for (i, id) in t.agent_id.iter().enumerate() {
            let r = returns.remove(id).unwrap_or(0.0) + t.reward[i];
            finished.push((r, t.interrupted[i]));
        }
        let mut actions = Vec::with_capacity(2 * d.len());
        for i in 0..d.len() {
            let o = d.obs[0].agent(i);
            *returns.entry(d.agent_id[i]).or_default() += d.reward[i];
            // rot.z, rot.x, ball x y z, velocity x y z.
            let airborne = if o[3] > 3.05 { 0.0 } else { 1.0 }; // level the platform until the ball lands
            let z = airborne * 4.0 * (0.5 * o[2] + 0.5 * o[5]) - 8.0 * o[0];
            let x = airborne * 4.0 * (-0.5 * o[4] - 0.5 * o[7]) - 8.0 * o[1];
            actions.extend([z.clamp(-1.0, 1.0), x.clamp(-1.0, 1.0)]);
        }
        env.set_actions(name, ActionTuple { continuous: actions, discrete: vec![] }).unwrap();
        env.step().unwrap();
    }
    assert_eq!(finished.len(), 12, "every platform reaches MaxStep once: {finished:?}");
    for (r, interrupted) in finished {
        assert!(interrupted && r > 99.0, "return {r}, interrupted {interrupted}");
    }
    env.close().unwrap();
}

#[test]
fn ball3d_random_play_drops_balls() {
    let (mut env, run) = check_scene("3DBall", 300);
    assert!(run.terminals["3DBall?team=0"] >= 12);
    let spec = &env.behavior_specs()["3DBall?team=0"];
    assert_eq!(spec.observation_specs[0].observation_type, ObservationType::Default);
    env.close().unwrap();
}
