//! A policy independent of any training backend: its description (observations, actions,
//! network sizes, normalisation; `policy.json`) and its weights by name (safetensors), named
//! by ML-Agents' torch module paths so that checkpoints and exports agree on every tensor.
//! A reference forward pass (plain Rust) gives the deterministic outputs the exports must
//! reproduce.

pub mod conditioning;
pub mod lstm;
pub mod parity;
pub mod visual;

pub use conditioning::ConditionalBody;
pub use visual::{EncoderType, VisualEncoder};

use crate::spec::ActionSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the `policy.json` layout.
pub const POLICY_FORMAT_VERSION: u32 = 1;
/// The width of 0.28's entity embeddings and of the pooled attention encoding (its fixed
/// `ATTENTION_EMBEDDING_SIZE`).
pub const ENTITY_EMBEDDING_SIZE: usize = 128;
/// ML-Agents' clip on normalised observations.
pub const NORMALIZATION_CLIP: f32 = 5.0;

/// What a policy network is (the `policy.json` beside a checkpoint's weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyDescription {
    pub format_version: u32,
    /// Observation shapes in sensor order: rank 1 (vector, optionally normalised), rank 2
    /// `[max entities, entity size]` (a BufferSensor's variable-length entities, read by 0.28's
    /// entity attention into 128 features shared by all of them) or rank 3 `[height, width,
    /// channels]` (Unity's layout; encoded by the `vis_encode_type` encoder into
    /// `hidden_units` features).
    pub observation_shapes: Vec<Vec<usize>>,
    /// ML-Agents' `vis_encode_type`: the encoder of every image (left out of `policy.json`
    /// when `simple`, the default).
    #[serde(default, skip_serializing_if = "EncoderType::is_simple")]
    pub vis_encode_type: EncoderType,
    /// The GOAL_SIGNAL observations that condition the body through 0.28's hypernetwork
    /// (`goal_conditioning_type: hyper`; [`conditioning`]); empty for the plain Swish MLP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goal_observations: Vec<usize>,
    pub action_spec: ActionSpec,
    pub hidden_units: usize,
    pub num_layers: usize,
    pub normalize: bool,
    pub memory_size: usize,
    /// How continuous actions come out of the Gaussian (PPO's clip, SAC's tanh squashing).
    #[serde(default, skip_serializing_if = "ContinuousHead::is_clipped")]
    pub continuous_head: ContinuousHead,
}

/// How a policy's continuous actions come out of its Gaussian.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContinuousHead {
    /// PPO's: a free log σ `[1, c]`; actions clip(x, -3, 3) / 3, the deterministic one
    /// clip(μ, -3, 3) / 3.
    #[default]
    Clipped,
    /// SAC's: log σ = clamp(Linear(h), -20, 2), a state-dependent layer; actions tanh(x), the
    /// deterministic one tanh(μ) (0.28 exports the raw μ, a bug: sac.md §9 row 6).
    Squashed,
}

impl ContinuousHead {
    pub fn is_clipped(&self) -> bool {
        *self == ContinuousHead::Clipped
    }

    /// The action sent to the environment for a Gaussian value `x` (a sample or the mean).
    pub fn action(self, x: f32) -> f32 {
        match self {
            ContinuousHead::Clipped => x.clamp(-ACTION_CLIP, ACTION_CLIP) / ACTION_CLIP,
            ContinuousHead::Squashed => x.tanh(),
        }
    }
}

/// PPO's clip of continuous actions (`clip(x, -3, 3) / 3`).
const ACTION_CLIP: f32 = crate::spec::model::ACTION_CLIP;

/// SAC's bounds on its state-dependent log σ.
pub const LOG_SIGMA_BOUNDS: (f32, f32) = (-20.0, 2.0);

/// Why weights cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("weight {name:?} is missing")]
    Missing { name: String },
    #[error("weight {name:?} has shape {found:?}, the description needs {expected:?}")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("weight {name:?} holds {count} non-finite value(s) (the first, {value}, at index {index}): the training diverged or the file was edited; export an earlier checkpoint (--checkpoint STEP)")]
    NonFinite { name: String, index: usize, value: f32, count: usize },
    #[error("the description cannot fit its weights: {0}")]
    Bounds(String),
    #[error("cannot read weights: {0}")]
    Read(String),
    #[error("{0}")]
    Unsupported(String),
}

/// One weight tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Weights by module path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Weights(pub BTreeMap<String, WeightTensor>);

/// The module paths ML-Agents 0.28's torch actor uses.
pub mod names {
    pub fn running_mean(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}.normalizer.running_mean")
    }
    pub fn running_variance(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}.normalizer.running_variance")
    }
    pub fn normalization_steps(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}.normalizer.normalization_steps")
    }
    /// Linear layers sit at even indices (each followed by its Swish).
    pub fn body_weight(layer: usize) -> String {
        format!("network_body._body_endoder.seq_layers.{}.weight", 2 * layer)
    }
    pub fn body_bias(layer: usize) -> String {
        format!("network_body._body_endoder.seq_layers.{}.bias", 2 * layer)
    }
    pub const MU_WEIGHT: &str = "action_model._continuous_distribution.mu.weight";
    pub const MU_BIAS: &str = "action_model._continuous_distribution.mu.bias";
    pub const LOG_SIGMA: &str = "action_model._continuous_distribution.log_sigma";
    /// SAC's state-dependent log σ layer.
    pub const LOG_SIGMA_WEIGHT: &str = "action_model._continuous_distribution.log_sigma.weight";
    pub const LOG_SIGMA_BIAS: &str = "action_model._continuous_distribution.log_sigma.bias";
    pub fn branch_weight(b: usize) -> String {
        format!("action_model._discrete_distribution.branches.{b}.weight")
    }
    pub fn branch_bias(b: usize) -> String {
        format!("action_model._discrete_distribution.branches.{b}.bias")
    }
    /// The module of observation `obs`'s visual encoder; its weights are named under it as
    /// [`super::VisualEncoder::weight_shapes`] lists them.
    pub fn visual_encoder(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}")
    }
    /// An entity observation's embedding (Linear + Swish of `[self, entity]`).
    pub fn entity_embedding_weight(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}.self_ent_encoder.seq_layers.0.weight")
    }
    pub fn entity_embedding_bias(obs: usize) -> String {
        format!("network_body.observation_encoder.processors.{obs}.self_ent_encoder.seq_layers.0.bias")
    }
    /// The self encoder of the entity attention (Linear + Swish of the other encodings).
    pub const X_SELF_WEIGHT: &str = "network_body.observation_encoder.x_self_encoder.seq_layers.0.weight";
    pub const X_SELF_BIAS: &str = "network_body.observation_encoder.x_self_encoder.seq_layers.0.bias";
    /// The residual self-attention shared by the entity observations, and its layers.
    pub const ATTENTION: &str = "network_body.observation_encoder.rsa";
    pub const ATTENTION_LAYERS: [&str; 4] = ["fc_q", "fc_k", "fc_v", "fc_out"];
    /// The LSTM of a recurrent body (torch's `nn.LSTM`, gate order i, f, g, o).
    pub const LSTM_WEIGHT_IH: &str = "network_body.lstm.lstm.weight_ih_l0";
    pub const LSTM_WEIGHT_HH: &str = "network_body.lstm.lstm.weight_hh_l0";
    pub const LSTM_BIAS_IH: &str = "network_body.lstm.lstm.bias_ih_l0";
    pub const LSTM_BIAS_HH: &str = "network_body.lstm.lstm.bias_hh_l0";
}

impl PolicyDescription {
    /// Checks that the sizes the description names are ones `tensor_count` tensors can hold,
    /// before anything is sized or listed from them (a description is read from a file).
    pub fn check_bounds(&self, tensor_count: usize) -> Result<(), PolicyError> {
        use crate::spec::model::{bounded_elements, MAX_INPUT_ELEMENTS as LARGEST};
        let bounds = |what: String| Err(PolicyError::Bounds(what));
        if self.num_layers > tensor_count {
            return bounds(format!("num_layers {} is more than the {tensor_count} tensors hold", self.num_layers));
        }
        for shape in &self.observation_shapes {
            if bounded_elements(shape).is_none() {
                return bounds(format!("observation shape {shape:?} is larger than {LARGEST} values"));
            }
        }
        let actions = &self.action_spec;
        let sizes = [self.hidden_units, self.memory_size, actions.continuous_size, actions.discrete_branches.len()];
        if sizes.iter().chain(&actions.discrete_branches).any(|s| *s > LARGEST) {
            return bounds(format!("hidden_units {}, memory_size {} or the action spec {actions} is larger than {LARGEST}", self.hidden_units, self.memory_size));
        }
        Ok(())
    }

    /// What differs between this description (a checkpoint's) and `other` (this run's), one
    /// `field: checkpoint X, configuration Y` per field; empty when they are equal.
    pub fn differences(&self, other: &Self) -> Vec<String> {
        let mut found = Vec::new();
        let mut compare = |field: &str, ours: String, theirs: String| {
            if ours != theirs {
                found.push(format!("{field}: checkpoint {ours}, this run {theirs}"));
            }
        };
        compare("format_version", self.format_version.to_string(), other.format_version.to_string());
        compare("observation shapes", format!("{:?}", self.observation_shapes), format!("{:?}", other.observation_shapes));
        if self.has_visual() {
            compare("vis_encode_type", self.vis_encode_type.to_string(), other.vis_encode_type.to_string());
        }
        compare("continuous actions", self.action_spec.continuous_size.to_string(), other.action_spec.continuous_size.to_string());
        compare("discrete branches", format!("{:?}", self.action_spec.discrete_branches), format!("{:?}", other.action_spec.discrete_branches));
        compare("goal-conditioned observations", format!("{:?}", self.goal_observations), format!("{:?}", other.goal_observations));
        compare("hidden_units", self.hidden_units.to_string(), other.hidden_units.to_string());
        compare("num_layers", self.num_layers.to_string(), other.num_layers.to_string());
        compare("normalize", self.normalize.to_string(), other.normalize.to_string());
        compare("memory_size", self.memory_size.to_string(), other.memory_size.to_string());
        if self.action_spec.continuous_size > 0 {
            compare("continuous head", format!("{:?}", self.continuous_head), format!("{:?}", other.continuous_head));
        }
        found
    }

    /// Whether the network has an LSTM (`memory_size` > 0).
    pub fn is_recurrent(&self) -> bool {
        self.memory_size > 0
    }

    /// Width of what the action heads read: the LSTM's output (`memory_size / 2`) in a
    /// recurrent network, else the body's (`hidden_units`).
    pub fn head_width(&self) -> usize {
        if self.is_recurrent() { self.memory_size / 2 } else { self.hidden_units }
    }

    /// Width of each observation's own encoding (an image's encoder gives `hidden_units`;
    /// entity observations none: they share the attention's pooled 128 after the others).
    pub fn encoding_widths(&self) -> Vec<usize> {
        self.observation_shapes
            .iter()
            .map(|s| match s.len() {
                3 => self.hidden_units,
                2 => 0,
                _ => s.iter().product::<usize>(),
            })
            .collect()
    }

    /// Width of the observation encoder's output: the observations' own encodings side by
    /// side, then the entity attention's pooled encoding when there are entity observations.
    pub fn encoding_width(&self) -> usize {
        let attention = if self.entity_observations().is_empty() { 0 } else { ENTITY_EMBEDDING_SIZE };
        self.encoding_widths().iter().sum::<usize>() + attention
    }

    /// The entity observations: each one's index and `[max entities, entity size]`.
    pub fn entity_observations(&self) -> Vec<(usize, [usize; 2])> {
        self.observation_shapes.iter().enumerate().filter(|(_, s)| s.len() == 2).map(|(i, s)| (i, [s[0], s[1]])).collect()
    }

    /// The hypernetwork-conditioned body reading the encodings and `action_inputs` more
    /// values, when the policy has goal observations.
    pub fn conditional_body(&self, action_inputs: usize) -> Option<ConditionalBody> {
        if self.goal_observations.is_empty() {
            return None;
        }
        let widths = self.encoding_widths();
        let goal = self.goal_observations.iter().filter_map(|i| widths.get(*i)).sum();
        Some(ConditionalBody { input: self.encoding_width() + action_inputs, goal, hidden: self.hidden_units, layers: self.num_layers.max(1) })
    }

    /// Floats per row of each observation (images flattened).
    pub fn observation_sizes(&self) -> Vec<usize> {
        self.observation_shapes.iter().map(|s| s.iter().product()).collect()
    }

    /// Total width of the rank-1 observations.
    pub fn vector_width(&self) -> usize {
        self.observation_shapes.iter().filter(|s| s.len() == 1).map(|s| s[0]).sum()
    }

    /// Whether any observation is an image.
    pub fn has_visual(&self) -> bool {
        self.observation_shapes.iter().any(|s| s.len() == 3)
    }

    /// Every weight the actor has, with its shape (torch layout: Linear weights `[out, in]`).
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut shapes = vec![];
        for (i, s) in self.observation_shapes.iter().enumerate() {
            if let Some(encoder) = self.visual_encoder(i) {
                let module = names::visual_encoder(i);
                shapes.extend(encoder.weight_shapes(self.hidden_units).into_iter().map(|(name, shape)| (format!("{module}.{name}"), shape)));
            } else if self.normalize && s.len() == 1 {
                let n = s.iter().product();
                shapes.push((names::running_mean(i), vec![n]));
                shapes.push((names::running_variance(i), vec![n]));
                shapes.push((names::normalization_steps(i), vec![1]));
            }
        }
        shapes.extend(self.attention_weight_shapes());
        let mut width = self.encoding_width();
        match self.conditional_body(0) {
            Some(body) => shapes.extend(body.weight_shapes()),
            None => {
                for l in 0..self.num_layers {
                    shapes.push((names::body_weight(l), vec![self.hidden_units, width]));
                    shapes.push((names::body_bias(l), vec![self.hidden_units]));
                    width = self.hidden_units;
                }
            }
        }
        if self.num_layers > 0 {
            width = self.hidden_units;
        }
        if self.is_recurrent() {
            let hidden = self.memory_size / 2;
            shapes.push((names::LSTM_WEIGHT_IH.into(), vec![4 * hidden, width]));
            shapes.push((names::LSTM_WEIGHT_HH.into(), vec![4 * hidden, hidden]));
            shapes.push((names::LSTM_BIAS_IH.into(), vec![4 * hidden]));
            shapes.push((names::LSTM_BIAS_HH.into(), vec![4 * hidden]));
            width = hidden;
        }
        let c = self.action_spec.continuous_size;
        if c > 0 {
            shapes.push((names::MU_WEIGHT.into(), vec![c, width]));
            shapes.push((names::MU_BIAS.into(), vec![c]));
            match self.continuous_head {
                ContinuousHead::Clipped => shapes.push((names::LOG_SIGMA.into(), vec![1, c])),
                ContinuousHead::Squashed => {
                    shapes.push((names::LOG_SIGMA_WEIGHT.into(), vec![c, width]));
                    shapes.push((names::LOG_SIGMA_BIAS.into(), vec![c]));
                }
            }
        }
        for (b, k) in self.action_spec.discrete_branches.iter().enumerate() {
            shapes.push((names::branch_weight(b), vec![*k, width]));
            shapes.push((names::branch_bias(b), vec![*k]));
        }
        shapes
    }

    /// The entity attention's weights (none without entity observations): each entity
    /// observation's embedding of `[self, entity]` (the self part only when other observations
    /// give one), the self encoder, the shared attention.
    fn attention_weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let entities = self.entity_observations();
        if entities.is_empty() {
            return vec![];
        }
        let e = ENTITY_EMBEDDING_SIZE;
        let self_size: usize = self.encoding_widths().iter().sum();
        let embedded_self = if self_size > 0 { e } else { 0 };
        let mut shapes = vec![];
        for (i, [_, size]) in entities {
            shapes.push((names::entity_embedding_weight(i), vec![e, embedded_self + size]));
            shapes.push((names::entity_embedding_bias(i), vec![e]));
        }
        if self_size > 0 {
            shapes.push((names::X_SELF_WEIGHT.into(), vec![e, self_size]));
            shapes.push((names::X_SELF_BIAS.into(), vec![e]));
        }
        for layer in names::ATTENTION_LAYERS {
            shapes.push((format!("{}.{layer}.weight", names::ATTENTION), vec![e, e]));
            shapes.push((format!("{}.{layer}.bias", names::ATTENTION), vec![e]));
        }
        shapes
    }

    /// The encoder of observation `obs` when it is an image its `vis_encode_type` takes.
    pub fn visual_encoder(&self, obs: usize) -> Option<VisualEncoder> {
        self.observation_shapes.get(obs).filter(|s| s.len() == 3).and_then(|s| VisualEncoder::new(self.vis_encode_type, s).ok())
    }

    /// Checks that every observation is a vector or an image the encoder takes, and that the
    /// goal observations are distinct observations.
    pub fn check_observations(&self) -> Result<(), PolicyError> {
        let count = self.observation_shapes.len();
        let mut goals = self.goal_observations.clone();
        goals.sort_unstable();
        goals.dedup();
        if goals.len() != self.goal_observations.len() || goals.iter().any(|g| *g >= count) {
            return Err(PolicyError::Unsupported(format!("goal observations {:?} are not distinct observations of the {count}", self.goal_observations)));
        }
        for s in &self.observation_shapes {
            match s.len() {
                1 => {}
                3 => {
                    VisualEncoder::new(self.vis_encode_type, s).map_err(|e| PolicyError::Unsupported(format!("observation shape {s:?}: {e}")))?;
                }
                2 if s.iter().all(|d| *d > 0) => {}
                _ => return Err(PolicyError::Unsupported(format!("observation shape {s:?}: only vectors, entity buffers [max entities, entity size] and images [height, width, channels] are supported"))),
            }
        }
        Ok(())
    }

    /// Refuses a policy with entity observations for Barracuda's `.nn`: no ML-Agents exporter
    /// ever wrote attention to `.nn` (poca.md §4.7); such policies go to Unity as ONNX, which
    /// com.unity.ml-agents 1.8 and later import.
    pub fn check_no_entities_for_nn(&self) -> Result<(), PolicyError> {
        match self.entity_observations().first() {
            Some((i, shape)) => Err(PolicyError::Unsupported(format!(
                "observation {i} is an entity buffer {shape:?} (a BufferSensor): Barracuda .nn files hold no attention; use the ONNX export"
            ))),
            None => Ok(()),
        }
    }

    /// Checks that the description is exportable and the weights fit it.
    pub fn check(&self, weights: &Weights) -> Result<(), PolicyError> {
        self.check_observations()?;
        if self.memory_size % 2 != 0 {
            return Err(PolicyError::Unsupported(format!("memory_size {} is odd; a memory is [h | c], two halves of the LSTM's width", self.memory_size)));
        }
        for (name, expected) in self.weight_shapes() {
            let found = weights.0.get(&name).ok_or_else(|| PolicyError::Missing { name: name.clone() })?;
            if found.shape != expected || found.data.len() != expected.iter().product::<usize>() {
                return Err(PolicyError::Shape { name, expected, found: found.shape.clone() });
            }
            if let Some((index, value)) = found.data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                let count = found.data.iter().filter(|v| !v.is_finite()).count();
                return Err(PolicyError::NonFinite { name, index, value: *value, count });
            }
        }
        Ok(())
    }
}

impl Weights {
    pub fn get(&self, name: &str) -> Result<&WeightTensor, PolicyError> {
        self.0.get(name).ok_or_else(|| PolicyError::Missing { name: name.into() })
    }

    /// Random weights for a description (uniform ±1/sqrt(fan_in), zero biases, unit
    /// normaliser), as a fresh network has.
    pub fn random(description: &PolicyDescription, seed: u64) -> Self {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut weights = BTreeMap::new();
        for (name, shape) in description.weight_shapes() {
            let n: usize = shape.iter().product();
            let data = if name.ends_with("running_variance") || name.ends_with("normalization_steps") {
                (0..n).map(|_| rng.random_range(0.5..2.0)).collect()
            } else if shape.len() >= 2 && !name.ends_with("log_sigma") {
                let fan_in: usize = shape[1..].iter().product();
                let bound = 1.0 / (fan_in as f32).sqrt();
                (0..n).map(|_| rng.random_range(-bound..bound)).collect()
            } else {
                (0..n).map(|_| rng.random_range(-0.5..0.5)).collect()
            };
            weights.insert(name, WeightTensor { shape, data });
        }
        Self(weights)
    }

    /// Reads safetensors bytes (float32 tensors).
    pub fn from_safetensors(bytes: &[u8]) -> Result<Self, PolicyError> {
        let tensors = safetensors::SafeTensors::deserialize(bytes).map_err(|e| PolicyError::Read(e.to_string()))?;
        let mut weights = BTreeMap::new();
        for (name, view) in tensors.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(PolicyError::Read(format!("tensor {name} is {:?}, not F32", view.dtype())));
            }
            let data = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            weights.insert(name, WeightTensor { shape: view.shape().to_vec(), data });
        }
        Ok(Self(weights))
    }

    /// Writes safetensors bytes.
    pub fn to_safetensors(&self) -> Vec<u8> {
        let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = self
            .0
            .iter()
            .map(|(name, t)| (name.clone(), t.data.iter().flat_map(|v| v.to_le_bytes()).collect(), t.shape.clone()))
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
            .iter()
            .map(|(name, data, shape)| {
                (name.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data).expect("sizes agree"))
            })
            .collect();
        safetensors::tensor::serialize(views, None).expect("in-memory serialisation")
    }
}

fn linear(x: &[f32], rows: usize, w: &WeightTensor, b: &WeightTensor) -> Vec<f32> {
    let (out, inp) = (w.shape[0], w.shape[1]);
    let mut y = vec![0.0f32; rows * out];
    for r in 0..rows {
        for o in 0..out {
            let mut acc = b.data[o];
            for i in 0..inp {
                acc += x[r * inp + i] * w.data[o * inp + i];
            }
            y[r * out + o] = acc;
        }
    }
    y
}

/// The observation encodings of `n` rows side by side (`[n, encoding_width]`): images
/// through their encoder, vectors normalised when the policy normalises.
fn encode_observations(description: &PolicyDescription, weights: &Weights, observations: &[Vec<f32>], n: usize) -> Result<Vec<f32>, PolicyError> {
    if !description.entity_observations().is_empty() {
        return Err(PolicyError::Unsupported("the reference forward pass has no entity attention (the exports are checked against the training network)".into()));
    }
    let sizes = description.observation_sizes();
    let width = description.encoding_width();
    let mut encoding = vec![0.0; n * width];
    let mut offset = 0;
    for (i, size) in sizes.into_iter().enumerate() {
        if let Some(encoder) = description.visual_encoder(i) {
            for r in 0..n {
                let features = encoder.forward_reference(&observations[i][r * size..(r + 1) * size], weights, &names::visual_encoder(i), description.hidden_units)?;
                encoding[r * width + offset..r * width + offset + features.len()].copy_from_slice(&features);
            }
            offset += description.hidden_units;
            continue;
        }
        for r in 0..n {
            for k in 0..size {
                let mut v = observations[i][r * size + k];
                if description.normalize {
                    let mean = weights.get(&names::running_mean(i))?.data[k];
                    let var = weights.get(&names::running_variance(i))?.data[k];
                    let steps = weights.get(&names::normalization_steps(i))?.data[0];
                    v = ((v - mean) / (var / steps).sqrt()).clamp(-NORMALIZATION_CLIP, NORMALIZATION_CLIP);
                }
                encoding[r * width + offset + k] = v;
            }
        }
        offset += size;
    }
    Ok(encoding)
}

/// The goal observations' columns of the encodings `[n, encoding_width]`, side by side.
fn goal_columns(description: &PolicyDescription, encodings: &[f32], n: usize) -> Vec<f32> {
    let widths = description.encoding_widths();
    let width: usize = widths.iter().sum();
    let offsets: Vec<usize> = widths.iter().scan(0, |at, w| Some(std::mem::replace(at, *at + w))).collect();
    let (offsets, widths) = (&offsets, &widths);
    (0..n)
        .flat_map(|r| description.goal_observations.iter().flat_map(move |g| (offsets[*g]..offsets[*g] + widths[*g]).map(move |c| r * width + c)))
        .map(|k| encodings[k])
        .collect()
}

/// The deterministic outputs of a policy in plain Rust: `deterministic_continuous_actions`
/// (`[n, c]`) and `deterministic_discrete_actions` (`[n, branches]`), for `observations`
/// (one `[n, size]` buffer per observation) and `masks` (`[n, sum of branches]`, 1 = allowed).
pub fn reference_forward(
    description: &PolicyDescription,
    weights: &Weights,
    observations: &[Vec<f32>],
    masks: Option<&[f32]>,
    n: usize,
) -> Result<(Vec<f32>, Vec<i64>), PolicyError> {
    let (continuous, discrete, _) = reference_step(description, weights, observations, masks, None, n)?;
    Ok((continuous, discrete))
}

/// [`reference_forward`] for one step of a recurrent policy too: each row's LSTM starts from
/// its `memories` row (`[n, memory_size]`, `[h | c]`; zeros when None). Returns the
/// deterministic actions and the memories after the step (empty for a feed-forward policy).
pub fn reference_step(
    description: &PolicyDescription,
    weights: &Weights,
    observations: &[Vec<f32>],
    masks: Option<&[f32]>,
    memories: Option<&[f32]>,
    n: usize,
) -> Result<(Vec<f32>, Vec<i64>, Vec<f32>), PolicyError> {
    description.check(weights)?;
    let m = description.memory_size;
    if memories.is_some_and(|mem| mem.len() != n * m) {
        return Err(PolicyError::Unsupported(format!("{n} rows need memories of {m} floats per row")));
    }
    let sizes = description.observation_sizes();
    let given: Vec<usize> = observations.iter().map(|o| o.len()).collect();
    let total_actions: usize = description.action_spec.discrete_branches.iter().sum();
    if given != sizes.iter().map(|s| s * n).collect::<Vec<_>>() || masks.is_some_and(|m| m.len() != n * total_actions) {
        return Err(PolicyError::Unsupported(format!("{n} rows need observations of {sizes:?} floats per row (given {given:?} in all) and masks of {total_actions}")));
    }
    let mut h = encode_observations(description, weights, observations, n)?;
    if let Some(body) = description.conditional_body(0) {
        let goal = goal_columns(description, &h, n);
        h = body.forward_reference(&h, &goal, n, weights)?;
    } else {
        for l in 0..description.num_layers {
            h = linear(&h, n, weights.get(&names::body_weight(l))?, weights.get(&names::body_bias(l))?);
            h.iter_mut().for_each(|v| *v *= 1.0 / (1.0 + (-*v).exp()));
        }
    }
    let mut memories_after = vec![];
    if description.is_recurrent() {
        let zeros = vec![0.0; n * m];
        (h, memories_after) = lstm::LstmWeights::read(weights)?.step(&h, memories.unwrap_or(&zeros), n);
    }
    let mut continuous = vec![];
    if description.action_spec.continuous_size > 0 {
        let mu = linear(&h, n, weights.get(names::MU_WEIGHT)?, weights.get(names::MU_BIAS)?);
        continuous = mu.iter().map(|m| description.continuous_head.action(*m)).collect();
    }
    let branches = &description.action_spec.discrete_branches;
    let total: usize = branches.iter().sum();
    let mut discrete = vec![0i64; n * branches.len()];
    let mut start = 0;
    for (b, k) in branches.iter().enumerate() {
        let logits = linear(&h, n, weights.get(&names::branch_weight(b))?, weights.get(&names::branch_bias(b))?);
        for r in 0..n {
            let mut best = (0usize, f32::NEG_INFINITY);
            for a in 0..*k {
                let allowed = masks.map_or(1.0, |m| m[r * total + start + a]);
                let masked = logits[r * k + a] * allowed - 1e8 * (1.0 - allowed);
                if masked > best.1 {
                    best = (a, masked);
                }
            }
            discrete[r * branches.len() + b] = best.0 as i64;
        }
        start += k;
    }
    Ok((continuous, discrete, memories_after))
}
