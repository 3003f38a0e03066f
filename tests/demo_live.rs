//! Demonstrations recorded live (reward-signals.md §7): a Unity-trained 3DBall policy plays the
//! stand-in with `--record-demo`; the file reads back with the scene's spec, and our pairing
//! gives each observation the action taken from it, which 0.28's loader does not (§7.7). On
//! 3DBall an action tilts the platform by a fixed amount, so the tilt's change after an
//! observation follows the action taken from it exactly.

mod common;

use common::{models_dir, temp_dir};
use mlagents::demo::{read, training_rows, Pairing};
use mlagents::run::session::{inspect_demo, play_model, EnvTarget, PlaySettings};

fn correlation(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy): (f64, f64) = (x.iter().map(|a| (a - mx).powi(2)).sum(), y.iter().map(|b| (b - my).powi(2)).sum());
    cov / (vx * vy).sqrt()
}

/// The smallest correlation over the two tilt axes between the tilt's change from a row to the
/// next row of the same episode and the row's action.
fn tilt_follows_action(pairing: Pairing, demo: &mlagents::demo::Demonstration) -> f64 {
    let rows = training_rows(std::slice::from_ref(demo), pairing);
    (0..2)
        .map(|axis| {
            let (mut change, mut action) = (vec![], vec![]);
            for w in rows.windows(2).filter(|w| !w[0].done && w[1].observations[0][axis] != w[0].observations[0][axis]) {
                change.push((w[1].observations[0][axis] - w[0].observations[0][axis]) as f64);
                action.push(w[0].continuous[axis] as f64);
            }
            correlation(&change, &action)
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn a_recorded_play_pairs_each_observation_with_the_action_taken_from_it() {
    let dir = temp_dir("demo-live");
    let path = dir.join("3DBall.demo");
    let model = models_dir().join("onnx/3DBall.onnx");
    let target = EnvTarget { env: "sim:3DBall".into(), behavior: None, base_port: None, timeout_wait: std::time::Duration::from_secs(60) };
    let settings = PlaySettings { episodes: 2, max_steps: 20_000, deterministic: true, seed: 1 };
    let summary = play_model(&model, &target, settings, None, Some(&path)).unwrap();
    let recorded = summary.demo.unwrap();
    assert_eq!(recorded.episodes, 2);
    let demo = read(&path).unwrap();
    assert_eq!((demo.behavior_name.as_str(), demo.metadata.name.as_str(), demo.records.len()), ("3DBall?team=0", "3DBall", recorded.records));
    assert_eq!(demo.spec.observation_specs[0].shape, vec![8]);
    assert!(demo.records.iter().all(|r| r.continuous.iter().all(|a| (-1.0..=1.0).contains(a))), "actions in the environment's range");
    let ours = tilt_follows_action(Pairing::ActionTaken, &demo);
    let compat = tilt_follows_action(Pairing::Compat0_28, &demo);
    eprintln!("3DBall recording: tilt change against the paired action r = {ours:.5} (ours), {compat:.3} (0.28's pairing)");
    assert!(ours > 0.99 && compat < 0.9, "ours {ours}, 0.28's {compat}");
    let report = inspect_demo(&path).unwrap();
    assert_eq!((report.episodes, report.interrupted, report.records), (2, 2, demo.records.len()));
    let _ = std::fs::remove_dir_all(dir);
}
