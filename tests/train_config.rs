//! The shipped ML-Agents PPO configurations load unchanged and resolve to their values; the
//! resolved configuration (configuration.yaml) reads back the same.

use mlagents::train::config::{RunOptions, Schedule};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config").join(name)
}

#[test]
fn shipped_configs_load_unchanged() {
    let basic = RunOptions::from_file(&fixture("Basic.yaml")).unwrap();
    let b = &basic.behaviors["Basic"];
    assert_eq!((b.hyperparameters.batch_size, b.hyperparameters.buffer_size), (32, 256));
    assert_eq!((b.network_settings.hidden_units, b.network_settings.num_layers), (20, 1));
    assert_eq!((b.reward_signals["extrinsic"].gamma, b.time_horizon, b.summary_freq), (0.9, 3, 2000));

    let ball = RunOptions::from_file(&fixture("3DBall.yaml")).unwrap();
    let b = &ball.behaviors["3DBall"];
    assert!(b.network_settings.normalize);
    assert_eq!((b.hyperparameters.lambd, b.time_horizon, b.max_steps), (0.99, 1000, 500_000));
    assert_eq!(b.hyperparameters.beta_schedule, Schedule::Linear);

    let hard = RunOptions::from_file(&fixture("3DBallHard.yaml")).unwrap();
    assert_eq!(hard.behaviors["3DBallHard"].reward_signals["extrinsic"].gamma, 0.995);
    let release = RunOptions::from_file(&fixture("3DBallHard_release.yaml")).unwrap();
    let r = &release.behaviors["3DBallHard"];
    assert!(r.threaded);
    assert_eq!(r.hyperparameters.epsilon_schedule, Schedule::Constant, "coupled to the constant LR schedule");

    let grid = RunOptions::from_file(&fixture("GridWorld.yaml")).unwrap();
    assert_eq!(grid.behaviors["GridWorld"].network_settings.hidden_units, 128);
}

#[test]
fn resolved_configuration_round_trips_as_yaml() {
    let ball = RunOptions::from_file(&fixture("3DBall.yaml")).unwrap();
    let yaml = ball.to_yaml();
    for key in ["beta_schedule: linear", "checkpoint_interval: 500000", "goal_conditioning_type: hyper", "run_id: ppo", "time_scale: 20.0"] {
        assert!(yaml.contains(key), "configuration.yaml lacks {key}:\n{yaml}");
    }
    let again = RunOptions::from_yaml(&yaml, "configuration.yaml").unwrap();
    assert_eq!(again, ball);
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let e = RunOptions::from_file(&fixture("nope.yaml")).unwrap_err().to_string();
    assert!(e.contains("nope.yaml"), "{e}");
}
