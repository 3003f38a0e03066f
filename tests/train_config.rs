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

/// The four POCA configurations 0.28 ships (config/poca, poca.md §6.3): POCA with PPO's
/// hyperparameters, and SoccerTwos' and StrikersVsGoalie's self-play blocks around it.
#[test]
fn shipped_poca_configs_load() {
    for (file, behavior, max_steps) in [("DungeonEscape", "DungeonEscape", 20_000_000), ("PushBlockCollab", "PushBlockCollab", 15_000_000)] {
        let o = RunOptions::from_file(&fixture(&format!("poca/{file}.yaml"))).unwrap();
        let b = &o.behaviors[behavior];
        assert_eq!((b.trainer_type.as_str(), b.hyperparameters.beta, b.network_settings.hidden_units, b.max_steps), ("poca", 0.01, 256, max_steps));
        assert_eq!((b.hyperparameters.beta_schedule, b.hyperparameters.epsilon_schedule), (Schedule::Constant, Schedule::Constant), "coupled to the constant LR schedule");
        assert!(b.self_play.is_none());
    }
    let soccer = RunOptions::from_file(&fixture("poca/SoccerTwos.yaml")).unwrap();
    let b = &soccer.behaviors["SoccerTwos"];
    let self_play = b.self_play.as_ref().expect("self_play");
    assert_eq!((b.trainer_type.as_str(), b.time_horizon, b.threaded), ("poca", 1000, false));
    assert_eq!((self_play.swap_steps, self_play.team_change, self_play.window), (2000, 200_000, 10));
    let strikers = RunOptions::from_file(&fixture("poca/StrikersVsGoalie.yaml")).unwrap();
    for (behavior, swap) in [("Goalie", 1000), ("Striker", 4000)] {
        let b = &strikers.behaviors[behavior];
        assert_eq!((b.trainer_type.as_str(), b.network_settings.hidden_units, b.self_play.as_ref().map(|s| s.swap_steps)), ("poca", 512, Some(swap)));
    }
    // The resolved configuration reads back the same.
    assert_eq!(RunOptions::from_yaml(&soccer.to_yaml(), "configuration.yaml").unwrap().behaviors, soccer.behaviors);
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
