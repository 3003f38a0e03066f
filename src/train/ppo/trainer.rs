//! PPO as ML-Agents 0.28 trains it (training.md §6-§9): per trajectory, normalisers, value
//! estimates and GAE into the update buffer; once the buffer is full, the clipped update with
//! ML-Agents' per-dimension ratio over shuffled minibatches (whole sequences for a recurrent
//! network). The session does the rest (`train::session`).
//!
//! `trainer_type: poca` trains here too: POCA's settings and update loop are PPO's, with the
//! centralized critic in place of PPO's own (what differs is [`crate::train::poca`]'s).

use crate::checkpoint::AdamState;
use crate::comm::side_channel::StatsAggregation;
use crate::policy::{PolicyDescription, Weights};
use crate::train::demonstrations::Demonstrations;
use crate::train::bc::BehavioralCloning;
use crate::train::algorithm::{trajectory_observations, update_normalizers, Algorithm, AlgorithmState, TrainerContext};
use crate::train::config::{RewardSignalKind, TrainerSettings};
use crate::train::error::TrainError;
use crate::train::gae::{gae, standardize};
use crate::train::networks::adam::Adam;
use crate::train::networks::memory::{critic_by_sequence, AgentMemories};
use crate::train::networks::multi_agent::{GroupObservations, MultiAgentCritic};
use crate::train::networks::{actor_weights, backward, load_variables, variables, Actor, Critic, OneThread};
use crate::train::poca;
use crate::train::rewards::{RewardSignals, SignalBatch};
use crate::train::schedule::DecayedValue;
use crate::train::trajectory::{AgentKey, EndedEpisodes, GroupmateStatus, Trajectory};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::{nn, Device, Kind, Tensor};

/// One experience as the update needs it.
struct Row {
    obs: Vec<Vec<f32>>,
    continuous: Vec<f32>,
    discrete: Vec<i64>,
    log_probs: Vec<f32>,
    /// 1 = allowed.
    mask: Vec<f32>,
    /// The mean of the signals' advantages.
    advantage: f32,
    /// Each signal's return (the targets of its value head).
    returns: Vec<f32>,
    /// The observations after the step (kept only for reward signals with networks).
    next_obs: Vec<Vec<f32>>,
    /// The actor memory consumed when acting (recurrent networks; empty otherwise).
    memory: Vec<f32>,
    /// The critic memory the row's sequence starts from (recurrent networks; POCA: its value
    /// stream).
    critic_memory: Vec<f32>,
    /// POCA's baseline memory the row's sequence starts from (recurrent networks).
    baseline_memory: Vec<f32>,
    /// A real step (false: padding at the end of a trajectory's last sequence).
    valid: bool,
    /// The episode ended with this step (GAIL reads it).
    done: bool,
    /// The groupmates beside the step (POCA).
    mates: Vec<GroupmateStatus>,
    /// Each signal's baseline at the step (POCA; the "old" baselines of its clipped loss).
    baselines: Vec<f32>,
}

impl Row {
    /// A padding row (lstm.md §2.2): zero observations, actions, memories and estimates, all
    /// actions allowed, masked out of every loss.
    fn padding(sizes: &[usize], c: usize, nb: usize, mask_len: usize, memory: usize, heads: usize, next_obs: bool) -> Self {
        let zeros = || sizes.iter().map(|s| vec![0.0; *s]).collect();
        Self {
            obs: zeros(),
            next_obs: if next_obs { zeros() } else { vec![] },
            continuous: vec![0.0; c],
            discrete: vec![0; nb],
            log_probs: vec![0.0; c + nb],
            mask: vec![1.0; mask_len],
            advantage: 0.0,
            returns: vec![0.0; heads],
            memory: vec![0.0; memory],
            critic_memory: vec![0.0; memory],
            baseline_memory: vec![0.0; memory],
            valid: false,
            done: false,
            mates: vec![],
            baselines: vec![0.0; heads],
        }
    }
}

/// The value network of the trainer: PPO's critic of the agent's own observations, or POCA's
/// centralized critic of the agent and its groupmates.
enum ValueNetwork {
    Own(Critic),
    Group(MultiAgentCritic),
}

impl ValueNetwork {
    fn heads(&self) -> usize {
        match self {
            Self::Own(critic) => critic.heads(),
            Self::Group(critic) => critic.heads(),
        }
    }

    fn update_normalizers(&mut self, observations: &[Tensor]) -> Result<(), usize> {
        match self {
            Self::Own(critic) => critic.update_normalizers(observations),
            Self::Group(critic) => critic.update_normalizers(observations),
        }
    }
}

/// PPO for one behavior.
pub struct Ppo {
    settings: TrainerSettings,
    description: PolicyDescription,
    vs: nn::VarStore,
    actor: Actor,
    critic: ValueNetwork,
    adam: Adam,
    /// The reward signals, in the critic's value-head order.
    signals: RewardSignals,
    /// Behavioral cloning, when the behavior has demonstrations.
    cloning: Option<BehavioralCloning>,
    buffer: Vec<Row>,
    learning_rate: DecayedValue,
    beta: DecayedValue,
    epsilon: DecayedValue,
    /// The order of minibatches.
    rng: rand_chacha::ChaCha8Rng,
    /// Steps per training sequence (`memory.sequence_length`; 1 for a feed-forward network).
    sequence_length: usize,
    /// Each agent's critic memory between trajectories (recurrent networks; per agent and
    /// reset at every episode end, where 0.28 shares one across agents: lstm.md §10.1). POCA:
    /// the value stream.
    critic_memories: AgentMemories,
    /// POCA's baseline stream, kept as the value stream is.
    baseline_memories: AgentMemories,
}

/// Where a recurrent POCA critic keeps its memories with `--compat-0-28`: one pair shared by
/// every agent of the behavior and never reset, as 0.28 does (poca.md §2.4).
const SHARED_CRITIC_MEMORY: AgentKey = (usize::MAX, i32::MIN);

/// The critic's estimates of a trajectory ([`Ppo::estimates`]).
struct TrajectoryValues {
    /// Each step's values then the bootstrap value (`(n + 1) × heads`, step-major).
    values: Vec<f32>,
    /// The critic memory each step's sequence starts from (recurrent critics).
    critic_memories: Vec<f32>,
    /// POCA's baselines (`n × heads`; empty for PPO) and the baseline memory each step's
    /// sequence starts from (recurrent critics).
    baselines: Vec<f32>,
    baseline_memories: Vec<f32>,
}

/// The name of a variable holding a NaN or an infinity, if any.
fn first_non_finite_variable(vs: &tch::nn::VarStore) -> Option<String> {
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables.into_iter().find(|(_, t)| t.isfinite().all().int64_value(&[]) == 0).map(|(name, _)| name)
}

fn rows_to_tensor(rows: &[&Row], get: impl Fn(&Row) -> &[f32], width: usize) -> Tensor {
    let data: Vec<f32> = rows.iter().flat_map(|r| get(r).iter().copied()).collect();
    Tensor::from_slice(&data).reshape([rows.len() as i64, width as i64])
}

/// One minibatch of the update, as tensors.
struct Minibatch {
    obs: Vec<Tensor>,
    continuous: Tensor,
    discrete: Tensor,
    /// 1 = allowed (None without discrete actions).
    masks: Option<Tensor>,
    old_log_probs: Tensor,
    /// `[rows, 1]`, broadcast over the action dimensions.
    advantages: Tensor,
    /// `[rows, signals]`.
    returns: Tensor,
    /// The observations after each row's step (reward signals with networks; else empty).
    next_obs: Vec<Tensor>,
    /// Each sequence's starting actor, critic and (POCA) baseline memories `[1, n_seq, m]`
    /// (recurrent networks).
    memories: Option<Tensor>,
    critic_memories: Option<Tensor>,
    baseline_memories: Option<Tensor>,
    /// 1 for real rows, 0 for padding (recurrent networks; None: every row is real).
    valid: Option<Tensor>,
    /// `[rows]`, 1 where the episode ended with the row's step.
    done: Tensor,
    /// The rows with their groupmates, and their baselines when taken `[rows, signals]`
    /// (POCA).
    group: Option<(GroupObservations, Tensor)>,
}

/// A minibatch's losses: the one minimised and its parts.
struct Losses {
    total: Tensor,
    policy: Tensor,
    value: Tensor,
    /// POCA's baseline loss.
    baseline: Option<Tensor>,
}

/// The mean of `t` over real rows (0.28's `masked_mean`: padding rows count for nothing, in
/// the numerator and the denominator); the plain mean without `valid`.
fn masked_mean(t: &Tensor, valid: Option<&Tensor>) -> Tensor {
    let Some(valid) = valid else { return t.mean(Kind::Float) };
    let mask = if t.dim() == 2 { valid.unsqueeze(1).expand_as(t) } else { valid.shallow_clone() };
    (t * &mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0)
}

impl Ppo {
    /// PPO's networks for `description` (drawn from libtorch's generator, seeded by the
    /// caller) and its minibatch order from `seed`; `demonstrations` for behavioral cloning and
    /// GAIL, as `settings` name them.
    pub fn new(description: &PolicyDescription, settings: &TrainerSettings, seed: u64, demonstrations: &Demonstrations) -> Self {
        let vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&vs.root(), description);
        let signals = RewardSignals::new(description, &settings.reward_signals, demonstrations.gail.as_deref(), settings.compat_0_28);
        let centralized = settings.trainer_type == "poca";
        let critic = if centralized {
            for signal in signals.tag_names().into_iter().filter(|name| *name != "Extrinsic") {
                log::warn!("Reward signal {signal} is not supported with the POCA trainer; results may be unexpected.");
            }
            ValueNetwork::Group(MultiAgentCritic::new(&(vs.root() / "critic"), description, &signals.keys()))
        } else {
            ValueNetwork::Own(Critic::for_signals(&(vs.root() / "critic"), description, &signals.keys()))
        };
        let signals = if centralized { signals.with_groupmate_rewards() } else { signals };
        let adam = Adam::new(&vs);
        let h = &settings.hyperparameters;
        let max = settings.max_steps;
        let is_actor = |name: &str| !name.starts_with(crate::checkpoint::CRITIC_PREFIX);
        let cloning = BehavioralCloning::for_trainer(&vs, is_actor, demonstrations.cloning.as_deref(), description, settings, seed.wrapping_add(1));
        Self {
            learning_rate: DecayedValue::learning_rate(h.learning_rate_schedule, h.learning_rate, max),
            beta: DecayedValue::beta(h.beta_schedule, h.beta, max),
            epsilon: DecayedValue::epsilon(h.epsilon_schedule, h.epsilon, max),
            settings: settings.clone(),
            description: description.clone(),
            vs,
            actor,
            critic,
            adam,
            signals,
            cloning,
            buffer: vec![],
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            sequence_length: settings.network_settings.memory.map_or(1, |m| m.sequence_length),
            critic_memories: AgentMemories::new(description.memory_size),
            baseline_memories: AgentMemories::new(description.memory_size),
        }
    }

    /// The critic's estimates of a trajectory (`obs`: its rows, the steps' then the one after).
    /// A recurrent critic starts from the agent's memories (POCA with `--compat-0-28`: the
    /// behavior's one shared pair) and keeps where it ended, or forgets them at an episode end.
    fn estimates(&mut self, t: &Trajectory, obs: &[Tensor], sizes: &[usize]) -> TrajectoryValues {
        let m = self.description.memory_size;
        let recurrent = self.description.is_recurrent();
        let ended = t.terminal || t.interrupted;
        let critic = match &self.critic {
            ValueNetwork::Own(critic) => critic,
            ValueNetwork::Group(critic) => {
                let shared = self.settings.compat_0_28;
                let key = if shared { SHARED_CRITIC_MEMORY } else { t.agent };
                let start = |store: &AgentMemories| store.get(&key).cloned().unwrap_or_else(|| vec![0.0; m]);
                let memories = recurrent.then(|| (poca::CriticMemories { value: start(&self.critic_memories), baseline: start(&self.baseline_memories) }, self.sequence_length));
                let e = poca::trajectory_estimates(critic, t, obs, sizes, &self.description.action_spec, memories);
                match e.final_memories {
                    Some(last) if shared || !ended => {
                        self.critic_memories.store(&[key], &last.value);
                        self.baseline_memories.store(&[key], &last.baseline);
                    }
                    _ => {
                        self.critic_memories.forget(&key);
                        self.baseline_memories.forget(&key);
                    }
                }
                return TrajectoryValues { values: e.values, critic_memories: e.value_memories, baselines: e.baselines, baseline_memories: e.baseline_memories };
            }
        };
        let no_baselines = |values, critic_memories| TrajectoryValues { values, critic_memories, baselines: vec![], baseline_memories: vec![] };
        if !recurrent {
            return no_baselines(tch::no_grad(|| Vec::<f32>::try_from(critic.forward(obs, None).0.flatten(0, -1)).unwrap_or_default()), vec![]);
        }
        let initial = self.critic_memories.get(&t.agent).cloned().unwrap_or_else(|| vec![0.0; m]);
        let sequenced = critic_by_sequence(critic, obs, t.steps.len(), self.sequence_length, initial);
        if ended {
            self.critic_memories.forget(&t.agent);
        } else {
            self.critic_memories.store(&[t.agent], &sequenced.final_memory);
        }
        no_baselines(sequenced.values, sequenced.initial_memories)
    }

    /// The rows of the sequences `chunk` (indices of whole sequences in the buffer) as tensors.
    /// Padding sits at the end of a sequence and counts for nothing, and the LSTM is causal:
    /// the steps after the longest real part of the chunk's sequences cannot change the loss
    /// or its gradient, so they are left out.
    fn minibatch(&self, chunk: &[usize]) -> Minibatch {
        let l = self.sequence_length;
        let a = &self.description.action_spec;
        let (c, nb, total) = (a.continuous_size, a.discrete_size(), a.mask_len());
        let real = |q: usize| self.buffer[q * l..(q + 1) * l].iter().rposition(|r| r.valid).map_or(1, |last| last + 1);
        let kept = chunk.iter().map(|q| real(*q)).max().unwrap_or(l);
        let rows: Vec<&Row> = chunk.iter().flat_map(|q| &self.buffer[q * l..q * l + kept]).collect();
        let starts: Vec<&Row> = rows.iter().step_by(kept).copied().collect();
        let m = self.description.memory_size;
        let recurrent = self.description.is_recurrent();
        let start_memories = |get: fn(&Row) -> &[f32]| recurrent.then(|| rows_to_tensor(&starts, get, m).reshape([1, starts.len() as i64, m as i64]));
        let valid: Vec<f32> = rows.iter().map(|r| if r.valid { 1.0 } else { 0.0 }).collect();
        let discrete: Vec<i64> = rows.iter().flat_map(|r| r.discrete.iter().copied()).collect();
        let advantages: Vec<f32> = rows.iter().map(|r| r.advantage).collect();
        let sizes = self.description.observation_sizes();
        let next_obs = if self.signals.has_networks() { sizes.iter().enumerate().map(|(i, s)| rows_to_tensor(&rows, |r| &r.next_obs[i], *s)).collect() } else { vec![] };
        let obs: Vec<Tensor> = sizes.iter().enumerate().map(|(i, s)| rows_to_tensor(&rows, |r| &r.obs[i], *s)).collect();
        let heads = self.critic.heads();
        let group = matches!(self.critic, ValueNetwork::Group(_)).then(|| {
            let mates: Vec<&[GroupmateStatus]> = rows.iter().map(|r| r.mates.as_slice()).collect();
            (poca::group_observations(obs.iter().map(Tensor::shallow_clone).collect(), &mates, &sizes, a), rows_to_tensor(&rows, |r| &r.baselines, heads))
        });
        Minibatch {
            obs,
            next_obs,
            continuous: rows_to_tensor(&rows, |r| &r.continuous, c),
            discrete: Tensor::from_slice(&discrete).reshape([rows.len() as i64, nb as i64]),
            masks: (total > 0).then(|| rows_to_tensor(&rows, |r| &r.mask, total)),
            old_log_probs: rows_to_tensor(&rows, |r| &r.log_probs, c + nb),
            advantages: Tensor::from_slice(&advantages).unsqueeze(1),
            returns: rows_to_tensor(&rows, |r| &r.returns, self.critic.heads()),
            memories: start_memories(|r| &r.memory),
            critic_memories: start_memories(|r| &r.critic_memory),
            baseline_memories: matches!(self.critic, ValueNetwork::Group(_)).then(|| start_memories(|r| &r.baseline_memory)).flatten(),
            valid: recurrent.then(|| Tensor::from_slice(&valid)),
            done: Tensor::from_slice(&rows.iter().map(|r| if r.done { 1.0f32 } else { 0.0 }).collect::<Vec<f32>>()),
            group,
        }
    }

    /// The PPO loss of a minibatch (clipped surrogate with ML-Agents' per-dimension ratio,
    /// value loss, entropy bonus) and its parts; POCA's adds its baseline's loss.
    fn losses(&self, batch: &Minibatch, beta: f64, epsilon: f64) -> Losses {
        let mean = |t: &Tensor| masked_mean(t, batch.valid.as_ref());
        let out = self.actor.forward(&batch.obs, batch.memories.as_ref(), batch.masks.as_ref(), Some((&batch.continuous, &batch.discrete)), false);
        let ratio = (&out.log_probs - &batch.old_log_probs).exp();
        let adv = &batch.advantages;
        let surrogate = (&ratio * adv).min_other(&(ratio.clamp(1.0 - epsilon, 1.0 + epsilon) * adv));
        let policy_loss = -mean(&surrogate);
        // ML-Agents 0.28 stores the value estimates and the returns under one buffer key
        // (`value_estimates_key` and `returns_key` are both `returns`), so the "old values" its
        // value clipping reads are the returns: the clipped term never exceeds the plain one
        // and the value loss is in effect (R - V)². Reproduced as written, since it sets how
        // fast the critic learns.
        // Every head's loss is a mean over the same rows: their mean is the mean over all.
        let clipped_loss = |v: &Tensor, old_v: &Tensor| {
            let ret = &batch.returns;
            let v_clipped = old_v + (v - old_v).clamp(-epsilon, epsilon);
            mean(&(ret - v).pow_tensor_scalar(2).max_other(&(ret - &v_clipped).pow_tensor_scalar(2)))
        };
        let entropy = mean(&out.entropy) * beta;
        match &self.critic {
            ValueNetwork::Group(critic) => {
                let (group, old_baselines) = batch.group.as_ref().expect("a centralized critic's minibatches carry their groups");
                // POCA: policy + 0.5·(value + 0.5·baseline) − β·entropy; the baselines' "old
                // values" are really the ones taken with the trajectory (their clip works).
                let (v, b) = critic.values_and_baselines(group, batch.critic_memories.as_ref(), batch.baseline_memories.as_ref());
                let (v, b) = (v.estimates, b.estimates);
                let value = clipped_loss(&v, &batch.returns);
                let baseline = clipped_loss(&b, old_baselines);
                let total = &policy_loss + (&value + &baseline * 0.5) * 0.5 - entropy;
                Losses { total, policy: policy_loss, value, baseline: Some(baseline) }
            }
            ValueNetwork::Own(critic) => {
                let (v, _) = critic.forward(&batch.obs, batch.critic_memories.as_ref());
                let value = clipped_loss(&v.reshape([-1, critic.heads() as i64]), &batch.returns);
                let total = &policy_loss + &value * 0.5 - entropy;
                Losses { total, policy: policy_loss, value, baseline: None }
            }
        }
    }
}

impl Algorithm for Ppo {
    fn trainer_type(&self) -> &'static str {
        match self.critic {
            ValueNetwork::Own(_) => "ppo",
            ValueNetwork::Group(_) => "poca",
        }
    }

    fn actor(&self) -> &Actor {
        &self.actor
    }

    fn actor_store(&self) -> &nn::VarStore {
        &self.vs
    }

    fn actor_weights(&self) -> Weights {
        actor_weights(&self.vs)
    }

    fn learning_rate(&self, step: u64) -> f64 {
        self.learning_rate.value(step)
    }

    fn take_trajectory(&mut self, t: Trajectory, context: &mut TrainerContext) -> Result<(), TrainError> {
        let n = t.steps.len();
        let sizes = self.description.observation_sizes();
        let obs = trajectory_observations(&t, &sizes);
        update_normalizers(&mut self.actor, |steps| self.critic.update_normalizers(steps), &obs, &t, context)?;
        let TrajectoryValues { values, critic_memories, baselines, baseline_memories } = self.estimates(&t, &obs, &sizes);
        let heads = self.critic.heads();
        let signal_rewards = self.signals.rewards(&t, &obs, context.stats);
        let mut advantages = vec![0.0f32; n];
        let mut returns = vec![vec![0.0f32; heads]; n];
        // POCA's returns stop only where the whole group's episode ended (poca.md §1.7).
        let returns_stop = if baselines.is_empty() { t.terminal } else { poca::bootstrap_ends(&t) };
        for (head, signal) in signal_rewards.iter().enumerate() {
            let head_values: Vec<f32> = values.iter().skip(head).step_by(heads).copied().collect();
            if head_values.len() != n + 1 {
                return Err(context.diverge("the critic gave no value for every step", self.learning_rate.value(context.step)));
            }
            // Curiosity and RND bootstrap past a real episode end (0.28's `ignore_done`).
            let terminal = returns_stop && !signal.ignore_done;
            let rewards = Vec::<f32>::try_from(&signal.rewards).unwrap_or_default();
            let (signal_advantages, signal_returns) = gae(&rewards, &head_values[..n], head_values[n], terminal, signal.gamma as f32, self.settings.hyperparameters.lambd as f32);
            if !signal_returns.iter().chain(&signal_advantages).all(|v| v.is_finite()) {
                if !head_values.iter().all(|v| v.is_finite()) {
                    return Err(context.diverge("the value estimates became non-finite", self.learning_rate.value(context.step)));
                }
                let largest = rewards.iter().fold(0.0f32, |m, r| if r.abs() > m.abs() { *r } else { m });
                let what = match signal.kind {
                    RewardSignalKind::Extrinsic => "the rewards".to_string(),
                    intrinsic => format!("the {} rewards", intrinsic.key()),
                };
                return Err(context.overflow(t.agent.1, what, format!("reach {largest:e}, and their discounted returns overflow")));
            }
            let head_baselines: Vec<f32> = baselines.iter().skip(head).step_by(heads).copied().collect();
            for k in 0..n {
                // POCA's advantage is the return less the counterfactual baseline.
                let advantage = head_baselines.get(k).map_or(signal_advantages[k], |b| signal_returns[k] - b);
                advantages[k] += advantage / heads as f32;
                returns[k][head] = signal_returns[k];
            }
            let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len().max(1) as f32;
            context.stats.add(&format!("Policy/{} Value Estimate", signal.kind.tag_name()), mean(&head_values[..n]), StatsAggregation::Average);
            if !head_baselines.is_empty() {
                context.stats.add(&format!("Policy/{} Baseline Estimate", signal.kind.tag_name()), mean(&head_baselines), StatsAggregation::Average);
            }
        }
        let mut next_obs: Vec<Vec<Vec<f32>>> = vec![];
        if self.signals.has_networks() {
            next_obs = t.steps.iter().skip(1).map(|s| s.obs.clone()).collect();
            next_obs.push(t.next_obs.clone());
        }
        let mut next_obs = next_obs.into_iter();
        let total = self.description.action_spec.mask_len();
        let m = self.description.memory_size;
        let ended = t.terminal || t.interrupted;
        let baselines_taken = !baselines.is_empty();
        let mut baselines = baselines.chunks(heads.max(1)).map(<[f32]>::to_vec);
        for ((k, s), returns) in t.steps.into_iter().enumerate().zip(returns) {
            let mask = if s.action_mask.len() == total { s.action_mask.iter().map(|m| if *m { 0.0 } else { 1.0 }).collect() } else { vec![1.0; total] };
            self.buffer.push(Row {
                obs: s.obs,
                next_obs: next_obs.next().unwrap_or_default(),
                continuous: s.decision.continuous,
                discrete: s.decision.discrete.iter().map(|d| *d as i64).collect(),
                log_probs: s.decision.log_probs,
                mask,
                advantage: advantages[k],
                returns,
                memory: s.decision.memory,
                critic_memory: critic_memories.get(k * m..(k + 1) * m).map(<[f32]>::to_vec).unwrap_or_default(),
                baseline_memory: baseline_memories.get(k * m..(k + 1) * m).map(<[f32]>::to_vec).unwrap_or_default(),
                valid: true,
                done: ended && k + 1 == n,
                // Only the centralized critic reads the mates.
                mates: if baselines_taken { s.group_status } else { vec![] },
                baselines: baselines.next().unwrap_or_default(),
            });
        }
        // Sequences never straddle trajectories: the last one is padded at its end.
        let (a, nb) = (&self.description.action_spec, self.description.action_spec.discrete_size());
        while self.buffer.len() % self.sequence_length != 0 {
            self.buffer.push(Row::padding(&sizes, a.continuous_size, nb, total, m, heads, self.signals.has_networks()));
        }
        Ok(())
    }

    /// Trains on the buffer once it holds more than `buffer_size` steps.
    fn update_due(&self, _step: u64) -> bool {
        self.buffer.len() > self.settings.hyperparameters.buffer_size
    }

    fn maybe_update(&mut self, context: &mut TrainerContext) -> Result<bool, TrainError> {
        let h = self.settings.hyperparameters.clone();
        if !self.update_due(context.step) {
            return Ok(false);
        }
        let mut advantages: Vec<f32> = self.buffer.iter().map(|r| r.advantage).collect();
        standardize(&mut advantages);
        for (r, a) in self.buffer.iter_mut().zip(advantages) {
            r.advantage = a;
        }
        let (lr, beta, epsilon) = (self.learning_rate.value(context.step), self.beta.value(context.step), self.epsilon.value(context.step));
        let _threads = OneThread::for_update(true, h.batch_size, self.description.hidden_units);
        let (mut policy_losses, mut value_losses, mut baseline_losses) = (vec![], vec![], vec![]);
        // Whole sequences are shuffled; a minibatch is batch_size rounded down to whole
        // sequences, at least one (0.28's `_update_policy`). Without memory a sequence is a step.
        let l = self.sequence_length;
        let sequences_per_batch = (h.batch_size - h.batch_size % l).max(l) / l;
        let mut order: Vec<usize> = (0..self.buffer.len() / l).collect();
        for _ in 0..h.num_epoch {
            order.shuffle(&mut self.rng);
            for chunk in order.chunks_exact(sequences_per_batch) {
                let batch = self.minibatch(chunk);
                let losses = self.losses(&batch, beta, epsilon);
                let (policy_value, value_value) = (losses.policy.double_value(&[]), losses.value.double_value(&[]));
                let baseline_value = losses.baseline.as_ref().map(|b| b.double_value(&[]));
                if !(policy_value.is_finite() && value_value.is_finite() && losses.total.double_value(&[]).is_finite()) {
                    self.buffer.clear();
                    return Err(context.divergence(&format!("the loss became non-finite (policy loss {policy_value}, value loss {value_value})"), lr));
                }
                self.adam.zero_grad();
                backward(&losses.total);
                self.adam.step(lr);
                if self.signals.has_networks() {
                    let signal_batch = SignalBatch { obs: &batch.obs, next_obs: &batch.next_obs, continuous: &batch.continuous, discrete: &batch.discrete, valid: batch.valid.as_ref(), done: Some(&batch.done) };
                    self.signals.update(&signal_batch);
                }
                policy_losses.push(policy_value.abs() as f32);
                value_losses.push(value_value as f32);
                baseline_losses.extend(baseline_value.map(|b| b as f32));
            }
        }
        self.buffer.clear();
        self.signals.report_update(context.stats);
        if let Some(cloning) = &mut self.cloning {
            context.stats.add("Losses/Pretraining Loss", cloning.update(&self.actor, context.step), StatsAggregation::Average);
        }
        if let Some(name) = first_non_finite_variable(&self.vs) {
            return Err(context.diverge(&format!("the update left non-finite values in {name}"), lr));
        }
        for (tag, values) in [("Losses/Policy Loss", policy_losses), ("Losses/Value Loss", value_losses), ("Losses/Baseline Loss", baseline_losses)] {
            if let Some(mean) = StatsAggregation::Average.aggregate(&values) {
                context.stats.add(tag, mean, StatsAggregation::Average);
            }
        }
        context.stats.add("Policy/Learning Rate", lr as f32, StatsAggregation::Average);
        context.stats.add("Policy/Epsilon", epsilon as f32, StatsAggregation::Average);
        context.stats.add("Policy/Beta", beta as f32, StatsAggregation::Average);
        Ok(true)
    }

    fn training_over(&mut self) {
        self.buffer.clear();
    }

    fn end_episodes(&mut self, ended: EndedEpisodes) {
        for store in [&mut self.critic_memories, &mut self.baseline_memories] {
            // The compat pair outlives every episode, as 0.28's does.
            let shared = store.get(&SHARED_CRITIC_MEMORY).cloned();
            store.forget_episodes(ended);
            if let Some(memory) = shared {
                store.store(&[SHARED_CRITIC_MEMORY], &memory);
            }
        }
        self.signals.end_episodes(ended);
    }

    /// The actor, the critic and Adam's moments; the reward signals' networks and optimizers.
    fn state(&self) -> AlgorithmState {
        let mut tensors = variables(&self.vs);
        tensors.0.extend(self.adam.moments().0);
        let mut record = serde_json::Map::new();
        if let Some((signal_tensors, signals)) = self.signals.state() {
            tensors.0.extend(signal_tensors.0);
            record.insert("reward_signals".into(), signals);
        }
        if let Some((cloning_tensors, cloning)) = self.cloning.as_ref().map(BehavioralCloning::state) {
            tensors.0.extend(cloning_tensors.0);
            record.insert("behavioral_cloning".into(), cloning);
        }
        let record = (!record.is_empty()).then_some(serde_json::Value::Object(record));
        AlgorithmState { tensors, optimizer: self.adam.state().clone(), record }
    }

    fn restore(&mut self, tensors: &Weights, optimizer: &AdamState, record: Option<&serde_json::Value>, resume: bool) -> Result<Vec<String>, TrainError> {
        let mut skipped = load_variables(&self.vs, tensors);
        if resume {
            self.adam.restore(optimizer, tensors);
        }
        skipped.extend(self.signals.restore(tensors, record.and_then(|r| r.get("reward_signals")), resume));
        if let (Some(cloning), true) = (&mut self.cloning, resume) {
            cloning.restore(tensors, record.and_then(|r| r.get("behavioral_cloning")));
        }
        Ok(skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::config::RunOptions;
    use crate::train::trajectory::{Decision, Experience};

    const MEMORY: usize = 8;

    /// A recurrent POCA trainer (memory 8, sequences of 2), with 0.28's shared memories or not.
    fn recurrent_poca(compat: bool) -> Ppo {
        let yaml = "behaviors:\n  1D:\n    trainer_type: poca\n    network_settings: {hidden_units: 8, num_layers: 1, memory: {memory_size: 8, sequence_length: 2}}\n";
        let mut settings = RunOptions::from_yaml(yaml, "t.yaml").unwrap().behaviors["1D"].clone();
        if compat {
            settings.follow_0_28();
        }
        let description = PolicyDescription {
            format_version: crate::policy::POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![3]],
            action_spec: crate::spec::ActionSpec::discrete(&[2]),
            hidden_units: 8,
            num_layers: 1,
            normalize: false,
            memory_size: MEMORY,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: crate::policy::ContinuousHead::default(),
        };
        tch::manual_seed(4);
        Ppo::new(&description, &settings, 1, &Demonstrations::default())
    }

    /// Three steps of `agent` beside one mate.
    fn trajectory(agent: AgentKey, terminal: bool) -> Trajectory {
        let mate = GroupmateStatus { obs: vec![vec![0.3; 3]], continuous: vec![], discrete: vec![1], reward: 0.0, done: false };
        let step = |k: usize| Experience {
            obs: vec![vec![0.1 * k as f32 + agent.1 as f32; 3]],
            action_mask: vec![],
            decision: Decision { discrete: vec![0], ..Default::default() },
            reward: 0.0,
            group_reward: 0.0,
            done: false,
            group_status: vec![mate.clone()],
        };
        Trajectory { agent, steps: (0..3).map(step).collect(), next_obs: vec![vec![0.5; 3]], terminal, interrupted: false, next_group_obs: vec![mate.obs.clone()] }
    }

    fn estimate(p: &mut Ppo, t: &Trajectory) -> TrajectoryValues {
        let observations = trajectory_observations(t, &[3]);
        p.estimates(t, &observations, &[3])
    }

    /// By default each agent's value and baseline memories are its own and end with its
    /// episode (poca.md §12.1); with `--compat-0-28` every agent chains one shared pair that no
    /// episode end resets (0.28's key `""`, §2.4).
    #[test]
    fn recurrent_poca_memories_are_per_agent_unless_0_28s_are_asked_for() {
        let zeros = vec![0.0; MEMORY];
        let first_memories = |v: &TrajectoryValues| (v.critic_memories[..MEMORY].to_vec(), v.baseline_memories[..MEMORY].to_vec());
        let mut own = recurrent_poca(false);
        let first = estimate(&mut own, &trajectory((0, 1), false));
        assert_eq!((first.critic_memories.len(), first.baseline_memories.len(), first.baselines.len()), (3 * MEMORY, 3 * MEMORY, 3));
        let (kept_value, kept_baseline) = (own.critic_memories.get(&(0, 1)).cloned().unwrap(), own.baseline_memories.get(&(0, 1)).cloned().unwrap());
        assert!(kept_value != zeros && kept_baseline != zeros && kept_value != kept_baseline);
        // Another agent starts from zeros; the first goes on from where it stopped, then forgets.
        assert_eq!(first_memories(&estimate(&mut own, &trajectory((0, 2), false))), (zeros.clone(), zeros.clone()));
        assert_eq!(first_memories(&estimate(&mut own, &trajectory((0, 1), true))), (kept_value, kept_baseline));
        assert!(own.critic_memories.get(&(0, 1)).is_none() && own.baseline_memories.get(&(0, 1)).is_none());

        let mut shared = recurrent_poca(true);
        estimate(&mut shared, &trajectory((0, 1), true));
        assert!(shared.critic_memories.get(&(0, 1)).is_none());
        let chained = shared.critic_memories.get(&SHARED_CRITIC_MEMORY).cloned().expect("kept past the episode end");
        // The next agent continues the first's stream, and a reset of every episode keeps it.
        assert_eq!(first_memories(&estimate(&mut shared, &trajectory((0, 2), false))).0, chained);
        shared.end_episodes(EndedEpisodes::All);
        assert!(shared.critic_memories.get(&SHARED_CRITIC_MEMORY).is_some() && shared.baseline_memories.get(&SHARED_CRITIC_MEMORY).is_some());
    }
}
