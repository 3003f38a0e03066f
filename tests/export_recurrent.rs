//! Recurrent policies (lstm.md §4, §6.3) with random weights, exported to ONNX (model API 3:
//! `recurrent_in`/`recurrent_out` `[batch, 1, m]`) and to `.nn` (memories `recurrent_in_h` /
//! `recurrent_in_c`, `[1, 1, 1, m/2]` each): both run in our runner over several steps with
//! each agent's memory carried, and match the plain-Rust reference step by step (1e-5);
//! model API 2 refuses memory; Unity's checks pass.

mod common;

use mlagents::barracuda::{self, export::to_nn};
use mlagents::onnx::export::{to_onnx_api_bytes, to_onnx_bytes, OnnxApi};
use mlagents::policy::{reference_step, PolicyDescription, Weights};
use mlagents::run::{check, LoadOptions, NamedTensors, NnPolicy, OnnxPolicy, Policy, TensorData};
use mlagents::spec::ActionSpec;
use rand::{Rng, SeedableRng};

const STEPS: usize = 6;
const AGENTS: usize = 3;

fn recurrent(actions: ActionSpec, observations: &[usize], memory_size: usize) -> PolicyDescription {
    PolicyDescription { memory_size, ..common::policy_description(actions, observations, true) }
}

fn observations_of(d: &PolicyDescription, rng: &mut impl Rng) -> Vec<Vec<f32>> {
    d.observation_shapes.iter().map(|s| (0..AGENTS * s[0]).map(|_| rng.random_range(-3.0..3.0)).collect()).collect()
}

fn masks_of(d: &PolicyDescription, step: usize) -> Vec<f32> {
    let total = d.action_spec.mask_len();
    (0..AGENTS * total).map(|k| if (k + step) % 5 == 3 { 0.0 } else { 1.0 }).collect()
}

fn close(what: &str, step: usize, got: &[f32], expected: &[f32]) {
    assert_eq!(got.len(), expected.len(), "{what} at step {step}");
    for (a, b) in got.iter().zip(expected) {
        assert!((a - b).abs() <= 1e-5, "{what} at step {step}: {got:?} vs {expected:?}");
    }
}

/// The ONNX export over STEPS steps, `recurrent_out` fed back as `recurrent_in`.
fn check_onnx(d: &PolicyDescription, seed: u64) {
    let weights = Weights::random(d, seed);
    let bytes = to_onnx_bytes(d, &weights).unwrap();
    let policy = OnnxPolicy::from_bytes(&bytes, "export", LoadOptions { deterministic: true, seed: Some(1), ..Default::default() }).unwrap();
    let m = d.memory_size;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 100);
    let (mut ours, mut reference) = (vec![0.0; AGENTS * m], vec![0.0; AGENTS * m]);
    for step in 0..STEPS {
        let observations = observations_of(d, &mut rng);
        let masks = masks_of(d, step);
        let mut inputs = NamedTensors::new();
        for (i, (data, shape)) in observations.iter().zip(&d.observation_shapes).enumerate() {
            inputs.insert(format!("obs_{i}"), TensorData { shape: vec![AGENTS, shape[0]], data: data.clone() });
        }
        if !masks.is_empty() {
            inputs.insert("action_masks".into(), TensorData { shape: vec![AGENTS, d.action_spec.mask_len()], data: masks.clone() });
        }
        inputs.insert("recurrent_in".into(), TensorData { shape: vec![AGENTS, 1, m], data: ours.clone() });
        let out = policy.run(&inputs).unwrap();
        let (continuous, discrete, after) = reference_step(d, &weights, &observations, Some(&masks), Some(&reference), AGENTS).unwrap();
        assert_eq!(out["memory_size"].data, vec![m as f32]);
        assert_eq!(out["recurrent_out"].shape, vec![AGENTS, 1, m]);
        close("recurrent_out", step, &out["recurrent_out"].data, &after);
        if d.action_spec.continuous_size > 0 {
            close("deterministic_continuous_actions", step, &out["deterministic_continuous_actions"].data, &continuous);
        }
        if d.action_spec.discrete_size() > 0 {
            let got: Vec<i64> = out["deterministic_discrete_actions"].data.iter().map(|v| *v as i64).collect();
            assert_eq!(got, discrete, "deterministic_discrete_actions at step {step}");
        }
        (ours, reference) = (out["recurrent_out"].data.clone(), after);
    }
}

/// The `.nn` export over STEPS steps, each memory output fed back to its memory input.
fn check_nn(d: &PolicyDescription, seed: u64) {
    let weights = Weights::random(d, seed);
    let model = barracuda::read(&barracuda::write(&to_nn(d, &weights).unwrap())).unwrap();
    let m = d.memory_size;
    assert_eq!(model.constant("memory_size"), Some(m as f32));
    assert_eq!(model.memories.len(), 2);
    assert!(model.memories[0].input.ends_with("_h") && model.memories[1].input.ends_with("_c"));
    let policy = NnPolicy::from_model(model.clone(), "export.nn", LoadOptions { deterministic: true, seed: None, ..Default::default() }).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 7);
    let half = m / 2;
    let (mut h, mut c) = (vec![0.0; AGENTS * half], vec![0.0; AGENTS * half]);
    let mut reference = vec![0.0; AGENTS * m];
    for step in 0..STEPS {
        let observations = observations_of(d, &mut rng);
        let masks = masks_of(d, step);
        let width = d.encoding_width();
        let mut concatenated = Vec::with_capacity(AGENTS * width);
        for r in 0..AGENTS {
            for (o, s) in observations.iter().zip(&d.observation_shapes) {
                concatenated.extend_from_slice(&o[r * s[0]..(r + 1) * s[0]]);
            }
        }
        let mut inputs = NamedTensors::new();
        inputs.insert("vector_observation".into(), TensorData { shape: vec![AGENTS, width], data: concatenated });
        if !masks.is_empty() {
            inputs.insert("action_masks".into(), TensorData { shape: vec![AGENTS, d.action_spec.mask_len()], data: masks.clone() });
        }
        inputs.insert("recurrent_in_h".into(), TensorData { shape: vec![AGENTS, half], data: h.clone() });
        inputs.insert("recurrent_in_c".into(), TensorData { shape: vec![AGENTS, half], data: c.clone() });
        let out = policy.run(&inputs).unwrap();
        let (continuous, discrete, after) = reference_step(d, &weights, &observations, Some(&masks), Some(&reference), AGENTS).unwrap();
        let joined: Vec<f32> = (0..AGENTS)
            .flat_map(|r| out["recurrent_out_h"].data[r * half..(r + 1) * half].iter().chain(&out["recurrent_out_c"].data[r * half..(r + 1) * half]).copied().collect::<Vec<_>>())
            .collect();
        close("memories", step, &joined, &after);
        let action = &out["action"].data;
        if d.action_spec.continuous_size > 0 {
            close("action", step, action, &continuous);
        } else {
            let k = d.action_spec.discrete_branches[0];
            let argmax: Vec<i64> = action.chunks(k).map(|row| (0..k).max_by(|i, j| row[*i].total_cmp(&row[*j])).unwrap() as i64).collect();
            assert_eq!(argmax, discrete, "action at step {step}");
        }
        h = out["recurrent_out_h"].data.clone();
        c = out["recurrent_out_c"].data.clone();
        reference = after;
    }
    common::assert_passes_unity_checks(Policy::from(policy), d);
}

#[test]
fn onnx_discrete_recurrent_policy_carries_memory() {
    check_onnx(&recurrent(ActionSpec::discrete(&[3, 2]), &[5, 3], 16), 1);
}

#[test]
fn onnx_continuous_recurrent_policy_carries_memory() {
    check_onnx(&recurrent(ActionSpec::continuous(2), &[4], 8), 2);
}

#[test]
fn onnx_hybrid_recurrent_policy_carries_memory() {
    check_onnx(&recurrent(ActionSpec::hybrid(1, &[2]), &[6], 12), 3);
}

#[test]
fn nn_discrete_recurrent_policy_carries_memory() {
    check_nn(&recurrent(ActionSpec::discrete(&[3]), &[5, 3], 16), 4);
}

#[test]
fn nn_continuous_recurrent_policy_carries_memory() {
    check_nn(&recurrent(ActionSpec::continuous(2), &[4], 8), 5);
}

#[test]
fn model_api_2_refuses_memory() {
    let d = recurrent(ActionSpec::continuous(1), &[3], 8);
    let e = to_onnx_api_bytes(&d, &Weights::random(&d, 1), OnnxApi::V2).unwrap_err().to_string();
    assert!(e.contains("memory") && e.contains("API 3"), "{e}");
}

#[test]
fn an_odd_memory_size_is_refused() {
    let d = recurrent(ActionSpec::continuous(1), &[3], 8);
    let weights = Weights::random(&d, 1);
    let odd = PolicyDescription { memory_size: 7, ..d };
    let e = to_onnx_bytes(&odd, &weights).unwrap_err().to_string();
    assert!(e.contains("memory_size 7"), "{e}");
}

/// A `memory_size` constant that disagrees with `recurrent_in`'s width (ONNX) or with the
/// memories' sizes (`.nn`) is a `check` violation naming both (Unity reads the width from the
/// tensor and would silently carry another memory).
#[test]
fn a_memory_size_that_disagrees_with_the_memory_is_a_check_violation() {
    let d = recurrent(ActionSpec::discrete(&[3]), &[4], 8);
    let weights = Weights::random(&d, 9);
    let spec = common::vector_behavior_spec(&d);
    let onnx = Policy::from(OnnxPolicy::from_bytes(&to_onnx_bytes(&d, &weights).unwrap(), "export", LoadOptions::default()).unwrap());
    let nn = Policy::from(NnPolicy::from_model(to_nn(&d, &weights).unwrap(), "export.nn", LoadOptions::default()).unwrap());
    for (policy, names) in [(onnx, "recurrent_in is 8 wide"), (nn, "hold 8 floats")] {
        let mut interface = policy.interface().unwrap().clone();
        assert_eq!(check(&interface, &spec), Vec::<String>::new());
        interface.constants.insert("memory_size".into(), vec![6.0]);
        let found = check(&interface, &spec);
        assert!(found.iter().any(|v| v.contains("memory_size is 6") && v.contains(names)), "{found:?}");
    }
}
