//! POCA's centralized critic against ML-Agents 0.28's own (`tests/fixtures/poca/
//! critic_reference.json`, written by `tests/peer/poca_critic_reference.py` from the real 0.28
//! `POCAValueNetwork`): variable names and shapes, a lone agent's values while the running
//! maximum of agents is 1, then a batch of an agent with two mates, one mate (the other slot
//! absent) and none: the values (agent and mates, observations only), the baselines (mates with
//! their hybrid actions, the agent without its own) and the maximum after (3).
#![cfg(feature = "train")]

mod common;

use common::reference_weight;
use mlagents::policy::{PolicyDescription, POLICY_FORMAT_VERSION};
use mlagents::spec::ActionSpec;
use mlagents::train::networks::multi_agent::MultiAgentCritic;
use mlagents::train::poca::group_observations;
use mlagents::train::trajectory::GroupmateStatus;
use serde_json::Value;
use std::collections::BTreeMap;
use tch::{nn, Device, Tensor};

const SIZES: [usize; 2] = [3, 2];
const ROWS: usize = 3;
/// Mates present per row.
const PRESENT: [usize; ROWS] = [2, 1, 0];

/// The script's `value`: value k of observation i of agent a (0 = self) in row r.
fn value(agent: usize, obs: usize, k: usize, row: usize) -> f32 {
    ((((k * 37 + row * 11 + obs * 5 + agent * 13) % 101) as f64) / 50.0 - 1.0) as f32
}

fn observations(agent: usize, row: usize) -> Vec<Vec<f32>> {
    SIZES.iter().enumerate().map(|(i, size)| (0..*size).map(|k| value(agent, i, k, row)).collect()).collect()
}

/// The script's `actions`: mate slot a's action in row r.
fn mate(agent: usize, row: usize) -> GroupmateStatus {
    let continuous = (0..2).map(|j| ((3 * agent + row + j) % 5) as f32 / 4.0 - 0.5).collect();
    GroupmateStatus { obs: observations(agent, row), continuous, discrete: vec![((agent + row) % 3) as i32, ((agent + row) % 2) as i32], reward: 0.0, done: false }
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().flat_map(|x| x.as_array().map_or_else(|| vec![x.as_f64().unwrap() as f32], |a| a.iter().map(|y| y.as_f64().unwrap() as f32).collect())).collect()
}

/// `[rows, heads]` side by side as the reference lists them: one list per head.
fn by_head(t: &Tensor) -> Vec<f32> {
    Vec::try_from(t.transpose(0, 1).contiguous().reshape([-1])).unwrap()
}

#[test]
fn the_poca_critic_computes_what_0_28s_does() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/poca/critic_reference.json");
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let description = PolicyDescription {
        format_version: POLICY_FORMAT_VERSION,
        observation_shapes: SIZES.iter().map(|s| vec![*s]).collect(),
        action_spec: ActionSpec { continuous_size: 2, discrete_branches: vec![3, 2] },
        hidden_units: 8,
        num_layers: 2,
        normalize: false,
        memory_size: 0,
        vis_encode_type: mlagents::policy::EncoderType::Simple,
        goal_observations: vec![],
        continuous_head: mlagents::policy::ContinuousHead::default(),
    };
    let store = nn::VarStore::new(Device::Cpu);
    let critic = MultiAgentCritic::new(&store.root(), &description, &["extrinsic", "curiosity"]);
    let usizes = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect::<Vec<_>>();
    let ours: BTreeMap<String, Vec<usize>> = store.variables().iter().map(|(name, t)| (name.clone(), t.size().iter().map(|d| *d as usize).collect())).collect();
    let theirs: BTreeMap<String, Vec<usize>> = reference["weights"].as_array().unwrap().iter().map(|w| (w[0].as_str().unwrap().to_string(), usizes(&w[1]))).collect();
    assert_eq!(ours, theirs, "names and shapes");
    tch::no_grad(|| {
        for (name, mut variable) in store.variables().into_iter().filter(|(name, _)| name != "network_body._current_max_agents") {
            variable.copy_(&Tensor::from_slice(&reference_weight(&name, &ours[&name]).data).reshape(variable.size()));
        }
    });
    let own = || SIZES.iter().enumerate().map(|(i, size)| Tensor::from_slice(&(0..ROWS).flat_map(|r| observations(0, r)[i].clone()).collect::<Vec<f32>>()).reshape([ROWS as i64, *size as i64])).collect::<Vec<_>>();
    let close = |what: &str, ours: Vec<f32>, theirs: Vec<f32>| {
        assert_eq!(ours.len(), theirs.len(), "{what}");
        let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "{what}: ours {ours:?}, 0.28's {theirs:?}");
    };
    let estimates = |g| {
        let (v, b) = tch::no_grad(|| critic.values_and_baselines(&g, None, None));
        (v.estimates, b.estimates)
    };
    let (alone, _) = estimates(group_observations(own(), &[&[], &[], &[]], &SIZES, &description.action_spec));
    close("a lone agent's values", by_head(&alone), floats(&reference["alone"]));
    let mates: Vec<Vec<GroupmateStatus>> = (0..ROWS).map(|r| (1..=PRESENT[r]).map(|a| mate(a, r)).collect()).collect();
    let slices: Vec<&[GroupmateStatus]> = mates.iter().map(Vec::as_slice).collect();
    let (values, baselines) = estimates(group_observations(own(), &slices, &SIZES, &description.action_spec));
    close("values", by_head(&values), floats(&reference["values"]));
    close("baselines", by_head(&baselines), floats(&reference["baselines"]));
    assert_eq!(critic.max_agents(), reference["max_agents"].as_f64().unwrap());
}
