//! Self-play (self-play.md §6.5): ML-Agents' four ghost integration tests with their exact
//! configurations, step budgets and pass criteria, each with a discrete and a continuous
//! action, on the stand-in test-suite scenes, three seeds each; the ratings, the team
//! rotation and the checkpointed state.
#![cfg(feature = "train")]

mod common;

use common::{event_file, finish, scalars, spawn_learn_on, temp_dir};
use mlagents::checkpoint::{self, Checkpoint, ROLLOUT_PREFIX};
use std::time::Duration;
use mlagents::train::config::RunOptions;
use mlagents::train::session::{learn, BehaviorResult, LearnOptions};
use std::collections::BTreeMap;

const SEEDS: [i64; 3] = [1337, 1338, 1339];

/// ML-Agents' `ppo_dummy_config` with a `self_play` block, for each behavior named.
fn config(behaviors: &[&str], max_steps: u64, self_play: &str, seed: i64) -> RunOptions {
    config_of("ppo", behaviors, max_steps, self_play, seed)
}

/// [`config`] for another trainer type.
fn config_of(trainer_type: &str, behaviors: &[&str], max_steps: u64, self_play: &str, seed: i64) -> RunOptions {
    let mut yaml = String::from("behaviors:\n");
    for b in behaviors {
        yaml += &format!(
            "  {b}:\n    trainer_type: {trainer_type}\n    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, learning_rate_schedule: constant, \
             beta_schedule: linear, epsilon_schedule: linear, beta: 5.0e-3, epsilon: 0.2, lambd: 0.95, num_epoch: 3}}\n    \
             network_settings: {{hidden_units: 32, num_layers: 1}}\n    max_steps: {max_steps}\n    time_horizon: 64\n    \
             summary_freq: 500\n    self_play: {{{self_play}}}\n"
        );
    }
    yaml += &format!("env_settings: {{base_port: 0, seed: {seed}}}\n");
    RunOptions::from_yaml(&yaml, "ghost.yaml").unwrap()
}

fn last5(returns: &[f32]) -> f32 {
    let tail = &returns[returns.len().saturating_sub(5)..];
    tail.iter().sum::<f32>() / tail.len().max(1) as f32
}

/// Each team's last-5 mean return (team 0, team 1), whichever behavior owns it.
fn team_scores(results: &BTreeMap<String, BehaviorResult>) -> [f32; 2] {
    let mut scores = [f32::NAN; 2];
    for r in results.values() {
        for (team, returns) in &r.team_returns {
            scores[*team as usize] = last5(returns);
        }
    }
    scores
}

/// Runs one upstream case on the discrete and the continuous scene for every seed; `passes`
/// judges the two teams' scores. At least two seeds of three must pass (the random streams
/// differ from Python's), as for the other upstream training tests.
fn upstream_case(name: &str, asymmetric: bool, max_steps: u64, self_play: &str, passes: fn([f32; 2]) -> bool) {
    let behaviors: &[&str] = if asymmetric { &["1D", "1DOpp"] } else { &["1D"] };
    for continuous in [false, true] {
        let scene = format!("sim:{}Ghost1D{}", if asymmetric { "Asymmetric" } else { "" }, if continuous { "Continuous" } else { "" });
        let scores: Vec<[f32; 2]> = SEEDS.iter().map(|seed| team_scores(&learn(&config(behaviors, max_steps, self_play, *seed), &LearnOptions::in_memory(&scene)).unwrap())).collect();
        eprintln!("{name} on {scene}: last-5 mean returns per seed (team 0, team 1) {scores:?}");
        let passed = scores.iter().filter(|s| passes(**s)).count();
        assert!(passed >= 2, "{name} on {scene}: {passed} of 3 seeds pass: {scores:?}");
    }
}

fn both_above(s: [f32; 2]) -> bool {
    s.iter().all(|v| *v > 0.9)
}

fn one_above_one_below(s: [f32; 2]) -> bool {
    s.iter().any(|v| *v > 0.9) && s.iter().any(|v| *v < 0.9)
}

#[test]
fn simple_ghost() {
    upstream_case("test_simple_ghost", false, 2500, "play_against_latest_model_ratio: 1.0, save_steps: 2000, swap_steps: 2000", both_above);
}

#[test]
fn simple_ghost_fails() {
    upstream_case("test_simple_ghost_fails", false, 2500, "play_against_latest_model_ratio: 1.0, save_steps: 2000, swap_steps: 4000", one_above_one_below);
}

#[test]
fn simple_asymmetric_ghost() {
    upstream_case("test_simple_asymm_ghost", true, 4000, "play_against_latest_model_ratio: 1.0, save_steps: 10000, swap_steps: 10000, team_change: 400", both_above);
}

#[test]
fn simple_asymmetric_ghost_fails() {
    upstream_case("test_simple_asymm_ghost_fails", true, 3000, "play_against_latest_model_ratio: 0.0, save_steps: 5000, swap_steps: 5000, team_change: 2000", one_above_one_below);
}

/// The self-play tensors and record of a checkpoint.
fn self_play_of(c: &Checkpoint) -> (serde_json::Value, Vec<(String, Vec<f32>)>) {
    let tensors = c.tensors.0.iter().filter(|(n, _)| n.starts_with("selfplay.")).map(|(n, t)| (n.clone(), t.data.clone())).collect();
    (c.description.self_play.clone().expect("a self-play record"), tensors)
}

/// A symmetric run through `mlagents-learn`: ratings in the console and TensorBoard, the
/// rating in training_status.json; killed with SIGKILL after a team change and resumed, it
/// continues with the pool, ratings, counters, learning team and opponents the checkpoint
/// held (compared), without an immediate team change, and trains on.
#[test]
fn ratings_are_reported_and_resume_restores_the_whole_state() {
    let dir = temp_dir("self-play-resume");
    let config = dir.join("config.yaml");
    let yaml = |max_steps: u64| {
        format!(
            "behaviors:\n  1D:\n    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3, learning_rate_schedule: constant}}\n    \
             network_settings: {{hidden_units: 32, num_layers: 1, normalize: true}}\n    max_steps: {max_steps}\n    summary_freq: 500\n    checkpoint_interval: 400\n    \
             self_play: {{save_steps: 300, swap_steps: 200, team_change: 1000, window: 3, play_against_latest_model_ratio: 0.5}}\nenv_settings: {{base_port: 0, seed: 5}}\n"
        )
    };
    std::fs::write(&config, yaml(10_000_000)).unwrap();
    let child = spawn_learn_on("Ghost1D", &config, "run", &dir, &[]);
    let behavior_dir = dir.join("run/1D");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    // Until a checkpoint was written after the first team change.
    let after_change = |c: &Checkpoint| c.description.self_play.as_ref().is_some_and(|r| r["rotation"]["learning_team"] == 1);
    while !checkpoint::list(&behavior_dir, "1D").iter().filter_map(|(_, p)| Checkpoint::read(p).ok()).any(|c| after_change(&c)) {
        assert!(std::time::Instant::now() < deadline, "no checkpoint after a team change in 180 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut child = child;
    child.kill().unwrap();
    let (_, log) = finish(child);
    assert!(log.lines().any(|l| l.contains("ELO: ") && l.contains("Learning team: ")), "{log}");
    let events = event_file(&behavior_dir);
    assert!(!scalars(&events, "Self-play/ELO").is_empty() && !scalars(&events, "Self-play/Learning Team").is_empty());
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/run_logs/training_status.json")).unwrap()).unwrap();
    assert!(status["1D"]["elo"].as_f64().is_some(), "{status}");

    let saved = checkpoint::latest(&behavior_dir, "1D").unwrap();
    let (record, tensors) = self_play_of(&saved);
    eprintln!("killed at step {}: {record}", saved.description.step);
    assert!(record["state"]["snapshots"].as_array().unwrap().len() >= 2, "{record}");

    // Resumed with max_steps below the saved step: nothing trains; the final checkpoint (at
    // the same step) holds exactly the restored state.
    std::fs::write(&config, yaml(1)).unwrap();
    let (ok, log) = finish(spawn_learn_on("Ghost1D", &config, "run", &dir, &["--resume"]));
    assert!(ok && log.contains("Self-play of 1D restored"), "{log}");
    let restored = checkpoint::at_step(&behavior_dir, "1D", saved.description.step).unwrap();
    assert_eq!(self_play_of(&restored), (record.clone(), tensors));
    let weights = |c: &Checkpoint| c.tensors.0.iter().filter(|(n, _)| !n.starts_with(ROLLOUT_PREFIX)).map(|(n, t)| (n.clone(), t.data.clone())).collect::<Vec<_>>();
    assert!(weights(&restored) == weights(&saved));

    // Resumed for real: training goes on without an immediate team change.
    let step = saved.description.step;
    std::fs::write(&config, yaml(step + 800)).unwrap();
    let (ok, log) = finish(spawn_learn_on("Ghost1D", &config, "run", &dir, &["--resume"]));
    assert!(ok, "{log}");
    let last = checkpoint::latest(&behavior_dir, "1D").unwrap();
    let (after, _) = self_play_of(&last);
    let before_change = record["state"]["last_team_change"].as_u64().unwrap();
    let change = after["state"]["last_team_change"].as_u64().unwrap();
    assert!(last.description.step > step && (change == before_change || change > before_change + 1000), "team change at {change} (saved {before_change}, step {step})");
    let _ = std::fs::remove_dir_all(dir);
}

/// A curriculum whose lesson follows the self-play rating (our `Elo` measure): it moves on
/// once the behavior's ELO passes the threshold, and not before.
#[test]
fn a_lesson_advances_on_the_self_play_rating() {
    let dir = temp_dir("self-play-elo-lesson");
    let mut run = config(&["1D"], 3000, "play_against_latest_model_ratio: 0.0, save_steps: 500, swap_steps: 200, team_change: 1000", 1337);
    let yaml = "p:\n  curriculum:\n    - name: Low\n      completion_criteria: {measure: Elo, behavior: 1D, threshold: 1300}\n      value: 1\n    - name: High\n      value: 2\n";
    run.environment_parameters = mlagents::train::environment_parameters::parse(&serde_norway::from_str(yaml).unwrap()).unwrap();
    learn(&run, &LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory("sim:Ghost1D") }).unwrap();
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run_logs/training_status.json")).unwrap()).unwrap();
    let elo = status["1D"]["elo"].as_f64().unwrap();
    eprintln!("final ELO {elo}, lesson {}", status["p"]["lesson_num"]);
    assert!(elo > 1300.0, "{status}");
    assert_eq!(status["p"]["lesson_num"], 1, "{status}");
    let events = event_file(&dir.join("1D"));
    let lessons = scalars(&events, "Environment/Lesson Number/p");
    assert!(lessons.first() == Some(&0.0) && lessons.last() == Some(&1.0), "{lessons:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `mlagents-run MODEL --env ENV --opponent OTHER --json`: the match report.
fn head_to_head(model: &std::path::Path, opponent: &std::path::Path, scene: &str, episodes: usize) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-run"))
        .arg(model)
        .args(["--env", scene, "--opponent"])
        .arg(opponent)
        .args(["--episodes", &episodes.to_string(), "--deterministic", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Pong through `mlagents-learn` with `tests/fixtures/config/Pong.yaml` (60k steps): the
/// rating rises above its start, and the final policy beats an early checkpoint of the same
/// run head to head (most decisive games won).
#[test]
fn pong_self_play_beats_its_early_self() {
    let dir = temp_dir("pong");
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/Pong.yaml")).unwrap();
    let config = dir.join("Pong.yaml");
    std::fs::write(&config, text.replace("max_steps: 100000", "max_steps: 60000")).unwrap();
    let (ok, log) = finish(spawn_learn_on("Pong", &config, "run", &dir, &["--seed", "1", "--base-port", "0"]));
    assert!(ok, "{log}");
    let elo = scalars(&event_file(&dir.join("run/Pong")), "Self-play/ELO");
    eprintln!("Pong ELO by summary: {elo:?}");
    assert!(elo.last().is_some_and(|e| *e > 1200.0), "{elo:?}");
    let early = checkpoint::list(&dir.join("run/Pong"), "Pong").first().map(|(step, json)| (*step, json.with_extension("onnx"))).unwrap();
    let report = head_to_head(&dir.join("run/Pong.onnx"), &early.1, "sim:Pong", 40);
    let (wins, losses) = (report["teams"]["0"]["wins"].as_u64().unwrap(), report["teams"]["0"]["losses"].as_u64().unwrap());
    eprintln!("Pong: final policy against the checkpoint of step {}: {wins} wins, {losses} losses, rating difference {}", early.0, report["rating_difference"]);
    assert!(wins > losses, "{report}");
    let _ = std::fs::remove_dir_all(dir);
}

/// RaceAsymmetric (a pair against a faster runner): both behaviors train under one rotation,
/// both are exported, and each export fits its own behavior (Unity's checks) and plays it
/// head to head.
#[test]
fn asymmetric_race_trains_and_exports_both_behaviors() {
    use mlagents::run::session::{check_model, EnvTarget, Report};
    let dir = temp_dir("race-asymmetric");
    let run = config(&["RaceDuo", "RaceSolo"], 3000, "save_steps: 1000, swap_steps: 500, team_change: 1000", 7);
    let results = learn(&run, &LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory("sim:RaceAsymmetric") }).unwrap();
    for (behavior, result) in &results {
        assert!(result.steps >= 3000, "{behavior}: {} steps", result.steps);
        let model = result.onnx.clone().unwrap();
        let target = EnvTarget { env: "sim:RaceAsymmetric".into(), behavior: Some(behavior.clone()), base_port: None, timeout_wait: Duration::from_secs(60) };
        let report = check_model(&model, &target).unwrap();
        assert!(report.passed(), "{}", report.text());
    }
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run_logs/training_status.json")).unwrap()).unwrap();
    assert!(status["RaceDuo"]["elo"].is_number() && status["RaceSolo"]["elo"].is_number(), "{status}");
    let report = head_to_head(results["RaceDuo"].onnx.as_ref().unwrap(), results["RaceSolo"].onnx.as_ref().unwrap(), "sim:RaceAsymmetric", 20);
    assert!(report["episodes"].as_u64().unwrap() >= 20, "{report}");
    let _ = std::fs::remove_dir_all(dir);
}

/// StrikersVsGoalie's shape (`config/poca/StrikersVsGoalie.yaml`: POCA for both sides under
/// self-play): on RaceAsymmetric the pair is one group, whose critic reads both members and
/// whose group reward is reported; both behaviors train under one rotation and their exports
/// fit their behaviors.
#[test]
fn poca_trains_a_grouped_team_under_self_play() {
    use mlagents::run::session::{check_model, EnvTarget, Report};
    let dir = temp_dir("race-asymmetric-poca");
    let run = config_of("poca", &["RaceDuo", "RaceSolo"], 3000, "save_steps: 1000, swap_steps: 500, team_change: 1000", 7);
    let results = learn(&run, &LearnOptions { run_dir: Some(dir.clone()), ..LearnOptions::in_memory("sim:RaceAsymmetric") }).unwrap();
    for (behavior, result) in &results {
        assert!(result.steps >= 3000, "{behavior}: {} steps", result.steps);
        let target = EnvTarget { env: "sim:RaceAsymmetric".into(), behavior: Some(behavior.clone()), base_port: None, timeout_wait: Duration::from_secs(60) };
        let report = check_model(result.onnx.as_ref().unwrap(), &target).unwrap();
        assert!(report.passed(), "{}", report.text());
    }
    let duo = common::event_file(&dir.join("RaceDuo"));
    for tag in ["Environment/Group Cumulative Reward", "Losses/Baseline Loss", "Self-play/ELO"] {
        assert!(!common::scalars(&duo, tag).is_empty(), "RaceDuo: no {tag}");
    }
    let tensors = common::tensors_without_rollouts(&checkpoint::latest(&dir.join("RaceDuo"), "RaceDuo").unwrap());
    assert_eq!(tensors["critic.network_body._current_max_agents"].data, vec![2.0], "the pair's critic saw both members");
    let _ = std::fs::remove_dir_all(dir);
}

/// A `self_play` block on a scene with a single team: a warning, and plain PPO (as 0.28 in
/// effect trains it), with no self-play state in the checkpoints.
#[test]
fn self_play_on_a_single_team_trains_as_plain_ppo() {
    let dir = temp_dir("self-play-single-team");
    let config = dir.join("config.yaml");
    std::fs::write(&config, "behaviors:\n  1D:\n    max_steps: 300\n    summary_freq: 100\n    hyperparameters: {batch_size: 16, buffer_size: 64}\n    self_play: {}\nenv_settings: {base_port: 0}\n").unwrap();
    let (ok, log) = finish(spawn_learn_on("Simple1DDiscrete", &config, "run", &dir, &[]));
    assert!(ok && log.contains("1D has a self_play block but the environment has only one team so far; it trains as plain PPO"), "{log}");
    let last = checkpoint::latest(&dir.join("run/1D"), "1D").unwrap();
    assert!(last.description.self_play.is_none() && last.description.step >= 300);
    let _ = std::fs::remove_dir_all(dir);
}

/// S2 (report of 2 December): `--resume` under a changed `self_play` block kept the
/// checkpoint's window and ratio. The new block applies: the pool keeps its newest snapshots
/// up to the new window, swaps follow the new ratio, and the console says what changed.
#[test]
fn a_resume_takes_the_changed_self_play_block() {
    let dir = temp_dir("self-play-changed");
    let config = dir.join("config.yaml");
    let yaml = |max_steps: u64, window: u64, ratio: f64| {
        format!(
            "behaviors:\n  1D:\n    hyperparameters: {{batch_size: 16, buffer_size: 64}}\n    network_settings: {{hidden_units: 16, num_layers: 1}}\n    \
             max_steps: {max_steps}\n    summary_freq: 500\n    checkpoint_interval: 500\n    \
             self_play: {{save_steps: 200, swap_steps: 100, team_change: 100000, window: {window}, play_against_latest_model_ratio: {ratio}}}\nenv_settings: {{base_port: 0, seed: 5}}\n"
        )
    };
    std::fs::write(&config, yaml(1500, 3, 0.0)).unwrap();
    let (ok, log) = finish(spawn_learn_on("Ghost1D", &config, "run", &dir, &[]));
    assert!(ok, "{log}");
    let first = checkpoint::latest(&dir.join("run/1D"), "1D").unwrap();
    let (record, _) = self_play_of(&first);
    assert_eq!(record["state"]["snapshots"].as_array().unwrap().len(), 3, "{record}");
    std::fs::write(&config, yaml(2500, 1, 1.0)).unwrap();
    let (ok, log) = finish(spawn_learn_on("Ghost1D", &config, "run", &dir, &["--resume"]));
    assert!(ok && log.contains("window: 3 -> 1") && log.contains("play_against_latest_model_ratio: 0 -> 1"), "{log}");
    let last = checkpoint::latest(&dir.join("run/1D"), "1D").unwrap();
    let (after, _) = self_play_of(&last);
    assert_eq!(after["state"]["settings"]["window"], 1, "{after}");
    assert_eq!(after["state"]["snapshots"].as_array().unwrap().len(), 1, "{after}");
    assert!(after["state"]["playing"].as_object().unwrap().values().all(|o| o == "Latest"), "with ratio 1 every swap plays the latest weights: {after}");
    let _ = std::fs::remove_dir_all(dir);
}

/// U3 (report of 2 December): a team whose agents appear after training started (as agents
/// spawned later bring their team in Unity) stopped training with "team 0 has no playing
/// copy". Self-play starts when it appears, the earlier team learning first.
#[test]
fn a_team_that_appears_late_starts_self_play() {
    let dir = temp_dir("self-play-late-team");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "behaviors:\n  1D:\n    max_steps: 800\n    summary_freq: 400\n    hyperparameters: {batch_size: 16, buffer_size: 64}\n    self_play: {save_steps: 100, swap_steps: 100}\nenv_settings: {base_port: 0, env_args: [--fault, late-team@40]}\n",
    )
    .unwrap();
    let (ok, log) = finish(spawn_learn_on("Ghost1D", &config, "run", &dir, &[]));
    assert!(ok && log.contains("team 1 of 1D appeared") && log.contains("self-play starts now (team 0 learns first)"), "{log}");
    let last = checkpoint::latest(&dir.join("run/1D"), "1D").unwrap();
    let (record, _) = self_play_of(&last);
    assert_eq!(record["state"]["teams"], serde_json::json!([0, 1]), "{record}");
    let _ = std::fs::remove_dir_all(dir);
}
