//! The ONNX export of entity attention (poca.md §4.6) against ML-Agents 0.28's own observation
//! encoder (`tests/fixtures/attention/reference.json`), without libtorch: a policy with no body
//! layers whose continuous head reads the encoding (μ = 0.1 · encoding) is exported in both
//! entity layouts and run on our runner, fed as each file says it expects; the encodings agree
//! with 0.28's. Fed the other layout, the Barracuda-layout file reads the entities scrambled.

mod common;

use common::{attention_observation, attention_reference, reference_weight, usizes};
use mlagents::env::{DecisionSteps, ObservationBatch};
use mlagents::onnx::export::{to_onnx_bytes_with, OnnxApi, OnnxOptions};
use mlagents::policy::{names, ContinuousHead, EncoderType, PolicyDescription, WeightTensor, Weights, POLICY_FORMAT_VERSION};
use mlagents::run::{LoadOptions, NamedTensors, OnnxPolicy, Policy, PolicyDriver};
use mlagents::spec::model::{self, ModelInput};
use mlagents::spec::{ActionSpec, BehaviorSpec, EntityLayout, ObservationSpec};

const ROWS: usize = 3;
/// μ = SCALE · encoding keeps the encoding inside the head's clip of ±3.
const SCALE: f32 = 0.1;
const OBSERVATION_ENCODER: &str = "network_body.observation_encoder.";

/// A policy whose deterministic continuous actions are the encoding scaled by [`SCALE`] / 3.
fn encoding_policy(shapes: &[Vec<usize>]) -> (PolicyDescription, Weights) {
    let mut d = PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes: shapes.to_vec(),
        action_spec: ActionSpec::continuous(1),
        hidden_units: 16,
        num_layers: 0,
        normalize: false,
        memory_size: 0,
        vis_encode_type: EncoderType::Simple,
        goal_observations: vec![],
        continuous_head: ContinuousHead::Clipped,
    };
    let width = d.encoding_width();
    d.action_spec = ActionSpec::continuous(width);
    let mut weights = Weights::default();
    for (name, shape) in d.weight_shapes() {
        let tensor = match name.strip_prefix(OBSERVATION_ENCODER) {
            Some(local) => reference_weight(local, &shape),
            None if name == names::MU_WEIGHT => WeightTensor { data: (0..width * width).map(|k| if k % (width + 1) == 0 { SCALE } else { 0.0 }).collect(), shape },
            None => WeightTensor { data: vec![0.0; shape.iter().product()], shape },
        };
        weights.0.insert(name, tensor);
    }
    d.check(&weights).unwrap();
    (d, weights)
}

fn load(d: &PolicyDescription, weights: &Weights, layout: EntityLayout) -> Policy {
    let bytes = to_onnx_bytes_with(d, weights, OnnxOptions { api: OnnxApi::V3, entity_layout: layout }).unwrap();
    Policy::from(OnnxPolicy::from_bytes(&bytes, "export", LoadOptions { deterministic: true, ..Default::default() }).unwrap())
}

/// The fixture's observations as decision steps (entities in their natural, entity-major order).
fn steps(shapes: &[Vec<usize>]) -> (BehaviorSpec, DecisionSteps) {
    let observation_specs = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| match s[..] {
            [max, size] => ObservationSpec::entities(max, size, &format!("obs_{i}")),
            _ => ObservationSpec::vector(s[0], &format!("obs_{i}")),
        })
        .collect();
    let obs = shapes.iter().enumerate().map(|(i, s)| ObservationBatch { shape: s.clone(), data: (0..ROWS).flat_map(|r| attention_observation(i, s, r)).collect() }).collect();
    let steps = DecisionSteps { obs, reward: vec![0.0; ROWS], agent_id: (0..ROWS as i32).collect(), action_mask: None, group_id: vec![0; ROWS], group_reward: vec![0.0; ROWS] };
    (BehaviorSpec { observation_specs, action_spec: ActionSpec::continuous(0) }, steps)
}

/// The encodings the policy's deterministic actions give.
fn encodings(policy: &Policy, inputs: &NamedTensors) -> Vec<f32> {
    let outputs = policy.run(inputs).unwrap();
    outputs[model::DETERMINISTIC_CONTINUOUS_ACTIONS].data.iter().map(|a| a * model::ACTION_CLIP / SCALE).collect()
}

fn worst_relative(ours: &[f32], theirs: &[f32]) -> f32 {
    assert_eq!(ours.len(), theirs.len());
    ours.iter().zip(theirs).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0, f32::max)
}

#[test]
fn both_layouts_compute_0_28s_encoding_when_fed_as_recorded() {
    for case in attention_reference()["cases"].as_array().unwrap() {
        let shapes: Vec<Vec<usize>> = case["shapes"].as_array().unwrap().iter().map(usizes).collect();
        let (mut d, weights) = encoding_policy(&shapes);
        let (mut spec, steps) = steps(&shapes);
        d.action_spec = ActionSpec::continuous(d.encoding_width());
        spec.action_spec = d.action_spec.clone();
        let theirs: Vec<f32> = case["output"].as_array().unwrap().iter().flat_map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
        let mut by_layout = vec![];
        for layout in [EntityLayout::Barracuda, EntityLayout::Natural] {
            let policy = load(&d, &weights, layout);
            let interface = policy.interface().unwrap();
            let entity_inputs: Vec<(String, &Vec<usize>)> = shapes.iter().enumerate().filter(|(_, s)| s.len() == 2).map(|(i, s)| (ModelInput::Observation(i).name(), s)).collect();
            let names: Vec<String> = entity_inputs.iter().map(|(n, _)| n.clone()).collect();
            assert_eq!(interface.entity_layouts.keys().cloned().collect::<Vec<_>>(), names, "{shapes:?}");
            assert!(interface.entity_layouts.values().all(|l| *l == layout), "{shapes:?}: {:?}", interface.entity_layouts);
            for (name, shape) in &entity_inputs {
                assert_eq!(interface.input(name).unwrap(), [shape[0] as i64, shape[1] as i64], "declared [batch, K, E] whatever the layout");
            }
            // The runner lays the entities out as the file expects.
            let mut driver = PolicyDriver::new(policy, "Entities", &spec, true, 0).unwrap();
            let inputs = driver.inputs(&steps);
            let ours = encodings(driver.policy(), &inputs);
            let worst = worst_relative(&ours, &theirs);
            assert!(worst < 1e-5, "{shapes:?} {layout}: the encoding differs from 0.28's by up to {worst} (relative)");
            by_layout.push((ours, inputs));
        }
        // Fed natural entities, the Barracuda-layout file reads them scrambled.
        let (_, natural_inputs) = &by_layout[1];
        let scrambled = encodings(&load(&d, &weights, EntityLayout::Barracuda), natural_inputs);
        let worst = worst_relative(&scrambled, &theirs);
        assert!(worst > 1e-2, "{shapes:?}: the Barracuda-layout file fed natural entities gives 0.28's encoding (worst {worst}): the layout would not matter");
    }
}

#[test]
fn entity_policies_are_onnx_only_and_api_3_only() {
    let (d, weights) = encoding_policy(&[vec![3], vec![6, 5]]);
    let nn = mlagents::barracuda::export::to_nn(&d, &weights).map(|_| ()).unwrap_err().to_string();
    assert!(nn.contains("observation 1 is an entity buffer [6, 5]") && nn.contains("use the ONNX export"), "{nn}");
    let v2 = to_onnx_bytes_with(&d, &weights, OnnxOptions { api: OnnxApi::V2, ..Default::default() }).unwrap_err().to_string();
    assert!(v2.contains("model API 3 only"), "{v2}");
}

/// The layout is recorded in the file's metadata; without the record, the graph tells.
#[test]
fn the_layout_is_recorded_and_otherwise_read_from_the_graph() {
    use prost::Message;
    let (d, weights) = encoding_policy(&[vec![4, 5], vec![3, 2]]);
    for layout in [EntityLayout::Barracuda, EntityLayout::Natural] {
        let mut proto = mlagents::onnx::export::to_onnx_with(&d, &weights, OnnxOptions { api: OnnxApi::V3, entity_layout: layout }).unwrap();
        let recorded: Vec<(String, String)> = proto.metadata_props.iter().map(|p| (p.key.clone(), p.value.clone())).collect();
        assert_eq!(recorded, [(mlagents::spec::entity_layout::METADATA_KEY.to_string(), layout.name().to_string())]);
        proto.metadata_props.clear();
        let policy = OnnxPolicy::from_bytes(&proto.encode_to_vec(), "unrecorded", LoadOptions::default()).unwrap();
        let layouts = &policy.interface().unwrap().entity_layouts;
        assert_eq!(layouts.values().copied().collect::<Vec<_>>(), [layout, layout]);
    }
    // A policy without entities records nothing.
    let (plain, weights) = encoding_policy(&[vec![3]]);
    let proto = mlagents::onnx::export::to_onnx_with(&plain, &weights, OnnxOptions::default()).unwrap();
    assert!(proto.metadata_props.is_empty());
}

/// Unity's own 0.28 attention export (`discrete_rank2_vector_v2_0.onnx`) reads its entity input
/// through the transpose: the runner says it expects Barracuda's layout.
#[test]
fn unitys_rank2_model_expects_barracudas_layout() {
    let path = common::models_dir().join("onnx/discrete_rank2_vector_v2_0.onnx");
    let policy = Policy::load(&path, LoadOptions::default()).unwrap();
    let layouts = &policy.interface().unwrap().entity_layouts;
    assert!(!layouts.is_empty() && layouts.values().all(|l| *l == EntityLayout::Barracuda), "{layouts:?}");
}

/// `check --target`: each layout passes the Unity packages that feed it and is flagged (M13)
/// for the others; Unity's own 0.28 export is a Barracuda-era model.
#[test]
fn check_flags_each_layout_for_the_packages_that_feed_the_other() {
    use mlagents::compat::{check_bytes, targets::parse_target};
    let targets = [parse_target("ml-agents@2.2.1-exp.1").unwrap(), parse_target("ml-agents@3.0.0").unwrap()];
    let m13 = |bytes: &[u8]| -> Vec<bool> {
        let report = check_bytes(bytes, "model", &targets).unwrap();
        report.targets.iter().map(|t| t.findings.iter().any(|f| f.id == "M13")).collect()
    };
    let (mut d, weights) = encoding_policy(&[vec![3], vec![6, 5]]);
    d.action_spec = ActionSpec::continuous(d.encoding_width());
    for (layout, flagged) in [(EntityLayout::Barracuda, [false, true]), (EntityLayout::Natural, [true, false])] {
        let bytes = to_onnx_bytes_with(&d, &weights, OnnxOptions { api: OnnxApi::V3, entity_layout: layout }).unwrap();
        assert_eq!(m13(&bytes), flagged, "{layout}");
        // Nothing else in the attention graph stops the package it is for.
        let report = check_bytes(&bytes, "model", &targets).unwrap();
        let home = &report.targets[if layout == EntityLayout::Barracuda { 0 } else { 1 }];
        assert_ne!(home.verdict, "error", "{layout}: {:?}", home.findings);
    }
    let unity = std::fs::read(common::models_dir().join("onnx/discrete_rank2_vector_v2_0.onnx")).unwrap();
    assert_eq!(m13(&unity), [false, true]);
}

/// `mlagents-run inspect` says which layout a model's entity input expects.
#[test]
fn inspect_names_the_entity_layout() {
    let path = common::models_dir().join("onnx/discrete_rank2_vector_v2_0.onnx");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mlagents-run")).arg("inspect").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && text.contains("entities:   obs_0 expects its entities laid out barracuda"), "{text}");
}
