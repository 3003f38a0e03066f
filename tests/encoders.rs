//! The visual encoders against ML-Agents 0.28's own (`tests/fixtures/encoders/reference.json`,
//! written by `tests/peer/encoder_reference.py` from the real 0.28 torch modules): weight
//! names and shapes, parameter counts and output widths for the shipped configs' image sizes;
//! outputs on fixed weights and images (the plain-Rust reference forward pass, and with the
//! `train` feature the tch network); 0.28's "too small" errors; and the goal-conditioned body
//! (hypernetwork) the same ways.

mod common;

use common::reference_weight as fill;
use mlagents::policy::{names, ConditionalBody, EncoderType, PolicyDescription, VisualEncoder, Weights, POLICY_FORMAT_VERSION};
use mlagents::spec::ActionSpec;
use serde_json::Value;
use std::collections::BTreeMap;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/encoders/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn encoder_type(key: &str) -> EncoderType {
    serde_json::from_value(Value::String(key.into())).unwrap()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

/// One reference case: the encoder, its hidden units, its weights by name (0.28's order), and
/// its outputs (two rows) when recorded.
struct Case {
    encoder: VisualEncoder,
    hidden: usize,
    weights: Vec<(String, Vec<usize>)>,
    parameters: usize,
    output_shape: Vec<usize>,
    output: Option<Vec<Vec<f32>>>,
}

fn cases() -> Vec<Case> {
    reference()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            encoder: VisualEncoder::new(encoder_type(c["type"].as_str().unwrap()), &usizes(&c["shape"])).unwrap(),
            hidden: c["hidden_units"].as_u64().unwrap() as usize,
            weights: c["weights"].as_array().unwrap().iter().map(|w| (w[0].as_str().unwrap().to_string(), usizes(&w[1]))).collect(),
            parameters: c["parameters"].as_u64().unwrap() as usize,
            output_shape: usizes(&c["output_shape"]),
            output: c.get("output").map(|o| o.as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()).collect()),
        })
        .collect()
}


/// The script's images: row r, value k (HWC) = ((37k + 11r) mod 101) / 100.
fn image(row: usize, size: usize) -> Vec<f32> {
    (0..size).map(|k| (((k * 37 + row * 11) % 101) as f64 / 100.0) as f32).collect()
}

fn close(ours: &[f32], theirs: &[f32]) -> bool {
    ours.len() == theirs.len() && ours.iter().zip(theirs).all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + b.abs()))
}

#[test]
fn names_shapes_and_parameter_counts_are_0_28s() {
    for case in cases() {
        let ours: BTreeMap<String, Vec<usize>> = case.encoder.weight_shapes(case.hidden).into_iter().collect();
        let theirs: BTreeMap<String, Vec<usize>> = case.weights.iter().cloned().collect();
        assert_eq!(ours, theirs, "{:?}", case.encoder);
        let count: usize = ours.values().map(|s| s.iter().product::<usize>()).sum();
        assert_eq!(count, case.parameters, "{:?}", case.encoder);
        assert_eq!(case.output_shape[1], case.hidden);
    }
}

#[test]
fn the_reference_forward_pass_gives_0_28s_outputs() {
    let mut checked = 0;
    for case in cases() {
        let Some(expected) = &case.output else { continue };
        let prefix = "encoder";
        let weights = Weights(case.weights.iter().map(|(name, shape)| (format!("{prefix}.{name}"), fill(name, shape))).collect());
        let e = case.encoder;
        for (row, theirs) in expected.iter().enumerate() {
            let ours = e.forward_reference(&image(row, e.height * e.width * e.channels), &weights, prefix, case.hidden).unwrap();
            assert!(close(&ours, theirs), "{e:?} row {row}: ours {ours:?}, 0.28 {theirs:?}");
        }
        checked += 1;
    }
    assert_eq!(checked, EncoderType::ALL.len());
}

#[test]
fn too_small_images_get_0_28s_error() {
    for m in reference()["minimums"].as_array().unwrap() {
        let t = encoder_type(m["type"].as_str().unwrap());
        let min = m["min"].as_u64().unwrap() as usize;
        assert_eq!(t.min_side(), min);
        let ours = VisualEncoder::new(t, &[min - 1, min, 3]).unwrap_err();
        // 0.28 joins its two sentences without a space ("too small forthe"); ours has it.
        assert_eq!(ours, m["error"].as_str().unwrap().replace("forthe", "for the"));
    }
}

/// A policy description reading one image of `case`'s encoder.
fn description(case: &Case) -> PolicyDescription {
    let e = case.encoder;
    PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes: vec![vec![e.height, e.width, e.channels]],
        vis_encode_type: e.encoder_type,
        goal_observations: vec![],
        action_spec: ActionSpec::discrete(&[2]),
        hidden_units: case.hidden,
        num_layers: 1,
        normalize: false,
        memory_size: 0,
        continuous_head: Default::default(),
    }
}

#[test]
fn a_policy_lists_its_encoders_weights_under_its_processor() {
    for case in cases().iter().filter(|c| c.output.is_some()) {
        let d = description(case);
        let module = names::visual_encoder(0);
        let listed: BTreeMap<String, Vec<usize>> = d.weight_shapes().into_iter().filter(|(name, _)| name.starts_with(&module)).collect();
        let expected: BTreeMap<String, Vec<usize>> = case.weights.iter().map(|(name, shape)| (format!("{module}.{name}"), shape.clone())).collect();
        assert_eq!(listed, expected);
    }
}

/// The tch network (`train::networks::Body`) builds 0.28's variables and, given the same
/// weights, computes 0.28's features.
#[cfg(feature = "train")]
#[test]
fn the_trainer_builds_0_28s_encoders() {
    use mlagents::train::networks::Body;
    use tch::{nn, Tensor};
    for case in cases() {
        let d = description(&case);
        let store = nn::VarStore::new(tch::Device::Cpu);
        let body = Body::new(&(store.root() / "network_body"), &d, 0);
        let module = names::visual_encoder(0);
        let variables: BTreeMap<String, Vec<usize>> = store
            .variables()
            .into_iter()
            .filter(|(name, _)| name.starts_with(&module))
            .map(|(name, t)| (name, t.size().iter().map(|s| *s as usize).collect()))
            .collect();
        let expected: BTreeMap<String, Vec<usize>> = case.weights.iter().map(|(name, shape)| (format!("{module}.{name}"), shape.clone())).collect();
        assert_eq!(variables, expected, "{:?}", case.encoder);
        let Some(outputs) = &case.output else { continue };
        let mut variables = store.variables();
        tch::no_grad(|| {
            for (name, shape) in &case.weights {
                let values = fill(name, shape);
                let dims: Vec<i64> = shape.iter().map(|s| *s as i64).collect();
                variables.get_mut(&format!("{module}.{name}")).unwrap().copy_(&Tensor::from_slice(&values.data).reshape(dims));
            }
        });
        let e = case.encoder;
        let size = e.height * e.width * e.channels;
        let rows: Vec<f32> = (0..outputs.len()).flat_map(|r| image(r, size)).collect();
        let x = Tensor::from_slice(&rows).reshape([outputs.len() as i64, size as i64]);
        let features = body.encode(&[x]);
        for (row, theirs) in outputs.iter().enumerate() {
            let ours: Vec<f32> = Vec::<f32>::try_from(features.get(row as i64)).unwrap();
            assert!(close(&ours, theirs), "{e:?} row {row}: ours {ours:?}, 0.28 {theirs:?}");
        }
    }
}

/// One `ConditionalEncoder` case of the reference: the body, 0.28's weights (names under
/// `_body_endoder`), parameter count and outputs for three rows.
struct ConditionalCase {
    body: ConditionalBody,
    weights: Vec<(String, Vec<usize>)>,
    parameters: usize,
    output: Vec<Vec<f32>>,
}

fn conditional_cases() -> Vec<ConditionalCase> {
    let size = |c: &Value, key: &str| c[key].as_u64().unwrap() as usize;
    reference()["conditional"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ConditionalCase {
            body: ConditionalBody { input: size(c, "input"), goal: size(c, "goal"), hidden: size(c, "hidden_units"), layers: size(c, "num_layers") },
            weights: c["weights"].as_array().unwrap().iter().map(|w| (w[0].as_str().unwrap().to_string(), usizes(&w[1]))).collect(),
            parameters: size(c, "parameters"),
            output: c["output"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()).collect(),
        })
        .collect()
}

/// The script's body inputs: row r, value k = ((37k + 11r) mod 101) / 100 · 2 − 1; the goal is
/// the last `goal` columns.
fn body_rows(case: &ConditionalCase) -> (Vec<f32>, Vec<f32>) {
    let (input, goal) = (case.body.input, case.body.goal);
    let x: Vec<f32> = (0..case.output.len()).flat_map(|r| image(r, input)).map(|v| v * 2.0 - 1.0).collect();
    let g = x.chunks(input).flat_map(|row| row[input - goal..].to_vec()).collect();
    (x, g)
}

const BODY_MODULE: &str = "network_body._body_endoder";

#[test]
fn the_goal_conditioned_body_is_0_28s() {
    for case in conditional_cases() {
        let ours: BTreeMap<String, Vec<usize>> = case.body.weight_shapes().into_iter().collect();
        let theirs: BTreeMap<String, Vec<usize>> = case.weights.iter().map(|(n, s)| (format!("{BODY_MODULE}.{n}"), s.clone())).collect();
        assert_eq!(ours, theirs, "{:?}", case.body);
        assert_eq!(ours.values().map(|s| s.iter().product::<usize>()).sum::<usize>(), case.parameters);
        let weights = Weights(case.weights.iter().map(|(n, s)| (format!("{BODY_MODULE}.{n}"), fill(n, s))).collect());
        let (x, goal) = body_rows(&case);
        let out = case.body.forward_reference(&x, &goal, case.output.len(), &weights).unwrap();
        for (row, theirs) in case.output.iter().enumerate() {
            let ours = &out[row * case.body.hidden..(row + 1) * case.body.hidden];
            assert!(close(ours, theirs), "{:?} row {row}: ours {ours:?}, 0.28 {theirs:?}", case.body);
        }
    }
}

/// A policy reading a vector and a goal vector, conditioned on the goal.
fn goal_description(case: &ConditionalCase) -> PolicyDescription {
    let b = case.body;
    PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes: vec![vec![b.input - b.goal], vec![b.goal]],
        vis_encode_type: EncoderType::Simple,
        goal_observations: vec![1],
        action_spec: ActionSpec::discrete(&[2]),
        hidden_units: b.hidden,
        num_layers: b.layers,
        normalize: false,
        memory_size: 0,
        continuous_head: Default::default(),
    }
}

#[test]
fn a_goal_conditioned_policy_lists_the_conditional_body() {
    for case in conditional_cases() {
        let d = goal_description(&case);
        assert_eq!(d.conditional_body(0), Some(case.body));
        let listed: BTreeMap<String, Vec<usize>> = d.weight_shapes().into_iter().filter(|(n, _)| n.starts_with(BODY_MODULE)).collect();
        assert_eq!(listed, case.body.weight_shapes().into_iter().collect());
    }
}

/// The tch body builds 0.28's conditional variables and computes its outputs.
#[cfg(feature = "train")]
#[test]
fn the_trainer_builds_0_28s_conditional_body() {
    use mlagents::train::networks::Body;
    use tch::{nn, Tensor};
    for case in conditional_cases() {
        let d = goal_description(&case);
        let store = nn::VarStore::new(tch::Device::Cpu);
        let body = Body::new(&(store.root() / "network_body"), &d, 0);
        let mut variables = store.variables();
        let found: BTreeMap<String, Vec<usize>> = variables.iter().map(|(n, t)| (n.clone(), t.size().iter().map(|s| *s as usize).collect())).collect();
        let expected: BTreeMap<String, Vec<usize>> = case.weights.iter().map(|(n, s)| (format!("{BODY_MODULE}.{n}"), s.clone())).collect();
        assert_eq!(found, expected, "{:?}", case.body);
        tch::no_grad(|| {
            for (name, shape) in &case.weights {
                let dims: Vec<i64> = shape.iter().map(|s| *s as i64).collect();
                variables.get_mut(&format!("{BODY_MODULE}.{name}")).unwrap().copy_(&Tensor::from_slice(&fill(name, shape).data).reshape(dims));
            }
        });
        let (x, goal) = body_rows(&case);
        let rows = case.output.len() as i64;
        let (input, goal_width) = (case.body.input as i64, case.body.goal as i64);
        let x = Tensor::from_slice(&x).reshape([rows, input]);
        let observations = [x.narrow(1, 0, input - goal_width), Tensor::from_slice(&goal).reshape([rows, goal_width])];
        let (h, _) = body.forward(&observations, None, None);
        for (row, theirs) in case.output.iter().enumerate() {
            let ours: Vec<f32> = Vec::<f32>::try_from(h.get(row as i64)).unwrap();
            assert!(close(&ours, theirs), "{:?} row {row}: ours {ours:?}, 0.28 {theirs:?}", case.body);
        }
    }
}
