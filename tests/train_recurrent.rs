//! Recurrent PPO (`network_settings.memory`, lstm.md) trains on the test suite's memory scene
//! within upstream `test_recurrent_ppo`'s budget (memory 16, lr 1e-3, batch 64, buffer 128,
//! 6000 steps, mean of the last 5 episode returns above 0.9), and the same configuration
//! without memory does not: the goal is shown for 3 steps only.
#![cfg(feature = "train")]

mod common;

use mlagents::train::config::RunOptions;
use mlagents::train::session::{learn, LearnOptions};

/// `test_recurrent_ppo`'s configuration (ppo_dummy_config with memory and its overrides).
fn recurrent_config(memory: bool, seed: i64) -> RunOptions {
    let memory = if memory { ", memory: {memory_size: 16, sequence_length: 64}" } else { "" };
    let yaml = format!(
        "behaviors:\n  1D:\n    hyperparameters: {{batch_size: 64, buffer_size: 128, learning_rate: 1.0e-3, \
         learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, \
         lambd: 0.95, num_epoch: 3}}\n    network_settings: {{hidden_units: 32, num_layers: 1{memory}}}\n    \
         reward_signals: {{extrinsic: {{gamma: 0.99, strength: 1.0}}}}\n    max_steps: 6000\n    time_horizon: 64\n    \
         summary_freq: 500\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
    );
    RunOptions::from_yaml(&yaml, "recurrent.yaml").unwrap()
}

fn last(k: usize, returns: &[f32]) -> f32 {
    let tail = &returns[returns.len().saturating_sub(k)..];
    tail.iter().sum::<f32>() / tail.len().max(1) as f32
}

fn last5(returns: &[f32]) -> f32 {
    last(5, returns)
}

/// The mean return of the last `k` episodes of three seeds.
fn scores(scene: &str, memory: bool, k: usize) -> Vec<f32> {
    let options = LearnOptions::in_memory(&format!("sim:{scene}"));
    [1337, 1338, 1339]
        .into_iter()
        .map(|seed| {
            let results = learn(&recurrent_config(memory, seed), &options).unwrap_or_else(|e| panic!("{scene}, seed {seed}: {e}"));
            assert!(results["1D"].steps >= 6000);
            last(k, &results["1D"].episode_returns)
        })
        .collect()
}

#[test]
fn recurrent_ppo_discrete() {
    let s = scores("Memory1DDiscrete", true, 5);
    eprintln!("Memory1DDiscrete with memory: {s:?}");
    assert!(s.iter().all(|v| *v > 0.9), "every seed must reach 0.9: {s:?}");
}

#[test]
fn recurrent_ppo_continuous() {
    let s = scores("Memory1DContinuous", true, 5);
    eprintln!("Memory1DContinuous with memory: {s:?}");
    assert!(s.iter().all(|v| *v > 0.9), "every seed must reach 0.9: {s:?}");
}

/// Without memory the policy cannot know the goal after step 3 (it stands 0.6 towards it): the
/// best it can do is wander, reaching the goal side first about 4 times in 5 and slowly (about
/// 0.45 on average, where the recurrent policy makes 1.02 every episode). Judged on the last 100
/// episodes: a few lucky walks in a row would pass a last-5 bar.
#[test]
fn the_memory_scene_needs_memory() {
    let s = scores("Memory1DDiscrete", false, 100);
    eprintln!("Memory1DDiscrete without memory, mean of the last 100 episodes: {s:?}");
    assert!(s.iter().all(|v| *v < 0.8), "a feed-forward policy should not solve the memory scene: {s:?}");
}

/// A trained recurrent policy: both exports pass the parity record (every recorded step from
/// its recorded memory, and the rows replayed in order with the model's own memory carried,
/// memories included, within 1e-5), and play the memory scene deterministically, memory
/// carried per agent, within 5% of the training's last-5 reward. Its checkpoint refuses to
/// resume under a configuration without memory.
#[test]
fn a_trained_recurrent_policy_exports_and_plays_in_both_formats() {
    use mlagents::policy::parity::ParityRecord;
    use mlagents::run::{check_parity, play, LoadOptions, Policy, PolicyDriver};
    for scene in ["Memory1DDiscrete", "Memory1DContinuous"] {
        let dir = common::temp_dir(&format!("train-recurrent-{scene}"));
        let options = LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory(&format!("sim:{scene}")) };
        let results = learn(&recurrent_config(true, 1337), &options).unwrap();
        let trained = last5(&results["1D"].episode_returns);
        let onnx = results["1D"].onnx.clone().expect("exported");
        let record = ParityRecord::read(&dir.join("1D.parity.json")).unwrap();
        assert_eq!(record.policy.memory_size, 16);
        assert_eq!(record.recurrent_in.len(), record.batch * 16);
        assert!(record.recurrent_in.iter().any(|v| *v != 0.0), "the record holds the memories the policy read");
        for model in [onnx.clone(), onnx.with_extension("nn")] {
            let report = check_parity(&model, &record, 1e-5).unwrap();
            assert!(report.passed && report.checks.iter().any(|c| c.recorded == "recurrent_out"), "{}: {report:?}", model.display());
            let policy = Policy::load(&model, LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
            let mut env = common::start(scene);
            env.reset().unwrap();
            let spec = env.behavior_specs()["1D?team=0"].clone();
            let mut driver = PolicyDriver::new(policy, "1D?team=0", &spec, true, 0).unwrap();
            let report = play(&mut env, &mut driver, 20, 5000).unwrap();
            env.close().unwrap();
            eprintln!("{scene} {}: trained {trained}, played {}", model.display(), report.mean_reward);
            assert!((report.mean_reward - trained).abs() <= 0.05 * trained.abs(), "{}: trained {trained}, played {report:?}", model.display());
        }
        // Resuming the recurrent checkpoint with a configuration without memory says so.
        let resume = LearnOptions { resume: true, ..options.clone() };
        let e = learn(&recurrent_config(false, 1337), &resume).unwrap_err().to_string();
        assert!(e.contains("memory_size: checkpoint 16, this run 0"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Self-play with a recurrent network (0.28 allows memory under `self_play`): on the ghost
/// scene both teams learn to reach their goal, the ghost team playing copies of the LSTM with
/// its own per-agent memories; the export is recurrent.
#[test]
fn recurrent_self_play_trains_both_teams() {
    let yaml = |seed: i64| {
        format!(
            "behaviors:\n  1D:\n    hyperparameters: {{batch_size: 64, buffer_size: 128, learning_rate: 1.0e-3, \
             learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear}}\n    \
             network_settings: {{hidden_units: 32, num_layers: 1, memory: {{memory_size: 16, sequence_length: 16}}}}\n    \
             max_steps: 5000\n    time_horizon: 64\n    summary_freq: 500\n    \
             self_play: {{play_against_latest_model_ratio: 1.0, save_steps: 2000, swap_steps: 2000}}\n\
             env_settings: {{base_port: 0, seed: {seed}}}\n"
        )
    };
    let both_learn = |s: &[f32; 2]| s.iter().all(|v| *v > 0.9);
    let (scores, passed) = common::until_majority(&common::THREE_SEEDS, both_learn, |seed| {
        let run = RunOptions::from_yaml(&yaml(seed), "recurrent-ghost.yaml").unwrap();
        let results = learn(&run, &LearnOptions::in_memory("sim:Ghost1D")).unwrap();
        let teams = &results["1D"].team_returns;
        [last5(&teams[&0]), last5(&teams[&1])]
    });
    eprintln!("recurrent self-play on Ghost1D: last-5 mean returns per seed (team 0, team 1) {scores:?}");
    assert!(passed >= 2, "{passed} of {} seeds: {scores:?}", scores.len());
}
