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
    config(trainer_type, 16, 64, max_steps, 500, seed)
}

/// [`dummy_config`] with other sizes.
fn config(trainer_type: &str, batch: usize, buffer: usize, max_steps: u64, summary_freq: u64, seed: i64) -> RunOptions {
    let yaml = format!(
        "behaviors:\n  1D:\n    trainer_type: {trainer_type}\n    hyperparameters: {{batch_size: {batch}, buffer_size: {buffer}, learning_rate: 5.0e-3, \
         learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, \
         lambd: 0.95, num_epoch: 3}}\n    network_settings: {{hidden_units: 32, num_layers: 1}}\n    \
         reward_signals: {{extrinsic: {{gamma: 0.99, strength: 1.0}}}}\n    max_steps: {max_steps}\n    time_horizon: 64\n    \
         summary_freq: {summary_freq}\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
    );
    RunOptions::from_yaml(&yaml, "dummy.yaml").unwrap()
}

/// Trains `trainer_type` on `scene` for `max_steps` and returns the scene's last summary of
/// `tag` (its mean over the last `summary_freq` steps) and the TensorBoard events.
fn train(scene: &str, options: &RunOptions, tag: &str) -> (f32, Vec<u8>) {
    let (trainer_type, max_steps, seed) = (&options.behaviors["1D"].trainer_type, options.behaviors["1D"].max_steps, options.env_settings.seed);
    let dir = temp_dir(&format!("poca-{scene}-{trainer_type}-{seed}"));
    let run = LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory(&format!("sim:{scene}")) };
    let results = learn(options, &run).unwrap();
    assert!(results["1D"].steps >= max_steps);
    // The export is the actor alone, as PPO's: it passes its parity record.
    let onnx = results["1D"].onnx.clone().expect("exported");
    let record: mlagents::policy::parity::ParityRecord = serde_json::from_slice(&std::fs::read(onnx.with_extension("parity.json")).unwrap()).unwrap();
    let report = mlagents::run::check_parity(&onnx, &record, 1e-5).unwrap();
    assert!(report.passed, "{trainer_type} on {scene}: {report:?}");
    let events = event_file(&dir.join("1D"));
    let _ = std::fs::remove_dir_all(dir);
    let last = scalars(&events, tag).last().copied().unwrap_or(f32::NAN);
    (last, events)
}

fn poca_reaches(scene: &str) {
    let (scores, passed) = common::until_majority(&common::THREE_SEEDS, |s| *s > 0.9, |seed| {
        let (score, events) = train(scene, &dummy_config("poca", 3000, seed), "Coop/Final Reward");
        for tag in ["Losses/Baseline Loss", "Policy/Extrinsic Baseline Estimate", "Environment/Group Cumulative Reward"] {
            assert!(!scalars(&events, tag).is_empty(), "{scene}: no {tag} in the event file");
        }
        score
    });
    eprintln!("{scene} (poca): last summary of the finishing rewards per seed {scores:?}");
    assert!(passed >= 2, "{scene}: {passed} of {} seeds reached 0.9 in 3000 steps: {scores:?}", scores.len());
}

#[test]
fn poca_discrete() {
    poca_reaches("CoopReach1D");
}

#[test]
fn poca_continuous() {
    poca_reaches("CoopReach1DContinuous");
}

/// CoopSacrifice: the door opens for the group only after one member went to the dragon and
/// left the episode with nothing. POCA credits that member with what the group earns after it
/// (the group bootstrap); PPO with the same budget learns from individual rewards (each member's
/// own and the group's while it is in the episode) and has no reason to go.
#[test]
fn the_sacrifice_is_learnt_by_poca_not_by_ppo() {
    let group_return = |trainer_type: &str, seed: i64| {
        let (score, events) = train("CoopSacrifice", &config(trainer_type, 64, 640, SACRIFICE_STEPS, 2000, seed), "Coop/Group Return");
        eprintln!("CoopSacrifice {trainer_type} seed {seed}: group return per summary {:?}", scalars(&events, "Coop/Group Return"));
        score
    };
    let (poca, poca_learnt) = common::until_majority(&[1, 2, 3], |s| *s > 0.9, |seed| group_return("poca", seed));
    let (ppo, ppo_did_not) = common::until_majority(&[1, 2, 3], |s| *s < 0.5, |seed| group_return("ppo", seed));
    eprintln!("CoopSacrifice, {SACRIFICE_STEPS} steps: group return over the last 2000 steps, POCA {poca:?}, PPO {ppo:?}");
    assert!(poca_learnt >= 2, "POCA did not learn the sacrifice: {poca:?}");
    assert!(ppo_did_not >= 2, "PPO learnt the sacrifice: {ppo:?}");
}

/// POCA inside self-play (SoccerTwos' and StrikersVsGoalie's shipped combination): on
/// upstream's symmetric ghost scene (two teams, no groups, where POCA's critic reads the agent
/// alone) both teams still learn, as `test_simple_ghost` asks of PPO.
#[test]
fn poca_trains_under_self_play() {
    let both_learn = |s: &Vec<f32>| s.len() == 2 && s.iter().all(|v| *v > 0.9);
    let (scores, passed) = common::until_majority(&common::THREE_SEEDS, both_learn, |seed| {
        let yaml = format!(
            "behaviors:\n  1D:\n    trainer_type: poca\n    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, \
             learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear}}\n    \
             network_settings: {{hidden_units: 32, num_layers: 1}}\n    max_steps: 2500\n    time_horizon: 64\n    summary_freq: 500\n    \
             self_play: {{play_against_latest_model_ratio: 1.0, save_steps: 2000, swap_steps: 2000}}\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
        );
        let results = learn(&RunOptions::from_yaml(&yaml, "ghost.yaml").unwrap(), &LearnOptions::in_memory("sim:Ghost1D")).unwrap();
        let last5 = |r: &[f32]| r[r.len().saturating_sub(5)..].iter().sum::<f32>() / r.len().clamp(1, 5) as f32;
        results["1D"].team_returns.values().map(|r| last5(r)).collect::<Vec<f32>>()
    });
    eprintln!("POCA under self-play on Ghost1D: last-5 mean returns per seed (team 0, team 1) {scores:?}");
    assert!(passed >= 2, "{passed} of {} seeds pass: {scores:?}", scores.len());
}

/// The budget of the sacrifice (the group return measured over its last 2000 steps).
const SACRIFICE_STEPS: u64 = 20000;

/// A POCA checkpoint keeps the whole critic, its agent count's running maximum included (two
/// members in CoopReach1D), and Adam over actor and critic; a resume restores exactly that.
#[test]
fn a_poca_checkpoint_keeps_the_critic_and_resumes_exactly() {
    use mlagents::checkpoint;
    let dir = temp_dir("poca-resume");
    let run = |resume: bool| LearnOptions { run_dir: Some(dir.clone()), resume, ..LearnOptions::in_memory("sim:CoopReach1D") };
    learn(&dummy_config("poca", 1000, 5), &run(false)).unwrap();
    let saved = checkpoint::latest(&dir.join("1D"), "1D").unwrap();
    let tensors = common::tensors_without_rollouts(&saved);
    assert_eq!(tensors["critic.network_body._current_max_agents"].data, vec![2.0]);
    for name in ["critic.network_body.self_attn.fc_q.weight", "critic.network_body.obs_action_encoder.self_ent_encoder.seq_layers.0.weight", "critic.value_heads.value_heads.extrinsic.weight"] {
        assert!(tensors.contains_key(name), "no {name} in {:?}", tensors.keys().collect::<Vec<_>>());
    }
    assert_eq!(tensors["critic.value_heads.value_heads.extrinsic.weight"].shape, vec![1, 33], "32 hidden units and the agent count");
    assert!(tensors.keys().any(|k| k.starts_with("optimizer.m.critic.")) && tensors.keys().any(|k| k.starts_with("optimizer.m.action_model.")));
    // Resumed with max_steps at the saved step, nothing trains: the final checkpoint holds
    // exactly the restored state.
    learn(&dummy_config("poca", saved.description.step, 5), &run(true)).unwrap();
    let restored = checkpoint::at_step(&dir.join("1D"), "1D", saved.description.step).unwrap();
    assert_eq!(restored.description.optimizer, saved.description.optimizer);
    assert!(common::tensors_without_rollouts(&restored) == tensors, "resumed state differs from the checkpoint");
    let _ = std::fs::remove_dir_all(dir);
}

/// Upstream's `test_recurrent_poca` settings: memory 16 in sequences of 64, lr 1e-3, batch 64,
/// buffer 128 (the dummy POCA config otherwise). `compat`: 0.28's shared critic memories.
fn recurrent_config(max_steps: u64, seed: i64, compat: bool) -> RunOptions {
    let yaml = format!(
        "behaviors:\n  1D:\n    trainer_type: poca\n    hyperparameters: {{batch_size: 64, buffer_size: 128, learning_rate: 1.0e-3, \
         learning_rate_schedule: constant, beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, \
         lambd: 0.95, num_epoch: 3}}\n    network_settings: {{hidden_units: 32, num_layers: 1, memory: {{memory_size: 16, sequence_length: 64}}}}\n    \
         reward_signals: {{extrinsic: {{gamma: 0.99, strength: 1.0}}}}\n    max_steps: {max_steps}\n    time_horizon: 64\n    \
         summary_freq: 500\nenv_settings: {{base_port: 0, seed: {seed}}}\n"
    );
    let mut options = RunOptions::from_yaml(&yaml, "recurrent.yaml").unwrap();
    if compat {
        options.behaviors.values_mut().for_each(|b| b.follow_0_28());
    }
    options
}

/// `test_recurrent_poca[is_multiagent=True]` ("just check if LSTM doesn't crash", 500 steps)
/// on the grouped CoopReach1D, with per-agent critic memories and with 0.28's shared ones; the
/// recurrent export passes its parity record, and the checkpoint holds the critic's LSTM.
#[test]
fn recurrent_poca_trains_a_group() {
    for compat in [false, true] {
        let dir = temp_dir(&format!("poca-recurrent-{compat}"));
        let run = LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory("sim:CoopReach1D") };
        let results = learn(&recurrent_config(500, 1337, compat), &run).unwrap();
        assert!(results["1D"].steps >= 500);
        let onnx = results["1D"].onnx.clone().expect("exported");
        let record: mlagents::policy::parity::ParityRecord = serde_json::from_slice(&std::fs::read(onnx.with_extension("parity.json")).unwrap()).unwrap();
        let report = mlagents::run::check_parity(&onnx, &record, 1e-5).unwrap();
        assert!(report.passed, "compat {compat}: {report:?}");
        let saved = mlagents::checkpoint::latest(&dir.join("1D"), "1D").unwrap();
        let tensors = common::tensors_without_rollouts(&saved);
        assert_eq!(tensors["critic.network_body.lstm.lstm.weight_ih_l0"].shape, vec![32, 32], "8 hidden units per gate over the 32 of the MLP");
        assert_eq!(tensors["critic.value_heads.value_heads.extrinsic.weight"].shape, vec![1, 9], "the LSTM's 8 and the agent count");
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `test_recurrent_poca[is_multiagent=False]`: one agent without a group in the memory scene
/// (the goal shown for 3 steps only), 6000 steps, mean of the last 5 returns above 0.9 for two
/// seeds of three.
#[test]
fn recurrent_poca_remembers() {
    let (scores, passed) = common::until_majority(&common::THREE_SEEDS, |s| *s > 0.9, |seed| {
        let results = learn(&recurrent_config(6000, seed, false), &LearnOptions::in_memory("sim:Memory1DDiscrete")).unwrap();
        let r = &results["1D"].episode_returns;
        r[r.len().saturating_sub(5)..].iter().sum::<f32>() / r.len().clamp(1, 5) as f32
    });
    eprintln!("Memory1DDiscrete (recurrent poca): last-5 mean returns per seed {scores:?}");
    assert!(passed >= 2, "{scores:?}");
}
