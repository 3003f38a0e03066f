//! MA-POCA (`trainer_type: poca`, the `train` feature) on the cooperative stand-ins over the
//! real protocol: upstream's POCA cases (poca.md §6.1: the dummy POCA config, 3000 steps, the
//! members' finishing rewards above 0.9 at the end) on CoopReach1D, discrete and continuous,
//! three seeds of which two must pass.
#![cfg(feature = "train")]

mod common;

use common::{event_file, scalars, temp_dir};
use mlagents::train::config::RunOptions;
use mlagents::train::session::{learn, LearnOptions};

/// ML-Agents' `poca_dummy_config` (lr 5e-3 constant, β and ε linear, batch 16, buffer 64,
/// 32 hidden units in 1 layer) for `trainer_type`.
fn dummy_config(trainer_type: &str, max_steps: u64, seed: i64) -> RunOptions {
    let yaml = format!(
        "behaviors:\n  1D:\n    trainer_type: {trainer_type}\n    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, \
         learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, \
         lambd: 0.95, num_epoch: 3}}\n    network_settings: {{hidden_units: 32, num_layers: 1}}\n    \
         reward_signals: {{extrinsic: {{gamma: 0.99, strength: 1.0}}}}\n    max_steps: {max_steps}\n    time_horizon: 64\n    \
         summary_freq: 500\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
    );
    RunOptions::from_yaml(&yaml, "dummy.yaml").unwrap()
}

/// Trains `trainer_type` on `scene` for `max_steps` and returns the scene's last summary of
/// `tag` (its mean over the last `summary_freq` steps) and the TensorBoard events.
fn train(scene: &str, trainer_type: &str, max_steps: u64, seed: i64, tag: &str) -> (f32, Vec<u8>) {
    let dir = temp_dir(&format!("poca-{scene}-{trainer_type}-{seed}"));
    let options = LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory(&format!("sim:{scene}")) };
    let results = learn(&dummy_config(trainer_type, max_steps, seed), &options).unwrap();
    assert!(results["1D"].steps >= max_steps);
    let events = event_file(&dir.join("1D"));
    let _ = std::fs::remove_dir_all(dir);
    let last = scalars(&events, tag).last().copied().unwrap_or(f32::NAN);
    (last, events)
}

fn poca_reaches(scene: &str) {
    let mut scores = vec![];
    for seed in [1337, 1338, 1339] {
        let (score, events) = train(scene, "poca", 3000, seed, "Coop/Final Reward");
        for tag in ["Losses/Baseline Loss", "Policy/Extrinsic Baseline Estimate", "Environment/Group Cumulative Reward"] {
            assert!(!scalars(&events, tag).is_empty(), "{scene}: no {tag} in the event file");
        }
        scores.push(score);
    }
    eprintln!("{scene} (poca): last summary of the finishing rewards per seed {scores:?}");
    let passed = scores.iter().filter(|s| **s > 0.9).count();
    assert!(passed >= 2, "{scene}: {passed} of 3 seeds reached 0.9 in 3000 steps: {scores:?}");
}

#[test]
fn poca_discrete() {
    poca_reaches("CoopReach1D");
}

#[test]
fn poca_continuous() {
    poca_reaches("CoopReach1DContinuous");
}
