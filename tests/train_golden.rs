//! Re-training the golden cases (models/golden, see models/README.md) with their seeds gives
//! their checkpoints again. Alone in its test binary: libtorch's random generator is global to
//! the process, so trainers running in parallel tests would draw from the same stream.
#![cfg(feature = "train")]

use mlagents::train::config::RunOptions;
use mlagents::train::session::{learn, LearnOptions};

mod common;

use common::{golden_case_dir, temp_dir, GOLDEN_CASES};

/// Re-training a golden case (models/golden) with its seed gives its weights, normalisers and
/// optimizer state again. On the machine that made the fixtures this is exact; another CPU
/// or libtorch build may sum floats in another order (AVX2 and AVX-512 kernels differ in the
/// last bits), so each element is compared with a tolerance relative to its magnitude:
/// |fresh - golden| <= TOLERANCE * max(|golden|, 1). Values up to 1 (weights, biases, Adam
/// moments) keep an absolute tolerance of 1e-4; large ones (normaliser sums, counts) one of
/// 1e-4 of their value, where one unit in the last place of 4096 is 4.9e-4 absolute.
#[test]
fn golden_runs_retrain_to_the_same_weights() {
    use mlagents::checkpoint::{self, ROLLOUT_PREFIX};
    const TOLERANCE: f32 = 1e-4;
    let mut failures = Vec::new();
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
        let mut worst = WorstElement::default();
        for (name, g) in golden.tensors.0.iter().filter(|(n, _)| !n.starts_with(ROLLOUT_PREFIX)) {
            let f = fresh.tensors.0.get(name).unwrap_or_else(|| panic!("{case}: {name} missing"));
            assert_eq!(f.shape, g.shape, "{case}: {name}");
            for (index, (&fresh_value, &golden_value)) in f.data.iter().zip(&g.data).enumerate() {
                worst.consider(name, index, fresh_value, golden_value);
            }
        }
        eprintln!("{case}: re-trained weights differ from the golden ones by at most {worst}");
        if !(worst.relative_error <= TOLERANCE) {
            failures.push(format!("{case}: {worst} (tolerance {TOLERANCE:e})"));
        }
        let _ = std::fs::remove_dir_all(out);
    }
    assert!(failures.is_empty(), "re-training differs from the golden fixtures:\n{}", failures.join("\n"));
}

/// The element that differs most, relative to its magnitude (at least 1), over a checkpoint.
#[derive(Default)]
struct WorstElement {
    relative_error: f32,
    tensor: String,
    index: usize,
    fresh: f32,
    golden: f32,
}

impl WorstElement {
    fn consider(&mut self, tensor: &str, index: usize, fresh: f32, golden: f32) {
        let relative_error = (fresh - golden).abs() / golden.abs().max(1.0);
        // NaN compares false: a NaN on either side is always the worst element.
        if !(relative_error <= self.relative_error) {
            *self = WorstElement { relative_error, tensor: tensor.to_string(), index, fresh, golden };
        }
    }
}

impl std::fmt::Display for WorstElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tensor.is_empty() {
            return write!(f, "0 (every element equal)");
        }
        write!(
            f,
            "{:e} relative, at {}[{}]: {} re-trained vs {} golden",
            self.relative_error, self.tensor, self.index, self.fresh, self.golden
        )
    }
}
