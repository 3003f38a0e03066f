//! PPO (the `train` feature) solves the ML-Agents test-suite scenes within the test suite's
//! budgets (envs.md §8.5: the dummy PPO config, 3000 steps, mean of the last 5 episode
//! returns above 0.9), trained against the stand-ins as real child processes.
#![cfg(feature = "train")]

use mlagents::train::config::RunOptions;
use mlagents::train::ppo::learn::{learn, LearnOptions};
use std::time::Duration;

/// ML-Agents' `ppo_dummy_config` (lr 5e-3 constant, beta and epsilon linear).
fn dummy_config(brain: &str, max_steps: u64, batch: usize, buffer: usize, lr: f64, seed: i64) -> RunOptions {
    let yaml = format!(
        "behaviors:\n  {brain}:\n    hyperparameters: {{batch_size: {batch}, buffer_size: {buffer}, learning_rate: {lr}, \
         learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, \
         lambd: 0.95, num_epoch: 3}}\n    network_settings: {{hidden_units: 32, num_layers: 1}}\n    \
         reward_signals: {{extrinsic: {{gamma: 0.99, strength: 1.0}}}}\n    max_steps: {max_steps}\n    time_horizon: 64\n    \
         summary_freq: 500\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
    );
    RunOptions::from_yaml(&yaml, "dummy.yaml").unwrap()
}

fn last5(returns: &[f32]) -> f32 {
    let tail = &returns[returns.len().saturating_sub(5)..];
    tail.iter().sum::<f32>() / tail.len().max(1) as f32
}

fn trains(scene: &str, max_steps: u64, batch: usize, buffer: usize, lr: f64) {
    let options = LearnOptions::in_memory(&format!("sim:{scene}"));
    // RNG streams differ from Python's, so several seeds must pass, not one lucky one.
    let mut scores = vec![];
    for seed in [1337, 1338, 1339] {
        let results = learn(&dummy_config("1D", max_steps, batch, buffer, lr, seed), &options).unwrap();
        let r = &results["1D"];
        assert!(r.steps >= max_steps);
        scores.push(last5(&r.episode_returns));
    }
    eprintln!("{scene}: last-5 mean returns per seed {scores:?}");
    let passed = scores.iter().filter(|s| **s > 0.9).count();
    assert!(passed >= 2, "{scene}: {passed} of 3 seeds reached 0.9 in {max_steps} steps: {scores:?}");
}

#[test]
fn simple_discrete() {
    trains("Simple1DDiscrete", 3000, 16, 64, 5e-3);
}

#[test]
fn simple_continuous() {
    trains("Simple1DContinuous", 3000, 16, 64, 5e-3);
}

/// test_2d_ppo: two dimensions, step 0.8, batch 64, buffer 640, 10000 steps.
#[test]
fn two_dimensional_discrete() {
    trains("Simple2DDiscrete", 10_000, 64, 640, 5e-3);
}

#[test]
fn two_dimensional_continuous() {
    trains("Simple2DContinuous", 10_000, 64, 640, 5e-3);
}

/// test_hybrid_ppo: batch 64, buffer 1024, lr 1e-3, 20000 steps.
#[test]
fn hybrid() {
    trains("SimpleHybrid", 20_000, 64, 1024, 1e-3);
}

/// Train, export to ONNX and .nn, play both exports with our runner: they keep the training score.
#[test]
fn a_trained_policy_exports_and_plays() {
    use mlagents::run::{play, LoadOptions, Policy, PolicyDriver};
    let dir = std::env::temp_dir().join(format!("mlagents-train-export-{}", std::process::id()));
    let options = LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory("sim:Simple1DDiscrete") };
    let results = learn(&dummy_config("1D", 3000, 16, 64, 5e-3, 1337), &options).unwrap();
    let onnx = results["1D"].onnx.clone().expect("exported");
    for model in [onnx.clone(), onnx.with_extension("nn")] {
        let policy = Policy::load(&model, LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
        let mut env = mlagents::env::UnityEnvironment::new(mlagents::env::EnvOptions {
            env: Some("sim:Simple1DDiscrete".into()),
            base_port: Some(0),
            ..Default::default()
        })
        .unwrap();
        env.reset().unwrap();
        let spec = env.behavior_specs()["1D?team=0"].clone();
        let mut driver = PolicyDriver::new(policy, "1D?team=0", &spec, true, 0).unwrap();
        let report = play(&mut env, &mut driver, 20, 5000).unwrap();
        env.close().unwrap();
        assert!(report.mean_reward > 0.9, "{}: {report:?}", model.display());
    }
    assert!(dir.join("1D").read_dir().unwrap().any(|f| f.unwrap().file_name().to_string_lossy().starts_with("events.out.tfevents")));
    let _ = std::fs::remove_dir_all(dir);
}

/// Ctrl-C during training: the trainer stops, closes the environment and still exports,
/// exiting 0.
#[test]
fn interrupted_training_still_exports() {
    let dir = std::env::temp_dir().join(format!("mlagents-interrupt-{}", std::process::id()));
    let config = dir.join("config.yaml");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&config, "behaviors:\n  1D:\n    max_steps: 10000000\n    summary_freq: 1000\nenv_settings: {base_port: 0}\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-learn"))
        .args([config.to_str().unwrap(), "--run-id", "interrupted", "--env", "sim:Simple1DDiscrete", "--results-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: sends a signal to our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let run = dir.join("interrupted");
    assert!(run.join("1D.onnx").is_file() && run.join("1D.nn").is_file() && run.join("configuration.yaml").is_file());
    let _ = std::fs::remove_dir_all(dir);
}
