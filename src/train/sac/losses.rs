//! SAC's four losses on one minibatch (sac.md §3.2), from the networks' outputs: the twin Q
//! losses against the target value network, the value loss against the soft Q estimate, the
//! policy loss on Q1, and the entropy coefficients' loss. Each reward signal is a stream with
//! its own heads, rewards and discount: the Q and value losses are means over the streams, the
//! policy reads the mean of Q1 over them. Continuous, discrete and hybrid
//! actions; where 0.28 is wrong for hybrid actions (the continuous entropy term of the value
//! target has the wrong sign, and the policy loss counts the expected Q twice: sac.md §9 row 5)
//! this computes the formulas as they are meant.

use crate::train::networks::SquashedSample;
use tch::{Kind, Tensor};

/// What the networks computed on a minibatch, one tensor per stream (reward signal).
pub struct Evaluated<'a> {
    /// The policy's fresh actions and their probabilities.
    pub sample: &'a SquashedSample,
    /// V(s) `[n]`.
    pub values: Vec<Tensor>,
    /// Q1 and Q2 at the fresh continuous actions (Q2 without gradient): `[n]` for continuous
    /// actions alone, else `[n, Σ branches]`.
    pub q1_sampled: Vec<Tensor>,
    pub q2_sampled: Vec<Tensor>,
    /// Q1 and Q2 at the buffer's continuous actions, same shapes.
    pub q1_taken: Vec<Tensor>,
    pub q2_taken: Vec<Tensor>,
    /// The target network's V(s') `[n]` (no gradient).
    pub next_values: Vec<Tensor>,
}

/// One stream's rewards and discount.
pub struct StreamTargets {
    /// Rewards already multiplied by the signal's strength `[n]`.
    pub rewards: Tensor,
    pub gamma: f64,
    /// Whether the stream bootstraps past a true episode end (curiosity and RND).
    pub ignore_done: bool,
}

/// The minibatch's own values the losses read.
pub struct BatchTargets<'a> {
    /// Each stream's rewards, in the heads' order.
    pub streams: &'a [StreamTargets],
    /// 1 for a true episode end `[n]`.
    pub done: &'a Tensor,
    /// The buffer's discrete choices `[n, branches]` (int64).
    pub discrete: &'a Tensor,
    /// 1 for real rows, 0 for padding (recurrent networks; None: every row is real).
    /// Padding counts in no loss (0.28 leaves it in the Q and value losses: sac.md §9 row 4).
    pub valid: Option<&'a Tensor>,
}

/// The entropy coefficients as logarithms (trainable), and their target entropies.
pub struct EntropyCoefficients<'a> {
    /// log α of the continuous actions `[1]` (None without continuous actions).
    pub continuous: Option<&'a Tensor>,
    /// log α of each branch `[branches]` (None without discrete actions).
    pub discrete: Option<&'a Tensor>,
    /// −(number of continuous actions).
    pub continuous_target: f64,
    /// 0.2 · ln(size) of each branch.
    pub discrete_targets: &'a [f64],
    pub branch_sizes: &'a [i64],
}

/// The losses of one gradient step.
pub struct Losses {
    pub policy: Tensor,
    pub q1: Tensor,
    pub q2: Tensor,
    pub value: Tensor,
    pub entropy: Tensor,
}

/// Σ_k P_ik · Q_ik of each branch i, `[n]` each.
fn expected_per_branch(probabilities: &[Tensor], q: &Tensor, sizes: &[i64]) -> Vec<Tensor> {
    let mut start = 0;
    probabilities
        .iter()
        .zip(sizes)
        .map(|(p, k)| {
            let e = (p * q.narrow(1, start, *k)).sum_dim_intlist(1, false, Kind::Float);
            start += k;
            e
        })
        .collect()
}

/// The mean over branches of Q at the taken choice of each branch `[n]` (0.28's "condense").
fn taken_choices(q: &Tensor, choices: &Tensor, sizes: &[i64]) -> Tensor {
    let mut start = 0;
    let per_branch: Vec<Tensor> = sizes
        .iter()
        .enumerate()
        .map(|(b, k)| {
            let q_branch = q.narrow(1, start, *k).gather(1, &choices.narrow(1, b as i64, 1), false);
            start += k;
            q_branch
        })
        .collect();
    Tensor::cat(&per_branch, 1).mean_dim(1, false, Kind::Float)
}

/// The mean of `t` `[n]` over real rows (all rows without `valid`).
fn masked_mean(t: &Tensor, valid: Option<&Tensor>) -> Tensor {
    match valid {
        Some(valid) => (t * valid).sum(Kind::Float) / valid.sum(Kind::Float).clamp_min(1.0),
        None => t.mean(Kind::Float),
    }
}

/// The mean of tensors of one shape (branches, or streams).
fn mean_of(terms: Vec<Tensor>) -> Tensor {
    let count = terms.len() as f64;
    terms.into_iter().reduce(|a, b| a + b).expect("at least one term") / count
}

/// The five losses of one gradient step (sac.md §3.2, with §9 row 5 fixed).
pub fn losses(e: &Evaluated, batch: &BatchTargets, alphas: &EntropyCoefficients) -> Losses {
    let sizes = alphas.branch_sizes;
    let discrete = !sizes.is_empty();
    let s = e.sample;
    let mean = |t: &Tensor| masked_mean(t, batch.valid);
    let alpha_c = alphas.continuous.map(|l| l.exp());
    let alpha_d = alphas.discrete.map(|l| l.exp());
    // Q: one-step TD targets on the target value network, per stream.
    let taken = |q: &Tensor| if discrete { taken_choices(q, batch.discrete, sizes) } else { q.shallow_clone() };
    let (mut q1_losses, mut q2_losses) = (vec![], vec![]);
    for (k, stream) in batch.streams.iter().enumerate() {
        let not_done = if stream.ignore_done { batch.done.ones_like() } else { 1.0 - batch.done };
        let y = tch::no_grad(|| &stream.rewards + not_done * stream.gamma * &e.next_values[k]);
        q1_losses.push(mean(&(&y - taken(&e.q1_taken[k])).pow_tensor_scalar(2)) * 0.5);
        q2_losses.push(mean(&(&y - taken(&e.q2_taken[k])).pow_tensor_scalar(2)) * 0.5);
    }
    let (q1, q2) = (mean_of(q1_losses), mean_of(q2_losses));
    // Each branch's α·Σ_k P·log P (the discrete entropy terms), per row.
    let branch_entropy_terms = |alpha: &Tensor| -> Vec<Tensor> {
        s.branch_probabilities.iter().zip(&s.branch_log_probabilities).enumerate().map(|(i, (p, l))| alpha.get(i as i64) * (p * l).sum_dim_intlist(1, false, Kind::Float)).collect()
    };
    // V: towards the soft value min(Q1, Q2) − α·log π of the fresh actions, per stream.
    let value_target = |q1_sampled: &Tensor, q2_sampled: &Tensor| {
        tch::no_grad(|| {
            let continuous_term = alpha_c.as_ref().map(|a| a.detach() * &s.continuous_log_prob);
            if let Some(alpha_d) = &alpha_d {
                let e1 = mean_of(expected_per_branch(&s.branch_probabilities, q1_sampled, sizes));
                let e2 = mean_of(expected_per_branch(&s.branch_probabilities, q2_sampled, sizes));
                let target = e1.min_other(&e2) - mean_of(branch_entropy_terms(&alpha_d.detach()));
                match continuous_term {
                    Some(c) => target - c,
                    None => target,
                }
            } else {
                q1_sampled.min_other(q2_sampled) - continuous_term.expect("SAC has some action")
            }
        })
    };
    let value_losses = (0..batch.streams.len()).map(|k| mean(&(&e.values[k] - value_target(&e.q1_sampled[k], &e.q2_sampled[k])).pow_tensor_scalar(2)) * 0.5).collect();
    let value = mean_of(value_losses);
    // π: α·log π − Q1 of the fresh actions (the expectation over each branch's choices), Q1
    // averaged over the streams.
    let q1_sampled = mean_of(e.q1_sampled.iter().map(Tensor::shallow_clone).collect());
    let continuous_policy = alpha_c.as_ref().map(|a| a.detach() * &s.continuous_log_prob);
    let policy_rows = match &alpha_d {
        Some(alpha_d) => {
            let alpha_d = alpha_d.detach();
            let mut start = 0;
            let mut rows: Option<Tensor> = None;
            for (i, ((p, l), k)) in s.branch_probabilities.iter().zip(&s.branch_log_probabilities).zip(sizes).enumerate() {
                let q = q1_sampled.narrow(1, start, *k);
                let term = (p * (alpha_d.get(i as i64) * l - q)).sum_dim_intlist(1, false, Kind::Float);
                rows = Some(match rows {
                    Some(r) => r + term,
                    None => term,
                });
                start += k;
            }
            let rows = rows.expect("at least one branch");
            match continuous_policy {
                Some(c) => rows + c,
                None => rows,
            }
        }
        None => continuous_policy.expect("SAC has some action") - &q1_sampled,
    };
    let policy = mean(&policy_rows);
    // α: towards the target entropies (the bracket without gradient).
    let mut entropy_terms = vec![];
    if let Some(alpha_d) = &alpha_d {
        let brackets: Vec<Tensor> = tch::no_grad(|| {
            s.branch_probabilities.iter().zip(&s.branch_log_probabilities).zip(alphas.discrete_targets).map(|((p, l), target)| (p * l).sum_dim_intlist(1, false, Kind::Float) + *target).collect()
        });
        let per_row = mean_of(brackets.iter().enumerate().map(|(i, b)| alpha_d.get(i as i64) * b).collect());
        entropy_terms.push(-mean(&per_row));
    }
    if let Some(alpha_c) = &alpha_c {
        let bracket = tch::no_grad(|| &s.continuous_log_prob + alphas.continuous_target);
        entropy_terms.push(-mean(&(alpha_c * bracket)));
    }
    let entropy = entropy_terms.into_iter().reduce(|a, b| a + b).expect("SAC has some action");
    Losses { policy, q1, q2, value, entropy }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(values: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(values).reshape(shape)
    }

    fn value(t: &Tensor) -> f64 {
        t.double_value(&[])
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }

    /// A hand-computed two-row batch with continuous actions alone.
    #[test]
    fn continuous_losses_by_hand() {
        let sample = SquashedSample {
            continuous: t(&[0.1, -0.2], &[2, 1]),
            continuous_log_prob: t(&[-1.0, 0.5], &[2]),
            branch_probabilities: vec![],
            branch_log_probabilities: vec![],
            memories: None,
        };
        let e = Evaluated {
            sample: &sample,
            values: vec![t(&[1.0, 2.0], &[2])],
            q1_sampled: vec![t(&[1.5, 1.0], &[2])],
            q2_sampled: vec![t(&[1.2, 1.4], &[2])],
            q1_taken: vec![t(&[0.5, 0.0], &[2])],
            q2_taken: vec![t(&[0.7, 0.2], &[2])],
            next_values: vec![t(&[3.0, 4.0], &[2])],
        };
        let (rewards, done, discrete) = (t(&[1.0, -1.0], &[2]), t(&[0.0, 1.0], &[2]), Tensor::zeros([2, 0], (Kind::Int64, tch::Device::Cpu)));
        let batch = BatchTargets { streams: &[StreamTargets { rewards: rewards.shallow_clone(), gamma: 0.5, ignore_done: false }], done: &done, discrete: &discrete, valid: None };
        let log_alpha = Tensor::from_slice(&[0.2f32.ln()]);
        let alphas = EntropyCoefficients { continuous: Some(&log_alpha), discrete: None, continuous_target: -1.0, discrete_targets: &[], branch_sizes: &[] };
        let l = losses(&e, &batch, &alphas);
        // y = r + (1 - done)·γ·V̄(s') = [2.5, -1].
        close(value(&l.q1), 0.5 * ((2.5f64 - 0.5).powi(2) + (-1.0f64).powi(2)) / 2.0);
        close(value(&l.q2), 0.5 * ((2.5f64 - 0.7).powi(2) + (-1.2f64).powi(2)) / 2.0);
        // V target = min(q1p, q2p) − α·ℓ = [1.2 + 0.2, 1.0 − 0.1].
        close(value(&l.value), 0.5 * ((1.0f64 - 1.4).powi(2) + (2.0f64 - 0.9).powi(2)) / 2.0);
        // π = mean(α·ℓ − q1p) = mean(-0.2 - 1.5, 0.1 - 1.0).
        close(value(&l.policy), (-1.7 - 0.9) / 2.0);
        // α loss = −mean(α·(ℓ + H̄)) = −0.2·mean(-2, -0.5).
        close(value(&l.entropy), 0.2 * 1.25);
    }

    /// A hand-computed one-row batch with two discrete branches, then with a continuous action
    /// as well (hybrid, with 0.28's sign and double count fixed).
    #[test]
    fn discrete_and_hybrid_losses_by_hand() {
        let p = [vec![0.25f32, 0.75], vec![0.5, 0.25, 0.25]];
        let sample = |continuous: bool| SquashedSample {
            continuous: if continuous { t(&[0.3], &[1, 1]) } else { Tensor::zeros([1, 0], (Kind::Float, tch::Device::Cpu)) },
            continuous_log_prob: t(&[if continuous { -0.5 } else { 0.0 }], &[1]),
            branch_probabilities: p.iter().map(|b| t(b, &[1, b.len() as i64])).collect(),
            branch_log_probabilities: p.iter().map(|b| t(&b.iter().map(|v| v.ln()).collect::<Vec<_>>(), &[1, b.len() as i64])).collect(),
            memories: None,
        };
        let q1 = [1.0f32, 2.0, 0.0, 3.0, -1.0];
        let q2 = [2.0f32, 1.0, 1.0, 1.0, 1.0];
        let (rewards, done, choices) = (t(&[0.5], &[1]), t(&[0.0], &[1]), Tensor::from_slice(&[1i64, 2]).reshape([1, 2]));
        let batch = BatchTargets { streams: &[StreamTargets { rewards: rewards.shallow_clone(), gamma: 0.9, ignore_done: false }], done: &done, discrete: &choices, valid: None };
        let log_alpha_d = Tensor::from_slice(&[0.1f32.ln(), 0.3f32.ln()]);
        let log_alpha_c = Tensor::from_slice(&[0.5f32.ln()]);
        let targets = [0.2 * 2f64.ln(), 0.2 * 3f64.ln()];
        let plogp: Vec<f64> = p.iter().map(|b| b.iter().map(|v| (*v as f64) * (*v as f64).ln()).sum()).collect();
        let expect = |q: &[f32]| -> [f64; 2] {
            [0.25 * q[0] as f64 + 0.75 * q[1] as f64, 0.5 * q[2] as f64 + 0.25 * q[3] as f64 + 0.25 * q[4] as f64]
        };
        let (e1, e2) = (expect(&q1), expect(&q2));
        for hybrid in [false, true] {
            let s = sample(hybrid);
            let e = Evaluated {
                sample: &s,
                values: vec![t(&[0.7], &[1])],
                q1_sampled: vec![t(&q1, &[1, 5])],
                q2_sampled: vec![t(&q2, &[1, 5])],
                q1_taken: vec![t(&q1, &[1, 5])],
                q2_taken: vec![t(&q2, &[1, 5])],
                next_values: vec![t(&[2.0], &[1])],
            };
            let alphas = EntropyCoefficients { continuous: hybrid.then_some(&log_alpha_c), discrete: Some(&log_alpha_d), continuous_target: -1.0, discrete_targets: &targets, branch_sizes: &[2, 3] };
            let l = losses(&e, &batch, &alphas);
            let y = 0.5 + 0.9 * 2.0;
            // Taken choices: branch 0 action 1, branch 1 action 2, averaged over branches.
            close(value(&l.q1), 0.5 * (y - (2.0 + -1.0) / 2.0f64).powi(2));
            close(value(&l.q2), 0.5 * (y - (1.0 + 1.0) / 2.0f64).powi(2));
            let continuous_entropy = if hybrid { 0.5 * -0.5 } else { 0.0 };
            let soft_q = ((e1[0] + e1[1]) / 2.0).min((e2[0] + e2[1]) / 2.0);
            let target = soft_q - (0.1 * plogp[0] + 0.3 * plogp[1]) / 2.0 - continuous_entropy;
            close(value(&l.value), 0.5 * (0.7 - target).powi(2));
            let policy = (0.1 * plogp[0] - e1[0]) + (0.3 * plogp[1] - e1[1]) + continuous_entropy;
            close(value(&l.policy), policy);
            let mut entropy = -((0.1 * (plogp[0] + targets[0]) + 0.3 * (plogp[1] + targets[1])) / 2.0);
            if hybrid {
                entropy -= 0.5 * (-0.5 + -1.0);
            }
            close(value(&l.entropy), entropy);
        }
    }

    /// Padding rows count in no loss: a batch with a padding row gives the losses of the
    /// real rows alone.
    #[test]
    fn padding_rows_count_for_nothing() {
        let sample = |rows: &[f32]| SquashedSample {
            continuous: t(&vec![0.1; rows.len()], &[rows.len() as i64, 1]),
            continuous_log_prob: t(rows, &[rows.len() as i64]),
            branch_probabilities: vec![],
            branch_log_probabilities: vec![],
            memories: None,
        };
        fn evaluated(s: &SquashedSample, n: usize, extra: f32) -> Evaluated<'_> {
            Evaluated {
            sample: s,
            values: vec![t(&[1.0, extra][..n], &[n as i64])],
            q1_sampled: vec![t(&[1.5, extra][..n], &[n as i64])],
            q2_sampled: vec![t(&[1.2, extra][..n], &[n as i64])],
            q1_taken: vec![t(&[0.5, extra][..n], &[n as i64])],
            q2_taken: vec![t(&[0.7, extra][..n], &[n as i64])],
            next_values: vec![t(&[3.0, extra][..n], &[n as i64])],
            }
        }
        let log_alpha = Tensor::from_slice(&[0.2f32.ln()]);
        let alphas = EntropyCoefficients { continuous: Some(&log_alpha), discrete: None, continuous_target: -1.0, discrete_targets: &[], branch_sizes: &[] };
        let no_choices = |n: i64| Tensor::zeros([n, 0], (Kind::Int64, tch::Device::Cpu));
        let (one, one_done, one_choices) = (t(&[1.0], &[1]), t(&[0.0], &[1]), no_choices(1));
        let (s1, s2) = (sample(&[-1.0]), sample(&[-1.0, 40.0]));
        let alone = losses(&evaluated(&s1, 1, 0.0), &BatchTargets { streams: &[StreamTargets { rewards: one.shallow_clone(), gamma: 0.5, ignore_done: false }], done: &one_done, discrete: &one_choices, valid: None }, &alphas);
        let (two, two_done, two_choices, valid) = (t(&[1.0, 9.0], &[2]), t(&[0.0, 0.0], &[2]), no_choices(2), t(&[1.0, 0.0], &[2]));
        let padded = losses(&evaluated(&s2, 2, 30.0), &BatchTargets { streams: &[StreamTargets { rewards: two.shallow_clone(), gamma: 0.5, ignore_done: false }], done: &two_done, discrete: &two_choices, valid: Some(&valid) }, &alphas);
        for (a, b) in [(&alone.q1, &padded.q1), (&alone.q2, &padded.q2), (&alone.value, &padded.value), (&alone.policy, &padded.policy), (&alone.entropy, &padded.entropy)] {
            close(value(b), value(a));
        }
    }

    /// Two streams (an extrinsic one, and one that bootstraps past the episode's end): the Q
    /// and value losses are the means of the streams' own, and the policy reads Q1's mean over
    /// the streams.
    #[test]
    fn streams_are_averaged() {
        let sample = SquashedSample {
            continuous: t(&[0.1], &[1, 1]),
            continuous_log_prob: t(&[-1.0], &[1]),
            branch_probabilities: vec![],
            branch_log_probabilities: vec![],
            memories: None,
        };
        let e = Evaluated {
            sample: &sample,
            values: vec![t(&[1.0], &[1]), t(&[0.5], &[1])],
            q1_sampled: vec![t(&[1.5], &[1]), t(&[0.5], &[1])],
            q2_sampled: vec![t(&[1.2], &[1]), t(&[0.9], &[1])],
            q1_taken: vec![t(&[0.5], &[1]), t(&[0.25], &[1])],
            q2_taken: vec![t(&[0.7], &[1]), t(&[0.0], &[1])],
            next_values: vec![t(&[3.0], &[1]), t(&[2.0], &[1])],
        };
        let done = t(&[1.0], &[1]);
        let discrete = Tensor::zeros([1, 0], (Kind::Int64, tch::Device::Cpu));
        let streams = [
            StreamTargets { rewards: t(&[1.0], &[1]), gamma: 0.5, ignore_done: false },
            StreamTargets { rewards: t(&[0.2], &[1]), gamma: 0.5, ignore_done: true },
        ];
        let batch = BatchTargets { streams: &streams, done: &done, discrete: &discrete, valid: None };
        let log_alpha = Tensor::from_slice(&[0.2f32.ln()]);
        let alphas = EntropyCoefficients { continuous: Some(&log_alpha), discrete: None, continuous_target: -1.0, discrete_targets: &[], branch_sizes: &[] };
        let l = losses(&e, &batch, &alphas);
        // y: 1 (done, no bootstrap) and 0.2 + 0.5 * 2 = 1.2 (bootstraps anyway).
        close(value(&l.q1), (0.5 * (1.0f64 - 0.5).powi(2) + 0.5 * (1.2f64 - 0.25).powi(2)) / 2.0);
        close(value(&l.q2), (0.5 * (1.0f64 - 0.7).powi(2) + 0.5 * 1.2f64.powi(2)) / 2.0);
        // V targets: min(Q1, Q2) + 0.2: 1.4 and 0.7.
        close(value(&l.value), (0.5 * (1.0f64 - 1.4).powi(2) + 0.5 * (0.5f64 - 0.7).powi(2)) / 2.0);
        // π: α·ℓ − mean(Q1) = -0.2 - 1.0.
        close(value(&l.policy), -1.2);
    }
}
