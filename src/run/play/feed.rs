//! Building a policy's inputs from decision steps as Unity's inference does: each declared
//! input planned once from the model's interface and the behavior spec ([`InputPlan::plan`]),
//! then filled for every batch of decisions ([`InputPlan::build`]).

use super::super::{ModelInterface, NamedTensors, TensorData};
use crate::env::DecisionSteps;
use crate::spec::model::ModelInput;
use crate::spec::{BehaviorSpec, EntityLayout};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// One declared model input and where its values come from.
#[derive(Debug, Clone)]
enum Source {
    /// Observation i as it arrives (rank 1, or HWC images), or transposed to CHW.
    Sensor { index: usize, channels_first: bool },
    /// Entity observation i (`[K, E]`) laid out as the model expects it.
    Entities { index: usize, layout: EntityLayout, shape: [usize; 2] },
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

/// What each agent carries from one decision to the next.
#[derive(Debug, Default)]
pub(super) struct AgentCarry {
    pub memories: HashMap<i32, Vec<f32>>,
    pub previous_actions: HashMap<i32, Vec<i32>>,
}

/// Where each declared input of a model comes from, for one behavior.
#[derive(Debug, Clone)]
pub(super) struct InputPlan {
    sources: Vec<(String, Source)>,
}

impl InputPlan {
    /// Plans every input the model reads; the error says which one the behavior cannot
    /// provide.
    pub fn plan(interface: &ModelInterface, spec: &BehaviorSpec) -> Result<Self, String> {
        let visual_indices: Vec<usize> = spec.observation_specs.iter().enumerate().filter(|(_, o)| o.shape.len() == 3).map(|(i, _)| i).collect();
        let channels_first_for = |index: usize, dims: &[i64], obs_input: bool| reads_channels_first(&spec.observation_specs[index].shape, dims, obs_input);
        let mut sources: Vec<(String, Source)> = interface
            .memories
            .iter()
            .filter(|m| !m.declared)
            .map(|m| (m.input.clone(), Source::Memory { offset: m.offset, size: m.size, rank3: false }))
            .collect();
        for input in &interface.inputs {
            let (name, dims) = (&input.name, input.dims.as_slice());
            let source = match ModelInput::parse(name) {
                Some(ModelInput::Observation(i)) => {
                    if i >= spec.observation_specs.len() {
                        return Err(format!("the model reads {name}, the behavior has {} observations", spec.observation_specs.len()));
                    }
                    match (spec.observation_specs[i].shape.as_slice(), interface.entity_layouts.get(name)) {
                        (&[max_entities, entity_size], Some(layout)) => Source::Entities { index: i, layout: *layout, shape: [max_entities, entity_size] },
                        _ => Source::Sensor { index: i, channels_first: channels_first_for(i, dims, true) },
                    }
                }
                Some(ModelInput::VectorObservation) => Source::VectorConcat,
                Some(ModelInput::VisualObservation(k)) => {
                    let index = *visual_indices.get(k).ok_or_else(|| format!("the model reads {name}, the behavior has {} visual observations", visual_indices.len()))?;
                    Source::Visual { nth: k, channels_first: channels_first_for(index, dims, false) }
                }
                Some(ModelInput::ActionMasks) => Source::Masks,
                Some(ModelInput::PreviousAction) => Source::PreviousAction,
                Some(ModelInput::RecurrentIn) => Source::Memory { offset: 0, size: interface.memory_size, rank3: dims.len() == 2 },
                Some(ModelInput::Epsilon) => Source::Epsilon { size: spec.action_spec.continuous_size },
                Some(ModelInput::SequenceLength) => Source::SequenceLength,
                None => return Err(format!("the model reads {name:?}, which no environment provides")),
            };
            sources.push((name.clone(), source));
        }
        Ok(Self { sources })
    }

    /// The inputs for a batch of decisions: observations as the model declares them, masks
    /// as 1 = allowed, each agent's memory and previous action (zeros for a new agent), and
    /// the noise TF-era models read (`None`: zeros, deterministic).
    pub fn build(&self, steps: &DecisionSteps, spec: &BehaviorSpec, carry: &AgentCarry, mut noise: Option<&mut ChaCha8Rng>) -> NamedTensors {
        let n = steps.len();
        let obs = &spec.observation_specs;
        let mut inputs = NamedTensors::new();
        for (name, source) in &self.sources {
            let tensor = match source {
                Source::Sensor { index, channels_first } => sensor(steps, obs[*index].shape.clone(), *index, *channels_first),
                Source::Entities { index, layout, shape: [max_entities, entity_size] } => {
                    let (max_entities, entity_size) = (*max_entities, *entity_size);
                    TensorData { shape: vec![n, max_entities, entity_size], data: layout.arrange_rows(&steps.obs[*index].data, max_entities, entity_size) }
                }
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
                    let width: usize = spec.action_spec.mask_len();
                    let data = if steps.action_mask.is_some() { steps.allowed_actions() } else { vec![1.0; n * width] };
                    TensorData { shape: vec![n, width], data }
                }
                Source::PreviousAction => {
                    let b = spec.action_spec.discrete_size();
                    let data = steps
                        .agent_id
                        .iter()
                        .flat_map(|id| carry.previous_actions.get(id).cloned().unwrap_or_else(|| vec![0; b]))
                        .map(|v| v as f32)
                        .collect();
                    TensorData { shape: vec![n, b], data }
                }
                Source::Memory { offset, size, rank3 } => {
                    let mut data = Vec::with_capacity(n * size);
                    for id in &steps.agent_id {
                        let stored = carry.memories.get(id);
                        data.extend((0..*size).map(|k| stored.and_then(|m| m.get(offset + k)).copied().unwrap_or(0.0)));
                    }
                    TensorData { shape: if *rank3 { vec![n, 1, *size] } else { vec![n, *size] }, data }
                }
                Source::Epsilon { size } => {
                    let data = (0..n * size).map(|_| noise.as_deref_mut().map_or(0.0, standard_normal)).collect();
                    TensorData { shape: vec![n, *size], data }
                }
                Source::SequenceLength => TensorData { shape: vec![1, 1], data: vec![1.0] },
            };
            inputs.insert(name.clone(), tensor);
        }
        inputs
    }
}

/// Whether a model input of `dims` (batch left out) reads the `[H, W, C]` observation `shape`
/// as `[C, H, W]`. Where both layouts fit (H = W = C), an `obs_i` input (`obs_input`) reads CHW,
/// as every ML-Agents ONNX exporter writes images, and a `visual_observation_k` input reads
/// HWC, as Barracuda's `.nn` does.
fn reads_channels_first(shape: &[usize], dims: &[i64], obs_input: bool) -> bool {
    let &[h, w, c] = shape else { return false };
    let [h, w, c] = [h, w, c].map(|d| d as i64);
    let channels_first = dims == [c, h, w];
    let channels_last = dims == [h, w, c];
    channels_first && (!channels_last || obs_input)
}

/// Observation `index` of every agent, as it arrives (`[n, ...shape]`) or transposed from
/// HWC to CHW.
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

/// One draw of a standard normal (Box-Muller).
fn standard_normal(rng: &mut ChaCha8Rng) -> f32 {
    let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
    let u2: f32 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::reads_channels_first;

    #[test]
    fn images_are_transposed_when_the_model_reads_channels_first() {
        assert!(reads_channels_first(&[84, 64, 3], &[3, 84, 64], true));
        assert!(!reads_channels_first(&[84, 64, 3], &[84, 64, 3], true));
        assert!(!reads_channels_first(&[4], &[4], true));
        // Channels equal to the height only: the layouts differ, the dims tell which.
        assert!(reads_channels_first(&[36, 20, 36], &[36, 36, 20], false));
        assert!(!reads_channels_first(&[36, 20, 36], &[36, 20, 36], true));
        // A cube: ONNX obs_i inputs are NCHW, .nn visual inputs NHWC.
        assert!(reads_channels_first(&[8, 8, 8], &[8, 8, 8], true));
        assert!(!reads_channels_first(&[8, 8, 8], &[8, 8, 8], false));
    }
}
