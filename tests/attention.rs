//! Entity attention against ML-Agents 0.28's own observation encoder
//! (`tests/fixtures/attention/reference.json`, written by `tests/peer/attention_reference.py`
//! from the real 0.28 torch modules): variable names and shapes, the zero-entity masks (an
//! entity with Σx² < 0.01 is padding) and the encoder's output (the vector observations, then
//! the pooled 128 of the residual self-attention) on rows with every entity real, one real
//! entity beside one too small to count, and none.
#![cfg(feature = "train")]

mod common;

use common::{attention_reference as reference, attention_observation as observation, reference_weight, usizes};
use mlagents::train::networks::attention::{zero_entities_mask, EntityAttention};
use std::collections::BTreeMap;
use tch::{nn, Device, Kind, Tensor};

const ROWS: usize = 3;
#[test]
fn the_entity_encoder_computes_what_0_28s_does() {
    for case in reference()["cases"].as_array().unwrap() {
        let shapes: Vec<Vec<usize>> = case["shapes"].as_array().unwrap().iter().map(usizes).collect();
        let vectors: Vec<usize> = shapes.iter().filter(|s| s.len() == 1).map(|s| s[0]).collect();
        let entities: Vec<(usize, [i64; 2])> = shapes.iter().enumerate().filter(|(_, s)| s.len() == 2).map(|(i, s)| (i, [s[0] as i64, s[1] as i64])).collect();
        let store = nn::VarStore::new(Device::Cpu);
        let attention = EntityAttention::new(&store.root(), vectors.iter().sum::<usize>() as i64, &entities);

        let ours: BTreeMap<String, Vec<usize>> = store.variables().iter().map(|(name, t)| (name.clone(), t.size().iter().map(|d| *d as usize).collect())).collect();
        let theirs: BTreeMap<String, Vec<usize>> = case["weights"].as_array().unwrap().iter().map(|w| (w[0].as_str().unwrap().to_string(), usizes(&w[1]))).collect();
        assert_eq!(ours, theirs, "{shapes:?}: names and shapes");
        tch::no_grad(|| {
            for (name, mut variable) in store.variables() {
                let weight = reference_weight(&name, &ours[&name]);
                variable.copy_(&Tensor::from_slice(&weight.data).reshape(variable.size()));
            }
        });

        let batch = |i: usize| {
            let rows: Vec<f32> = (0..ROWS).flat_map(|r| observation(i, &shapes[i], r)).collect();
            Tensor::from_slice(&rows).reshape([ROWS as i64, -1])
        };
        let vector_inputs: Vec<Tensor> = (0..shapes.len()).filter(|i| shapes[*i].len() == 1).map(batch).collect();
        let entity_inputs: Vec<Tensor> = entities.iter().map(|(i, _)| batch(*i)).collect();
        let encoded_self = (!vector_inputs.is_empty()).then(|| Tensor::cat(&vector_inputs, 1));
        let pooled = tch::no_grad(|| attention.forward(encoded_self.as_ref(), &entity_inputs));
        let output = match &encoded_self {
            Some(x) => Tensor::cat(&[x.shallow_clone(), pooled], 1),
            None => pooled,
        };
        assert_eq!(output.size()[1], case["output_width"].as_i64().unwrap());

        for ((input, (_, [max, size])), expected) in entity_inputs.iter().zip(&entities).zip(case["masks"].as_array().unwrap()) {
            let mask: Vec<f32> = Vec::try_from(zero_entities_mask(&input.reshape([-1, *max, *size])).reshape([-1])).unwrap();
            let expected: Vec<f32> = expected.as_array().unwrap().iter().flat_map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
            assert_eq!(mask, expected, "{shapes:?}: masks");
        }
        let ours: Vec<f32> = Vec::try_from(output.to_kind(Kind::Float).reshape([-1])).unwrap();
        let theirs: Vec<f32> = case["output"].as_array().unwrap().iter().flat_map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
        let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "{shapes:?}: outputs differ by up to {worst} (relative)");
        // The row without entities pools to zeros.
        let last_row = &ours[ours.len() - 128..];
        assert!(last_row.iter().all(|v| *v == 0.0), "{shapes:?}");
    }
}

/// Masked entities change nothing: rows that differ only in what padding entities hold
/// (below the threshold) encode the same.
#[test]
fn padding_entities_do_not_reach_the_encoding() {
    tch::manual_seed(1);
    let store = nn::VarStore::new(Device::Cpu);
    let attention = EntityAttention::new(&store.root(), 2, &[(1, [6, 3])]);
    let own = Tensor::from_slice(&[0.3f32, -0.7, 0.3, -0.7]).reshape([2, 2]);
    let real: Vec<f32> = (0..9).map(|k| (k as f32 - 4.0) / 4.0).collect();
    let mut first = real.clone();
    first.extend([0.0; 9]);
    let mut second = real;
    second.extend([0.05, -0.05, 0.02, 0.0, 0.0, 0.0, -0.01, 0.03, 0.0]);
    let entities = Tensor::from_slice(&[first, second].concat()).reshape([2, 18]);
    let pooled = tch::no_grad(|| attention.forward(Some(&own), &[entities]));
    let difference = (pooled.get(0) - pooled.get(1)).abs().max().double_value(&[]);
    assert!(difference < 1e-6, "{difference}");
}

/// A policy with entity observations (0.28's actor with a BufferSensor beside a vector): its
/// variables are the ones the policy description lists for export, names and shapes, with the
/// attention's pooled 128 after the vector in the body's input; the actor runs on a batch.
#[test]
fn a_policy_with_entity_observations_has_the_described_variables() {
    use mlagents::policy::{PolicyDescription, POLICY_FORMAT_VERSION};
    use mlagents::train::networks::Actor;
    let d = PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes: vec![vec![4], vec![10, 5]],
        action_spec: mlagents::spec::ActionSpec::discrete(&[2]),
        hidden_units: 16,
        num_layers: 2,
        normalize: true,
        memory_size: 0,
        vis_encode_type: mlagents::policy::EncoderType::Simple,
        goal_observations: vec![],
        continuous_head: mlagents::policy::ContinuousHead::default(),
    };
    d.check_observations().unwrap();
    assert_eq!(d.encoding_width(), 4 + 128);
    let store = nn::VarStore::new(Device::Cpu);
    let actor = Actor::new(&store.root(), &d);
    let ours: BTreeMap<String, Vec<usize>> = store.variables().iter().map(|(name, t)| (name.clone(), t.size().iter().map(|d| *d as usize).collect())).collect();
    let described: BTreeMap<String, Vec<usize>> = d.weight_shapes().into_iter().collect();
    assert_eq!(ours, described);
    assert!(ours.contains_key("network_body.observation_encoder.processors.1.self_ent_encoder.seq_layers.0.weight"));
    assert_eq!(ours["network_body._body_endoder.seq_layers.0.weight"], vec![16, 4 + 128]);
    let observations = [Tensor::ones([3, 4], (Kind::Float, Device::Cpu)), Tensor::ones([3, 50], (Kind::Float, Device::Cpu))];
    let out = tch::no_grad(|| actor.forward(&observations, None, None, None, true));
    assert_eq!(out.discrete.size(), vec![3, 1]);
}

