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

/// A stand-in scene with extra player flags (faults).
fn start_with(scene: &str, args: &[&str]) -> mlagents::env::UnityEnvironment {
    let options = mlagents::env::EnvOptions { additional_args: args.iter().map(|a| a.to_string()).collect(), ..common::sim_options(scene) };
    mlagents::env::UnityEnvironment::new(options).unwrap()
}

/// U7 (report of 2 December): when the environment ends the session (the Editor leaving play
/// mode: status 400), `play` reports the episodes that ended and why it stopped; it was an
/// error that reported nothing.
#[test]
fn play_reports_what_ended_before_the_editor_stopped() {
    let mut env = start_with("Basic", &["--fault", "leave-play-mode@300"]);
    env.reset().unwrap();
    let behavior = env.behavior_names()[0].clone();
    let spec = env.behavior_specs()[&behavior].clone();
    let policy = Policy::load(&models_dir().join("nn/Basic.nn"), LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let mut driver = PolicyDriver::new(policy, &behavior, &spec, true, 1).unwrap();
    let report = play(&mut env, &mut driver, 10_000, 100_000).unwrap();
    let _ = env.close();
    assert!(report.episodes > 0 && report.episodes == report.returns.len(), "{report:?}");
    assert!(report.stopped.as_deref().is_some_and(|s| s.contains("closed the connection") && s.contains("400")), "{report:?}");
}

/// U8 (report of 2 December): a game whose second team spawns after the first message was
/// refused as "a single team". Teams join when they appear; a game that never shows a second
/// team is refused after the wait, naming the team it has.
#[test]
fn a_match_waits_for_a_team_that_spawns_late() {
    use mlagents::run::versus::{play_match, TEAM_WAIT_STEPS};
    let dir = common::temp_dir("late-team-match");
    let model = dir.join("random.onnx");
    let description = common::policy_description(mlagents::spec::ActionSpec::discrete(&[2]), &[2], false);
    let mut env = start_with("Ghost1D", &["--fault", "late-team@30"]);
    env.reset().unwrap();
    assert_eq!(env.behavior_names(), ["1D?team=0"], "team 1 is not spawned yet");
    let spec = env.behavior_specs()["1D?team=0"].clone();
    let description = mlagents::policy::PolicyDescription { observation_shapes: spec.observation_specs.iter().map(|o| o.shape.clone()).collect(), ..description };
    std::fs::write(&model, mlagents::onnx::export::to_onnx_bytes(&description, &mlagents::policy::Weights::random(&description, 3)).unwrap()).unwrap();
    let mut new_driver = |name: &str, spec: &mlagents::spec::BehaviorSpec| -> Result<PolicyDriver, mlagents::run::PlayError> {
        PolicyDriver::new(Policy::load(&model, LoadOptions { deterministic: true, ..Default::default() })?, name, spec, true, 1)
    };
    let models = [(0, "a".to_string()), (1, "b".to_string())].into();
    let results = play_match(&mut env, &mut new_driver, &models, 10, 20_000).unwrap();
    let _ = env.close();
    assert_eq!(results.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert!(results[&0].episodes() >= 10 && results[&1].episodes() > 0, "{results:?}");
    let mut lone = common::start("Simple1DDiscrete");
    let error = play_match(&mut lone, &mut new_driver, &models, 1_000_000, 100_000).unwrap_err().to_string();
    let _ = lone.close();
    assert!(error.contains("only team 0 has appeared") && error.contains(&format!("after {TEAM_WAIT_STEPS} environment steps")), "{error}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Unity's own GridWorld policy (a CNN on the 64x84 camera) plays the stand-in's camera image as
/// it plays Unity's scene: within 10% of the scene's benchmark (0.8), actions sampled as Unity
/// samples them, 180 episodes (20 per area).
#[test]
fn unity_gridworld_policy_scores_near_its_benchmark_on_the_camera() {
    let policy = Policy::load(&models_dir().join("nn/GridWorld.nn"), LoadOptions::default()).unwrap();
    let mut env = common::start("GridWorld");
    env.reset().unwrap();
    let spec = env.behavior_specs()["GridWorld?team=0"].clone();
    let mut driver = PolicyDriver::new(policy, "GridWorld?team=0", &spec, false, 1).unwrap();
    let report = play(&mut env, &mut driver, 180, 100_000).unwrap();
    env.close().unwrap();
    eprintln!("GridWorld.nn on sim:GridWorld: mean reward {:.3} over {} episodes", report.mean_reward, report.episodes);
    assert_eq!(report.episodes, 180);
    assert!(report.mean_reward >= 0.72, "GridWorld.nn scored {:.3}, below 0.72 (the benchmark 0.8 less 10%)", report.mean_reward);
}
