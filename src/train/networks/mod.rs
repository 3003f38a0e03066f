//! The networks the trainers build on (the `train` feature): [`adam`], the [`lstm`] and the
//! agents' recurrent [`memory`], [`acting`] (with [`rust_acting`], the small actors' sampling
//! step without libtorch), and here the actor and the critic.
//!
//! The actor and the critic as ML-Agents 0.28 builds them for PPO (training.md §4): separate
//! bodies with their own observation normalisers, Swish MLPs, a Gaussian head with a free
//! log σ and masked categorical heads. Variable paths are ML-Agents' module paths, so the
//! actor's weights are exactly what [`crate::policy`] exports.

pub mod acting;
pub mod adam;
pub mod attention;
pub mod lstm;
pub mod memory;
pub mod multi_agent;
pub mod rust_acting;
pub mod values;

use crate::policy::visual::{Step, VisualEncoder as EncoderShape};
use crate::policy::{ContinuousHead, PolicyDescription, WeightTensor, Weights, LOG_SIGMA_BOUNDS};
use crate::spec::model;
use crate::train::config::{RunOptions, TrainerSettings};
pub use lstm::backward;
use lstm::Lstm;
use tch::{nn, nn::Module, Kind, Tensor};

/// A running observation normaliser (count, mean, m2).
struct Normalizer {
    mean: Tensor,
    variance: Tensor,
    steps: Tensor,
}

impl Normalizer {
    fn new(p: nn::Path, size: i64) -> Self {
        Self {
            mean: p.zeros_no_train("running_mean", &[size]),
            variance: p.ones_no_train("running_variance", &[size]),
            steps: p.ones_no_train("normalization_steps", &[1]),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        ((x - &self.mean) / (&self.variance / &self.steps).sqrt()).clamp(-5.0, 5.0)
    }

    /// Takes in a batch of observations; false (and nothing changed) when the running mean
    /// or variance would leave float32 (observations whose squares overflow).
    fn update(&mut self, x: &Tensor) -> bool {
        tch::no_grad(|| {
            let n = x.size()[0] as f64;
            let new_steps = &self.steps + n;
            let new_mean = &self.mean + (x - &self.mean).sum_dim_intlist(0, false, Kind::Float) / &new_steps;
            let new_variance = &self.variance + ((x - &new_mean) * (x - &self.mean)).sum_dim_intlist(0, false, Kind::Float);
            let finite = |t: &Tensor| t.isfinite().all().int64_value(&[]) != 0;
            if !finite(&new_mean) || !finite(&new_variance) {
                return false;
            }
            self.mean.copy_(&new_mean);
            self.variance.copy_(&new_variance);
            self.steps.copy_(&new_steps);
            true
        })
    }
}

/// A visual encoder of 0.28 (the [`Step`]s of [`crate::policy::visual`]) on tch; takes
/// flattened HWC images and permutes them to NCHW as ML-Agents does.
struct VisualEncoder {
    shape: EncoderShape,
    layers: Vec<EncoderLayer>,
}

/// One built step of a visual encoder.
enum EncoderLayer {
    Conv(nn::Conv2D),
    MaxPool { kernel: i64, stride: i64 },
    LeakyRelu,
    Relu,
    Swish,
    Residual(Vec<EncoderLayer>),
    Flatten,
    Dense(nn::Linear),
}

impl VisualEncoder {
    fn new(p: nn::Path, shape: EncoderShape, hidden: i64) -> Self {
        Self { shape, layers: build_encoder_layers(&p, &shape.steps(hidden as usize)) }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let s = &self.shape;
        let h = x.reshape([-1, s.height as i64, s.width as i64, s.channels as i64]).permute([0, 3, 1, 2]);
        run_encoder_layers(&self.layers, h)
    }
}

/// The variable path of a module named `a.b.c` under `p`.
fn module_path<'a>(p: &nn::Path<'a>, module: &str) -> nn::Path<'a> {
    let mut parts = module.split('.');
    let first = parts.next().unwrap_or_default();
    parts.fold(p / first, |path, part| &path / part)
}

fn build_encoder_layers(p: &nn::Path, steps: &[Step]) -> Vec<EncoderLayer> {
    steps
        .iter()
        .map(|step| match step {
            Step::Conv { module, input, output, kernel, stride, padding } => {
                // torch's default initialisation of a convolution (0.28 keeps it): weights and
                // bias uniform in ±1/√fan_in (Kaiming-uniform with a = √5).
                let bound = 1.0 / ((input * kernel * kernel) as f64).sqrt();
                let uniform = nn::Init::Uniform { lo: -bound, up: bound };
                let config = nn::ConvConfig { stride: *stride as i64, padding: *padding as i64, ws_init: uniform, bs_init: uniform, ..Default::default() };
                EncoderLayer::Conv(nn::conv2d(module_path(p, module), *input as i64, *output as i64, *kernel as i64, config))
            }
            Step::MaxPool { kernel, stride } => EncoderLayer::MaxPool { kernel: *kernel as i64, stride: *stride as i64 },
            Step::LeakyRelu => EncoderLayer::LeakyRelu,
            Step::Relu => EncoderLayer::Relu,
            Step::Swish => EncoderLayer::Swish,
            Step::Residual(inner) => EncoderLayer::Residual(build_encoder_layers(p, inner)),
            Step::Flatten { .. } => EncoderLayer::Flatten,
            // Kaiming-normal with linear gain × 1.41, as ML-Agents initialises the encoder's dense layer.
            Step::Dense { module, input, output } => EncoderLayer::Dense(kaiming_linear(module_path(p, module), *input as i64, *output as i64, 1.41)),
        })
        .collect()
}

fn run_encoder_layers(layers: &[EncoderLayer], x: Tensor) -> Tensor {
    layers.iter().fold(x, |h, layer| match layer {
        EncoderLayer::Conv(conv) => conv.forward(&h),
        EncoderLayer::MaxPool { kernel, stride } => h.max_pool2d([*kernel, *kernel], [*stride, *stride], [0, 0], [1, 1], false),
        EncoderLayer::LeakyRelu => h.leaky_relu(),
        EncoderLayer::Relu => h.relu(),
        EncoderLayer::Swish => h.silu(),
        EncoderLayer::Residual(inner) => &h + run_encoder_layers(inner, h.shallow_clone()),
        EncoderLayer::Flatten => h.flatten(1, -1),
        EncoderLayer::Dense(dense) => dense.forward(&h),
    })
}

/// How one observation is encoded.
enum Processor {
    /// A vector, optionally normalised.
    Vector(Option<Normalizer>),
    Visual(VisualEncoder),
    /// An entity buffer: read by the encoder's attention, no encoding of its own.
    Entity,
}

/// Tensors side by side (dim 1); a lone tensor as it is, without `cat`'s copy and autograd
/// node (the small networks pay libtorch's per-operation cost on every one).
fn concatenate(mut tensors: Vec<Tensor>) -> Tensor {
    match tensors.len() {
        1 => tensors.pop().expect("one tensor"),
        _ => Tensor::cat(&tensors, 1),
    }
}

/// ML-Agents' `NetworkBody`: observation processors + Swish MLP (+ the LSTM of a recurrent
/// network). The actor, the critics and the reward signals' networks each have one.
pub struct Body {
    encoder: ObservationEncoder,
    layers: Vec<nn::Linear>,
    /// The last layer of a goal-conditioned body, and the goal observations it reads.
    hyper: Option<(HyperLayer, Vec<usize>)>,
    lstm: Option<Lstm>,
}

/// 0.28's `HyperNetwork` layer ([`crate::policy::conditioning`]): the goal encodings generate an
/// `[input, hidden]` matrix per row.
struct HyperLayer {
    hypernet: Vec<nn::Linear>,
    bias: Tensor,
    input: i64,
    hidden: i64,
}

impl HyperLayer {
    fn new(p: nn::Path, input: i64, goal: i64, hidden: i64) -> Self {
        use crate::policy::conditioning::HYPER_LAYERS;
        let net = &p / "hypernet";
        let mut hypernet = vec![];
        let mut width = goal;
        for k in 0..HYPER_LAYERS {
            hypernet.push(kaiming_linear(&net / (2 * k), width, hidden, 1.0));
            width = hidden;
        }
        // 0.28 draws the flat output layer again, uniform in ±√(1 / (hidden · input)).
        let bound = (1.0 / (hidden * input) as f64).sqrt();
        let config = nn::LinearConfig { ws_init: nn::Init::Uniform { lo: -bound, up: bound }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
        hypernet.push(nn::linear(&net / (2 * HYPER_LAYERS + 1), hidden, input * hidden, config));
        let bias = p.var("bias", &[hidden], nn::Init::Const(0.0));
        Self { hypernet, bias, input, hidden }
    }

    fn forward(&self, x: &Tensor, goal: &Tensor) -> Tensor {
        use crate::policy::conditioning::LAYER_NORM_EPSILON;
        let (flat, hidden_layers) = self.hypernet.split_last().expect("a hypernetwork has layers");
        let mut z = goal.shallow_clone();
        for layer in hidden_layers {
            z = layer.forward(&z).silu();
        }
        let mean = z.mean_dim(-1, true, Kind::Float);
        let centred = &z - mean;
        let variance = (&centred * &centred).mean_dim(-1, true, Kind::Float);
        let normalised = centred / (variance + LAYER_NORM_EPSILON as f64).sqrt();
        let matrices = flat.forward(&normalised).view([-1, self.input, self.hidden]);
        (x.unsqueeze(1).bmm(&matrices).squeeze_dim(1) + &self.bias).silu()
    }
}

/// A linear layer with ML-Agents' `KaimingHeNormal` initialisation (linear gain: standard
/// deviation `gain / sqrt(fan_in)`) and zero bias.
pub fn kaiming_linear(p: nn::Path, fan_in: i64, fan_out: i64, gain: f64) -> nn::Linear {
    let std = gain / (fan_in as f64).sqrt();
    let config = nn::LinearConfig { ws_init: nn::Init::Randn { mean: 0.0, stdev: std }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, fan_in, fan_out, config)
}

impl Body {
    /// The body of `d`'s networks; its first layer also reads `action_inputs` values (SAC's
    /// Q networks read the continuous action after the observation encodings).
    pub fn new(p: &nn::Path, d: &PolicyDescription, action_inputs: usize) -> Self {
        let encoder = ObservationEncoder::new(&(p / "observation_encoder"), d);
        let conditional = d.conditional_body(action_inputs);
        // 0.28's `ConditionalEncoder` names its layers `layers`, the plain `LinearEncoder`
        // `seq_layers`; the conditional one's last layer is the hypernetwork.
        let seq = p / "_body_endoder" / if conditional.is_some() { "layers" } else { "seq_layers" };
        let mut width = (d.encoding_width() + action_inputs) as i64;
        let mut layers = vec![];
        let plain_layers = d.num_layers.max(1) - usize::from(conditional.is_some());
        for l in 0..plain_layers {
            layers.push(kaiming_linear(&seq / (2 * l), width, d.hidden_units as i64, 1.0));
            width = d.hidden_units as i64;
        }
        let hyper = conditional.map(|body| {
            let layer = HyperLayer::new(&seq / (2 * body.hyper_layer()), body.hyper_input() as i64, body.goal as i64, body.hidden as i64);
            (layer, d.goal_observations.clone())
        });
        let lstm = (d.memory_size > 0).then(|| Lstm::new(p / "lstm" / "lstm", d.hidden_units as i64, d.memory_size as i64 / 2));
        Self { encoder, layers, hyper, lstm }
    }

    /// The encoding `[rows, width]` (width `memory_size / 2` with an LSTM, else
    /// `hidden_units`) and, for a recurrent body given `memories` (`[1, n_seq, m]`, rows
    /// being `n_seq` sequences of equal length), the memories after each sequence.
    pub fn forward(&self, observations: &[Tensor], action: Option<&Tensor>, memories: Option<&Tensor>) -> (Tensor, Option<Tensor>) {
        let h = self.mlp(observations, action);
        let Some(lstm) = &self.lstm else { return (h, None) };
        let (out, after) = lstm.forward_from(&h, memories);
        (out, Some(after))
    }

    /// Each observation's encoding (normalised vectors, image features), side by side.
    pub fn encode(&self, observations: &[Tensor]) -> Tensor {
        self.encoder.encode(observations)
    }

    fn mlp(&self, observations: &[Tensor], action: Option<&Tensor>) -> Tensor {
        let encodings = self.encoder.encodings(observations);
        let goal = self.hyper.as_ref().map(|(_, goals)| Tensor::cat(&goals.iter().map(|g| encodings[*g].shallow_clone()).collect::<Vec<_>>(), 1));
        let mut encoded = vec![self.encoder.assemble(encodings, observations)];
        encoded.extend(action.map(Tensor::shallow_clone));
        let mut h = concatenate(encoded);
        for layer in &self.layers {
            h = layer.forward(&h).silu();
        }
        match (&self.hyper, goal) {
            (Some((layer, _)), Some(goal)) => layer.forward(&h, &goal),
            _ => h,
        }
    }

    /// Takes `other`'s normalisers (count, mean, variance), as 0.28's SAC copies the actor's
    /// into its value networks before every update.
    fn copy_normalizers_from(&mut self, other: &Body) {
        self.encoder.copy_normalizers_from(&other.encoder);
    }

    /// See [`ObservationEncoder::update_normalizers`].
    pub fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        self.encoder.update_normalizers(observations)
    }
}

/// 0.28's `ObservationEncoder`: one processor per observation (a vector's optional
/// normaliser, an image's encoder) under `observation_encoder.processors.{i}`, and the entity
/// attention over the entity observations ([`attention`]) when there are any.
pub struct ObservationEncoder {
    processors: Vec<Processor>,
    attention: Option<attention::EntityAttention>,
}

impl ObservationEncoder {
    /// The processors of `d`'s observations under `p` (a network body's
    /// `observation_encoder`).
    pub fn new(p: &nn::Path, d: &PolicyDescription) -> Self {
        let encoder = p / "processors";
        let processors = d
            .observation_shapes
            .iter()
            .enumerate()
            .map(|(i, s)| match (d.visual_encoder(i), s.len()) {
                (Some(shape), _) => Processor::Visual(VisualEncoder::new(&encoder / i, shape, d.hidden_units as i64)),
                (None, 2) => Processor::Entity,
                (None, _) => Processor::Vector(d.normalize.then(|| Normalizer::new(&encoder / i / "normalizer", s[0] as i64))),
            })
            .collect();
        let entities: Vec<(usize, [i64; 2])> = d.entity_observations().into_iter().map(|(i, [n, e])| (i, [n as i64, e as i64])).collect();
        let self_size: usize = d.encoding_widths().iter().sum();
        let attention = (!entities.is_empty()).then(|| attention::EntityAttention::new(p, self_size as i64, &entities));
        Self { processors, attention }
    }

    /// The encoder's output `[rows, d.encoding_width()]`: each observation's encoding
    /// (normalised vectors, image features) side by side, then the entity attention's.
    pub fn encode(&self, observations: &[Tensor]) -> Tensor {
        self.assemble(self.encodings(observations), observations)
    }

    /// Each observation's own encoding, in order (an entity observation's is empty).
    fn encodings(&self, observations: &[Tensor]) -> Vec<Tensor> {
        observations
            .iter()
            .zip(&self.processors)
            .map(|(x, p)| match p {
                Processor::Vector(None) => x.shallow_clone(),
                Processor::Vector(Some(n)) => n.forward(x),
                Processor::Visual(v) => v.forward(x),
                Processor::Entity => x.narrow(1, 0, 0),
            })
            .collect()
    }

    /// The encoder's output from the observations' own `encodings`: side by side, then the
    /// entity attention's pooled encoding of the entity observations beside them.
    fn assemble(&self, encodings: Vec<Tensor>, observations: &[Tensor]) -> Tensor {
        let encoded_self = concatenate(encodings);
        let Some(attention) = &self.attention else { return encoded_self };
        let entities: Vec<Tensor> = observations.iter().zip(&self.processors).filter(|(_, p)| matches!(p, Processor::Entity)).map(|(x, _)| x.shallow_clone()).collect();
        let has_self = encoded_self.size()[1] > 0;
        let pooled = attention.forward(has_self.then_some(&encoded_self), &entities);
        if has_self {
            Tensor::cat(&[encoded_self, pooled], 1)
        } else {
            pooled
        }
    }

    /// Takes `other`'s normalisers (count, mean, variance).
    fn copy_normalizers_from(&mut self, other: &ObservationEncoder) {
        for (mine, theirs) in self.processors.iter_mut().zip(&other.processors) {
            if let (Processor::Vector(Some(mine)), Processor::Vector(Some(theirs))) = (mine, theirs) {
                tch::no_grad(|| {
                    mine.mean.copy_(&theirs.mean);
                    mine.variance.copy_(&theirs.variance);
                    mine.steps.copy_(&theirs.steps);
                });
            }
        }
    }

    /// Updates every observation's normaliser; the index of an observation that would take
    /// one out of float32 (its normaliser left as it was) is an error.
    pub fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        for (k, (p, x)) in self.processors.iter_mut().zip(observations).enumerate() {
            if let Processor::Vector(Some(n)) = p {
                if !n.update(x) {
                    return Err(k);
                }
            }
        }
        Ok(())
    }
}

/// The Gaussian head of continuous actions.
enum Gaussian {
    /// PPO's: μ and a free log σ `[1, c]`.
    FreeSigma { mu: nn::Linear, log_sigma: Tensor },
    /// SAC's: μ and log σ = clamp(Linear(h), -20, 2), the sample squashed by tanh.
    Squashed { mu: nn::Linear, log_sigma: nn::Linear },
}

impl Gaussian {
    fn mu(&self, h: &Tensor) -> Tensor {
        match self {
            Gaussian::FreeSigma { mu, .. } | Gaussian::Squashed { mu, .. } => mu.forward(h),
        }
    }

    /// log σ for each row of `h` (`[n, c]`).
    fn log_sigma(&self, h: &Tensor, mu: &Tensor) -> Tensor {
        match self {
            Gaussian::FreeSigma { log_sigma, .. } => mu.zeros_like() + log_sigma,
            Gaussian::Squashed { log_sigma, .. } => {
                let (low, high) = LOG_SIGMA_BOUNDS;
                log_sigma.forward(h).clamp(low as f64, high as f64)
            }
        }
    }
}

/// The policy network.
pub struct Actor {
    body: Body,
    gaussian: Option<Gaussian>,
    branches: Vec<nn::Linear>,
    branch_sizes: Vec<i64>,
}

/// A value network: one head per reward signal, each with one output, or, for SAC's Q
/// networks, one output per discrete action.
pub struct Critic {
    body: Body,
    heads: Vec<nn::Linear>,
}

/// What the actor computed for a batch.
pub struct ActorOutput {
    /// Continuous actions `[n, c]`: PPO's raw samples (sent to the environment as
    /// clip(a, -3, 3) / 3), SAC's squashed ones (sent as they are).
    pub continuous: Tensor,
    /// Discrete choices `[n, branches]` (int64).
    pub discrete: Tensor,
    /// Log-probabilities `[n, c + branches]`.
    pub log_probs: Tensor,
    /// Entropy per row `[n]`.
    pub entropy: Tensor,
    /// A recurrent actor's memories after each sequence `[1, n_seq, m]`.
    pub memories: Option<Tensor>,
}

/// Fresh actions of SAC's update with what its losses need of the policy.
pub struct SquashedSample {
    /// Squashed continuous actions `[n, c]` (reparameterised: gradients reach the actor).
    pub continuous: Tensor,
    /// The joint log-probability of `continuous` `[n]` (sum over dimensions; zeros without
    /// continuous actions).
    pub continuous_log_prob: Tensor,
    /// Each branch's probabilities + 1e-7 `[n, k]` and their logarithms.
    pub branch_probabilities: Vec<Tensor>,
    pub branch_log_probabilities: Vec<Tensor>,
    /// A recurrent actor's memories after each sequence.
    pub memories: Option<Tensor>,
}

/// log N(x; μ, σ) per dimension, as ML-Agents computes it.
fn gaussian_log_prob(x: &Tensor, mu: &Tensor, sigma: &Tensor) -> Tensor {
    -(x - mu).pow_tensor_scalar(2) / (sigma.pow_tensor_scalar(2) * 2.0 + 1e-7) - (sigma + 1e-7).log() - 0.5 * (2.0 * std::f64::consts::PI).ln()
}

/// log |d tanh(x) / dx| in torch's stable form 2·(ln 2 − x − softplus(−2x)).
fn tanh_log_jacobian(x: &Tensor) -> Tensor {
    ((-x) - (x * -2.0).softplus() + std::f64::consts::LN_2) * 2.0
}

impl Actor {
    pub fn new(root: &nn::Path, d: &PolicyDescription) -> Self {
        let body = Body::new(&(root / "network_body"), d, 0);
        let h = d.head_width() as i64;
        let c = d.action_spec.continuous_size as i64;
        let gaussian = (c > 0).then(|| {
            let dist = root / "action_model" / "_continuous_distribution";
            let mu = kaiming_linear(&dist / "mu", h, c, 0.2);
            match d.continuous_head {
                ContinuousHead::Clipped => Gaussian::FreeSigma { mu, log_sigma: dist.zeros("log_sigma", &[1, c]) },
                ContinuousHead::Squashed => Gaussian::Squashed { mu, log_sigma: kaiming_linear(&dist / "log_sigma", h, c, 0.2) },
            }
        });
        let discrete = root / "action_model" / "_discrete_distribution" / "branches";
        let branch_sizes: Vec<i64> = d.action_spec.discrete_branches.iter().map(|k| *k as i64).collect();
        let branches = branch_sizes.iter().enumerate().map(|(b, k)| kaiming_linear(&discrete / b, h, *k, 0.1)).collect();
        Self { body, gaussian, branches, branch_sizes }
    }

    /// Evaluates the policy. With `given` (continuous samples, discrete choices) it scores
    /// those actions (for PPO's update); otherwise it samples (or, `deterministic`, takes
    /// modes). A recurrent actor starts each sequence from `memories` (`[1, n_seq, m]`; zeros
    /// when None, one sequence per row).
    pub fn forward(&self, observations: &[Tensor], memories: Option<&Tensor>, masks: Option<&Tensor>, given: Option<(&Tensor, &Tensor)>, deterministic: bool) -> ActorOutput {
        let (h, memories_out) = self.body.forward(observations, None, memories);
        let n = h.size()[0];
        let mut log_probs = vec![];
        let mut entropies = vec![];
        let mut continuous = Tensor::zeros([n, 0], (Kind::Float, h.device()));
        if let Some(gaussian) = &self.gaussian {
            let mu = gaussian.mu(&h);
            let sigma = gaussian.log_sigma(&h, &mu).exp();
            let squashed = matches!(gaussian, Gaussian::Squashed { .. });
            let x = match given {
                // A squashed action given back is unsquashed (SAC's update never asks).
                Some((c, _)) if squashed => c.clamp(-1.0 + 1e-6, 1.0 - 1e-6).atanh(),
                Some((c, _)) => c.shallow_clone(),
                None if deterministic => mu.shallow_clone(),
                None => &mu + &sigma * mu.randn_like(),
            };
            let mut lp = gaussian_log_prob(&x, &mu, &sigma);
            if squashed {
                lp = lp - tanh_log_jacobian(&x);
            }
            log_probs.push(lp);
            let e = ((sigma.pow_tensor_scalar(2) * (2.0 * std::f64::consts::PI * std::f64::consts::E)) + 1e-7).log() * 0.5;
            entropies.push(e.mean_dim(1, false, Kind::Float));
            continuous = if squashed { x.tanh() } else { x };
        }
        let mut discrete = vec![];
        for (b, p) in self.masked_probabilities(&h, masks).into_iter().enumerate() {
            let choice = match given {
                Some((_, d)) => d.narrow(1, b as i64, 1),
                None if deterministic => p.argmax(1, true),
                // Probabilities that are not finite (the network diverged) cannot be sampled:
                // any index serves, since the trainer refuses non-finite outputs (`act`).
                None => p.f_multinomial(1, true).unwrap_or_else(|_| p.argmax(1, true)),
            };
            log_probs.push((p.gather(1, &choice, false) + 1e-7).log());
            entropies.push(-(&p * (&p + 1e-7).log()).sum_dim_intlist(1, false, Kind::Float));
            discrete.push(choice);
        }
        let discrete = if discrete.is_empty() { Tensor::zeros([n, 0], (Kind::Int64, h.device())) } else { concatenate(discrete) };
        let entropy = entropies.into_iter().reduce(|a, b| a + b).unwrap_or_else(|| Tensor::zeros([n], (Kind::Float, h.device())));
        ActorOutput { continuous, discrete, log_probs: concatenate(log_probs), entropy, memories: memories_out }
    }

    /// SAC's fresh actions for its update (sac.md §3.2 step 3): reparameterised squashed
    /// continuous samples with their joint log-probability, and every branch's whole
    /// distribution (SAC's discrete losses take expectations, not samples).
    pub fn sample_squashed(&self, observations: &[Tensor], memories: Option<&Tensor>, masks: Option<&Tensor>) -> SquashedSample {
        let (h, memories) = self.body.forward(observations, None, memories);
        let n = h.size()[0];
        let (continuous, continuous_log_prob) = match &self.gaussian {
            Some(gaussian) => {
                let mu = gaussian.mu(&h);
                let sigma = gaussian.log_sigma(&h, &mu).exp();
                let x = &mu + &sigma * mu.randn_like();
                let lp = gaussian_log_prob(&x, &mu, &sigma) - tanh_log_jacobian(&x);
                (x.tanh(), lp.sum_dim_intlist(1, false, Kind::Float))
            }
            None => (Tensor::zeros([n, 0], (Kind::Float, h.device())), Tensor::zeros([n], (Kind::Float, h.device()))),
        };
        let branch_probabilities: Vec<Tensor> = self.masked_probabilities(&h, masks).into_iter().map(|p| p + 1e-7).collect();
        let branch_log_probabilities = branch_probabilities.iter().map(Tensor::log).collect();
        SquashedSample { continuous, continuous_log_prob, branch_probabilities, branch_log_probabilities, memories }
    }

    /// What behavioral cloning compares with a demonstration's actions (with gradient): the
    /// continuous actions sampled (reparameterised) as the environment receives them (PPO:
    /// clip(μ + σε, −3, 3) / 3; SAC: tanh(μ + σε)), and each branch's log-probabilities
    /// log(p + 1e-7) over all its actions. A recurrent actor starts each sequence from
    /// `memories` (`[1, n_seq, m]`). `raw_samples`: PPO's samples as they are, unclipped (0.28's
    /// cloning, in `--compat-0-28` runs).
    pub fn imitation_outputs(&self, observations: &[Tensor], memories: Option<&Tensor>, raw_samples: bool) -> (Option<Tensor>, Vec<Tensor>) {
        let h = self.body.forward(observations, None, memories).0;
        let continuous = self.gaussian.as_ref().map(|gaussian| {
            let mu = gaussian.mu(&h);
            let sample = &mu + gaussian.log_sigma(&h, &mu).exp() * mu.randn_like();
            match gaussian {
                Gaussian::FreeSigma { .. } if raw_samples => sample,
                Gaussian::FreeSigma { .. } => sample.clamp(-model::ACTION_CLIP as f64, model::ACTION_CLIP as f64) / model::ACTION_CLIP as f64,
                Gaussian::Squashed { .. } => sample.tanh(),
            }
        });
        let log_probabilities = self.masked_probabilities(&h, None).into_iter().map(|p| (p + 1e-7).log()).collect();
        (continuous, log_probabilities)
    }

    /// Each branch's probabilities `[n, k]`: softmax of logits·a − 1e8·(1 − a) (a = 1 allowed).
    fn masked_probabilities(&self, h: &Tensor, masks: Option<&Tensor>) -> Vec<Tensor> {
        let mut start = 0;
        let mut probabilities = vec![];
        for (layer, k) in self.branches.iter().zip(&self.branch_sizes) {
            let logits = layer.forward(h);
            // Without a mask every a is 1 and the masked logits are the logits, exactly;
            // (a − 1)·1e8 added is −(1 − a)·1e8 subtracted, exactly.
            let masked = match masks {
                Some(m) => {
                    let allowed = m.narrow(1, start, *k);
                    &logits * &allowed + (&allowed - 1.0) * 1e8
                }
                None => logits,
            };
            probabilities.push(masked.softmax(1, Kind::Float));
            start += k;
        }
        probabilities
    }

    /// Each branch's masked probabilities for a batch of observations (a recurrent actor
    /// from `memories`, one sequence per row).
    pub fn branch_probabilities(&self, observations: &[Tensor], memories: Option<&Tensor>, masks: Option<&Tensor>) -> Vec<Tensor> {
        tch::no_grad(|| self.masked_probabilities(&self.body.forward(observations, None, memories).0, masks))
    }

    /// The continuous actions the exports compute on a batch (no gradient): the deterministic
    /// one and the one sampled with the standard-normal `noise` `[n, c]` (PPO:
    /// clip(·, -3, 3) / 3 of μ and μ + σ·noise; SAC: their tanh). None without continuous
    /// actions.
    pub fn continuous_with_noise(&self, observations: &[Tensor], memories: Option<&Tensor>, noise: &Tensor) -> Option<(Tensor, Tensor)> {
        let gaussian = self.gaussian.as_ref()?;
        tch::no_grad(|| {
            let h = self.body.forward(observations, None, memories).0;
            let mu = gaussian.mu(&h);
            let sample = &mu + gaussian.log_sigma(&h, &mu).exp() * noise;
            Some(match gaussian {
                Gaussian::FreeSigma { .. } => {
                    let clip = |t: &Tensor| t.clamp(-model::ACTION_CLIP as f64, model::ACTION_CLIP as f64) / model::ACTION_CLIP as f64;
                    (clip(&mu), clip(&sample))
                }
                Gaussian::Squashed { .. } => (mu.tanh(), sample.tanh()),
            })
        })
    }

    /// Whether continuous actions come out squashed (sent to the environment as they are).
    pub fn squashes(&self) -> bool {
        matches!(self.gaussian, Some(Gaussian::Squashed { .. }))
    }

    /// See `Body::update_normalizers`.
    pub fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        self.body.update_normalizers(observations)
    }
}

impl Critic {
    /// A critic with the extrinsic value head only: one value per row.
    pub fn new(root: &nn::Path, d: &PolicyDescription) -> Self {
        Self::for_signals(root, d, &["extrinsic"])
    }

    /// A critic with one value head per reward signal, in `signals` order (the heads' names).
    pub fn for_signals(root: &nn::Path, d: &PolicyDescription, signals: &[&str]) -> Self {
        Self::with_heads(root, d, signals, 0, 1)
    }

    /// A value network whose body also reads `action_inputs` action values, with one head of
    /// `outputs` outputs per reward signal (SAC's Q networks: the continuous action in, one
    /// value per discrete action out).
    pub fn with_heads(root: &nn::Path, d: &PolicyDescription, signals: &[&str], action_inputs: usize, outputs: usize) -> Self {
        let body = Body::new(&(root / "network_body"), d, action_inputs);
        Self { body, heads: signals.iter().map(|name| value_head(root, name, d.head_width(), outputs)).collect() }
    }

    /// The number of value heads.
    pub fn heads(&self) -> usize {
        self.heads.len()
    }

    /// V(s): `[n]` with one head, `[n, heads]` with several; and for a recurrent critic the
    /// memories after each sequence (it starts from `memories` `[1, n_seq, m]`; zeros when
    /// None, one sequence per row).
    pub fn forward(&self, observations: &[Tensor], memories: Option<&Tensor>) -> (Tensor, Option<Tensor>) {
        self.forward_with_action(observations, None, memories)
    }

    /// The values of rows whose body also reads `action` (`[n]` for one head of one output,
    /// else `[n, outputs]`, the heads side by side).
    pub fn forward_with_action(&self, observations: &[Tensor], action: Option<&Tensor>, memories: Option<&Tensor>) -> (Tensor, Option<Tensor>) {
        let (h, memories) = self.body.forward(observations, action, memories);
        let values = concatenate(self.heads.iter().map(|head| head.forward(&h)).collect());
        let values = if values.size()[1] == 1 { values.squeeze_dim(1) } else { values };
        (values, memories)
    }

    /// Takes the actor's observation normalisers.
    pub fn copy_normalizers_from(&mut self, actor: &Actor) {
        self.body.copy_normalizers_from(&actor.body);
    }

    /// See `Body::update_normalizers`.
    pub fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        self.body.update_normalizers(observations)
    }
}

/// One value head `root.value_heads.value_heads.<name>` reading `width` values:
/// Xavier-uniform (bound sqrt(6 / (fan_in + fan_out))), zero bias, as ML-Agents' value heads.
pub fn value_head(root: &nn::Path, name: &str, width: usize, outputs: usize) -> nn::Linear {
    let bound = (6.0 / (width as f64 + outputs as f64)).sqrt();
    let config = nn::LinearConfig { ws_init: nn::Init::Uniform { lo: -bound, up: bound }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(root / "value_heads" / "value_heads" / name, width as i64, outputs as i64, config)
}

/// A tensor's values as a float32 weight.
pub fn to_weight(t: &Tensor) -> WeightTensor {
    let t = t.to_kind(Kind::Float).contiguous();
    WeightTensor { shape: t.size().iter().map(|d| *d as usize).collect(), data: Vec::<f32>::try_from(t.flatten(0, -1)).unwrap_or_default() }
}

/// Every variable of a var store as named tensors.
pub fn variables(vs: &nn::VarStore) -> Weights {
    Weights(vs.variables().iter().map(|(name, t)| (name.clone(), to_weight(t))).collect())
}

/// Copies tensors into the var store's variables of the same name and shape; returns the
/// names that were missing or had another shape (they keep their values).
pub fn load_variables(vs: &nn::VarStore, tensors: &Weights) -> Vec<String> {
    let mut skipped = vec![];
    for (name, mut var) in vs.variables() {
        match tensors.0.get(&name) {
            Some(w) if w.shape.iter().map(|d| *d as i64).collect::<Vec<_>>() == var.size() => {
                tch::no_grad(|| var.copy_(&Tensor::from_slice(&w.data).reshape(var.size())));
            }
            _ => skipped.push(name),
        }
    }
    skipped
}

/// The actor's variables as exportable weights (the critic's are not part of a policy).
pub fn actor_weights(vs: &nn::VarStore) -> Weights {
    let mut weights = variables(vs);
    weights.0.retain(|name, _| !name.starts_with(crate::checkpoint::CRITIC_PREFIX));
    weights
}

/// Updates whose largest product (rows × hidden units²) is at most this many multiply-adds run
/// libtorch on one thread: their tensors are too small for a second thread to pay for its
/// wake-ups, and its spinning takes the core the environment needs (SAC's memory scene: 19%
/// less update time on 2 cores; PPO's 3DBall: 29%).
const SINGLE_THREAD_WORK: usize = 1 << 24;

/// libtorch on one thread while it lives (its former thread count restored on drop).
pub struct OneThread(i32);

impl OneThread {
    /// One thread for an update of `rows`-row minibatches through `hidden`-unit layers when it
    /// is small (and `updating`).
    pub fn for_update(updating: bool, rows: usize, hidden: usize) -> Option<Self> {
        (updating && is_small(rows, hidden)).then(Self::start)
    }

    /// One thread for a whole run when [`run_updates_on_one_thread`].
    pub fn for_run(run: &RunOptions) -> Option<Self> {
        run_updates_on_one_thread(run).then(Self::start)
    }

    fn start() -> Self {
        let before = tch::get_num_threads();
        tch::set_num_threads(1);
        OneThread(before)
    }
}

/// Whether every behavior `run` may train (the configured behaviors and `default_settings`)
/// updates on one thread ([`OneThread::for_update`]) and none is `threaded`. Between those
/// updates libtorch sees only a few agents' rows (acting, value estimates): a second thread
/// would wake for each parallel region and then spin, taking the core the environment needs
/// (recurrent PPO: libgomp was 31% of the samples).
fn run_updates_on_one_thread(run: &RunOptions) -> bool {
    let mut settings = run.behaviors.values().chain(&run.default_settings).peekable();
    let updates_on_one_thread = |s: &TrainerSettings| !s.threaded && is_small(s.hyperparameters.batch_size, s.network_settings.hidden_units);
    settings.peek().is_some() && settings.all(updates_on_one_thread)
}

/// Whether `rows`-row minibatches through `hidden`-unit layers are at most [`SINGLE_THREAD_WORK`].
fn is_small(rows: usize, hidden: usize) -> bool {
    rows.saturating_mul(hidden).saturating_mul(hidden) <= SINGLE_THREAD_WORK
}

impl Drop for OneThread {
    fn drop(&mut self) {
        tch::set_num_threads(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(yaml: &str) -> RunOptions {
        RunOptions::from_yaml(yaml, "t.yaml").unwrap()
    }

    #[test]
    fn a_run_keeps_one_thread_only_when_every_behavior_updates_on_one() {
        let small = "behaviors:\n  A:\n    hyperparameters: {batch_size: 64}\n    network_settings: {hidden_units: 128}\n";
        assert!(run_updates_on_one_thread(&run(small)));
        // 0.28's defaults (batch 1024, 128 units) are exactly at the limit.
        assert!(run_updates_on_one_thread(&run("behaviors:\n  A:\n    trainer_type: ppo\n")));
        assert!(!run_updates_on_one_thread(&run(&format!("{small}    threaded: true\n"))));
        assert!(!run_updates_on_one_thread(&run(&format!("{small}  B:\n    hyperparameters: {{batch_size: 2048}}\n"))));
        assert!(!run_updates_on_one_thread(&run(&format!("{small}default_settings:\n  network_settings: {{hidden_units: 512}}\n"))));
        assert!(!run_updates_on_one_thread(&run("behaviors: {}\n")));
    }
}
