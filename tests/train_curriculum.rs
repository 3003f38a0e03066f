//! Curricula live (curriculum.md §2-§3, §9): `mlagents-learn` on the Corridor scene with
//! `tests/fixtures/config/Corridor_curriculum.yaml` advances its lessons in order at their
//! thresholds, the scene receives each new goal distance, and the final policy solves the
//! hardest lesson, where training on the hardest goal alone does not; a run killed in the
//! middle of a lesson resumes in the same lesson with the same smoothing and reward buffer.
#![cfg(feature = "train")]

mod common;

use common::{event_file, finish, scalars, spawn_learn_on, temp_dir};
use mlagents::checkpoint::{self, Checkpoint};
use mlagents::train::config::RunOptions;
use mlagents::train::session::{learn, LearnOptions};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

const LESSONS: [&str; 4] = ["Near", "Middle", "Far", "Farthest"];
const GOAL_DISTANCES: [f32; 4] = [5.0, 30.0, 60.0, 90.0];
/// The optimum on the hardest lesson: +1 after 90 decisions of -0.005.
const HARDEST_OPTIMUM: f32 = 0.55;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/Corridor_curriculum.yaml")
}

fn spawn_corridor(config: &Path, run_id: &str, results: &Path, extra: &[&str]) -> Child {
    spawn_learn_on("Corridor", config, run_id, results, &[&["--base-port", "0"], extra].concat())
}

/// Mean reward of a deterministic play of `model` on the Corridor's default (hardest) goal.
fn plays(model: &Path) -> f32 {
    use mlagents::run::{play, LoadOptions, Policy, PolicyDriver};
    let policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() }).unwrap();
    let mut env = mlagents::env::UnityEnvironment::new(mlagents::env::EnvOptions { env: Some("sim:Corridor".into()), base_port: Some(0), ..Default::default() }).unwrap();
    env.reset().unwrap();
    let spec = env.behavior_specs()["Corridor?team=0"].clone();
    let mut driver = PolicyDriver::new(policy, "Corridor?team=0", &spec, true, 0).unwrap();
    let report = play(&mut env, &mut driver, 16, 10_000).unwrap();
    env.close().unwrap();
    report.mean_reward
}

/// The lessons advance in order at their thresholds (console and TensorBoard), the scene
/// echoes each new goal distance, the final policy solves the hardest lesson, and the same
/// budget spent on the hardest goal alone does worse.
#[test]
fn lessons_advance_in_order_and_the_curriculum_beats_the_hardest_lesson_alone() {
    let dir = temp_dir("curriculum");
    let (ok, log) = finish(spawn_corridor(&fixture(), "run", &dir, &["--seed", "5"]));
    assert!(ok, "{log}");
    // Console: every lesson announced once, in order, each advance with its measure.
    let announced: Vec<&str> = log.lines().filter_map(|l| l.split("is in lesson '").nth(1)).map(|l| l.split('\'').next().unwrap()).collect();
    assert_eq!(announced, LESSONS, "{log}");
    let advances: Vec<&str> = log.lines().filter(|l| l.contains("moves from lesson")).collect();
    assert_eq!(advances.len(), 3, "{log}");
    for (line, threshold) in advances.iter().zip(["threshold 0.9 ", "threshold 0.8 ", "threshold 0.65 "]) {
        assert!(line.contains("reward of Corridor is") && line.contains(threshold), "{line}");
        let measured: f64 = line.split("Corridor is ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap();
        let threshold: f64 = threshold.trim().trim_start_matches("threshold ").parse().unwrap();
        assert!(measured > threshold, "{line}");
    }
    // Leaving 'Far' (require_reset: true) resets the environments, once, right after it.
    let resets: Vec<usize> = log.lines().enumerate().filter(|(_, l)| l.contains("require_reset")).map(|(i, _)| i).collect();
    let far = log.lines().position(|l| l.contains("moves from lesson 'Far'")).unwrap();
    assert!(resets.len() == 1 && resets[0] > far && resets[0] <= far + 2, "{resets:?} after line {far}: {log}");
    // TensorBoard: the lesson number never goes back and ends at the last lesson; the
    // scene's echo of the parameter follows the lessons' values in order.
    let events = event_file(&dir.join("run/Corridor"));
    let lessons = scalars(&events, "Environment/Lesson Number/goal_distance");
    assert!(lessons.windows(2).all(|w| w[0] <= w[1]) && lessons.last() == Some(&3.0), "{lessons:?}");
    let echoed = scalars(&events, "Sim/Parameter/goal_distance");
    let mut expected = GOAL_DISTANCES.iter();
    assert!(echoed.iter().all(|v| expected.any(|d| d == v)) && echoed.last() == Some(&90.0), "{echoed:?}");
    // The run logs keep 0.28's lesson_num; the final checkpoint records the curriculum.
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/run_logs/training_status.json")).unwrap()).unwrap();
    assert_eq!(status["goal_distance"]["lesson_num"], 3, "{status}");
    let last = checkpoint::latest(&dir.join("run/Corridor"), "Corridor").unwrap();
    assert_eq!(last.description.curriculum.as_ref().unwrap().lessons["goal_distance"], 3);

    let with_curriculum = plays(&dir.join("run/Corridor.onnx"));
    // The same budget on the hardest goal from the start (three seeds: a random drift can
    // find the far goal now and then, so the median is compared).
    let text = std::fs::read_to_string(fixture()).unwrap();
    let flat = text[..text.find("environment_parameters:").unwrap()].to_string() + "environment_parameters:\n  goal_distance: 90\n";
    let behind = |alone: &f32| *alone < with_curriculum - 0.3;
    let (alone, behind_count) = common::until_majority(&[4, 5, 6], behind, |seed| {
        let mut run = RunOptions::from_yaml(&flat, "flat.yaml").unwrap();
        (run.env_settings.base_port, run.env_settings.seed) = (0, seed);
        let flat_dir = temp_dir(&format!("curriculum-flat-{seed}"));
        let results = learn(&run, &LearnOptions { run_dir: Some(flat_dir.clone()), ..LearnOptions::in_memory("sim:Corridor") }).unwrap();
        let played = plays(results["Corridor"].onnx.as_ref().unwrap());
        let _ = std::fs::remove_dir_all(flat_dir);
        played
    });
    let steps = RunOptions::from_file(&fixture()).unwrap().behaviors["Corridor"].max_steps;
    eprintln!("Corridor, goal 90 cells away, after {steps} steps: with the curriculum {with_curriculum:.3} (optimum {HARDEST_OPTIMUM}); hardest lesson alone {alone:?}");
    assert!(with_curriculum >= HARDEST_OPTIMUM - 0.05, "the curriculum did not solve the hardest lesson: {with_curriculum}");
    // The median of three seeds behind by 0.3: two of them.
    assert!(behind_count >= 2, "without the curriculum {alone:?}, with it {with_curriculum}");
    let _ = std::fs::remove_dir_all(dir);
}

/// SIGKILL in the middle of a lesson, then `--resume`: the same lesson, smoothing and reward
/// buffer as the latest checkpoint recorded (0.28 would start the smoothing at 0 with empty
/// buffers, and lose the lesson altogether on a kill). A configuration whose curriculum no
/// longer has the recorded lesson is refused, saying so.
#[test]
fn resume_after_a_kill_continues_the_lesson_exactly() {
    let dir = temp_dir("curriculum-resume");
    let config = dir.join("config.yaml");
    let text = std::fs::read_to_string(fixture()).unwrap();
    let with_steps = |max_steps: u64| text.replace("max_steps: 20000", &format!("max_steps: {max_steps}\n    checkpoint_interval: 500"));
    std::fs::write(&config, with_steps(10_000_000)).unwrap();
    let mut child = spawn_corridor(&config, "run", &dir, &["--seed", "5"]);
    let behavior_dir = dir.join("run/Corridor");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    // Until a checkpoint records a lesson past the first with episodes in its buffer.
    let in_a_lesson = |c: &Checkpoint| c.description.curriculum.as_ref().is_some_and(|r| r.lessons["goal_distance"] >= 1 && !r.reward_buffer.is_empty());
    while !checkpoint::list(&behavior_dir, "Corridor").iter().filter_map(|(_, p)| Checkpoint::read(p).ok()).any(|c| in_a_lesson(&c)) {
        assert!(std::time::Instant::now() < deadline, "no checkpoint in a later lesson after 180 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let saved = checkpoint::latest(&behavior_dir, "Corridor").unwrap();
    let record = saved.description.curriculum.clone().unwrap();
    let lesson = record.lessons["goal_distance"];
    eprintln!("killed at step {} in lesson {lesson}: smoothing {:?}, {} episodes buffered", saved.description.step, record.smoothed, record.reward_buffer.len());
    // training_status.json was written with the checkpoints (0.28 writes it only at exit).
    let status: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("run/run_logs/training_status.json")).unwrap()).unwrap();
    assert!(status["goal_distance"]["lesson_num"].as_u64().is_some(), "{status}");

    // Resume with max_steps below the saved step: nothing is trained; the final checkpoint
    // (at the same step) records exactly the restored curriculum.
    std::fs::write(&config, with_steps(1)).unwrap();
    let (ok, log) = finish(spawn_corridor(&config, "run", &dir, &["--resume"]));
    assert!(ok, "{log}");
    assert!(log.contains("Curriculum restored from"), "{log}");
    assert!(log.contains(&format!("is in lesson '{}'", LESSONS[lesson])), "{log}");
    let restored = checkpoint::at_step(&behavior_dir, "Corridor", saved.description.step).unwrap();
    assert_eq!(restored.description.curriculum.as_ref(), Some(&record));

    // A curriculum cut below the recorded lesson is refused with what to do.
    let cut = text[..text.find("      - name: Middle").unwrap()].to_string();
    std::fs::write(&config, cut.replace("max_steps: 20000", "max_steps: 1")).unwrap();
    let (ok, log) = finish(spawn_corridor(&config, "run", &dir, &["--resume"]));
    assert!(!ok && log.contains(&format!("goal_distance in lesson {lesson}, but the configuration gives it 1 lesson(s) (Near)")), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}
