//! Re-training the golden cases (models/golden, see models/README.md) with their seeds gives
//! their checkpoints again. Alone in its test binary: libtorch's random generator is global to
//! the process, so trainers running in parallel tests would draw from the same stream.
#![cfg(feature = "train")]

use mlagents::train::config::RunOptions;
use mlagents::train::ppo::learn::{learn, LearnOptions};

mod common;

use common::{golden_case_dir, temp_dir, GOLDEN_CASES};

/// Re-training a golden case (models/golden) with its seed gives its weights, normalisers and
/// optimizer state again. On the machine that made the fixtures this is exact; another CPU
/// or libtorch build may sum floats in another order, hence the small tolerance.
#[test]
fn golden_runs_retrain_to_the_same_weights() {
    use mlagents::train::checkpoint::{self, ROLLOUT_PREFIX};
    const TOLERANCE: f32 = 1e-4;
    for (case, behavior) in GOLDEN_CASES {
        let dir = golden_case_dir(case);
        let run = RunOptions::from_file(&dir.join("config.yaml")).unwrap();
        let scene = std::fs::read_to_string(dir.join("scene")).unwrap();
        let out = temp_dir(&format!("golden-{case}"));
        let options = LearnOptions { run_dir: Some(out.clone()), ..LearnOptions::in_memory(&format!("sim:{}", scene.trim())) };
        learn(&run, &options).unwrap();
        let golden = checkpoint::latest(&dir.join("run").join(behavior), behavior).unwrap();
        let fresh = checkpoint::latest(&out.join(behavior), behavior).unwrap();
        assert_eq!(fresh.description.step, golden.description.step, "{case}");
        assert_eq!(fresh.description.optimizer, golden.description.optimizer, "{case}");
        let mut worst = 0.0f32;
        for (name, g) in golden.tensors.0.iter().filter(|(n, _)| !n.starts_with(ROLLOUT_PREFIX)) {
            let f = fresh.tensors.0.get(name).unwrap_or_else(|| panic!("{case}: {name} missing"));
            assert_eq!(f.shape, g.shape, "{case}: {name}");
            for (a, b) in f.data.iter().zip(&g.data) {
                worst = worst.max((a - b).abs());
            }
        }
        eprintln!("{case}: re-trained weights differ from the golden ones by at most {worst:e}");
        assert!(worst <= TOLERANCE, "{case}: {worst}");
        let _ = std::fs::remove_dir_all(out);
    }
}

