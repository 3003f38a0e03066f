//! One behavior's PPO trainer (training.md §6-§9): acts for decision steps, turns steps
//! into trajectories, computes values and GAE, fills the update buffer, runs the clipped
//! PPO update with ML-Agents' per-dimension ratio, and reports statistics.

use crate::spec::model::{self, ModelInput};
use super::adam::Adam;
use super::memory::{critic_by_sequence, AgentMemories};
use super::networks::{actor_weights, load_variables, variables, Actor, Critic};
use crate::comm::side_channel::StatsAggregation;
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::policy::{PolicyDescription, SimpleVisualEncoder, Weights, POLICY_FORMAT_VERSION};
use crate::spec::BehaviorSpec;
use crate::checkpoint::{self, Checkpoint, CheckpointDescription, CurriculumRecord, CHECKPOINT_FORMAT_VERSION, ROLLOUT_PREFIX};
use crate::train::curriculum::RewardBuffer;
use crate::train::config::TrainerSettings;
use crate::train::error::TrainError;
use crate::train::gae::{gae, standardize};
use crate::train::schedule::DecayedValue;
use crate::train::stats::{StatsReporter, CUMULATIVE_REWARD};
use crate::train::tensorboard::SummaryWriter;
use crate::train::trajectory::{AgentProcessor, Decision, Trajectory};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::collections::VecDeque;
use std::time::Instant;
use tch::{nn, Device, Kind, Tensor};

/// How many recent decisions are kept for the parity record of a checkpoint.
const PARITY_ROWS: usize = 16;

/// One experience as the update needs it.
struct Row {
    obs: Vec<Vec<f32>>,
    continuous: Vec<f32>,
    discrete: Vec<i64>,
    log_probs: Vec<f32>,
    /// 1 = allowed.
    mask: Vec<f32>,
    advantage: f32,
    ret: f32,
    /// The actor memory consumed when acting (recurrent networks; empty otherwise).
    memory: Vec<f32>,
    /// The critic memory the row's sequence starts from (recurrent networks).
    critic_memory: Vec<f32>,
    /// A real step (false: padding at the end of a trajectory's last sequence).
    valid: bool,
}

impl Row {
    /// A padding row (lstm.md §2.2): zero observations, actions, memories and estimates, all
    /// actions allowed, masked out of every loss.
    fn padding(sizes: &[usize], c: usize, nb: usize, mask_len: usize, memory: usize) -> Self {
        Self {
            obs: sizes.iter().map(|s| vec![0.0; *s]).collect(),
            continuous: vec![0.0; c],
            discrete: vec![0; nb],
            log_probs: vec![0.0; c + nb],
            mask: vec![1.0; mask_len],
            advantage: 0.0,
            ret: 0.0,
            memory: vec![0.0; memory],
            critic_memory: vec![0.0; memory],
            valid: false,
        }
    }
}

/// A PPO trainer for one behavior.
pub struct PpoTrainer {
    pub behavior: String,
    pub settings: TrainerSettings,
    pub description: PolicyDescription,
    vs: nn::VarStore,
    actor: Actor,
    critic: Critic,
    adam: Adam,
    processor: AgentProcessor,
    buffer: Vec<Row>,
    stats: StatsReporter,
    writer: Option<SummaryWriter>,
    /// Agent steps ingested.
    pub step: u64,
    /// The step this session started from (non-zero when resumed).
    pub initial_step: u64,
    learning_rate: DecayedValue,
    beta: DecayedValue,
    epsilon: DecayedValue,
    rng: rand_chacha::ChaCha8Rng,
    started: Instant,
    /// Console summary lines so far (the training loop prints them).
    pub summaries: Vec<String>,
    /// How many of `summaries` [`PpoTrainer::new_summaries`] has handed out.
    summaries_taken: usize,
    /// Returns of the episodes finished so far, in order.
    pub episode_returns: Vec<f32>,
    /// Recent episode returns as the curriculum's completion criteria read them (its
    /// capacity is set by the lesson manager).
    pub reward_buffer: RewardBuffer,
    /// Recent decision inputs (observations, masks with 1 = allowed) for the parity record.
    recent_inputs: VecDeque<RecentInput>,
    /// The next multiple of `checkpoint_interval` to cross.
    next_checkpoint: u64,
    /// A checkpoint became due, labelled with this step (the step before the trajectory that
    /// crossed the interval, as ML-Agents labels it).
    pub pending_checkpoint: Option<u64>,
    /// Mean episode reward of the last summary (recorded with checkpoints).
    last_mean_reward: Option<f32>,
    /// An update produced a non-finite loss or non-finite weights: the weights are not to be
    /// saved (the last checkpoint on disk is the last good one).
    pub diverged: bool,
    /// Steps per training sequence (`memory.sequence_length`; 1 for a feed-forward network).
    sequence_length: usize,
    /// Each agent's actor memory between decisions (recurrent networks).
    actor_memories: AgentMemories,
    /// Each agent's critic memory between trajectories (recurrent networks; per agent and
    /// reset at every episode end, where 0.28 shares one across agents: lstm.md §10.1).
    critic_memories: AgentMemories,
    /// The agent whose consecutive decisions a recurrent network's parity record follows
    /// (a sequence; a new agent after its episode ends).
    parity_agent: Option<(usize, i32)>,
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

/// One decision's inputs kept for the parity record.
struct RecentInput {
    observations: Vec<Vec<f32>>,
    /// 1 = allowed.
    mask: Vec<f32>,
    /// The memory the actor read (recurrent networks).
    memory: Vec<f32>,
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
    returns: Tensor,
    /// Each sequence's starting actor and critic memories `[1, n_seq, m]` (recurrent networks).
    memories: Option<Tensor>,
    critic_memories: Option<Tensor>,
    /// 1 for real rows, 0 for padding (recurrent networks; None: every row is real).
    valid: Option<Tensor>,
}

/// The mean of `t` over real rows (0.28's `masked_mean`: padding rows count for nothing, in
/// the numerator and the denominator); the plain mean without `valid`.
fn masked_mean(t: &Tensor, valid: Option<&Tensor>) -> Tensor {
    let Some(valid) = valid else { return t.mean(Kind::Float) };
    let mask = if t.dim() == 2 { valid.unsqueeze(1).expand_as(t) } else { valid.shallow_clone() };
    (t * &mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0)
}

/// What one step of a source of agents completed.
pub struct Ingested {
    /// The returns of the episodes that ended.
    pub episode_returns: Vec<f32>,
    /// The last reward (plus group reward) of each episode that ended on its own.
    pub games: Vec<f32>,
}

/// Actions an actor sampled for decision steps.
pub struct Sampled {
    /// What the environment is sent (continuous actions clipped to [-3, 3] and divided by 3).
    pub actions: ActionTuple,
    /// What the trajectories record (raw samples and their log-probabilities).
    pub decisions: Vec<Decision>,
    /// The policy's entropy for each agent.
    pub entropy: Vec<f32>,
    /// A recurrent actor's memories after acting, agent after agent (empty otherwise).
    pub memories: Vec<f32>,
}

/// The configuration's sizes against the machine's memory once the behavior's observations
/// are known (`train::memory_cost`; the configuration was checked with one observation float).
fn check_memory(behavior: &str, spec: &BehaviorSpec, settings: &TrainerSettings) -> Result<(), TrainError> {
    use crate::train::memory_cost::{beyond, costs, physical_memory, rule, BehaviorShape};
    let Some(available) = physical_memory() else { return Ok(()) };
    let hidden = settings.network_settings.hidden_units as u64;
    let sizes = settings.sizes();
    let mut shape = BehaviorShape::least(&sizes);
    shape.observation_floats = spec.observation_specs.iter().map(|o| o.shape.iter().product::<usize>() as u64).sum();
    // Each observation's first layer: a vector's floats, or an image's encoder output, times
    // the hidden units.
    let first_layers: u64 = spec.observation_specs.iter().map(|o| SimpleVisualEncoder::of(&o.shape).map_or(o.shape.iter().product::<usize>(), |e| e.flat_size()) as u64).sum();
    shape.actor_parameters = shape.actor_parameters.saturating_add(first_layers.saturating_mul(hidden));
    match beyond(costs(&sizes, shape), available) {
        Some(cost) => Err(TrainError::Mismatch(format!("{behavior}: {} is {}; with this behavior's {} observation floats a step, {}", cost.key, cost.value, shape.observation_floats, rule(&cost, available)))),
        None => Ok(()),
    }
}

/// Observation values from this magnitude up overflow a network's float32 products on the way
/// to its outputs (and their squares overflow the normaliser well before).
const OVERFLOWING_OBSERVATION: f32 = 1e18;

/// The observation value of largest magnitude among the deciding agents: agent id,
/// observation index and value.
fn largest_observation(steps: &DecisionSteps) -> Option<(i32, usize, f32)> {
    let mut largest: Option<(i32, usize, f32)> = None;
    for (k, batch) in steps.obs.iter().enumerate() {
        for (row, agent) in steps.agent_id.iter().enumerate() {
            for v in batch.agent(row) {
                if largest.is_none_or(|(.., l)| v.abs() > l.abs()) {
                    largest = Some((*agent, k, *v));
                }
            }
        }
    }
    largest
}

/// Samples actions from `actor` for every agent of `steps` (a recurrent actor from
/// `memories`, `[1, n, m]` with `flat` the same values; each decision records the memory it
/// consumed); None when the outputs are not finite (a diverged network).
fn sample_actions(actor: &Actor, description: &PolicyDescription, steps: &DecisionSteps, memories: Option<(&Tensor, &[f32])>) -> Option<Sampled> {
    let n = steps.len();
    if n == 0 {
        return Some(Sampled { actions: ActionTuple::zeros(&description.action_spec, 0), decisions: vec![], entropy: vec![], memories: vec![] });
    }
    let obs: Vec<Tensor> = steps.obs.iter().map(|b| Tensor::from_slice(&b.data).reshape([n as i64, b.agent_len() as i64])).collect();
    let total = description.action_spec.mask_len();
    let masks = (total > 0).then(|| Tensor::from_slice(&steps.allowed_actions()).reshape([n as i64, total as i64]));
    let out = tch::no_grad(|| actor.forward(&obs, memories.map(|m| m.0), masks.as_ref(), None, false));
    let c = description.action_spec.continuous_size;
    let nb = description.action_spec.discrete_size();
    let raw: Vec<f32> = Vec::<f32>::try_from(out.continuous.flatten(0, -1)).unwrap_or_default();
    let discrete: Vec<i64> = Vec::<i64>::try_from(out.discrete.flatten(0, -1)).unwrap_or_default();
    let log_probs: Vec<f32> = Vec::<f32>::try_from(out.log_probs.flatten(0, -1)).unwrap_or_default();
    let entropy: Vec<f32> = Vec::<f32>::try_from(out.entropy).unwrap_or_default();
    let memories_out: Vec<f32> = out.memories.map(|m| Vec::<f32>::try_from(m.flatten(0, -1)).unwrap_or_default()).unwrap_or_default();
    if raw.iter().chain(&log_probs).chain(&memories_out).any(|v| !v.is_finite()) {
        return None;
    }
    let k = c + nb;
    let m = description.memory_size;
    let consumed = memories.map(|m| m.1).unwrap_or_default();
    let decisions = (0..n)
        .map(|a| Decision {
            continuous: raw[a * c..(a + 1) * c].to_vec(),
            discrete: discrete[a * nb..(a + 1) * nb].iter().map(|d| *d as i32).collect(),
            log_probs: log_probs[a * k..(a + 1) * k].to_vec(),
            memory: consumed.get(a * m..(a + 1) * m).map(<[f32]>::to_vec).unwrap_or_default(),
        })
        .collect();
    let actions = ActionTuple {
        continuous: raw.iter().map(|v| v.clamp(-model::ACTION_CLIP, model::ACTION_CLIP) / model::ACTION_CLIP).collect(),
        discrete: discrete.iter().map(|d| *d as i32).collect(),
    };
    Some(Sampled { actions, decisions, entropy, memories: memories_out })
}

/// [`sample_actions`] for one step of a source of agents (a worker, or one team of it): a
/// recurrent actor reads each agent's memory from `memories` (the agents whose episode ended
/// in `terminals` are forgotten first) and keeps there what it produced.
pub fn sample_with_memories(
    actor: &Actor,
    description: &PolicyDescription,
    memories: &mut AgentMemories,
    source: usize,
    steps: &DecisionSteps,
    terminals: &TerminalSteps,
) -> Option<Sampled> {
    if !description.is_recurrent() {
        return sample_actions(actor, description, steps, None);
    }
    let (agents, (tensor, flat)) = memories.for_decisions(source, steps, terminals);
    let sampled = sample_actions(actor, description, steps, Some((&tensor, &flat)))?;
    memories.store(&agents, &sampled.memories);
    Some(sampled)
}

impl PpoTrainer {
    pub fn new(behavior: &str, spec: &BehaviorSpec, settings: TrainerSettings, seed: u64, tensorboard: Option<&std::path::Path>) -> Result<Self, TrainError> {
        if let Some(o) = spec.observation_specs.iter().find(|o| o.shape.len() != 1 && SimpleVisualEncoder::of(&o.shape).is_none()) {
            return Err(TrainError::Unsupported(format!(
                "behavior {behavior}: observation {:?} has shape {:?}; vectors and images of at least {2}x{2} (the simple encoder) are trained",
                o.name,
                o.shape,
                SimpleVisualEncoder::MIN_SIDE
            )));
        }
        let has_visual = spec.observation_specs.iter().any(|o| o.shape.len() == 3);
        let encoder = settings.network_settings.vis_encode_type;
        if has_visual && encoder != crate::train::config::VisualEncoder::Simple {
            return Err(TrainError::Unsupported(format!("behavior {behavior}: vis_encode_type {encoder:?} is not supported yet (only simple)")));
        }
        check_memory(behavior, spec, &settings)?;
        tch::manual_seed(seed as i64);
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: spec.observation_specs.iter().map(|o| o.shape.clone()).collect(),
            action_spec: spec.action_spec.clone(),
            hidden_units: settings.network_settings.hidden_units,
            num_layers: settings.network_settings.num_layers.max(1),
            normalize: settings.network_settings.normalize,
            memory_size: settings.network_settings.memory.map_or(0, |m| m.memory_size),
        };
        let (settings_memory, description_memory) = (settings.network_settings.memory, description.memory_size);
        let vs = nn::VarStore::new(Device::Cpu);
        let actor = Actor::new(&vs.root(), &description);
        let critic = Critic::new(&(vs.root() / "critic"), &description);
        let h = &settings.hyperparameters;
        let adam = Adam::new(&vs);
        let max = settings.max_steps;
        let writer = match tensorboard {
            Some(dir) => Some(SummaryWriter::create(dir).map_err(|source| TrainError::Io { what: "TensorBoard folder", path: dir.into(), source })?),
            None => None,
        };
        Ok(Self {
            behavior: behavior.into(),
            learning_rate: DecayedValue::learning_rate(h.learning_rate_schedule, h.learning_rate, max),
            beta: DecayedValue::beta(h.beta_schedule, h.beta, max),
            epsilon: DecayedValue::epsilon(h.epsilon_schedule, h.epsilon, max),
            processor: AgentProcessor::new(settings.time_horizon),
            stats: StatsReporter::new(behavior, settings.summary_freq as u64, 0),
            settings,
            description,
            vs,
            actor,
            critic,
            adam,
            buffer: vec![],
            writer,
            step: 0,
            initial_step: 0,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            started: Instant::now(),
            summaries: vec![],
            summaries_taken: 0,
            episode_returns: vec![],
            reward_buffer: RewardBuffer::new(1),
            recent_inputs: VecDeque::new(),
            next_checkpoint: 0,
            pending_checkpoint: None,
            last_mean_reward: None,
            diverged: false,
            sequence_length: settings_memory.map_or(1, |m| m.sequence_length),
            actor_memories: AgentMemories::new(description_memory),
            critic_memories: AgentMemories::new(description_memory),
            parity_agent: None,
        })
    }

    /// Still below `max_steps`.
    pub fn should_train(&self) -> bool {
        self.step <= self.settings.max_steps
    }

    /// Samples actions for the agents that need a decision. Outputs that are not finite (a
    /// diverged network) are an error, and mark the trainer [`diverged`](Self::diverged).
    /// A recurrent actor reads each agent's memory (zeros for an agent whose episode ended in
    /// `terminals` of the same step, or that is new) and keeps what it produced.
    pub fn act(&mut self, source: usize, steps: &DecisionSteps, terminals: &TerminalSteps) -> Result<(ActionTuple, Vec<Decision>), TrainError> {
        let Some(sampled) = sample_with_memories(&self.actor, &self.description, &mut self.actor_memories, source, steps, terminals) else {
            if let Some((agent, observation, value)) = largest_observation(steps).filter(|(.., v)| v.abs() >= OVERFLOWING_OBSERVATION) {
                return Err(self.overflow(agent, format!("observation {observation}"), format!("holds {value:e}, and the policy's outputs became non-finite")));
            }
            self.diverged = true;
            return Err(self.divergence("the policy's outputs became non-finite", self.learning_rate.value(self.step)));
        };
        for e in sampled.entropy {
            self.stats.add("Policy/Entropy", e, StatsAggregation::Average);
        }
        let total = self.description.action_spec.mask_len();
        let mask_values = if total > 0 { steps.allowed_actions() } else { vec![] };
        let m = self.description.memory_size;
        // A recurrent network's record follows one agent, so its rows are sequences.
        let recorded: Vec<usize> = if self.description.is_recurrent() {
            if self.parity_agent.is_some_and(|(s, id)| s == source && terminals.agent_id.contains(&id)) {
                self.parity_agent = None;
            }
            if self.parity_agent.is_none() {
                self.parity_agent = steps.agent_id.first().map(|id| (source, *id));
            }
            self.parity_agent.and_then(|(s, id)| steps.agent_id.iter().position(|a| s == source && *a == id)).into_iter().collect()
        } else {
            (0..steps.len().min(PARITY_ROWS)).collect()
        };
        for a in recorded {
            let decision = &sampled.decisions[a];
            let observations = steps.obs.iter().map(|b| b.agent(a).to_vec()).collect();
            let mask = if total > 0 { mask_values[a * total..(a + 1) * total].to_vec() } else { vec![] };
            if self.recent_inputs.len() == PARITY_ROWS {
                self.recent_inputs.pop_front();
            }
            self.recent_inputs.push_back(RecentInput { observations, mask, memory: decision.memory.clone() });
            debug_assert_eq!(decision.memory.len(), m);
        }
        Ok((sampled.actions, sampled.decisions))
    }

    /// Takes one environment step of one source of agents (a worker, or one team of a worker;
    /// with the decisions `act` returned for it). Returns the episodes that ended, and the
    /// last reward of each that ended on its own (not interrupted), which self-play rates as a
    /// game. Past `max_steps` (self-play keeps counting a learning team's steps) nothing is
    /// kept for an update.
    /// Observations or rewards that overflow training's arithmetic are an error
    /// ([`TrainError::Overflow`]).
    pub fn ingest(&mut self, worker: usize, decision_steps: &DecisionSteps, terminal_steps: &TerminalSteps, decisions: Vec<Decision>) -> Result<Ingested, TrainError> {
        let (trajectories, episodes) = self.processor.add_steps(worker, decision_steps, terminal_steps, decisions);
        let games: Vec<f32> = trajectories.iter().filter(|t| t.terminal).filter_map(|t| t.steps.last()).map(|s| s.reward).collect();
        let episode_returns = episodes.iter().map(|e| e.cumulative_reward).collect();
        for e in episodes {
            self.episode_returns.push(e.cumulative_reward);
            self.reward_buffer.push(e.cumulative_reward);
            self.stats.add(CUMULATIVE_REWARD, e.cumulative_reward, StatsAggregation::Average);
            self.stats.add("Environment/Episode Length", e.length as f32, StatsAggregation::Average);
        }
        for t in trajectories {
            self.process(t)?;
        }
        if !self.should_train() {
            self.buffer.clear();
        }
        Ok(Ingested { episode_returns, games })
    }

    fn process(&mut self, t: Trajectory) -> Result<(), TrainError> {
        let n = t.steps.len();
        let sizes = self.description.observation_sizes();
        let obs: Vec<Tensor> = sizes
            .iter()
            .enumerate()
            .map(|(i, size)| {
                let mut data: Vec<f32> = t.steps.iter().flat_map(|s| s.obs[i].iter().copied()).collect();
                data.extend_from_slice(&t.next_obs[i]);
                Tensor::from_slice(&data).reshape([(n + 1) as i64, *size as i64])
            })
            .collect();
        let steps_only: Vec<Tensor> = obs.iter().map(|o| o.narrow(0, 0, n as i64)).collect();
        if let Err(k) = self.actor.update_normalizers(&steps_only).and_then(|()| self.critic.update_normalizers(&steps_only)) {
            let largest = t.steps.iter().flat_map(|s| s.obs[k].iter()).fold(0.0f32, |m, v| if v.abs() > m.abs() { *v } else { m });
            return Err(self.overflow(t.agent.1, format!("observation {k}"), format!("holds {largest:e}, whose square overflows the observation normaliser (normalize: true)")));
        }
        let (values, critic_memories) = if self.description.is_recurrent() {
            let initial = self.critic_memories.get(&t.agent).cloned().unwrap_or_else(|| vec![0.0; self.description.memory_size]);
            let sequenced = critic_by_sequence(&self.critic, &obs, n, self.sequence_length, initial);
            if t.terminal || t.interrupted {
                self.critic_memories.forget(&t.agent);
            } else {
                self.critic_memories.store(&[t.agent], &sequenced.final_memory);
            }
            (sequenced.values, sequenced.initial_memories)
        } else {
            (tch::no_grad(|| Vec::<f32>::try_from(self.critic.forward(&obs, None).0).unwrap_or_default()), vec![])
        };
        let signal = &self.settings.reward_signals["extrinsic"];
        let rewards: Vec<f32> = t.steps.iter().map(|s| s.reward * signal.strength as f32).collect();
        let (advantages, returns) =
            gae(&rewards, &values[..n], values[n], t.terminal, signal.gamma as f32, self.settings.hyperparameters.lambd as f32);
        if !returns.iter().chain(&advantages).all(|v| v.is_finite()) {
            if !values.iter().all(|v| v.is_finite()) {
                self.diverged = true;
                return Err(self.divergence("the value estimates became non-finite", self.learning_rate.value(self.step)));
            }
            let largest = rewards.iter().fold(0.0f32, |m, r| if r.abs() > m.abs() { *r } else { m });
            return Err(self.overflow(t.agent.1, "the rewards".into(), format!("reach {largest:e}, and their discounted returns overflow")));
        }
        let mean_value = values[..n].iter().sum::<f32>() / n as f32;
        self.stats.add("Policy/Extrinsic Value Estimate", mean_value, StatsAggregation::Average);
        let total = self.description.action_spec.mask_len();
        let m = self.description.memory_size;
        for (k, s) in t.steps.into_iter().enumerate() {
            let mask = if s.action_mask.len() == total { s.action_mask.iter().map(|m| if *m { 0.0 } else { 1.0 }).collect() } else { vec![1.0; total] };
            self.buffer.push(Row {
                obs: s.obs,
                continuous: s.decision.continuous,
                discrete: s.decision.discrete.iter().map(|d| *d as i64).collect(),
                log_probs: s.decision.log_probs,
                mask,
                advantage: advantages[k],
                ret: returns[k],
                memory: s.decision.memory,
                critic_memory: critic_memories.get(k * m..(k + 1) * m).map(<[f32]>::to_vec).unwrap_or_default(),
                valid: true,
            });
        }
        // Sequences never straddle trajectories: the last one is padded at its end.
        let (a, nb) = (&self.description.action_spec, self.description.action_spec.discrete_size());
        while self.buffer.len() % self.sequence_length != 0 {
            self.buffer.push(Row::padding(&sizes, a.continuous_size, nb, total, m));
        }
        let before = self.step;
        self.step += n as u64;
        let interval = self.settings.checkpoint_interval.max(1);
        if self.next_checkpoint == 0 {
            self.next_checkpoint = (before / interval + 1) * interval;
        }
        if self.step >= self.next_checkpoint {
            self.pending_checkpoint = Some(before);
            self.next_checkpoint = (self.step / interval + 1) * interval;
        }
        if let Some(label) = self.stats.due(self.step) {
            self.summarize(label);
        }
        Ok(())
    }

    fn summarize(&mut self, label: u64) {
        let line = self.stats.console_line(label, self.started.elapsed().as_secs_f64(), self.should_train());
        self.last_mean_reward = self.stats.mean(CUMULATIVE_REWARD);
        self.summaries.push(line);
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = self.stats.write(w, label) {
                log::warn!("TensorBoard write failed: {e}");
            }
        } else {
            self.stats.clear();
        }
    }

    /// Runs an update when the buffer holds more than `buffer_size` experiences.
    /// Trains on the buffer once it holds more than `buffer_size` steps. An update whose loss
    /// is not finite stops before the optimizer step; one that leaves non-finite weights marks
    /// the trainer [`diverged`](Self::diverged). Either is an error that says what to change.
    /// Returns whether an update ran.
    pub fn maybe_update(&mut self) -> Result<bool, TrainError> {
        let h = self.settings.hyperparameters.clone();
        if self.buffer.len() <= h.buffer_size {
            return Ok(false);
        }
        let mut advantages: Vec<f32> = self.buffer.iter().map(|r| r.advantage).collect();
        standardize(&mut advantages);
        for (r, a) in self.buffer.iter_mut().zip(advantages) {
            r.advantage = a;
        }
        let (lr, beta, epsilon) = (self.learning_rate.value(self.step), self.beta.value(self.step), self.epsilon.value(self.step));
        let (mut policy_losses, mut value_losses) = (vec![], vec![]);
        // Whole sequences are shuffled; a minibatch is batch_size rounded down to whole
        // sequences, at least one (0.28's `_update_policy`). Without memory a sequence is a step.
        let l = self.sequence_length;
        let sequences_per_batch = (h.batch_size - h.batch_size % l).max(l) / l;
        let mut order: Vec<usize> = (0..self.buffer.len() / l).collect();
        for _ in 0..h.num_epoch {
            order.shuffle(&mut self.rng);
            for chunk in order.chunks_exact(sequences_per_batch) {
                let batch = self.minibatch(chunk);
                let (loss, policy_loss, value_loss) = self.losses(&batch, beta, epsilon);
                let (policy_value, value_value) = (policy_loss.double_value(&[]), value_loss.double_value(&[]));
                if !(policy_value.is_finite() && value_value.is_finite() && loss.double_value(&[]).is_finite()) {
                    self.buffer.clear();
                    return Err(self.divergence(&format!("the loss became non-finite (policy loss {policy_value}, value loss {value_value})"), lr));
                }
                self.adam.zero_grad();
                loss.backward();
                self.adam.step(lr);
                policy_losses.push(policy_value.abs() as f32);
                value_losses.push(value_value as f32);
            }
        }
        self.buffer.clear();
        if let Some(name) = first_non_finite_variable(&self.vs) {
            self.diverged = true;
            return Err(self.divergence(&format!("the update left non-finite values in {name}"), lr));
        }
        for (tag, values) in [("Losses/Policy Loss", policy_losses), ("Losses/Value Loss", value_losses)] {
            if let Some(mean) = StatsAggregation::Average.aggregate(&values) {
                self.stats.add(tag, mean, StatsAggregation::Average);
            }
        }
        self.stats.add("Policy/Learning Rate", lr as f32, StatsAggregation::Average);
        self.stats.add("Policy/Epsilon", epsilon as f32, StatsAggregation::Average);
        self.stats.add("Policy/Beta", beta as f32, StatsAggregation::Average);
        Ok(true)
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
        let returns: Vec<f32> = rows.iter().map(|r| r.ret).collect();
        Minibatch {
            obs: self.description.observation_sizes().iter().enumerate().map(|(i, s)| rows_to_tensor(&rows, |r| &r.obs[i], *s)).collect(),
            continuous: rows_to_tensor(&rows, |r| &r.continuous, c),
            discrete: Tensor::from_slice(&discrete).reshape([rows.len() as i64, nb as i64]),
            masks: (total > 0).then(|| rows_to_tensor(&rows, |r| &r.mask, total)),
            old_log_probs: rows_to_tensor(&rows, |r| &r.log_probs, c + nb),
            advantages: Tensor::from_slice(&advantages).unsqueeze(1),
            returns: Tensor::from_slice(&returns),
            memories: start_memories(|r| &r.memory),
            critic_memories: start_memories(|r| &r.critic_memory),
            valid: recurrent.then(|| Tensor::from_slice(&valid)),
        }
    }

    /// The PPO loss of a minibatch (clipped surrogate with ML-Agents' per-dimension ratio,
    /// value loss, entropy bonus), and its policy and value parts.
    fn losses(&self, batch: &Minibatch, beta: f64, epsilon: f64) -> (Tensor, Tensor, Tensor) {
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
        let (ret, old_v) = (&batch.returns, &batch.returns);
        let (v, _) = self.critic.forward(&batch.obs, batch.critic_memories.as_ref());
        let v_clipped = old_v + (&v - old_v).clamp(-epsilon, epsilon);
        let value_loss = mean(&(ret - &v).pow_tensor_scalar(2).max_other(&(ret - &v_clipped).pow_tensor_scalar(2)));
        let loss: Tensor = &policy_loss + &value_loss * 0.5 - mean(&out.entropy) * beta;
        (loss, policy_loss, value_loss)
    }

    /// The error for numbers from the environment that training cannot hold.
    fn overflow(&self, agent: i32, what: String, detail: String) -> TrainError {
        TrainError::Overflow { behavior: self.behavior.clone(), agent, step: self.step, what, detail }
    }

    /// The error for a diverged update.
    fn divergence(&self, what: &str, learning_rate: f64) -> TrainError {
        TrainError::Diverged { behavior: self.behavior.clone(), step: self.step, what: what.into(), learning_rate }
    }

    /// The actor's weights as a backend-neutral policy.
    pub fn policy(&self) -> (PolicyDescription, Weights) {
        (self.description.clone(), actor_weights(&self.vs))
    }

    /// Text appended to the console summary lines (self-play's learning team and opponents).
    pub fn set_summary_context(&mut self, context: Option<String>) {
        self.stats.context = context;
    }

    /// Records a value the environment sent on the stats side channel (summarised with the
    /// trainer's own statistics, by its aggregation).
    pub fn add_environment_stat(&mut self, key: &str, value: f32, aggregation: StatsAggregation) {
        self.stats.add(key, value, aggregation);
    }

    /// The summary lines not handed out yet.
    pub fn new_summaries(&mut self) -> Vec<String> {
        let new = self.summaries[self.summaries_taken..].to_vec();
        self.summaries_taken = self.summaries.len();
        new
    }

    /// Mean episode reward of the last summary.
    pub fn last_summary_reward(&self) -> Option<f32> {
        self.last_mean_reward
    }

    /// Drops the episodes in progress (the environment is being reset under them) and the
    /// memories of their agents.
    pub fn end_episodes(&mut self) {
        self.processor.drop_episodes_in_progress();
        self.actor_memories.clear();
        self.critic_memories.clear();
        self.parity_agent = None;
    }

    /// Everything a checkpoint holds: the description (labelled `step`, with the run's
    /// curriculum if it has one) and the tensors (actor, critic, Adam's moments, and the
    /// parity record of recent decisions).
    pub fn checkpoint(&self, step: u64, curriculum: Option<CurriculumRecord>) -> (CheckpointDescription, Weights) {
        let mut tensors = variables(&self.vs);
        tensors.0.extend(self.adam.moments().0);
        tensors.0.extend(self.parity_record(step).0);
        let description = CheckpointDescription {
            format_version: CHECKPOINT_FORMAT_VERSION,
            behavior: self.behavior.clone(),
            trainer: "ppo".into(),
            step,
            policy: self.description.clone(),
            optimizer: self.adam.state().clone(),
            weights_file: String::new(),
            weights_sha256: String::new(),
            reward: self.last_mean_reward,
            creation_time: checkpoint::now(),
            curriculum,
            self_play: None,
        };
        (description, tensors)
    }

    /// The recent decisions' inputs and the training network's outputs on them: deterministic
    /// actions, and continuous actions sampled with recorded standard-normal noise.
    fn parity_record(&self, step: u64) -> Weights {
        use crate::policy::WeightTensor;
        let n = self.recent_inputs.len();
        let mut out = Weights::default();
        if n == 0 {
            return out;
        }
        let mut put = |name: &str, shape: Vec<usize>, data: Vec<f32>| {
            out.0.insert(format!("{ROLLOUT_PREFIX}{name}"), WeightTensor { shape, data });
        };
        let mut obs = vec![];
        for (i, size) in self.description.observation_sizes().into_iter().enumerate() {
            let data: Vec<f32> = self.recent_inputs.iter().flat_map(|r| r.observations[i].iter().copied()).collect();
            obs.push(Tensor::from_slice(&data).reshape([n as i64, size as i64]));
            put(&ModelInput::Observation(i).name(), vec![n, size], data);
        }
        let total = self.description.action_spec.mask_len();
        let masks = (total > 0).then(|| {
            let data: Vec<f32> = self.recent_inputs.iter().flat_map(|r| r.mask.iter().copied()).collect();
            put(model::ACTION_MASKS, vec![n, total], data.clone());
            Tensor::from_slice(&data).reshape([n as i64, total as i64])
        });
        // A recurrent actor: the rows are one agent's consecutive decisions, replayed with this
        // network's own memory carried from row to row.
        let m = self.description.memory_size;
        let memories = self.description.is_recurrent().then(|| {
            let data = self.carried_memories(&obs, masks.as_ref());
            put(model::RECURRENT_IN, vec![n, m], data.clone());
            Tensor::from_slice(&data).reshape([1, n as i64, m as i64])
        });
        let out_det = tch::no_grad(|| self.actor.forward(&obs, memories.as_ref(), masks.as_ref(), None, true));
        if let Some(after) = &out_det.memories {
            put(model::RECURRENT_OUT, vec![n, m], Vec::<f32>::try_from(after.flatten(0, -1)).unwrap_or_default());
        }
        let c = self.description.action_spec.continuous_size;
        if c > 0 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(step);
            let noise: Vec<f32> = (0..n * c).map(|_| rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng)).collect();
            let mu = &out_det.continuous;
            let sigma = self.actor.log_sigma().map(|l| l.exp()).unwrap_or_else(|| mu.ones_like());
            let noise_t = Tensor::from_slice(&noise).reshape([n as i64, c as i64]);
            let sampled = (mu + sigma * &noise_t).clamp(-model::ACTION_CLIP as f64, model::ACTION_CLIP as f64) / model::ACTION_CLIP as f64;
            let deterministic = mu.clamp(-model::ACTION_CLIP as f64, model::ACTION_CLIP as f64) / model::ACTION_CLIP as f64;
            let values = |t: &Tensor| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap_or_default();
            put("noise", vec![n, c], noise);
            put(model::DETERMINISTIC_CONTINUOUS_ACTIONS, vec![n, c], values(&deterministic));
            put(model::CONTINUOUS_ACTIONS, vec![n, c], values(&sampled));
        }
        let b = self.description.action_spec.discrete_size();
        if b > 0 {
            let choices: Vec<i64> = Vec::<i64>::try_from(out_det.discrete.flatten(0, -1)).unwrap_or_default();
            put(model::DETERMINISTIC_DISCRETE_ACTIONS, vec![n, b], choices.iter().map(|v| *v as f32).collect());
            // Sampled with recorded uniform draws: the inverse CDF of each branch's probabilities.
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(step.wrapping_add(1));
            let uniform: Vec<f32> = (0..n * b).map(|_| rand::Rng::random::<f32>(&mut rng)).collect();
            let probabilities = self.actor.branch_probabilities(&obs, memories.as_ref(), masks.as_ref());
            let mut sampled = vec![0.0f32; n * b];
            for (branch, p) in probabilities.iter().enumerate() {
                let rows: Vec<f32> = Vec::<f32>::try_from(p.flatten(0, -1)).unwrap_or_default();
                let k = rows.len() / n;
                for r in 0..n {
                    let choice = crate::policy::parity::inverse_cdf(&rows[r * k..(r + 1) * k], uniform[r * b + branch]);
                    sampled[r * b + branch] = choice as f32;
                }
            }
            put("uniform", vec![n, b], uniform);
            put(model::DISCRETE_ACTIONS, vec![n, b], sampled);
        }
        out
    }

    /// The memory each recorded row starts from when the current actor replays the rows in
    /// order: the first row's, and a new episode's (zeros), as recorded; every other row's
    /// what the actor produced on the row before (`[n, m]` flat).
    fn carried_memories(&self, observations: &[Tensor], masks: Option<&Tensor>) -> Vec<f32> {
        let m = self.description.memory_size;
        let mut carried = Vec::with_capacity(self.recent_inputs.len() * m);
        let mut memory = vec![0.0f32; m];
        for (r, recent) in self.recent_inputs.iter().enumerate() {
            if crate::policy::parity::starts_sequence(r, &recent.memory) {
                memory = recent.memory.clone();
            }
            carried.extend_from_slice(&memory);
            let row: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, r as i64, 1)).collect();
            let mask = masks.map(|t| t.narrow(0, r as i64, 1));
            let before = Tensor::from_slice(&memory).reshape([1, 1, m as i64]);
            let out = tch::no_grad(|| self.actor.forward(&row, Some(&before), mask.as_ref(), None, true));
            memory = out.memories.map(|t| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap_or_default()).unwrap_or_default();
        }
        carried
    }

    /// Loads a checkpoint's actor, critic and normalisers, and, when `resume`, Adam's state
    /// and the step count (`--initialize-from` starts again at step 0 with fresh Adam).
    pub fn restore(&mut self, checkpoint: &Checkpoint, resume: bool) -> Result<(), TrainError> {
        let differences = checkpoint.description.policy.differences(&self.description);
        if !differences.is_empty() {
            let what_to_do = if resume {
                "resume with the run's own configuration.yaml, or start a new network with --initialize-from"
            } else {
                "--initialize-from needs the same network: give this run the checkpoint's network_settings"
            };
            return Err(TrainError::Mismatch(format!("{}: the checkpoint's network differs from this run's ({}); {what_to_do}", checkpoint.path.display(), differences.join("; "))));
        }
        let skipped = load_variables(&self.vs, &checkpoint.tensors);
        if !skipped.is_empty() {
            log::warn!("{}: no tensors for {skipped:?}; they keep their fresh values", checkpoint.path.display());
        }
        if resume {
            self.adam.restore(&checkpoint.description.optimizer, &checkpoint.tensors);
            self.step = checkpoint.description.step;
            self.initial_step = self.step;
            self.stats = StatsReporter::new(&self.behavior, self.settings.summary_freq as u64, self.step);
            self.next_checkpoint = 0;
            self.last_mean_reward = checkpoint.description.reward;
            if let Some(record) = &checkpoint.description.curriculum {
                self.reward_buffer.restore(&record.reward_buffer);
            }
        }
        Ok(())
    }
}
