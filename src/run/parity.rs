//! Proving that an exported model computes what was trained: [`check_parity`] feeds a model
//! the inputs of a parity record (as Unity would feed them, whatever the model's interface)
//! and compares every action output with the training network's recorded outputs
//! (deterministic ones, and sampled ones with the recorded noise and uniform draws in place of
//! the model's own);
//! [`compare_models`] runs two models on the same decision steps and compares their actions.

use crate::spec::model::{self, ModelInput};
use super::play::{argmax, split_branches, PlayError, PolicyDriver};
use super::{LoadOptions, NamedTensors, Policy, TensorData, NOISE_INPUT, UNIFORM_INPUT};
use crate::policy::parity::{inverse_cdf, starts_sequence};
use crate::env::{DecisionSteps, ObservationBatch};
use crate::policy::parity::ParityRecord;
use crate::spec::{BehaviorSpec, ObservationSpec};
use serde::Serialize;
use std::path::Path;

/// One output compared with its recorded counterpart.
#[derive(Debug, Clone, Serialize)]
pub struct OutputCheck {
    /// The model's output (e.g. `deterministic_continuous_actions`, or `action` for `.nn`).
    pub output: String,
    /// The recorded values it was compared with.
    pub recorded: String,
    /// Largest absolute difference (continuous values, or discrete indices).
    pub max_abs_error: f32,
    /// Rows whose discrete choices differ (0 for continuous outputs).
    pub mismatched_rows: usize,
    pub passed: bool,
}

/// The outcome of a parity check.
#[derive(Debug, Clone, Serialize)]
pub struct ParityReport {
    pub model: String,
    pub sha256: String,
    /// The sha256 the record lists for a file of this name, if any.
    pub recorded_sha256: Option<String>,
    pub rows: usize,
    pub tolerance: f32,
    pub checks: Vec<OutputCheck>,
    /// Weights holding NaN or infinities: never a pass, whatever the outputs (tract may turn
    /// them into finite actions where Unity gives NaN).
    pub non_finite_weights: Vec<String>,
    pub passed: bool,
}

/// The behavior spec and decision steps a parity record describes.
pub fn record_steps(record: &ParityRecord) -> (BehaviorSpec, DecisionSteps) {
    let n = record.batch;
    let observation_specs: Vec<ObservationSpec> = record
        .policy
        .observation_shapes
        .iter()
        .enumerate()
        .map(|(i, s)| match s.as_slice() {
            [h, w, c] => ObservationSpec::visual_hwc(*h, *w, *c, &ModelInput::Observation(i).name()),
            [max, size] => ObservationSpec::entities(*max, *size, &ModelInput::Observation(i).name()),
            _ => ObservationSpec::vector(s.iter().product(), &ModelInput::Observation(i).name()),
        })
        .collect();
    let spec = BehaviorSpec { observation_specs, action_spec: record.policy.action_spec.clone() };
    let obs = record.observations.iter().zip(&record.policy.observation_shapes).map(|(data, shape)| ObservationBatch { shape: shape.clone(), data: data.clone() }).collect();
    let branches = &record.policy.action_spec.discrete_branches;
    let action_mask = (!branches.is_empty()).then(|| {
        let total: usize = branches.iter().sum();
        let mut start = 0;
        branches
            .iter()
            .map(|size| {
                let flags = (0..n).flat_map(|r| (0..*size).map(move |k| (r, k))).map(|(r, k)| record.action_masks[r * total + start + k] < 0.5).collect();
                start += size;
                flags
            })
            .collect()
    });
    let steps = DecisionSteps {
        obs,
        reward: vec![0.0; n],
        agent_id: (0..n).map(record_agent).collect(),
        action_mask,
        group_id: vec![0; n],
        group_reward: vec![0.0; n],
    };
    (spec, steps)
}

fn sha256_file(path: &Path) -> Result<String, PlayError> {
    let bytes = std::fs::read(path).map_err(|source| super::RunError::Io { path: path.display().to_string(), source })?;
    Ok(crate::checkpoint::sha256_hex(&bytes))
}

/// `width` values per row from an output (the first `width` of each row).
fn rows(t: &TensorData, n: usize, width: usize) -> Vec<Vec<f32>> {
    let per_row = t.data.len() / n.max(1);
    (0..n).map(|r| t.data[r * per_row..r * per_row + width.min(per_row)].to_vec()).collect()
}

fn compare_continuous(output: &str, recorded_name: &str, t: &TensorData, recorded: &[f32], n: usize, c: usize, tolerance: f32) -> OutputCheck {
    let got = rows(t, n, c);
    let mut max = 0.0f32;
    for (r, row) in got.iter().enumerate() {
        if row.len() < c {
            max = f32::INFINITY;
            continue;
        }
        for k in 0..c {
            let e = (row[k] - recorded[r * c + k]).abs();
            max = if e.is_nan() { f32::INFINITY } else { max.max(e) };
        }
    }
    OutputCheck { output: output.into(), recorded: recorded_name.into(), max_abs_error: max, mismatched_rows: 0, passed: max <= tolerance }
}

/// The discrete choices `[n][branches]` in `outputs`: from the index output `indices` (model
/// API 3: one value per branch; returns true), or by `choose(row, branch, log_probs)` on
/// per-branch log-probabilities (model API 2's `discrete_actions` or `action`, `.nn`; returns
/// false). None without either.
fn discrete_choices(
    outputs: &NamedTensors,
    indices: &str,
    n: usize,
    branches: &[usize],
    choose: impl Fn(usize, usize, &[f32]) -> i64,
) -> Option<(bool, Vec<Vec<i64>>)> {
    let index_output = outputs.get(indices);
    if let Some(t) = index_output.filter(|t| t.data.len() == n * branches.len()) {
        return Some((true, rows(t, n, branches.len()).into_iter().map(|r| r.iter().map(|v| v.round() as i64).collect()).collect()));
    }
    let t = index_output.or_else(|| outputs.get(model::ACTION))?;
    let choices = rows(t, n, branches.iter().sum())
        .iter()
        .enumerate()
        .map(|(r, row)| split_branches(row, branches).enumerate().map(|(b, log_probs)| choose(r, b, log_probs)).collect())
        .collect();
    Some((false, choices))
}

fn compare_discrete(output: &str, recorded_name: &str, choices: &[Vec<i64>], recorded: &[i64], branches: usize) -> OutputCheck {
    let mut mismatched = 0;
    let mut max = 0.0f32;
    for (r, row) in choices.iter().enumerate() {
        let expected = &recorded[r * branches..(r + 1) * branches];
        if row.as_slice() != expected {
            mismatched += 1;
            for (a, b) in row.iter().zip(expected) {
                max = max.max((a - b).abs() as f32);
            }
        }
    }
    OutputCheck { output: output.into(), recorded: recorded_name.into(), max_abs_error: max, mismatched_rows: mismatched, passed: mismatched == 0 }
}

/// Checks `model` against a parity record: deterministic actions (and, for continuous
/// actions, the actions sampled with the recorded noise) within `tolerance`; discrete
/// choices must be equal.
pub fn check_parity(model: &Path, record: &ParityRecord, tolerance: f32) -> Result<ParityReport, PlayError> {
    let sha256 = sha256_file(model)?;
    check_recorded(model, &sha256, record, tolerance).map_err(|e| {
        if record.files.values().any(|s| *s == sha256) {
            return e;
        }
        // A record made for other files: say so rather than only what failed.
        let files: Vec<&str> = record.files.keys().map(String::as_str).collect();
        PlayError::Mismatch {
            behavior: record.behavior.clone(),
            detail: format!("the parity record was made for {} (step {}), and {} is none of them (sha256 differs): {e}", files.join(" and "), record.step, model.display()),
        }
    })
}

fn check_recorded(model: &Path, sha256: &str, record: &ParityRecord, tolerance: f32) -> Result<ParityReport, PlayError> {
    let (spec, steps) = record_steps(record);
    let n = record.batch;
    let c = spec.action_spec.continuous_size;
    let branches = &spec.action_spec.discrete_branches;
    let policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() })?;
    let non_finite_weights = policy.non_finite_weights();
    let mut driver = PolicyDriver::new(policy, &record.behavior, &spec, true, 0)?;
    // A recurrent record: every row steps from the memory it recorded.
    let m = record.policy.memory_size;
    if m > 0 {
        set_recorded_memories(&mut driver, record);
    }
    let inputs = driver.inputs(&steps);
    let outputs = driver.policy().run(&inputs)?;
    let missing = |what: &str| PlayError::Mismatch { behavior: record.behavior.clone(), detail: format!("the model has no {what} output") };
    let mut checks = vec![];
    if m > 0 {
        checks.extend(check_memories(&mut driver, record, &steps, &outputs, tolerance)?);
    }
    if c > 0 {
        let (name, t) = [model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::ACTION]
            .iter()
            .find_map(|k| outputs.get(*k).map(|t| (*k, t)))
            .ok_or_else(|| missing("deterministic continuous action"))?;
        checks.push(compare_continuous(name, model::DETERMINISTIC_CONTINUOUS_ACTIONS, t, &record.deterministic_continuous_actions, n, c, tolerance));
    }
    let sampled_discrete = !branches.is_empty() && !record.discrete_actions.is_empty();
    let sampled = sampled_outputs(model, &inputs, record, sampled_discrete)?;
    if let (Some(sampled), true) = (&sampled, c > 0) {
        let (name, t) = [model::CONTINUOUS_ACTIONS, model::ACTION].iter().find_map(|k| sampled.get(*k).map(|t| (*k, t))).ok_or_else(|| missing("continuous action"))?;
        checks.push(compare_continuous(name, model::CONTINUOUS_ACTIONS, t, &record.continuous_actions, n, c, tolerance));
    }
    if !branches.is_empty() {
        let (from_indices, choices) = discrete_choices(&outputs, model::DETERMINISTIC_DISCRETE_ACTIONS, n, branches, |_, _, log_probs| argmax(log_probs) as i64)
            .ok_or_else(|| missing("discrete action"))?;
        let name = if from_indices { model::DETERMINISTIC_DISCRETE_ACTIONS } else { "action (argmax per branch)" };
        checks.push(compare_discrete(name, model::DETERMINISTIC_DISCRETE_ACTIONS, &choices, &record.deterministic_discrete_actions, branches.len()));
    }
    if let (Some(sampled), true) = (&sampled, sampled_discrete) {
        let (from_indices, choices) = sampled_choices(sampled, record).ok_or_else(|| missing("discrete action"))?;
        let name = if from_indices { model::DISCRETE_ACTIONS } else { "action (sampled per branch)" };
        checks.push(compare_discrete(name, model::DISCRETE_ACTIONS, &choices, &record.discrete_actions, branches.len()));
    }
    let file_name = model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let recorded_sha256 = record.files.iter().find(|(name, _)| Path::new(name).extension() == model.extension() || **name == file_name).map(|(_, s)| s.clone());
    let passed = checks.iter().all(|c| c.passed) && non_finite_weights.is_empty();
    Ok(ParityReport { model: model.display().to_string(), sha256: sha256.to_string(), recorded_sha256, rows: n, tolerance, checks, non_finite_weights, passed })
}

/// The model's outputs with the record's noise and uniform draws in place of its own (None
/// when the record's policy samples nothing). `with_discrete`: the record holds uniform draws
/// (otherwise any value serves; the discrete samples are not read).
fn sampled_outputs(model: &Path, inputs: &NamedTensors, record: &ParityRecord, with_discrete: bool) -> Result<Option<NamedTensors>, PlayError> {
    let (n, c, k) = (record.batch, record.policy.action_spec.continuous_size, record.policy.action_spec.discrete_branches.len());
    if c == 0 && !with_discrete {
        return Ok(None);
    }
    let sampling = Policy::load(model, LoadOptions { noise_input: true, ..Default::default() })?;
    let mut with_noise: NamedTensors = inputs.clone();
    if c > 0 {
        with_noise.insert(NOISE_INPUT.into(), TensorData { shape: vec![n, c], data: record.noise.clone() });
    }
    if sampling.declares_input(UNIFORM_INPUT) {
        let uniform = if with_discrete { record.uniform.clone() } else { vec![0.5; n * k] };
        with_noise.insert(UNIFORM_INPUT.into(), TensorData { shape: vec![n, k], data: uniform });
    }
    Ok(Some(sampling.run(&with_noise)?))
}

/// The sampled discrete choices in `sampled`: the index output, or each branch's
/// log-probabilities (model API 2, `.nn`) sampled as Unity would with the record's draws.
fn sampled_choices(sampled: &NamedTensors, record: &ParityRecord) -> Option<(bool, Vec<Vec<i64>>)> {
    let branches = &record.policy.action_spec.discrete_branches;
    discrete_choices(sampled, model::DISCRETE_ACTIONS, record.batch, branches, |r, b, log_probs| {
        let p: Vec<f32> = log_probs.iter().map(|l| l.exp()).collect();
        inverse_cdf(&p, record.uniform[r * branches.len() + b])
    })
}

/// Fills a parity record's outputs (actions, deterministic and sampled with its noise and
/// uniform draws; memories) with what `model` computes on its inputs, fed as
/// [`check_parity`] feeds them. A recurrent record's rows are taken as one agent's
/// consecutive decisions: each row's `recurrent_in` is the memory the row before left, except
/// where it is all zeros (an episode start), as [`check_parity`] replays them.
pub fn record_outputs(model: &Path, record: &mut ParityRecord) -> Result<(), PlayError> {
    let (spec, steps) = record_steps(record);
    let (n, m) = (record.batch, record.policy.memory_size);
    let (c, branches) = (spec.action_spec.continuous_size, spec.action_spec.discrete_branches.clone());
    let policy = Policy::load(model, LoadOptions { deterministic: true, ..Default::default() })?;
    let mut driver = PolicyDriver::new(policy, &record.behavior, &spec, true, 0)?;
    if m > 0 {
        let (mut memories_in, mut memories_out) = (vec![], vec![]);
        replay_carried(&mut driver, &steps, &record.recurrent_in, m, |_, memory_in, _, memory_out| {
            memories_in.extend_from_slice(memory_in);
            memories_out.extend_from_slice(memory_out);
        })?;
        (record.recurrent_in, record.recurrent_out) = (memories_in, memories_out);
        set_recorded_memories(&mut driver, record);
    }
    let inputs = driver.inputs(&steps);
    let outputs = driver.policy().run(&inputs)?;
    let behavior = record.behavior.clone();
    let missing = |what: &str| PlayError::Mismatch { behavior: behavior.clone(), detail: format!("the model has no {what} output") };
    let continuous = |outputs: &NamedTensors, names: [&str; 2]| -> Result<Vec<f32>, PlayError> {
        let t = names.iter().find_map(|k| outputs.get(*k)).ok_or_else(|| missing("continuous action"))?;
        Ok(rows(t, n, c).concat())
    };
    if c > 0 {
        record.deterministic_continuous_actions = continuous(&outputs, [model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::ACTION])?;
    }
    if !branches.is_empty() {
        let (_, choices) = discrete_choices(&outputs, model::DETERMINISTIC_DISCRETE_ACTIONS, n, &branches, |_, _, log_probs| argmax(log_probs) as i64).ok_or_else(|| missing("discrete action"))?;
        record.deterministic_discrete_actions = choices.concat();
    }
    if let Some(sampled) = sampled_outputs(model, &inputs, record, !branches.is_empty())? {
        if c > 0 {
            record.continuous_actions = continuous(&sampled, [model::CONTINUOUS_ACTIONS, model::ACTION])?;
        }
        if !branches.is_empty() {
            record.discrete_actions = sampled_choices(&sampled, record).ok_or_else(|| missing("discrete action"))?.1.concat();
        }
    }
    Ok(())
}

/// A recurrent record: the memory after each row (run from its recorded memory, `outputs`),
/// then the rows replayed in order with the model's own memory carried ([`check_carried`]).
fn check_memories(driver: &mut PolicyDriver, record: &ParityRecord, steps: &DecisionSteps, outputs: &NamedTensors, tolerance: f32) -> Result<Vec<OutputCheck>, PlayError> {
    let (n, m) = (record.batch, record.policy.memory_size);
    let interface = driver.policy().interface()?;
    if interface.memory_size != m || interface.memories.is_empty() {
        return Err(PlayError::Mismatch {
            behavior: record.behavior.clone(),
            detail: format!("the record is of a recurrent policy with memory_size {m}; the model carries {} floats of memory", interface.memory_size),
        });
    }
    let outputs_named = interface.memories.iter().map(|s| s.output.as_str()).collect::<Vec<_>>().join(" + ");
    let after = TensorData { shape: vec![n, m], data: driver.memories_after(outputs, n) };
    let mut checks = vec![compare_continuous(&outputs_named, model::RECURRENT_OUT, &after, &record.recurrent_out, n, m, tolerance)];
    checks.extend(check_carried(driver, record, steps, tolerance)?);
    Ok(checks)
}

/// A recurrent record's rows are one agent's consecutive decisions: runs them in order with
/// the model's own memory carried from row to row (zeros where the record starts a new
/// episode), and compares the memories and deterministic actions with the recorded ones.
fn check_carried(driver: &mut PolicyDriver, record: &ParityRecord, steps: &DecisionSteps, tolerance: f32) -> Result<Vec<OutputCheck>, PlayError> {
    let (n, m) = (record.batch, record.policy.memory_size);
    let spec = &record.policy.action_spec;
    let (c, branches) = (spec.continuous_size, &spec.discrete_branches);
    let (mut memories, mut continuous, mut discrete) = (vec![], vec![], vec![]);
    replay_carried(driver, steps, &record.recurrent_in, m, |_, _, outputs, memory_out| {
        memories.extend_from_slice(memory_out);
        if c > 0 {
            let t = [model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::ACTION].iter().find_map(|k| outputs.get(*k)).map(|t| rows(t, 1, c).remove(0));
            continuous.extend(t.unwrap_or_else(|| vec![f32::NAN; c]));
        }
        if !branches.is_empty() {
            let choices = discrete_choices(outputs, model::DETERMINISTIC_DISCRETE_ACTIONS, 1, branches, |_, _, log_probs| argmax(log_probs) as i64);
            discrete.push(choices.map(|(_, rows)| rows[0].clone()).unwrap_or_else(|| vec![-1; branches.len()]));
        }
    })?;
    let memory_name = format!("{} (memory carried)", model::RECURRENT_OUT);
    let mut checks = vec![compare_continuous(&memory_name, model::RECURRENT_OUT, &TensorData { shape: vec![n, m], data: memories }, &record.recurrent_out, n, m, tolerance)];
    if c > 0 {
        let t = TensorData { shape: vec![n, c], data: continuous };
        checks.push(compare_continuous("deterministic continuous actions (memory carried)", model::DETERMINISTIC_CONTINUOUS_ACTIONS, &t, &record.deterministic_continuous_actions, n, c, tolerance));
    }
    if !branches.is_empty() {
        checks.push(compare_discrete("deterministic discrete actions (memory carried)", model::DETERMINISTIC_DISCRETE_ACTIONS, &discrete, &record.deterministic_discrete_actions, branches.len()));
    }
    Ok(checks)
}

/// Each row's recorded memory (`recurrent_in`) as its agent's memory in `driver`.
fn set_recorded_memories(driver: &mut PolicyDriver, record: &ParityRecord) {
    for (r, memory) in record.recurrent_in.chunks_exact(record.policy.memory_size).enumerate() {
        driver.set_memory(record_agent(r), memory.to_vec());
    }
}

/// Runs a recurrent record's rows in order as one agent's consecutive decisions: a row that
/// starts a sequence ([`starts_sequence`] on `recorded_in`) runs from its recorded memory,
/// every other row from the memory the row before left. Calls `each(row, memory in, outputs,
/// memory out)` per row.
fn replay_carried(
    driver: &mut PolicyDriver,
    steps: &DecisionSteps,
    recorded_in: &[f32],
    m: usize,
    mut each: impl FnMut(usize, &[f32], &NamedTensors, &[f32]),
) -> Result<(), PlayError> {
    let mut memory = vec![0.0; m];
    for (r, recorded) in recorded_in.chunks_exact(m).enumerate() {
        if starts_sequence(r, recorded) {
            memory = recorded.to_vec();
        }
        driver.set_memory(record_agent(r), memory.clone());
        let inputs = driver.inputs(&steps.row(r));
        let outputs = driver.policy().run(&inputs)?;
        let after = driver.memories_after(&outputs, 1);
        each(r, &memory, &outputs, &after);
        memory = after;
    }
    Ok(())
}

/// The agent id [`record_steps`] gives row `r`.
fn record_agent(r: usize) -> i32 {
    r as i32
}

/// The outcome of running two models on the same decisions.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    pub first: String,
    pub second: String,
    pub rows: usize,
    /// Largest difference of the deterministic continuous actions.
    pub continuous_max_abs_error: f32,
    /// Rows whose deterministic discrete actions differ.
    pub discrete_mismatched_rows: usize,
    pub tolerance: f32,
    pub passed: bool,
}

/// Runs `first` and `second` deterministically on each batch of decisions (as Unity feeds
/// each model, whatever its interface) and compares their actions.
pub fn compare_models(first: &Path, second: &Path, behavior: &str, spec: &BehaviorSpec, batches: &[DecisionSteps], tolerance: f32) -> Result<CompareReport, PlayError> {
    let load = |p: &Path| -> Result<PolicyDriver, PlayError> {
        let policy = Policy::load(p, LoadOptions { deterministic: true, ..Default::default() })?;
        PolicyDriver::new(policy, behavior, spec, true, 0)
    };
    let (mut a, mut b) = (load(first)?, load(second)?);
    let (mut max, mut mismatched, mut rows) = (0.0f32, 0, 0);
    let branches = spec.action_spec.discrete_size();
    for steps in batches.iter().filter(|s| !s.is_empty()) {
        let (x, y) = (a.decide(steps)?, b.decide(steps)?);
        for (p, q) in x.continuous.iter().zip(&y.continuous) {
            let e = (p - q).abs();
            max = if e.is_nan() { f32::INFINITY } else { max.max(e) };
        }
        if branches > 0 {
            mismatched += x.discrete.chunks(branches).zip(y.discrete.chunks(branches)).filter(|(p, q)| p != q).count();
        }
        rows += steps.len();
    }
    Ok(CompareReport {
        first: first.display().to_string(),
        second: second.display().to_string(),
        rows,
        continuous_max_abs_error: max,
        discrete_mismatched_rows: mismatched,
        tolerance,
        passed: rows > 0 && max <= tolerance && mismatched == 0,
    })
}
