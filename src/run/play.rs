//! Playing a policy against a live environment as Unity's inference does: observations fed
//! by the names the model declares (ML-Agents model API v1-v3 and `.nn`), masks inverted to
//! 1 = allowed, memories and previous actions carried per agent, outputs turned into actions
//! (continuous from the model; discrete sampled from log-probabilities, or argmax when
//! deterministic).

use crate::spec::model::{self, ModelInput};
use super::{NamedTensors, Policy, RunError, TensorData};
use crate::env::{ActionTuple, DecisionSteps, EnvError, UnityEnvironment};
use crate::spec::BehaviorSpec;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::time::Instant;

/// Errors while playing.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("the model does not fit behavior {behavior:?}: {detail}")]
    Mismatch { behavior: String, detail: String },
    #[error("no episode of {behavior} ended within {steps} environment steps ({decisions} decisions); raise --max-steps, or check that the policy can end an episode")]
    NoEpisode { behavior: String, steps: usize, decisions: usize },
}

/// One declared model input and where its values come from.
#[derive(Debug, Clone)]
enum Source {
    /// Observation i as it arrives (rank 1, or HWC images), or transposed to CHW.
    Sensor { index: usize, channels_first: bool },
    /// Rank-1 observations concatenated in order (`vector_observation`).
    VectorConcat,
    /// The k-th visual observation (`visual_observation_k`).
    Visual { nth: usize, channels_first: bool },
    Masks,
    PreviousAction,
    /// The agent's whole stored memory, or one slice of it.
    Memory { offset: usize, size: usize, rank3: bool },
    Epsilon { size: usize },
    SequenceLength,
}

/// Feeds a policy from decision steps and turns its outputs into actions.
pub struct PolicyDriver {
    policy: Policy,
    behavior: String,
    spec: BehaviorSpec,
    deterministic: bool,
    rng: ChaCha8Rng,
    sources: Vec<(String, Source)>,
    memory_size: usize,
    /// Memory outputs and where they go in the stored memory.
    memory_outputs: Vec<(String, usize, usize)>,
    memories: HashMap<i32, Vec<f32>>,
    previous_actions: HashMap<i32, Vec<i32>>,
}

impl PolicyDriver {
    /// Checks that the model's inputs can be fed from `spec` and plans how.
    pub fn new(policy: Policy, behavior: &str, spec: &BehaviorSpec, deterministic: bool, seed: u64) -> Result<Self, PlayError> {
        let mismatch = |detail: String| PlayError::Mismatch { behavior: behavior.into(), detail };
        let declared: Vec<(String, Vec<i64>)> = match &policy {
            Policy::Onnx(p) => p.inputs().iter().map(|i| (i.name.clone(), i.dims.iter().skip(1).map(|d| d.map_or(-1, |v| v as i64)).collect())).collect(),
            Policy::Nn(p) => p.model().inputs.iter().map(|i| (i.name.clone(), i.shape.iter().skip(1).map(|d| *d as i64).collect())).collect(),
        };
        let (memory_size, memory_outputs, memory_inputs) = match &policy {
            Policy::Nn(p) => {
                let m = p.model();
                let mut offset = 0;
                let (mut outs, mut ins) = (vec![], vec![]);
                for mem in &m.memories {
                    let size = mem.shape[3].max(0) as usize;
                    outs.push((mem.output.clone(), offset, size));
                    ins.push((mem.input.clone(), Source::Memory { offset, size, rank3: false }));
                    offset += size;
                }
                (m.constant(model::MEMORY_SIZE).map_or(offset, |v| v as usize).max(offset), outs, ins)
            }
            Policy::Onnx(p) => {
                let size = declared.iter().find(|(n, _)| n == model::RECURRENT_IN).and_then(|(_, d)| d.last().copied()).unwrap_or(0).max(0) as usize;
                let outs = if size > 0 && p.outputs().iter().any(|o| o == model::RECURRENT_OUT) { vec![(model::RECURRENT_OUT.into(), 0, size)] } else { vec![] };
                (size, outs, vec![])
            }
        };
        let visual_indices: Vec<usize> = spec.observation_specs.iter().enumerate().filter(|(_, o)| o.shape.len() == 3).map(|(i, _)| i).collect();
        let channels_first_for = |index: usize, dims: &[i64]| -> bool {
            let s = &spec.observation_specs[index].shape;
            s.len() == 3 && dims.len() == 3 && dims[0] == s[2] as i64 && (dims[1], dims[2]) == (s[0] as i64, s[1] as i64) && s[2] != s[0]
        };
        let mut sources = memory_inputs;
        for (name, dims) in &declared {
            let source = match ModelInput::parse(name) {
                Some(ModelInput::Observation(i)) => {
                    if i >= spec.observation_specs.len() {
                        return Err(mismatch(format!("the model reads {name}, the behavior has {} observations", spec.observation_specs.len())));
                    }
                    Source::Sensor { index: i, channels_first: channels_first_for(i, dims) }
                }
                Some(ModelInput::VectorObservation) => Source::VectorConcat,
                Some(ModelInput::VisualObservation(k)) => {
                    let index = *visual_indices.get(k).ok_or_else(|| mismatch(format!("the model reads {name}, the behavior has {} visual observations", visual_indices.len())))?;
                    Source::Visual { nth: k, channels_first: channels_first_for(index, dims) }
                }
                Some(ModelInput::ActionMasks) => Source::Masks,
                Some(ModelInput::PreviousAction) => Source::PreviousAction,
                Some(ModelInput::RecurrentIn) => Source::Memory { offset: 0, size: memory_size, rank3: dims.len() == 2 },
                Some(ModelInput::Epsilon) => Source::Epsilon { size: spec.action_spec.continuous_size },
                Some(ModelInput::SequenceLength) => Source::SequenceLength,
                None => return Err(mismatch(format!("the model reads {name:?}, which no environment provides"))),
            };
            sources.push((name.clone(), source));
        }
        Ok(Self {
            policy,
            behavior: behavior.into(),
            spec: spec.clone(),
            deterministic,
            rng: ChaCha8Rng::seed_from_u64(seed),
            sources,
            memory_size,
            memory_outputs,
            memories: HashMap::new(),
            previous_actions: HashMap::new(),
        })
    }

    /// The policy being driven.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Forgets the memory and previous action of agents whose episode ended.
    pub fn end_episodes(&mut self, agent_ids: &[i32]) {
        for id in agent_ids {
            self.memories.remove(id);
            self.previous_actions.remove(id);
        }
    }

    /// Builds the model inputs for a batch of decisions.
    pub fn inputs(&mut self, steps: &DecisionSteps) -> NamedTensors {
        let n = steps.len();
        let obs = &self.spec.observation_specs;
        let mut inputs = NamedTensors::new();
        for (name, source) in &self.sources {
            let tensor = match source {
                Source::Sensor { index, channels_first } => sensor(steps, obs[*index].shape.clone(), *index, *channels_first),
                Source::Visual { nth, channels_first } => {
                    let index = obs.iter().enumerate().filter(|(_, o)| o.shape.len() == 3).nth(*nth).map(|(i, _)| i).expect("planned");
                    sensor(steps, obs[index].shape.clone(), index, *channels_first)
                }
                Source::VectorConcat => {
                    let parts: Vec<usize> = (0..obs.len()).filter(|i| obs[*i].shape.len() == 1).collect();
                    let width: usize = parts.iter().map(|i| obs[*i].shape[0]).sum();
                    let mut data = Vec::with_capacity(n * width);
                    for a in 0..n {
                        for i in &parts {
                            data.extend_from_slice(steps.obs[*i].agent(a));
                        }
                    }
                    TensorData { shape: vec![n, width], data }
                }
                Source::Masks => {
                    let width: usize = self.spec.action_spec.mask_len();
                    let data = if steps.action_mask.is_some() { steps.allowed_actions() } else { vec![1.0; n * width] };
                    TensorData { shape: vec![n, width], data }
                }
                Source::PreviousAction => {
                    let b = self.spec.action_spec.discrete_size();
                    let data = steps
                        .agent_id
                        .iter()
                        .flat_map(|id| self.previous_actions.get(id).cloned().unwrap_or_else(|| vec![0; b]))
                        .map(|v| v as f32)
                        .collect();
                    TensorData { shape: vec![n, b], data }
                }
                Source::Memory { offset, size, rank3 } => {
                    let mut data = Vec::with_capacity(n * size);
                    for id in &steps.agent_id {
                        let stored = self.memories.get(id);
                        data.extend((0..*size).map(|k| stored.and_then(|m| m.get(offset + k)).copied().unwrap_or(0.0)));
                    }
                    TensorData { shape: if *rank3 { vec![n, 1, *size] } else { vec![n, *size] }, data }
                }
                Source::Epsilon { size } => {
                    let data = (0..n * size).map(|_| if self.deterministic { 0.0 } else { standard_normal(&mut self.rng) }).collect();
                    TensorData { shape: vec![n, *size], data }
                }
                Source::SequenceLength => TensorData { shape: vec![1, 1], data: vec![1.0] },
            };
            inputs.insert(name.clone(), tensor);
        }
        inputs
    }

    /// Runs the policy on a batch of decisions and returns the actions (and stores memories
    /// and previous actions).
    pub fn decide(&mut self, steps: &DecisionSteps) -> Result<ActionTuple, PlayError> {
        let n = steps.len();
        if n == 0 {
            return Ok(ActionTuple::zeros(&self.spec.action_spec, 0));
        }
        let inputs = self.inputs(steps);
        let outputs = self.policy.run(&inputs)?;
        let mismatch = |detail: String| PlayError::Mismatch { behavior: self.behavior.clone(), detail };
        let action_spec = self.spec.action_spec.clone();
        let (c, branches) = (action_spec.continuous_size, action_spec.discrete_branches.clone());
        let version = outputs.get(model::VERSION_NUMBER).and_then(|t| t.data.first()).copied().or(match &self.policy {
            Policy::Nn(p) => p.model().constant(model::VERSION_NUMBER),
            Policy::Onnx(_) => None,
        });
        let pick = |names: &[&str]| names.iter().find_map(|n| outputs.get(*n).map(|t| (n.to_string(), t)));
        let mut continuous = vec![];
        if c > 0 {
            let names: &[&str] = if self.deterministic {
                &[model::DETERMINISTIC_CONTINUOUS_ACTIONS, model::CONTINUOUS_ACTIONS, model::ACTION]
            } else {
                &[model::CONTINUOUS_ACTIONS, model::ACTION]
            };
            let (name, t) = pick(names).ok_or_else(|| mismatch("no continuous action output".into()))?;
            let width = t.data.len() / n.max(1);
            if width < c {
                return Err(mismatch(format!("output {name} has {width} values per agent, the behavior needs {c} continuous actions")));
            }
            for a in 0..n {
                continuous.extend(t.data[a * width..a * width + c].iter().map(|v| v.clamp(-1.0, 1.0)));
            }
        }
        let mut discrete = vec![];
        if !branches.is_empty() {
            let names: &[&str] = if self.deterministic {
                &[model::DETERMINISTIC_DISCRETE_ACTIONS, model::DISCRETE_ACTIONS, model::ACTION]
            } else {
                &[model::DISCRETE_ACTIONS, model::ACTION]
            };
            let (name, t) = pick(names).ok_or_else(|| mismatch("no discrete action output".into()))?;
            let width = t.data.len() / n.max(1);
            let total: usize = branches.iter().sum();
            // Version 3 outputs branch indices; version 2 and .nn output log-probabilities.
            let indices = version == Some(3.0) && width == branches.len();
            let offset = if name == model::ACTION && c > 0 { c } else { 0 };
            if !indices && width < offset + total {
                return Err(mismatch(format!("output {name} has {width} values per agent, the branches need {total}")));
            }
            for a in 0..n {
                let row = &t.data[a * width..(a + 1) * width];
                if indices {
                    discrete.extend(branches.iter().enumerate().map(|(b, size)| row[b].round().clamp(0.0, (*size - 1) as f32) as i32));
                    continue;
                }
                for logits in split_branches(&row[offset..], &branches) {
                    discrete.push(if self.deterministic { argmax(logits) as i32 } else { sample(logits, &mut self.rng) });
                }
            }
        }
        for (k, id) in steps.agent_id.iter().enumerate() {
            if !branches.is_empty() {
                self.previous_actions.insert(*id, discrete[k * branches.len()..(k + 1) * branches.len()].to_vec());
            }
        }
        if self.memory_size > 0 {
            for (name, offset, size) in &self.memory_outputs {
                let Some(t) = outputs.get(name) else { continue };
                let width = t.data.len() / n;
                for (k, id) in steps.agent_id.iter().enumerate() {
                    let memory = self.memories.entry(*id).or_insert_with(|| vec![0.0; self.memory_size]);
                    let take = (*size).min(width);
                    memory[*offset..*offset + take].copy_from_slice(&t.data[k * width..k * width + take]);
                }
            }
        }
        Ok(ActionTuple { continuous, discrete })
    }
}

fn sensor(steps: &DecisionSteps, shape: Vec<usize>, index: usize, channels_first: bool) -> TensorData {
    let n = steps.len();
    let batch = &steps.obs[index];
    if !channels_first {
        let mut full = vec![n];
        full.extend(shape);
        return TensorData { shape: full, data: batch.data.clone() };
    }
    let (h, w, c) = (shape[0], shape[1], shape[2]);
    let mut data = vec![0.0; batch.data.len()];
    for a in 0..n {
        let src = batch.agent(a);
        let dst = &mut data[a * h * w * c..(a + 1) * h * w * c];
        for y in 0..h {
            for x in 0..w {
                for ch in 0..c {
                    dst[(ch * h + y) * w + x] = src[(y * w + x) * c + ch];
                }
            }
        }
    }
    TensorData { shape: vec![n, c, h, w], data }
}

/// Index of the largest value (the first of equals).
pub(super) fn argmax(values: &[f32]) -> usize {
    values.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, v)| if *v > best.1 { (i, *v) } else { best }).0
}

/// One row of per-branch values laid side by side (`.nn` and model API 2 log-probabilities)
/// as one slice per branch; a short row gives short or empty slices.
pub(super) fn split_branches<'a>(row: &'a [f32], branches: &'a [usize]) -> impl Iterator<Item = &'a [f32]> + 'a {
    branches.iter().scan(0usize, move |start, size| {
        let slice = &row[(*start).min(row.len())..(*start + size).min(row.len())];
        *start += size;
        Some(slice)
    })
}

/// Samples a class from log-probabilities as Unity does (exp(x - max), cumulative).
fn sample(log_probs: &[f32], rng: &mut ChaCha8Rng) -> i32 {
    let max = log_probs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f32> = log_probs.iter().map(|l| (l - max).exp()).collect();
    let total: f32 = weights.iter().sum();
    let mut pick = rng.random::<f32>() * total;
    for (i, w) in weights.iter().enumerate() {
        if pick < *w {
            return i as i32;
        }
        pick -= w;
    }
    (weights.len() - 1) as i32
}

fn standard_normal(rng: &mut ChaCha8Rng) -> f32 {
    let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
    let u2: f32 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
}

/// What a play session measured for one behavior.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlayReport {
    pub behavior: String,
    pub episodes: usize,
    pub mean_reward: f32,
    pub std_reward: f32,
    pub decisions: usize,
    pub decisions_per_second: f64,
    pub returns: Vec<f32>,
}

/// Plays `driver` on its behavior until `episodes` episodes have ended (other behaviors get
/// zero actions), or `max_steps` environment steps.
pub fn play(env: &mut UnityEnvironment, driver: &mut PolicyDriver, episodes: usize, max_steps: usize) -> Result<PlayReport, PlayError> {
    if env.needs_reset() {
        env.reset()?;
    }
    let behavior = driver.behavior.clone();
    // Summed in f64, as ML-Agents sums rewards in Python floats.
    let mut running: HashMap<i32, f64> = HashMap::new();
    let mut returns = vec![];
    let mut decisions = 0;
    let mut policy_time = 0.0;
    for _ in 0..max_steps {
        let (d, t) = env.get_steps(&behavior)?;
        for (i, id) in t.agent_id.iter().enumerate() {
            returns.push((running.remove(id).unwrap_or(0.0) + t.reward[i] as f64) as f32);
        }
        driver.end_episodes(&t.agent_id);
        if returns.len() >= episodes {
            break;
        }
        for (i, id) in d.agent_id.iter().enumerate() {
            *running.entry(*id).or_default() += d.reward[i] as f64;
        }
        let start = Instant::now();
        let actions = driver.decide(&d)?;
        policy_time += start.elapsed().as_secs_f64();
        decisions += d.len();
        env.set_actions(&behavior, actions)?;
        env.step()?;
    }
    if returns.is_empty() {
        return Err(PlayError::NoEpisode { behavior, steps: max_steps, decisions });
    }
    returns.truncate(episodes);
    let mean = if returns.is_empty() { f32::NAN } else { returns.iter().sum::<f32>() / returns.len() as f32 };
    let std = if returns.is_empty() { f32::NAN } else { (returns.iter().map(|r| (r - mean).powi(2)).sum::<f32>() / returns.len() as f32).sqrt() };
    Ok(PlayReport {
        behavior,
        episodes: returns.len(),
        mean_reward: mean,
        std_reward: std,
        decisions,
        decisions_per_second: if policy_time > 0.0 { decisions as f64 / policy_time } else { 0.0 },
        returns,
    })
}
