//! The actor's sampling step in plain Rust, for the small vector-observation actors of most
//! of ML-Agents' configurations (an MLP, an optional LSTM, PPO's Gaussian head with a free
//! log σ, masked categorical heads). One decision of such an actor through libtorch is some
//! thirty operations of a few µs of dispatch each, a hundred times its arithmetic, on the
//! path every environment step waits on. This computes what [`Actor::forward`] computes when
//! it samples (the same formulas, in float32), reading the network's weights in place, so it
//! is never behind the update. The random numbers are libtorch's, drawn as torch's own
//! sampling draws them (`randn_like` for the Gaussian, `multinomial`'s exponential draws for
//! each branch, one operation each): a run takes the same actions whichever path acts.

use super::lstm::{dot, Lstm};
use super::values::{contiguous_slice, values};
use super::{Actor, Gaussian, Normalizer, Processor};
use tch::{nn, Kind, Tensor};

/// Actors with up to this many weights act in Rust (a 128-unit, two-layer MLP has ~20 000),
/// for up to this many multiply-adds a step (beyond, libtorch's kernels and threads win).
const RUST_ACTING_LIMIT: usize = 1 << 16;
const RUST_ACTING_WORK: usize = 1 << 21;

/// What one sampling step gives, row after row (as [`super::ActorOutput`] holds it).
pub struct RustSample {
    /// Raw continuous samples `[n, c]`.
    pub continuous: Vec<f32>,
    /// Choices `[n, branches]`.
    pub discrete: Vec<i64>,
    /// Log-probabilities `[n, c + branches]`.
    pub log_probs: Vec<f32>,
    /// Entropy of each row.
    pub entropy: Vec<f32>,
    /// The memories after the step `[n, m]` (empty without an LSTM).
    pub memories: Vec<f32>,
}

/// A tensor's values borrowed in place (the network's weights, alive as long as the actor).
fn weights(t: &Tensor) -> Option<&[f32]> {
    // SAFETY: the weights live as long as `t`'s borrow, and nothing writes them while the
    // actor acts (updates run on this thread, or on a copy: see `session::overlap`).
    contiguous_slice::<f32>(t).map(|s| unsafe { &*s })
}

/// `rows` rows of `x` (`[rows, in]`) through a linear layer: `[rows, out]`; None when `x`
/// has another width.
fn linear(layer: &nn::Linear, x: &[f32], rows: usize) -> Option<Vec<f32>> {
    let (w, size) = (weights(&layer.ws)?, layer.ws.size());
    let (out, width) = (size[0] as usize, size[1] as usize);
    let bias = match &layer.bs {
        Some(b) => Some(weights(b)?),
        None => None,
    };
    if x.len() != rows * width {
        return None;
    }
    let mut y = Vec::with_capacity(rows * out);
    for row in x.chunks_exact(width.max(1)).take(rows) {
        for o in 0..out {
            y.push(bias.map_or(0.0, |b| b[o]) + dot(&w[o * width..(o + 1) * width], row));
        }
    }
    Some(y)
}

impl Normalizer {
    /// [`Normalizer::forward`] on `rows` rows.
    fn forward_rows(&self, x: &[f32], rows: usize) -> Option<Vec<f32>> {
        let (mean, variance, steps) = (weights(&self.mean)?, weights(&self.variance)?, *weights(&self.steps)?.first()?);
        let size = mean.len();
        if x.len() != rows * size {
            return None;
        }
        Some((0..rows * size).map(|k| ((x[k] - mean[k % size]) / (variance[k % size] / steps).sqrt()).clamp(-5.0, 5.0)).collect())
    }
}

impl Actor {
    /// Whether [`Self::sample_in_rust`] can act for this actor: vector observations only, no
    /// goal conditioning, PPO's continuous head (if any), and a small network.
    pub fn acts_in_rust(&self, rows: usize) -> bool {
        let body = &self.body;
        let vectors_only = body.encoder.attention.is_none() && body.encoder.processors.iter().all(|p| matches!(p, Processor::Vector(_)));
        let mu = match &self.gaussian {
            Some(Gaussian::FreeSigma { mu, .. }) => Some(mu),
            Some(Gaussian::Squashed { .. }) => return false,
            None => None,
        };
        let size: usize = body.layers.iter().chain(&self.branches).chain(mu).map(|l| l.ws.numel()).sum::<usize>() + body.lstm.as_ref().map_or(0, Lstm::weight_count);
        vectors_only && body.hyper.is_none() && size <= RUST_ACTING_LIMIT && size * rows <= RUST_ACTING_WORK
    }

    /// Samples actions for `n` rows as [`Self::forward`] does without `given`: `observations`
    /// one `[n, size]` buffer per observation, `masks` `[n, sum of branches]` (1 = allowed),
    /// `memories` `[n, m]` for a recurrent actor (zeros when None). None when a weight is
    /// not a contiguous float tensor (the caller then acts through libtorch).
    pub fn sample_in_rust(&self, observations: &[&[f32]], masks: Option<&[f32]>, memories: Option<&[f32]>, n: usize) -> Option<RustSample> {
        let body = &self.body;
        let mut encodings = Vec::with_capacity(observations.len());
        for (x, processor) in observations.iter().zip(&body.encoder.processors) {
            encodings.push(match processor {
                Processor::Vector(Some(normalizer)) => normalizer.forward_rows(x, n)?,
                Processor::Vector(None) => x.to_vec(),
                _ => return None,
            });
        }
        let widths: Vec<usize> = encodings.iter().map(|e| e.len() / n.max(1)).collect();
        let mut h: Vec<f32> = (0..n).flat_map(|r| encodings.iter().zip(&widths).flat_map(move |(e, w)| e[r * w..(r + 1) * w].iter().copied())).collect();
        for layer in &body.layers {
            h = linear(layer, &h, n)?;
            h.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp());
        }
        let mut memories_after = vec![];
        if let Some(lstm) = &body.lstm {
            (h, memories_after) = lstm.step_in_rust(&h, memories, n)?;
        }
        self.sample_heads(&h, masks, n).map(|mut sample| {
            sample.memories = memories_after;
            sample
        })
    }

    /// The heads' samples, log-probabilities and entropies from the body's output `h`.
    fn sample_heads(&self, h: &[f32], masks: Option<&[f32]>, n: usize) -> Option<RustSample> {
        let c = self.gaussian.as_ref().map_or(0, |g| match g {
            Gaussian::FreeSigma { mu, .. } | Gaussian::Squashed { mu, .. } => mu.ws.size()[0] as usize,
        });
        let branches = self.branch_sizes.len();
        let k = c + branches;
        let mut sample = RustSample { continuous: vec![0.0; n * c], discrete: vec![0; n * branches], log_probs: vec![0.0; n * k], entropy: vec![0.0; n], memories: vec![] };
        if let Some(Gaussian::FreeSigma { mu: mu_layer, log_sigma }) = &self.gaussian {
            let mu = linear(mu_layer, h, n)?;
            let log_sigma = weights(log_sigma)?;
            // torch's `randn_like(mu)`: the same draws from the generator.
            let noise = values::<f32>(&Tensor::randn([n as i64, c as i64], (Kind::Float, tch::Device::Cpu)));
            let half_log_two_pi = (0.5 * (2.0 * std::f64::consts::PI).ln()) as f32;
            let two_pi_e = (2.0 * std::f64::consts::PI * std::f64::consts::E) as f32;
            for r in 0..n {
                let mut entropy = 0.0;
                for d in 0..c {
                    let (m, sigma) = (mu[r * c + d], log_sigma[d].exp());
                    let x = m + sigma * noise[r * c + d];
                    sample.continuous[r * c + d] = x;
                    let square = (x - m) * (x - m);
                    sample.log_probs[r * k + d] = -square / (sigma * sigma * 2.0 + 1e-7) - (sigma + 1e-7).ln() - half_log_two_pi;
                    entropy += ((sigma * sigma * two_pi_e) + 1e-7).ln() * 0.5;
                }
                sample.entropy[r] = entropy / c as f32;
            }
        }
        let total: usize = self.branch_sizes.iter().map(|s| *s as usize).sum();
        let mut start = 0;
        for (b, layer) in self.branches.iter().enumerate() {
            let size = self.branch_sizes[b] as usize;
            let logits = linear(layer, h, n)?;
            let exponential = values::<f32>(&Tensor::empty([n as i64, size as i64], (Kind::Float, tch::Device::Cpu)).exponential_(1.0));
            for r in 0..n {
                let mut p: Vec<f32> = (0..size)
                    .map(|a| {
                        let allowed = masks.map_or(1.0, |m| m[r * total + start + a]);
                        logits[r * size + a] * allowed + (allowed - 1.0) * 1e8
                    })
                    .collect();
                let largest = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                p.iter_mut().for_each(|v| *v = (*v - largest).exp());
                let sum: f32 = p.iter().sum();
                p.iter_mut().for_each(|v| *v /= sum);
                // torch's `multinomial(p, 1)`: argmax of p / q with q exponential draws (the
                // first on a tie).
                let q = &exponential[r * size..(r + 1) * size];
                let choice = (0..size).fold(0, |best, a| if p[a] / q[a] > p[best] / q[best] { a } else { best });
                sample.discrete[r * branches + b] = choice as i64;
                sample.log_probs[r * k + c + b] = (p[choice] + 1e-7).ln();
                sample.entropy[r] -= p.iter().map(|v| v * (v + 1e-7).ln()).sum::<f32>();
            }
            start += size;
        }
        if sample.continuous.iter().chain(&sample.log_probs).any(|v| !v.is_finite()) {
            // A diverged network: the caller acts through libtorch, which reports it.
            return None;
        }
        Some(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ContinuousHead, EncoderType, PolicyDescription, POLICY_FORMAT_VERSION};
    use crate::spec::ActionSpec;
    use tch::Device;

    fn description(action_spec: ActionSpec, memory_size: usize) -> PolicyDescription {
        PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![3], vec![2]],
            action_spec,
            hidden_units: 8,
            num_layers: 2,
            normalize: true,
            memory_size,
            vis_encode_type: EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: ContinuousHead::Clipped,
        }
    }

    /// The Rust step's samples scored by libtorch's forward (`given`): the same
    /// log-probabilities, entropies and memories, for a recurrent actor with a normaliser
    /// that has seen data, both kinds of actions and a mask.
    #[test]
    fn the_rust_step_scores_its_samples_as_the_torch_actor_does() {
        tch::manual_seed(5);
        let d = description(ActionSpec { continuous_size: 2, discrete_branches: vec![3, 2] }, 6);
        let vs = nn::VarStore::new(Device::Cpu);
        let mut actor = Actor::new(&vs.root(), &d);
        let n = 4;
        let first: Vec<f32> = (0..n * 3).map(|k| (k as f32 * 0.37).sin() * 4.0).collect();
        let second: Vec<f32> = (0..n * 2).map(|k| (k as f32 * 0.11).cos()).collect();
        let tensors = [Tensor::from_slice(&first).reshape([n as i64, 3]), Tensor::from_slice(&second).reshape([n as i64, 2])];
        actor.update_normalizers(&tensors).unwrap();
        let masks: Vec<f32> = (0..n).flat_map(|r| [1.0, if r % 2 == 0 { 0.0 } else { 1.0 }, 1.0, 1.0, 1.0]).collect();
        let memories: Vec<f32> = (0..n * 6).map(|k| (k as f32 * 0.3).sin() * 0.5).collect();
        assert!(actor.acts_in_rust(n));
        let sample = actor.sample_in_rust(&[&first, &second], Some(&masks), Some(&memories), n).unwrap();
        assert!((0..n).step_by(2).all(|r| sample.discrete[r * 2] != 1), "a masked action was chosen: {:?}", sample.discrete);
        let scored = tch::no_grad(|| {
            let given = (Tensor::from_slice(&sample.continuous).reshape([n as i64, 2]), Tensor::from_slice(&sample.discrete).reshape([n as i64, 2]));
            let m = Tensor::from_slice(&memories).reshape([1, n as i64, 6]);
            actor.forward(&tensors, Some(&m), Some(&Tensor::from_slice(&masks).reshape([n as i64, 5])), Some((&given.0, &given.1)), false)
        });
        let close = |what: &str, torch: Vec<f32>, rust: &[f32]| {
            assert_eq!(torch.len(), rust.len(), "{what}");
            for (a, b) in torch.iter().zip(rust) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{what}: torch {a} vs rust {b}");
            }
        };
        close("log-probabilities", values(&scored.log_probs), &sample.log_probs);
        close("entropy", values(&scored.entropy), &sample.entropy);
        close("memories", values(&scored.memories.unwrap()), &sample.memories);
    }

    /// From the same generator state, the Rust step takes the actions torch's forward takes
    /// (the same draws, the same way), continuous and discrete, over many rows.
    #[test]
    fn the_rust_step_takes_the_torch_actors_actions() {
        let d = description(ActionSpec { continuous_size: 2, discrete_branches: vec![3, 4] }, 6);
        let vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&vs.root(), &d);
        let n = 64;
        let first: Vec<f32> = (0..n * 3).map(|k| (k as f32 * 0.37).sin() * 4.0).collect();
        let second: Vec<f32> = (0..n * 2).map(|k| (k as f32 * 0.11).cos()).collect();
        let memories: Vec<f32> = (0..n * 6).map(|k| (k as f32 * 0.3).sin() * 0.5).collect();
        // The tests share libtorch's generator: another test's draws in between would show as
        // a mismatch, so the comparison may be tried again.
        let matches = (0..5).any(|_| {
            tch::manual_seed(17);
            let rust = actor.sample_in_rust(&[&first, &second], None, Some(&memories), n).unwrap();
            tch::manual_seed(17);
            let torch = tch::no_grad(|| {
                let tensors = [Tensor::from_slice(&first).reshape([n as i64, 3]), Tensor::from_slice(&second).reshape([n as i64, 2])];
                actor.forward(&tensors, Some(&Tensor::from_slice(&memories).reshape([1, n as i64, 6])), None, None, false)
            });
            let continuous_close = values::<f32>(&torch.continuous).iter().zip(&rust.continuous).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + a.abs()));
            continuous_close && values::<i64>(&torch.discrete) == rust.discrete
        });
        assert!(matches);
    }

    /// Over many draws, each action comes up as often as its probability says, and the
    /// continuous samples have the head's mean and σ.
    #[test]
    fn the_rust_step_samples_from_the_policys_distribution() {
        tch::manual_seed(9);
        let d = description(ActionSpec { continuous_size: 1, discrete_branches: vec![3] }, 0);
        let vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&vs.root(), &d);
        tch::no_grad(|| {
            if let Some(Gaussian::FreeSigma { log_sigma, .. }) = &actor.gaussian {
                let _ = log_sigma.shallow_clone().fill_(0.5f64.ln());
            }
        });
        let n = 20000;
        let (first, second) = (vec![0.3f32; n * 3], vec![-0.2f32; n * 2]);
        let sample = actor.sample_in_rust(&[&first, &second], None, None, n).unwrap();
        let probabilities: Vec<f32> = {
            let tensors = [Tensor::from_slice(&first[..3]).reshape([1, 3]), Tensor::from_slice(&second[..2]).reshape([1, 2])];
            values(&actor.branch_probabilities(&tensors, None, None)[0])
        };
        for (a, p) in probabilities.iter().enumerate() {
            let share = sample.discrete.iter().filter(|c| **c == a as i64).count() as f32 / n as f32;
            assert!((share - p).abs() < 0.015, "action {a}: drawn {share}, probability {p}");
        }
        let mean = sample.continuous.iter().sum::<f32>() / n as f32;
        let sd = (sample.continuous.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n as f32).sqrt();
        assert!((sd - 0.5).abs() < 0.02, "σ {sd}");
    }
}
