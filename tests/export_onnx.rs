//! The ONNX exporter on policies with random weights: the export runs in our tract runner and
//! its deterministic outputs equal the plain-Rust reference forward pass within 1e-5; masked
//! actions are never chosen; weights round-trip through safetensors; bad weights are named.

mod common;

use mlagents::onnx::export::to_onnx_bytes;
use mlagents::policy::{reference_forward, PolicyDescription, Weights};
use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, TensorData};
use mlagents::spec::ActionSpec;
use rand::{Rng, SeedableRng};

use common::policy_description as description;

fn check_export(d: &PolicyDescription, seed: u64) {
    let weights = Weights::random(d, seed);
    let bytes = to_onnx_bytes(d, &weights).unwrap();
    let policy = OnnxPolicy::from_bytes(&bytes, "export", LoadOptions { deterministic: false, seed: Some(1), ..Default::default() }).unwrap();
    let n = 5;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 100);
    let mut inputs = NamedTensors::new();
    let mut observations = vec![];
    for (i, shape) in d.observation_shapes.iter().enumerate() {
        let data: Vec<f32> = (0..n * shape[0]).map(|_| rng.random_range(-3.0..3.0)).collect();
        observations.push(data.clone());
        inputs.insert(format!("obs_{i}"), TensorData { shape: vec![n, shape[0]], data });
    }
    let total: usize = d.action_spec.discrete_branches.iter().sum();
    let masks: Vec<f32> = (0..n * total).map(|k| if k % 3 == 1 { 0.0 } else { 1.0 }).collect();
    if total > 0 {
        inputs.insert("action_masks".into(), TensorData { shape: vec![n, total], data: masks.clone() });
    }
    let out = policy.run(&inputs).unwrap();
    let (continuous, discrete) = reference_forward(d, &weights, &observations, Some(&masks), n).unwrap();
    assert_eq!(out["version_number"].data, vec![3.0]);
    assert_eq!(out["memory_size"].data, vec![0.0]);
    if d.action_spec.continuous_size > 0 {
        let got = &out["deterministic_continuous_actions"].data;
        for (a, b) in got.iter().zip(&continuous) {
            assert!((a - b).abs() < 1e-5, "{got:?} vs {continuous:?}");
        }
        assert!(out["continuous_actions"].data.iter().all(|v| v.abs() <= 1.0));
        assert_eq!(out["continuous_action_output_shape"].data, vec![d.action_spec.continuous_size as f32]);
    }
    if total > 0 {
        let got: Vec<i64> = out["deterministic_discrete_actions"].data.iter().map(|v| *v as i64).collect();
        assert_eq!(got, discrete);
        let branches = &d.action_spec.discrete_branches;
        assert_eq!(out["discrete_action_output_shape"].data, branches.iter().map(|k| *k as f32).collect::<Vec<_>>());
        for key in ["discrete_actions", "deterministic_discrete_actions"] {
            for (r, row) in out[key].data.chunks(branches.len()).enumerate() {
                let mut start = 0;
                for (b, k) in branches.iter().enumerate() {
                    let a = row[b] as usize;
                    assert!(a < *k && masks[r * total + start + a] == 1.0, "{key}: agent {r} branch {b} chose masked {a}");
                    start += k;
                }
            }
        }
    }
}

#[test]
fn continuous_policy_with_normalisation() {
    check_export(&description(ActionSpec::continuous(2), &[8], true), 1);
}

#[test]
fn discrete_multi_branch_policy_respects_masks() {
    check_export(&description(ActionSpec::discrete(&[3, 2]), &[5, 3], false), 2);
}

#[test]
fn hybrid_policy() {
    check_export(&description(ActionSpec::hybrid(2, &[3]), &[6], true), 3);
}

/// SAC's squashed head: the export runs, its deterministic actions equal the reference pass
/// (tanh of the mean), and with weights that put the mean at 2 for every input the
/// deterministic action is tanh(2), inside [-1, 1] (0.28 exports the raw mean, 2: sac.md §9 row
/// 6); the sampled actions stay inside (-1, 1), and the `.nn` form lowers and loads.
#[test]
fn squashed_policy_exports_the_squashed_mean() {
    use mlagents::policy::{names, ContinuousHead};
    let d = PolicyDescription { continuous_head: ContinuousHead::Squashed, ..description(ActionSpec::hybrid(2, &[3]), &[6], true) };
    check_export(&d, 4);
    let d = PolicyDescription { continuous_head: ContinuousHead::Squashed, ..description(ActionSpec::continuous(2), &[4], false) };
    let mut weights = Weights::random(&d, 5);
    weights.0.get_mut(names::MU_WEIGHT).unwrap().data.iter_mut().for_each(|w| *w = 0.0);
    weights.0.get_mut(names::MU_BIAS).unwrap().data = vec![2.0, -2.0];
    let observations = vec![vec![0.5, -1.0, 2.0, 0.0]];
    let (continuous, _) = reference_forward(&d, &weights, &observations, None, 1).unwrap();
    assert_eq!(continuous, vec![2.0f32.tanh(), (-2.0f32).tanh()]);
    let bytes = to_onnx_bytes(&d, &weights).unwrap();
    let policy = OnnxPolicy::from_bytes(&bytes, "export", LoadOptions { deterministic: false, seed: Some(1), ..Default::default() }).unwrap();
    let mut inputs = NamedTensors::new();
    inputs.insert("obs_0".into(), TensorData { shape: vec![1, 4], data: observations[0].clone() });
    let out = policy.run(&inputs).unwrap();
    for (got, expected) in out["deterministic_continuous_actions"].data.iter().zip(&continuous) {
        assert!((got - expected).abs() < 1e-6, "{got} vs {expected}");
    }
    assert!(out["continuous_actions"].data.iter().all(|a| a.abs() < 1.0), "{:?}", out["continuous_actions"].data);
    let nn = mlagents::barracuda::write(&mlagents::barracuda::export::to_nn(&d, &weights).unwrap());
    let path = std::env::temp_dir().join(format!("mlagents-squashed-{}.nn", std::process::id()));
    std::fs::write(&path, nn).unwrap();
    let loaded = mlagents::run::Policy::load(&path, LoadOptions { deterministic: false, seed: Some(1), ..Default::default() });
    let _ = std::fs::remove_file(&path);
    loaded.unwrap();
}

#[test]
fn weights_round_trip_and_bad_weights_are_named() {
    let d = description(ActionSpec::hybrid(1, &[2]), &[4], true);
    let weights = Weights::random(&d, 9);
    let back = Weights::from_safetensors(&weights.to_safetensors()).unwrap();
    assert_eq!(back, weights);
    let mut missing = weights.clone();
    missing.0.remove("action_model._continuous_distribution.mu.bias");
    let e = to_onnx_bytes(&d, &missing).unwrap_err().to_string();
    assert!(e.contains("mu.bias") && e.contains("missing"), "{e}");
    let mut wrong = weights.clone();
    wrong.0.get_mut("network_body._body_endoder.seq_layers.0.weight").unwrap().shape = vec![16, 5];
    let e = to_onnx_bytes(&d, &wrong).unwrap_err().to_string();
    assert!(e.contains("seq_layers.0.weight") && e.contains("[16, 4]"), "{e}");
    assert!(Weights::from_safetensors(b"not safetensors").is_err());
    // Images smaller than the simple encoder takes are refused with the reason.
    let visual = PolicyDescription { observation_shapes: vec![vec![8, 8, 3]], ..d };
    let e = to_onnx_bytes(&visual, &Weights::default()).unwrap_err().to_string();
    assert!(e.contains("[8, 8, 3]") && e.contains("too small for the provided EncoderType (simple). The min dimension is 20"), "{e}");
}
