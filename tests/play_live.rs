//! Live fidelity: Unity-trained policies played by our runner (tract) on the stand-in scenes
//! over 20 episodes, deterministic, reach Unity's benchmark figures: Basic.nn >= 0.9 (Unity
//! 0.93), 3DBall.nn and 3DBall.onnx >= 95 (Unity 100). Sampled play is checked to run and
//! stay sane (its figures are reported in the issue notes, not asserted).

mod common;

use mlagents::run::{play, LoadOptions, Policy, PolicyDriver, PlayReport};

use common::models_dir;

fn play_model(model: &str, scene: &str, deterministic: bool) -> PlayReport {
    let report = common::play_file(&models_dir().join(model), scene, deterministic);
    assert_eq!(report.episodes, 20, "{model}: {report:?}");
    report
}

#[test]
fn basic_nn_reaches_the_benchmark() {
    let r = play_model("nn/Basic.nn", "Basic", true);
    assert!(r.mean_reward >= 0.9, "{r:?}");
}

#[test]
fn ball3d_nn_reaches_the_benchmark() {
    let r = play_model("nn/3DBall.nn", "3DBall", true);
    assert!(r.mean_reward >= 95.0, "{r:?}");
}

#[test]
fn ball3d_onnx_reaches_the_benchmark() {
    let r = play_model("onnx/3DBall.onnx", "3DBall", true);
    assert!(r.mean_reward >= 95.0, "{r:?}");
}

#[test]
fn ball3d_hard_onnx_reaches_the_benchmark() {
    let r = play_model("onnx/3DBallHard.onnx", "3DBallHard", true);
    assert!(r.mean_reward >= 95.0, "{r:?}");
}

/// The 0.17-era 3DBallHard.nn was trained on 5 features stacked 9 times; on the stand-in
/// that observes it that way it balances most balls for whole episodes (on the newer
/// two-sensor layout it balances none). Not a benchmark-level result: a few balls still
/// fall early.
#[test]
fn ball3d_hard_nn_balances_on_the_legacy_layout() {
    let r = play_model("nn/3DBallHard.nn", "3DBallHardLegacy", true);
    let full = r.returns.iter().filter(|x| **x >= 99.0).count();
    assert!(full >= 15, "{full} of 20 full episodes: {r:?}");
}

#[test]
fn sampled_play_runs_on_both_formats() {
    for (model, scene) in [("nn/Basic.nn", "Basic"), ("onnx/3DBall.onnx", "3DBall")] {
        let r = play_model(model, scene, false);
        assert!(r.mean_reward.is_finite() && r.returns.iter().all(|x| x.is_finite()), "{r:?}");
    }
}

#[test]
fn a_model_that_does_not_fit_the_behavior_is_refused() {
    let policy = Policy::load(&models_dir().join("onnx/3DBall.onnx"), LoadOptions::default()).unwrap();
    let mut env = common::start("Basic");
    env.reset().unwrap();
    let spec = env.behavior_specs()["Basic?team=0"].clone();
    let mut driver = PolicyDriver::new(policy, "Basic?team=0", &spec, true, 1).unwrap();
    // 3DBall reads 8 floats and has no discrete output: Basic has 20 and a discrete branch.
    let e = play(&mut env, &mut driver, 1, 10).unwrap_err().to_string();
    assert!(e.contains("obs_0") || e.contains("discrete"), "{e}");
}

fn facts(model: &str) -> mlagents::run::ModelInterface {
    Policy::load(&models_dir().join(model), LoadOptions::default()).unwrap().interface().unwrap().clone()
}

#[test]
fn models_pass_the_checks_of_their_own_scene_and_fail_others_with_every_reason() {
    let mut specs = std::collections::BTreeMap::new();
    for scene in ["Basic", "3DBall", "3DBallHard", "GridWorld"] {
        let mut env = common::start(scene);
        env.reset().unwrap();
        specs.insert(scene, env.behavior_specs().values().next().unwrap().clone());
        env.close().unwrap();
    }
    for (model, scene) in [
        ("nn/Basic.nn", "Basic"),
        ("nn/3DBall.nn", "3DBall"),
        ("onnx/3DBall.onnx", "3DBall"),
        ("onnx/3DBallHard.onnx", "3DBallHard"),
        ("nn/GridWorld.nn", "GridWorld"),
    ] {
        let violations = mlagents::run::check(&facts(model), &specs[scene]);
        assert!(violations.is_empty(), "{model} on {scene}: {violations:?}");
    }
    let v = mlagents::run::check(&facts("onnx/3DBall.onnx"), &specs["Basic"]);
    assert_eq!(v.len(), 3, "{v:?}");
    assert!(v.iter().any(|m| m.contains("2 continuous actions")) && v.iter().any(|m| m.contains("obs_0")), "{v:?}");
    let v = mlagents::run::check(&facts("nn/Basic.nn"), &specs["GridWorld"]);
    assert!(v.iter().any(|m| m.contains("action_masks has width 3")), "{v:?}");
    assert!(v.iter().any(|m| m.contains("vector_observation has size 20")), "{v:?}");
    let mut broken = facts("nn/Basic.nn");
    broken.constants.remove("version_number");
    broken.inputs.push(mlagents::run::DeclaredInput { name: "batch_size".into(), dims: vec![1] });
    let v = mlagents::run::check(&broken, &specs["Basic"]);
    assert!(v.iter().any(|m| m.contains("version_number was not found")), "{v:?}");
    assert!(v.iter().any(|m| m.contains("unexpected input named \"batch_size\"")), "{v:?}");
}
