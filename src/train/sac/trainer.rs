//! SAC for one behavior (sac.md §2-§7): the squashed-Gaussian actor, the value network V
//! and its target, twin Q networks, the entropy coefficients; every step into the replay
//! buffer; gradient steps at the cadence of `steps_per_update`, each stepping the policy, the
//! value networks and the coefficients with their own Adam, then moving the target by τ.
//!
//! Beyond 0.28 (sac.md §9, §10): the entropy coefficients and the update counter are part of
//! every checkpoint (0.28 resets α on `--resume`, issue #5781), the replay buffer can be kept
//! beside each checkpoint (`save_replay_buffer`), the exported deterministic action is the
//! squashed mean, and hybrid actions take the value target and policy loss as meant.

use super::cadence::UpdateCadence;
use super::losses::{losses, BatchTargets, EntropyCoefficients, Evaluated, StreamTargets};
use super::replay::{ReplayBuffer, RowShape, Transition};
use crate::checkpoint::AdamState;
use crate::comm::side_channel::StatsAggregation;
use crate::policy::{PolicyDescription, Weights};
use crate::train::demonstrations::Demonstrations;
use crate::train::bc::BehavioralCloning;
use crate::train::algorithm::{trajectory_observations, update_normalizers, Algorithm, AlgorithmState, TrainerContext};
use crate::train::config::{SacHyperparameters, TrainerSettings};
use crate::train::error::TrainError;
use crate::train::networks::adam::Adam;
use crate::train::networks::memory::{critic_by_sequence, AgentMemories};
use crate::train::networks::{actor_weights, backward, load_variables, variables, Actor, Critic, OneThread};
use crate::train::rewards::{RewardSignals, SignalBatch};
use crate::train::schedule::DecayedValue;
use crate::train::trajectory::{EndedEpisodes, Trajectory};
use rand::SeedableRng;
use tch::{nn, Device, Kind, Tensor};

/// Prefixes of SAC's networks in a checkpoint (the actor keeps ML-Agents' own names).
const VALUE_NETWORK: &str = "value_network";
const Q1_NETWORK: &str = "q1_network";
const Q2_NETWORK: &str = "q2_network";
const TARGET_NETWORK: &str = "target_network";
const ENTROPY_COEFFICIENTS: &str = "log_ent_coef";

/// 0.28's scale of the discrete target entropies (`0.2 · ln(branch size)`).
const DISCRETE_TARGET_ENTROPY_SCALE: f64 = 0.2;


/// SAC's targets of entropy: −(continuous actions), and 0.2·ln(k) per branch of k actions.
pub fn target_entropies(continuous: usize, branches: &[usize]) -> (f64, Vec<f64>) {
    (-(continuous as f64), branches.iter().map(|k| DISCRETE_TARGET_ENTROPY_SCALE * (*k as f64).ln()).collect())
}

/// `target ← (1 − τ)·target + τ·source` over the trainable variables of two stores whose
/// names match after their prefixes (the normalisers are not averaged).
pub fn soft_update(source: &nn::VarStore, source_prefix: &str, target: &nn::VarStore, target_prefix: &str, tau: f64) {
    let sources = source.variables();
    tch::no_grad(|| {
        for (name, t) in target.variables() {
            if !t.requires_grad() {
                continue;
            }
            let Some(s) = name.strip_prefix(target_prefix).and_then(|rest| sources.get(&format!("{source_prefix}{rest}"))) else { continue };
            let mixed = &t * (1.0 - tau) + s * tau;
            let _ = t.shallow_clone().copy_(&mixed);
        }
    });
}

/// A critic's output split into its streams (one per reward signal, in head order): `[n]` or
/// `[n, outputs]` each.
fn per_stream(values: Tensor, streams: usize) -> Vec<Tensor> {
    if streams == 1 {
        return vec![values];
    }
    let width = values.size()[1] / streams as i64;
    (0..streams as i64)
        .map(|k| {
            let stream = values.narrow(1, k * width, width);
            if width == 1 { stream.squeeze_dim(1) } else { stream }
        })
        .collect()
}

/// Runs `f` with the trainable variables of `vs` under `prefix` taking no gradient.
fn with_frozen<T>(vs: &nn::VarStore, prefix: &str, f: impl FnOnce() -> T) -> T {
    let named: Vec<Tensor> = vs.variables().into_iter().filter(|(name, t)| name.starts_with(prefix) && t.requires_grad()).map(|(_, t)| t).collect();
    for t in &named {
        let _ = t.set_requires_grad(false);
    }
    let out = f();
    for t in &named {
        let _ = t.set_requires_grad(true);
    }
    out
}

/// SAC for one behavior.
pub struct Sac {
    settings: TrainerSettings,
    sac: SacHyperparameters,
    description: PolicyDescription,
    actor_vs: nn::VarStore,
    actor: Actor,
    /// V, Q1 and Q2 (stepped by one Adam, as 0.28's value optimizer).
    values_vs: nn::VarStore,
    value: Critic,
    q1: Critic,
    q2: Critic,
    target_vs: nn::VarStore,
    target: Critic,
    entropy_vs: nn::VarStore,
    log_alpha_continuous: Option<Tensor>,
    log_alpha_discrete: Option<Tensor>,
    policy_adam: Adam,
    value_adam: Adam,
    entropy_adam: Adam,
    buffer: ReplayBuffer,
    cadence: UpdateCadence,
    /// The reward signals, in the value networks' head order.
    signals: RewardSignals,
    /// When the signals' networks update (`reward_signal_steps_per_update`).
    signal_cadence: UpdateCadence,
    /// Behavioral cloning, when the behavior has demonstrations.
    cloning: Option<BehavioralCloning>,
    learning_rate: DecayedValue,
    /// Minibatch draws.
    rng: rand_chacha::ChaCha8Rng,
    continuous_target: f64,
    discrete_targets: Vec<f64>,
    /// `max_steps` reached: no more rows are taken (0.28 appends only while it trains).
    training_over: bool,
    /// Steps per training sequence (`memory.sequence_length`; 1 for a feed-forward network).
    sequence_length: usize,
    /// Each agent's V memory between trajectories (recurrent networks; per agent, reset at
    /// every episode end, where 0.28 shares one across agents: sac.md §9 row 7).
    critic_memories: AgentMemories,
}

impl Sac {
    /// SAC's networks for `description`, drawn from libtorch's generator (seeded by the
    /// caller) in 0.28's order: actor, V, Q1, Q2, target (then a copy of V).
    pub fn new(behavior: &str, description: &PolicyDescription, settings: &TrainerSettings, seed: u64, demonstrations: &Demonstrations) -> Result<Self, TrainError> {
        let sac = settings.hyperparameters.sac.clone().ok_or_else(|| TrainError::Mismatch(format!("{behavior}: trainer_type sac without SAC hyperparameters")))?;
        let actor_vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&actor_vs.root(), description);
        let spec = &description.action_spec;
        let (c, branches) = (spec.continuous_size, spec.discrete_branches.len());
        let q_outputs = spec.mask_len().max(1);
        let signals = RewardSignals::new(description, &settings.reward_signals, demonstrations.gail.as_deref(), settings.compat_0_28);
        let streams = signals.keys();
        let values_vs = nn::VarStore::new(Device::Cpu);
        let value = Critic::for_signals(&(values_vs.root() / VALUE_NETWORK), description, &streams);
        let q1 = Critic::with_heads(&(values_vs.root() / Q1_NETWORK), description, &streams, c, q_outputs);
        let q2 = Critic::with_heads(&(values_vs.root() / Q2_NETWORK), description, &streams, c, q_outputs);
        let target_vs = nn::VarStore::new(Device::Cpu);
        let target = Critic::for_signals(&(target_vs.root() / TARGET_NETWORK), description, &streams);
        soft_update(&values_vs, VALUE_NETWORK, &target_vs, TARGET_NETWORK, 1.0);
        let entropy_vs = nn::VarStore::new(Device::Cpu);
        let initial = sac.init_entcoef.ln();
        let coefficients = entropy_vs.root() / ENTROPY_COEFFICIENTS;
        let log_alpha_continuous = (c > 0).then(|| coefficients.var("continuous", &[1], nn::Init::Const(initial)));
        let log_alpha_discrete = (branches > 0).then(|| coefficients.var("discrete", &[branches as i64], nn::Init::Const(initial)));
        let (continuous_target, discrete_targets) = target_entropies(c, &spec.discrete_branches);
        let h = &settings.hyperparameters;
        let sequence_length = settings.network_settings.memory.map_or(1, |m| m.sequence_length);
        let cloning = BehavioralCloning::for_trainer(&actor_vs, |_| true, demonstrations.cloning.as_deref(), description, settings, seed.wrapping_add(1));
        Ok(Self {
            policy_adam: Adam::new(&actor_vs),
            value_adam: Adam::new(&values_vs),
            entropy_adam: Adam::new(&entropy_vs),
            buffer: ReplayBuffer::new(
                description.observation_sizes(),
                RowShape { continuous_size: c, branches, mask_len: spec.mask_len(), memory_size: description.memory_size, sequence_length },
            ),
            cadence: UpdateCadence::new(sac.steps_per_update, sac.buffer_init_steps),
            signals,
            signal_cadence: UpdateCadence::new(sac.reward_signal_steps_per_update, sac.buffer_init_steps),
            cloning,
            learning_rate: DecayedValue::learning_rate(h.learning_rate_schedule, h.learning_rate, settings.max_steps),
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            settings: settings.clone(),
            sac,
            description: description.clone(),
            actor_vs,
            actor,
            values_vs,
            value,
            q1,
            q2,
            target_vs,
            target,
            entropy_vs,
            log_alpha_continuous,
            log_alpha_discrete,
            continuous_target,
            discrete_targets,
            training_over: false,
            sequence_length,
            critic_memories: AgentMemories::new(description.memory_size),
        })
    }

    /// One gradient step on a sampled minibatch (sac.md §3.2); returns the losses (policy,
    /// Q1, Q2, V). A non-finite loss is an error before any weight moves.
    fn gradient_step(&mut self, context: &TrainerContext, lr: f64) -> Result<[f64; 4], TrainError> {
        for critic in [&mut self.value, &mut self.q1, &mut self.q2, &mut self.target] {
            critic.copy_normalizers_from(&self.actor);
        }
        let batch = self.buffer.sample(self.settings.hyperparameters.batch_size, &mut self.rng);
        let sample = self.actor.sample_squashed(&batch.obs, batch.memories.as_ref(), batch.masks.as_ref());
        // Recurrent networks: V starts each sequence from its stored memory, Q1 and Q2 from
        // zeros, and the target from V's memory one step into the sequence (sac.md §4.4).
        let q_memories = batch.critic_memories.as_ref().map(Tensor::zeros_like);
        let next_memories = batch.critic_memories.as_ref().map(|m| {
            let l = self.sequence_length as i64;
            let first: Vec<Tensor> = batch.obs.iter().map(|o| o.view([-1, l, o.size()[1]]).select(1, 0)).collect();
            tch::no_grad(|| self.value.forward(&first, Some(m)).1.expect("a recurrent critic"))
        });
        let spec = &self.description.action_spec;
        let action_input = |a: &Tensor| (spec.continuous_size > 0).then(|| a.shallow_clone());
        let fresh = action_input(&sample.continuous);
        let taken = action_input(&batch.continuous);
        let streams = self.signals.keys().len();
        let q1_taken = self.q1.forward_with_action(&batch.obs, taken.as_ref(), q_memories.as_ref()).0;
        let q2_taken = self.q2.forward_with_action(&batch.obs, taken.as_ref(), q_memories.as_ref()).0;
        // Without continuous actions the Q networks read no action: Q at the fresh actions is
        // Q at the buffer's, and the policy loss reads it without gradient (0.28's second pass
        // sends the policy loss's gradient into Q1, then zeroes it: the same update).
        let (q1_sampled, q2_sampled) = match &fresh {
            Some(fresh) => (
                // Q1's weights take no gradient from the policy loss (0.28 zeroes what its policy
                // pass leaves there): only the path to the action is recorded.
                with_frozen(&self.values_vs, Q1_NETWORK, || self.q1.forward_with_action(&batch.obs, Some(fresh), q_memories.as_ref()).0),
                tch::no_grad(|| self.q2.forward_with_action(&batch.obs, Some(fresh), q_memories.as_ref()).0),
            ),
            None => (q1_taken.detach(), q2_taken.detach()),
        };
        let evaluated = Evaluated {
            sample: &sample,
            values: per_stream(self.value.forward(&batch.obs, batch.critic_memories.as_ref()).0, streams),
            q1_sampled: per_stream(q1_sampled, streams),
            q2_sampled: per_stream(q2_sampled, streams),
            q1_taken: per_stream(q1_taken, streams),
            q2_taken: per_stream(q2_taken, streams),
            next_values: per_stream(tch::no_grad(|| self.target.forward(&batch.next_obs, next_memories.as_ref()).0), streams),
        };
        // Every signal's rewards of the sampled rows, with the signals' networks as they are now
        // (0.28 re-evaluates them on every minibatch).
        let signal_batch = SignalBatch { obs: &batch.obs, next_obs: &batch.next_obs, continuous: &batch.continuous, discrete: &batch.discrete, valid: batch.valid.as_ref(), done: Some(&batch.done) };
        let stream_targets: Vec<StreamTargets> =
            self.signals.evaluate(Some(&signal_batch), &batch.rewards).into_iter().map(|r| StreamTargets { rewards: r.rewards, gamma: r.gamma, ignore_done: r.ignore_done }).collect();
        let targets = BatchTargets { streams: &stream_targets, done: &batch.done, discrete: &batch.discrete, valid: batch.valid.as_ref() };
        let sizes: Vec<i64> = spec.discrete_branches.iter().map(|k| *k as i64).collect();
        let alphas = EntropyCoefficients {
            continuous: self.log_alpha_continuous.as_ref(),
            discrete: self.log_alpha_discrete.as_ref(),
            continuous_target: self.continuous_target,
            discrete_targets: &self.discrete_targets,
            branch_sizes: &sizes,
        };
        let l = losses(&evaluated, &targets, &alphas);
        let values = [&l.policy, &l.q1, &l.q2, &l.value].map(|t| t.double_value(&[]));
        if !values.iter().chain([l.entropy.double_value(&[])].iter()).all(|v| v.is_finite()) {
            return Err(context.divergence(&format!("the loss became non-finite (policy loss {}, Q1 loss {}, Q2 loss {}, value loss {})", values[0], values[1], values[2], values[3]), lr));
        }
        // One backward pass: the losses reach disjoint parameters (the policy loss the actor,
        // the Q and value losses Q1, Q2 and V, the entropy loss the coefficients), so each
        // optimizer gets the gradient of its own loss at the pre-step parameters, as 0.28's three
        // passes give it.
        for adam in [&mut self.policy_adam, &mut self.value_adam, &mut self.entropy_adam] {
            adam.zero_grad();
        }
        backward(&(&l.policy + &l.q1 + &l.q2 + &l.value + &l.entropy));
        for adam in [&mut self.policy_adam, &mut self.value_adam, &mut self.entropy_adam] {
            adam.step(lr);
        }
        soft_update(&self.values_vs, VALUE_NETWORK, &self.target_vs, TARGET_NETWORK, self.sac.tau);
        Ok(values)
    }

    /// The reward signals' updates due at this step (sac.md §3.4): each takes one minibatch
    /// of its own per update; returns the updates run.
    fn update_signals(&mut self, context: &mut TrainerContext) -> u64 {
        if self.signals.network_count() == 0 {
            return 0;
        }
        let due = self.signal_cadence.take_due(context.step);
        for _ in 0..due {
            for index in 0..self.signals.network_count() {
                let batch = self.buffer.sample(self.settings.hyperparameters.batch_size, &mut self.rng);
                let signal_batch = SignalBatch { obs: &batch.obs, next_obs: &batch.next_obs, continuous: &batch.continuous, discrete: &batch.discrete, valid: batch.valid.as_ref(), done: Some(&batch.done) };
                self.signals.update_network(index, &signal_batch);
            }
        }
        self.signals.report_update(context.stats);
        due
    }

    /// The name of a variable of any network holding a NaN or an infinity.
    fn first_non_finite_variable(&self) -> Option<String> {
        [&self.actor_vs, &self.values_vs, &self.target_vs, &self.entropy_vs]
            .iter()
            .flat_map(|vs| vs.variables())
            .find(|(_, t)| t.isfinite().all().int64_value(&[]) == 0)
            .map(|(name, _)| name)
    }

    /// Mean of `e^log α` (None for a missing coefficient).
    fn coefficient(log_alpha: Option<&Tensor>) -> Option<f32> {
        log_alpha.map(|l| l.exp().mean(Kind::Float).double_value(&[]) as f32)
    }
}

impl Algorithm for Sac {
    fn trainer_type(&self) -> &'static str {
        "sac"
    }

    fn actor(&self) -> &Actor {
        &self.actor
    }

    fn actor_store(&self) -> &nn::VarStore {
        &self.actor_vs
    }

    fn actor_weights(&self) -> Weights {
        actor_weights(&self.actor_vs)
    }

    fn learning_rate(&self, step: u64) -> f64 {
        self.learning_rate.value(step)
    }

    /// Normalisers, the value statistic, and every step into the replay buffer. A step that
    /// ended its episode by reaching its maximum length (interrupted) is not done, and looks
    /// to its own observation as the next (0.28 does so: sac.md §4.3).
    fn take_trajectory(&mut self, t: Trajectory, context: &mut TrainerContext) -> Result<(), TrainError> {
        let n = t.steps.len();
        let with_next = trajectory_observations(&t, &self.description.observation_sizes());
        update_normalizers(&mut self.actor, |steps| self.value.update_normalizers(steps), &with_next, &t, context)?;
        let (values, critic_memories) = if self.description.is_recurrent() {
            // V by sequence from the agent's carried memory: each step keeps the memory its
            // sequence starts from.
            let initial = self.critic_memories.get(&t.agent).cloned().unwrap_or_else(|| vec![0.0; self.description.memory_size]);
            let sequenced = critic_by_sequence(&self.value, &with_next, n, self.sequence_length, initial);
            if t.terminal || t.interrupted {
                self.critic_memories.forget(&t.agent);
            } else {
                self.critic_memories.store(&[t.agent], &sequenced.final_memory);
            }
            (sequenced.values, sequenced.initial_memories)
        } else {
            let steps: Vec<Tensor> = with_next.iter().map(|o| o.narrow(0, 0, n as i64)).collect();
            (tch::no_grad(|| Vec::<f32>::try_from(self.value.forward(&steps, None).0.flatten(0, -1)).unwrap_or_default()), vec![])
        };
        let streams = self.signals.tag_names();
        if !values.iter().all(|v| v.is_finite()) {
            return Err(context.diverge("the value estimates became non-finite", self.learning_rate.value(context.step)));
        }
        for (k, name) in streams.iter().enumerate() {
            let stream_values: Vec<f32> = values.iter().skip(k).step_by(streams.len()).take(n).copied().collect();
            context.stats.add(&format!("Policy/{name} Value"), stream_values.iter().sum::<f32>() / n as f32, StatsAggregation::Average);
        }
        if let Some(s) = t.steps.iter().find(|s| !s.reward.is_finite()) {
            return Err(context.overflow(t.agent.1, "the rewards".into(), format!("reach {:e}", s.reward)));
        }
        // For the signals' normalisers and the episodes' rewards per signal (SAC's updates
        // evaluate the rewards again on every minibatch).
        self.signals.rewards(&t, &with_next, context.stats);
        if self.training_over {
            return Ok(());
        }
        let total = self.description.action_spec.mask_len();
        let m = self.description.memory_size;
        for (k, s) in t.steps.iter().enumerate() {
            let last = k + 1 == n;
            let next_obs = match (last, t.interrupted) {
                (false, _) => &t.steps[k + 1].obs,
                (true, true) => &s.obs,
                (true, false) => &t.next_obs,
            };
            let mask: Vec<f32> = if s.action_mask.len() == total { s.action_mask.iter().map(|m| if *m { 0.0 } else { 1.0 }).collect() } else { vec![1.0; total] };
            self.buffer.push(Transition {
                obs: &s.obs,
                next_obs,
                continuous: &s.decision.continuous,
                discrete: &s.decision.discrete,
                mask: &mask,
                done: last && t.terminal && !t.interrupted,
                reward: s.reward,
                memory: &s.decision.memory,
                critic_memory: critic_memories.get(k * m..(k + 1) * m).unwrap_or_default(),
            });
        }
        // Sequences never straddle trajectories: the last one is padded at its end.
        self.buffer.pad_to_sequence();
        Ok(())
    }

    /// The gradient steps due at this step (sac.md §3.1), then the buffer trimmed.
    fn update_due(&self, step: u64) -> bool {
        let signals_due = self.signals.network_count() > 0 && self.signal_cadence.any_due(step);
        self.cadence.ready(step, self.buffer.len(), self.settings.hyperparameters.batch_size) && (self.cadence.any_due(step) || signals_due)
    }

    fn maybe_update(&mut self, context: &mut TrainerContext) -> Result<bool, TrainError> {
        let batch_size = self.settings.hyperparameters.batch_size;
        if !self.cadence.ready(context.step, self.buffer.len(), batch_size) {
            return Ok(false);
        }
        let lr = self.learning_rate.value(context.step);
        let due = self.cadence.take_due(context.step);
        let _threads = OneThread::for_update(due > 0, batch_size, self.description.hidden_units);
        let mut losses: [Vec<f32>; 4] = Default::default();
        for _ in 0..due {
            let values = self.gradient_step(context, lr)?;
            for (all, v) in losses.iter_mut().zip(values) {
                all.push(v as f32);
            }
        }
        self.buffer.trim(self.settings.hyperparameters.buffer_size);
        let signal_updates = self.update_signals(context);
        if due == 0 {
            return Ok(signal_updates > 0);
        }
        // Once per round of gradient steps (0.28 runs a whole cloning pass after every step).
        if let Some(cloning) = &mut self.cloning {
            context.stats.add("Losses/Pretraining Loss", cloning.update(&self.actor, context.step), StatsAggregation::Average);
        }
        if let Some(name) = self.first_non_finite_variable() {
            return Err(context.diverge(&format!("the update left non-finite values in {name}"), lr));
        }
        for (tag, values) in ["Losses/Policy Loss", "Losses/Q1 Loss", "Losses/Q2 Loss", "Losses/Value Loss"].into_iter().zip(losses) {
            if let Some(mean) = StatsAggregation::Average.aggregate(&values) {
                context.stats.add(tag, mean, StatsAggregation::Average);
            }
        }
        for (tag, value) in [("Policy/Continuous Entropy Coeff", Self::coefficient(self.log_alpha_continuous.as_ref())), ("Policy/Discrete Entropy Coeff", Self::coefficient(self.log_alpha_discrete.as_ref()))] {
            if let Some(value) = value {
                context.stats.add(tag, value, StatsAggregation::Average);
            }
        }
        context.stats.add("Policy/Learning Rate", lr as f32, StatsAggregation::Average);
        Ok(true)
    }

    fn training_over(&mut self) {
        self.training_over = true;
    }

    fn end_episodes(&mut self, ended: EndedEpisodes) {
        self.critic_memories.forget_episodes(ended);
        self.signals.end_episodes(ended);
    }

    /// Every network (the entropy coefficients included), the three optimizers' moments, and
    /// the update counter; the reward signals' networks, optimizers and update counter.
    fn state(&self) -> AlgorithmState {
        let mut tensors = Weights::default();
        for vs in [&self.actor_vs, &self.values_vs, &self.target_vs, &self.entropy_vs] {
            tensors.0.extend(variables(vs).0);
        }
        for adam in [&self.policy_adam, &self.value_adam, &self.entropy_adam] {
            tensors.0.extend(adam.moments().0);
        }
        let mut record = serde_json::json!({ "cadence": self.cadence, "value_optimizer": self.value_adam.state(), "entropy_optimizer": self.entropy_adam.state() });
        if let Some((signal_tensors, signals)) = self.signals.state() {
            tensors.0.extend(signal_tensors.0);
            record["reward_signals"] = signals;
            record["signal_cadence"] = serde_json::json!(self.signal_cadence);
        }
        if let Some((cloning_tensors, cloning)) = self.cloning.as_ref().map(BehavioralCloning::state) {
            tensors.0.extend(cloning_tensors.0);
            record["behavioral_cloning"] = cloning;
        }
        AlgorithmState { tensors, optimizer: self.policy_adam.state().clone(), record: Some(record) }
    }

    fn experience_to_keep(&self) -> Option<Weights> {
        self.sac.save_replay_buffer.then(|| self.buffer.to_weights())
    }

    fn restore_experience(&mut self, experience: &Weights) -> Result<usize, String> {
        self.buffer = self.buffer.from_weights(experience)?;
        Ok(self.buffer.len())
    }

    fn restore(&mut self, tensors: &Weights, optimizer: &AdamState, record: Option<&serde_json::Value>, resume: bool) -> Result<Vec<String>, TrainError> {
        let mut skipped = vec![];
        for vs in [&self.actor_vs, &self.values_vs, &self.target_vs, &self.entropy_vs] {
            skipped.extend(load_variables(vs, tensors));
        }
        skipped.extend(self.signals.restore(tensors, record.and_then(|r| r.get("reward_signals")), resume));
        if !resume {
            return Ok(skipped);
        }
        if let Some(cloning) = &mut self.cloning {
            cloning.restore(tensors, record.and_then(|r| r.get("behavioral_cloning")));
        }
        if let Some(saved) = record.and_then(|r| serde_json::from_value::<UpdateCadence>(r.get("signal_cadence")?.clone()).ok()) {
            self.signal_cadence.update_steps = saved.update_steps;
        }
        self.policy_adam.restore(optimizer, tensors);
        let recorded = |key: &str| record.and_then(|r| serde_json::from_value::<AdamState>(r[key].clone()).ok());
        self.value_adam.restore(&recorded("value_optimizer").unwrap_or_else(|| optimizer.clone()), tensors);
        self.entropy_adam.restore(&recorded("entropy_optimizer").unwrap_or_else(|| optimizer.clone()), tensors);
        match record.and_then(|r| serde_json::from_value::<UpdateCadence>(r["cadence"].clone()).ok()) {
            // The counter goes on; the ratio and initial steps are this run's settings.
            Some(saved) => self.cadence.update_steps = saved.update_steps,
            None => {
                log::warn!("the checkpoint holds no SAC update counter; it is recomputed from the step");
            }
        }
        Ok(skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sac.md §2.4: −n for continuous actions, 0.2·ln(k) per branch.
    #[test]
    fn target_entropies_follow_0_28() {
        let (continuous, discrete) = target_entropies(3, &[2, 3, 4, 5, 7]);
        assert_eq!(continuous, -3.0);
        let expected = [0.1386, 0.2197, 0.2773, 0.3219, 0.3892];
        for (d, e) in discrete.iter().zip(expected) {
            assert!((d - e).abs() < 1e-4, "{d} vs {e}");
        }
    }

    /// The target moves τ of the way to the source's trainable variables; its normaliser and
    /// variables of other names stay.
    #[test]
    fn soft_update_moves_the_target_by_tau() {
        let source = nn::VarStore::new(Device::Cpu);
        let target = nn::VarStore::new(Device::Cpu);
        let s = source.root() / "value_network";
        let t = target.root() / "target_network";
        let _ = s.var("w", &[2], nn::Init::Const(1.0));
        let _ = s.zeros_no_train("running_mean", &[1]).fill_(4.0);
        let w = t.var("w", &[2], nn::Init::Const(0.0));
        let mean = t.zeros_no_train("running_mean", &[1]);
        soft_update(&source, VALUE_NETWORK, &target, TARGET_NETWORK, 0.25);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![0.25, 0.25]);
        soft_update(&source, VALUE_NETWORK, &target, TARGET_NETWORK, 0.25);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![0.4375, 0.4375]);
        assert_eq!(Vec::<f32>::try_from(&mean).unwrap(), vec![0.0]);
    }
}
