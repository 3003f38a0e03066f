//! The `.nn` exporter: policies with random weights, written as Barracuda format 16, read
//! back, lowered onto tract and run: the deterministic action equals the plain-Rust reference
//! forward pass; discrete rows are per-branch log-probabilities whose argmax is the
//! reference choice and that give masked actions no weight; the constants are ML-Agents'.

mod common;

use mlagents::barracuda::{self, export::to_nn};
use mlagents::policy::{reference_forward, PolicyDescription, Weights};
use mlagents::run::{LoadOptions, NamedTensors, NnPolicy, Policy, TensorData};
use mlagents::spec::ActionSpec;
use rand::{Rng, SeedableRng};

use common::policy_description as description;

fn check_export(d: &PolicyDescription, seed: u64) {
    let weights = Weights::random(d, seed);
    let bytes = barracuda::write(&to_nn(d, &weights).unwrap());
    let model = barracuda::read(&bytes).unwrap();
    assert_eq!(model.version, 16);
    assert_eq!(model.constant("version_number"), Some(2.0));
    assert_eq!(model.constant("memory_size"), Some(0.0));
    let continuous = d.action_spec.continuous_size > 0;
    assert_eq!(model.constant("is_continuous_control"), Some(if continuous { 1.0 } else { 0.0 }));
    let policy = NnPolicy::from_model(model.clone(), "export.nn", LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
    let n = 4;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 7);
    let observations: Vec<Vec<f32>> =
        d.observation_shapes.iter().map(|s| (0..n * s[0]).map(|_| rng.random_range(-3.0..3.0)).collect()).collect();
    let width = d.encoding_width();
    let mut concatenated = Vec::with_capacity(n * width);
    for r in 0..n {
        for (o, s) in observations.iter().zip(&d.observation_shapes) {
            concatenated.extend_from_slice(&o[r * s[0]..(r + 1) * s[0]]);
        }
    }
    let mut inputs = NamedTensors::new();
    inputs.insert("vector_observation".into(), TensorData { shape: vec![n, width], data: concatenated });
    let total: usize = d.action_spec.discrete_branches.iter().sum();
    let masks: Vec<f32> = (0..n * total).map(|k| if k % 4 == 2 { 0.0 } else { 1.0 }).collect();
    if total > 0 {
        inputs.insert("action_masks".into(), TensorData { shape: vec![n, total], data: masks.clone() });
    }
    let action = policy.run(&inputs).unwrap().remove("action").unwrap();
    let (reference_continuous, reference_discrete) = reference_forward(d, &weights, &observations, Some(&masks), n).unwrap();
    if continuous {
        for (a, b) in action.data.iter().zip(&reference_continuous) {
            assert!((a - b).abs() < 1e-5, "{:?} vs {reference_continuous:?}", action.data);
        }
    } else {
        let branches = &d.action_spec.discrete_branches;
        for r in 0..n {
            let row = &action.data[r * total..(r + 1) * total];
            let mut start = 0;
            for (b, k) in branches.iter().enumerate() {
                let logp = &row[start..start + k];
                let sum: f32 = logp.iter().map(|l| l.exp()).sum();
                assert!((sum - 1.0).abs() < 1e-4, "branch probabilities sum to {sum}");
                let argmax = (0..*k).max_by(|i, j| logp[*i].total_cmp(&logp[*j])).unwrap() as i64;
                assert_eq!(argmax, reference_discrete[r * branches.len() + b]);
                for a in 0..*k {
                    if masks[r * total + start + a] == 0.0 {
                        assert!(logp[a].exp() < 1e-5, "masked action {a} has probability {}", logp[a].exp());
                    }
                }
                start += k;
            }
        }
    }
    // Unity's checks pass against the matching behavior.
    common::assert_passes_unity_checks(Policy::from(policy), d);
}

#[test]
fn continuous_policy_with_normalisation() {
    check_export(&description(ActionSpec::continuous(2), &[8], true), 1);
}

#[test]
fn discrete_multi_branch_policy() {
    check_export(&description(ActionSpec::discrete(&[3, 2]), &[5, 3], false), 2);
}

#[test]
fn hybrid_policies_are_refused_with_a_reason() {
    let d = description(ActionSpec::hybrid(1, &[2]), &[4], false);
    let e = to_nn(&d, &Weights::random(&d, 3)).unwrap_err().to_string();
    assert!(e.contains("hybrid") && e.contains("ONNX"), "{e}");
}
