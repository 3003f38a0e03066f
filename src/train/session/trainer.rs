//! One behavior's trainer as the session drives it, whatever its trainer type: it acts for
//! decision steps, assembles trajectories and hands them to its [`Algorithm`], counts steps,
//! keeps the statistics and summaries, says when a checkpoint is due, records recent
//! decisions for the parity record, and writes and restores checkpoints.

use super::overlap::{Finished, Overlap, MAX_QUEUED_TRAJECTORIES};
use super::parity::{parity_record, RecentInput, PARITY_ROWS};
use crate::checkpoint::{self, Checkpoint, CheckpointDescription, CurriculumRecord, CHECKPOINT_FORMAT_VERSION};
use crate::comm::side_channel::StatsAggregation;
use crate::env::{ActionTuple, DecisionSteps, TerminalSteps};
use crate::policy::{ContinuousHead, EncoderType as VisualEncoderType, PolicyDescription, VisualEncoder, Weights, POLICY_FORMAT_VERSION};
use crate::spec::{BehaviorSpec, ObservationType};
use crate::train::algorithm::{Algorithm, TrainerContext};
use crate::train::config::{GoalConditioning, RewardSignalKind, TrainerSettings};
use crate::train::curriculum::RewardBuffer;
use crate::train::error::TrainError;
use crate::train::networks::acting::{largest_observation, sample_with_memories, OVERFLOWING_OBSERVATION};
use crate::train::networks::memory::AgentMemories;
use crate::train::ppo::trainer::Ppo;
use crate::train::sac::trainer::Sac;
use crate::train::stats::{StatsReporter, CUMULATIVE_REWARD, GROUP_CUMULATIVE_REWARD, GROUP_EPISODE_RETURN, GROUP_SIZE};
use crate::train::tensorboard::SummaryWriter;
use crate::train::trajectory::{AgentProcessor, Decision, EndedEpisodes, Trajectory};
use std::collections::VecDeque;
use std::time::Instant;

/// What one step of a source of agents completed.
pub struct Ingested {
    /// The returns of the episodes that ended.
    pub episode_returns: Vec<f32>,
    /// The last reward (plus group reward) of each episode that ended on its own.
    pub games: Vec<f32>,
}

/// One behavior's trainer.
pub struct BehaviorTrainer {
    pub behavior: String,
    pub settings: TrainerSettings,
    pub description: PolicyDescription,
    /// The trainer type's networks and update; None while an update runs on the update thread
    /// (`threaded: true`).
    algorithm: Option<Box<dyn Algorithm>>,
    /// With `threaded: true`: the update thread and what acts and waits while it updates.
    overlap: Option<Overlap>,
    processor: AgentProcessor,
    stats: StatsReporter,
    writer: Option<SummaryWriter>,
    /// Agent steps ingested.
    pub step: u64,
    /// The step this session started from (non-zero when resumed).
    pub initial_step: u64,
    started: Instant,
    /// Console summary lines so far (the training loop prints them).
    pub summaries: Vec<String>,
    /// How many of `summaries` [`BehaviorTrainer::new_summaries`] has handed out.
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
    /// An update produced non-finite weights or outputs: the weights are not to be saved
    /// (the last checkpoint on disk is the last good one).
    pub diverged: bool,
    /// 0.28's warning about group rewards under a single-agent trainer was given.
    warned_group_rewards: bool,
    /// Updates that ran on the update thread (`threaded: true`), and the time they took there.
    pub updates_on_thread: u64,
    pub update_thread_time: std::time::Duration,
    /// Each agent's actor memory between decisions (recurrent networks).
    actor_memories: AgentMemories,
    /// The agent whose consecutive decisions a recurrent network's parity record follows
    /// (a sequence; a new agent after its episode ends).
    parity_agent: Option<(usize, i32)>,
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
    let encoder = settings.network_settings.vis_encode_type;
    let first_layers: u64 = spec.observation_specs.iter().map(|o| VisualEncoder::new(encoder, &o.shape).map_or(o.shape.iter().product::<usize>(), |e| e.flat_size()) as u64).sum();
    shape.actor_parameters = shape.actor_parameters.saturating_add(first_layers.saturating_mul(hidden));
    // A goal-conditioned body's hypernetwork generates an [input, hidden] matrix from `hidden`
    // values: hidden · input · hidden more weights.
    let network = &settings.network_settings;
    let has_goal = spec.observation_specs.iter().any(|o| o.observation_type == ObservationType::GoalSignal);
    if has_goal && network.goal_conditioning_type == GoalConditioning::Hyper {
        let encodings: u64 = spec.observation_specs.iter().map(|o| if o.shape.len() == 3 { hidden } else { o.shape.iter().product::<usize>() as u64 }).sum();
        let input = if network.num_layers > 1 { hidden } else { encodings };
        shape.actor_parameters = shape.actor_parameters.saturating_add(hidden.saturating_mul(input).saturating_mul(hidden));
    }
    match beyond(costs(&sizes, shape), available) {
        Some(cost) => Err(TrainError::Mismatch(format!("{behavior}: {} is {}; with this behavior's {} observation floats a step, {}", cost.key, cost.value, shape.observation_floats, rule(&cost, available)))),
        None => Ok(()),
    }
}

/// The observations training can encode: vectors, and images the policy's encoder and each
/// reward signal's take (0.28's "too small" error otherwise).
fn check_observations(behavior: &str, spec: &BehaviorSpec, settings: &TrainerSettings) -> Result<(), TrainError> {
    let signals = settings.reward_signals.iter().filter(|(_, s)| s.kind != RewardSignalKind::Extrinsic);
    let encoders: Vec<(String, VisualEncoderType)> = std::iter::once(("network_settings.vis_encode_type".to_string(), settings.network_settings.vis_encode_type))
        .chain(signals.map(|(key, s)| (format!("reward_signals.{key}.network_settings.vis_encode_type"), s.network_settings.vis_encode_type)))
        .collect();
    for o in &spec.observation_specs {
        match o.shape.len() {
            1 => {}
            3 => {
                for (setting, encoder) in &encoders {
                    if let Err(e) = VisualEncoder::new(*encoder, &o.shape) {
                        return Err(TrainError::Unsupported(format!("behavior {behavior}: observation {:?} of shape {:?} ({setting}: {encoder}): {e}", o.name, o.shape)));
                    }
                }
            }
            2 if o.is_entities() && o.observation_type == ObservationType::GoalSignal => {
                return Err(TrainError::Unsupported(format!("behavior {behavior}: observation {:?} is a goal signal with a variable length; goal signals are vectors or images (as in ML-Agents 0.28)", o.name)));
            }
            2 if o.is_entities() && o.shape.iter().all(|d| *d > 0) => {}
            2 => {
                return Err(TrainError::Unsupported(format!(
                    "behavior {behavior}: observation {:?} of shape {:?} has dimension properties {:?}; a rank-2 observation is trained as entities (a BufferSensor) only with (VariableSize, None), as ML-Agents 0.28 requires",
                    o.name, o.shape, o.dimension_properties
                )))
            }
            _ => {
                return Err(TrainError::Unsupported(format!(
                    "behavior {behavior}: observation {:?} has shape {:?}; vectors, entity buffers [max entities, entity size] and images [height, width, channels] are trained",
                    o.name, o.shape
                )))
            }
        }
    }
    // A signal's network is conditioned on the goal signals as the policy's is; a signal asking
    // for the hypernetwork beside a policy that does not is refused.
    let goal = spec.observation_specs.iter().find(|o| o.observation_type == ObservationType::GoalSignal);
    let hyper_signal = settings.reward_signals.iter().find(|(_, s)| s.kind != RewardSignalKind::Extrinsic && s.network_settings.goal_conditioning_type == GoalConditioning::Hyper);
    if let (Some(goal), Some((key, _)), GoalConditioning::None) = (goal, hyper_signal, settings.network_settings.goal_conditioning_type) {
        return Err(TrainError::Unsupported(format!(
            "behavior {behavior}: observation {:?} is a goal signal; the {key} reward signal's goal_conditioning_type is hyper (its default) while the behavior's is none, which is not trained here; set reward_signals.{key}.network_settings.goal_conditioning_type: none too",
            goal.name
        )));
    }
    Ok(())
}

impl BehaviorTrainer {
    /// A trainer of the settings' trainer type for `behavior`, its networks drawn from `seed`;
    /// TensorBoard event files go to `tensorboard`.
    pub fn new(behavior: &str, spec: &BehaviorSpec, settings: TrainerSettings, seed: u64, tensorboard: Option<&std::path::Path>) -> Result<Self, TrainError> {
        check_observations(behavior, spec, &settings)?;
        check_memory(behavior, spec, &settings)?;
        let demonstrations = crate::train::demonstrations::Demonstrations::load(behavior, &settings, spec)?;
        tch::manual_seed(seed as i64);
        let description = PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: spec.observation_specs.iter().map(|o| o.shape.clone()).collect(),
            action_spec: spec.action_spec.clone(),
            hidden_units: settings.network_settings.hidden_units,
            num_layers: settings.network_settings.num_layers.max(1),
            normalize: settings.network_settings.normalize,
            memory_size: settings.network_settings.memory.map_or(0, |m| m.memory_size),
            vis_encode_type: settings.network_settings.vis_encode_type,
            // 0.28's default conditions the body's last layer on the goal signals through a
            // hypernetwork (`goal_conditioning_type: hyper`).
            goal_observations: match settings.network_settings.goal_conditioning_type {
                GoalConditioning::Hyper => spec.observation_specs.iter().enumerate().filter(|(_, o)| o.observation_type == ObservationType::GoalSignal).map(|(i, _)| i).collect(),
                GoalConditioning::None => vec![],
            },
            // SAC's actor squashes its Gaussian (sac.md §2.2).
            continuous_head: if settings.trainer_type == "sac" { ContinuousHead::Squashed } else { ContinuousHead::Clipped },
        };
        let algorithm: Box<dyn Algorithm> = match settings.trainer_type.as_str() {
            // POCA is PPO's update with the centralized critic (`train::poca`).
            "ppo" | "poca" => Box::new(Ppo::new(&description, &settings, seed, &demonstrations)),
            "sac" => Box::new(Sac::new(behavior, &description, &settings, seed, &demonstrations)?),
            other => return Err(TrainError::Unsupported(format!("behavior {behavior}: trainer_type {other} is not trained yet"))),
        };
        let overlap = if settings.threaded { Some(Overlap::new(behavior, &description)?) } else { None };
        if settings.threaded {
            // The environment (this thread and the players) and the update thread each want a
            // core: libtorch's own threads take only what is left, or their spinning slows both.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            tch::set_num_threads((cores as i32 - 1).max(1));
        }
        let writer = match tensorboard {
            Some(dir) => Some(SummaryWriter::create(dir).map_err(|source| TrainError::Io { what: "TensorBoard folder", path: dir.into(), source })?),
            None => None,
        };
        Ok(Self {
            behavior: behavior.into(),
            processor: AgentProcessor::new(settings.time_horizon),
            stats: StatsReporter::new(behavior, settings.summary_freq as u64, 0),
            actor_memories: AgentMemories::new(description.memory_size),
            settings,
            description,
            algorithm: Some(algorithm),
            overlap,
            writer,
            step: 0,
            initial_step: 0,
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
            warned_group_rewards: false,
            updates_on_thread: 0,
            update_thread_time: std::time::Duration::ZERO,
            parity_agent: None,
        })
    }

    /// Still below `max_steps`.
    pub fn should_train(&self) -> bool {
        self.step <= self.settings.max_steps
    }

    /// The algorithm, which is here unless an update runs on the update thread; the session
    /// reads and saves it only between updates (checkpoints fall due as trajectories are taken,
    /// which happens only then).
    fn home(&self) -> &dyn Algorithm {
        self.algorithm.as_deref().expect("the algorithm is read only between threaded updates")
    }

    /// Whether an update is running on the update thread.
    pub fn updating(&self) -> bool {
        self.algorithm.is_none()
    }

    /// The learning rate now (while an update runs, the one it began with).
    fn learning_rate(&self) -> f64 {
        match (&self.algorithm, &self.overlap) {
            (Some(a), _) => a.learning_rate(self.step),
            (None, Some(o)) => o.learning_rate,
            (None, None) => 0.0,
        }
    }

    /// Samples actions for the agents that need a decision. Outputs that are not finite (a
    /// diverged network) are an error, and mark the trainer [`diverged`](Self::diverged).
    /// A recurrent actor reads each agent's memory (zeros for an agent whose episode ended in
    /// `terminals` of the same step, or that is new) and keeps what it produced.
    pub fn act(&mut self, source: usize, steps: &DecisionSteps, terminals: &TerminalSteps) -> Result<(ActionTuple, Vec<Decision>), TrainError> {
        let actor = match (&self.algorithm, &self.overlap) {
            (Some(algorithm), _) => algorithm.actor(),
            (None, Some(overlap)) => &overlap.acting.actor,
            (None, None) => unreachable!("an algorithm leaves only for the update thread"),
        };
        let Some(sampled) = sample_with_memories(actor, &self.description, &mut self.actor_memories, source, steps, terminals) else {
            let learning_rate = self.learning_rate();
            let mut context = TrainerContext { behavior: &self.behavior, step: self.step, stats: &mut self.stats, diverged: &mut self.diverged };
            if let Some((agent, observation, value)) = largest_observation(steps).filter(|(.., v)| v.abs() >= OVERFLOWING_OBSERVATION) {
                return Err(context.overflow(agent, format!("observation {observation}"), format!("holds {value:e}, and the policy's outputs became non-finite")));
            }
            return Err(context.diverge("the policy's outputs became non-finite", learning_rate));
        };
        for e in sampled.entropy {
            self.stats.add("Policy/Entropy", e, StatsAggregation::Average);
        }
        self.record_recent_inputs(source, steps, terminals, &sampled.decisions);
        Ok((sampled.actions, sampled.decisions))
    }

    /// Keeps decisions' inputs for the parity record: the first agents of the step, or, for
    /// a recurrent network, one agent's consecutive decisions (a sequence).
    fn record_recent_inputs(&mut self, source: usize, steps: &DecisionSteps, terminals: &TerminalSteps, decisions: &[Decision]) {
        let total = self.description.action_spec.mask_len();
        let mask_values = if total > 0 { steps.allowed_actions() } else { vec![] };
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
            let observations = steps.obs.iter().map(|b| b.agent(a).to_vec()).collect();
            let mask = if total > 0 { mask_values[a * total..(a + 1) * total].to_vec() } else { vec![] };
            if self.recent_inputs.len() == PARITY_ROWS {
                self.recent_inputs.pop_front();
            }
            self.recent_inputs.push_back(RecentInput { observations, mask, memory: decisions[a].memory.clone() });
            debug_assert_eq!(decisions[a].memory.len(), self.description.memory_size);
        }
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
        if !self.warned_group_rewards && self.settings.trainer_type != "poca" && trajectories.iter().any(|t| t.steps.iter().any(|s| s.group_reward != 0.0)) {
            // 0.28's warning (PPO and SAC add the group reward to the agent's own).
            log::warn!("{}: an agent received a group reward, but you are not using a multi-agent trainer; use the POCA trainer for best results", self.behavior);
            self.warned_group_rewards = true;
        }
        let games: Vec<f32> = trajectories.iter().filter(|t| t.terminal).filter_map(|t| t.steps.last()).map(|s| s.reward).collect();
        let episode_returns = episodes.iter().map(|e| e.cumulative_reward).collect();
        for e in episodes {
            self.episode_returns.push(e.cumulative_reward);
            self.reward_buffer.push(e.cumulative_reward);
            self.stats.add(CUMULATIVE_REWARD, e.cumulative_reward, StatsAggregation::Average);
            self.stats.add("Environment/Episode Length", e.length as f32, StatsAggregation::Average);
            // 0.28's POCA reports the group rewards of agents that ended with their group.
            if self.settings.trainer_type == "poca" && e.group_complete {
                self.stats.add(GROUP_CUMULATIVE_REWARD, e.group_reward, StatsAggregation::Average);
            }
            if let Some(group) = e.group_episode {
                self.stats.add(GROUP_EPISODE_RETURN, group.group_return, StatsAggregation::Average);
                self.stats.add(GROUP_SIZE, group.size as f32, StatsAggregation::Average);
            }
        }
        match &mut self.overlap {
            Some(overlap) if self.algorithm.is_none() => overlap.queued.extend(trajectories),
            _ => self.take_trajectories(trajectories)?,
        }
        Ok(Ingested { episode_returns, games })
    }

    /// Hands trajectories to the algorithm (which is here) and counts their steps.
    fn take_trajectories(&mut self, trajectories: Vec<Trajectory>) -> Result<(), TrainError> {
        for t in trajectories {
            let n = t.steps.len() as u64;
            let algorithm = self.algorithm.as_mut().expect("trajectories are taken between threaded updates");
            let mut context = TrainerContext { behavior: &self.behavior, step: self.step, stats: &mut self.stats, diverged: &mut self.diverged };
            algorithm.take_trajectory(t, &mut context)?;
            self.count_steps(n);
        }
        if !self.should_train() {
            self.algorithm.as_mut().expect("trajectories are taken between threaded updates").training_over();
        }
        Ok(())
    }

    /// Counts a trajectory's steps: a checkpoint may become due, and a summary.
    fn count_steps(&mut self, n: u64) {
        let before = self.step;
        self.step += n;
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

    /// Runs the algorithm's update when it is due; with `threaded: true`, sends it to the
    /// update thread instead (the agents act meanwhile with a copy of the actor, and
    /// [`collect_update`](Self::collect_update) takes it back). An update whose loss is not
    /// finite stops before the optimizer step; one that leaves non-finite weights marks the
    /// trainer [`diverged`](Self::diverged). Either is an error that says what to change.
    /// Returns whether an update ran here.
    pub fn start_update(&mut self) -> Result<bool, TrainError> {
        let Some(algorithm) = self.algorithm.as_mut() else { return Ok(false) };
        let Some(overlap) = self.overlap.as_mut() else {
            let mut context = TrainerContext { behavior: &self.behavior, step: self.step, stats: &mut self.stats, diverged: &mut self.diverged };
            return algorithm.maybe_update(&mut context);
        };
        if algorithm.update_due(self.step) {
            overlap.acting.copy_from(algorithm.actor_store());
            overlap.learning_rate = algorithm.learning_rate(self.step);
            let stats = StatsReporter::new(&self.behavior, self.settings.summary_freq as u64, self.step);
            let algorithm = self.algorithm.take().expect("checked above");
            overlap.thread.send(algorithm, self.step, stats, self.diverged)?;
        }
        Ok(false)
    }

    /// With `threaded: true`: takes the update back if it is done (or waits for it when
    /// [`MAX_QUEUED_TRAJECTORIES`] wait for it), then the trajectories that came meanwhile.
    /// Returns whether an update came back.
    pub fn collect_update(&mut self) -> Result<bool, TrainError> {
        let Some(overlap) = self.overlap.as_mut().filter(|_| self.algorithm.is_none()) else { return Ok(false) };
        let finished = if overlap.queued.len() >= MAX_QUEUED_TRAJECTORIES { Some(overlap.thread.wait()?) } else { overlap.thread.try_finished()? };
        match finished {
            Some(finished) => self.take_back(finished),
            None => Ok(false),
        }
    }

    /// Waits for a running update and takes it back with the trajectories that came meanwhile
    /// (before a checkpoint, or at the end).
    pub fn finish_update(&mut self) -> Result<(), TrainError> {
        let Some(overlap) = self.overlap.as_mut().filter(|_| self.algorithm.is_none()) else { return Ok(()) };
        let finished = overlap.thread.wait()?;
        self.take_back(finished).map(|_| ())
    }

    /// Installs an update back from the update thread, then takes the trajectories that
    /// waited for it. Returns whether it updated (or its error).
    fn take_back(&mut self, finished: Finished) -> Result<bool, TrainError> {
        self.algorithm = Some(finished.algorithm);
        self.stats.absorb(finished.stats);
        self.diverged = finished.diverged;
        self.update_thread_time += finished.took;
        let updated = finished.result?;
        self.updates_on_thread += updated as u64;
        let overlap = self.overlap.as_mut().expect("only threaded trainers send updates away");
        let queued = std::mem::take(&mut overlap.queued);
        let episodes_ended = std::mem::take(&mut overlap.episodes_ended);
        self.take_trajectories(queued)?;
        let algorithm = self.algorithm.as_mut().expect("installed above");
        episodes_ended.into_iter().for_each(|ended| algorithm.end_episodes(ended));
        Ok(updated)
    }

    /// The actor's weights as a backend-neutral policy (while an update runs, those acting).
    pub fn policy(&self) -> (PolicyDescription, Weights) {
        let weights = match (&self.algorithm, &self.overlap) {
            (Some(a), _) => a.actor_weights(),
            (None, Some(overlap)) => overlap.acting.weights(),
            (None, None) => unreachable!("an algorithm leaves only for the update thread"),
        };
        (self.description.clone(), weights)
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
    pub fn end_episodes(&mut self, ended: EndedEpisodes) {
        self.processor.drop_episodes_in_progress(ended);
        self.actor_memories.forget_episodes(ended);
        match (&mut self.algorithm, &mut self.overlap) {
            (Some(algorithm), _) => algorithm.end_episodes(ended),
            (None, Some(overlap)) => overlap.episodes_ended.push(ended),
            (None, None) => {}
        }
        if self.parity_agent.is_some_and(|(source, id)| ended.covers(&(source, id))) {
            self.parity_agent = None;
        }
    }

    /// Everything a checkpoint holds: the description (labelled `step`, with the run's
    /// curriculum if it has one) and the tensors (the algorithm's networks and optimizer
    /// state, and the parity record of recent decisions).
    pub fn checkpoint(&self, step: u64, curriculum: Option<CurriculumRecord>) -> (CheckpointDescription, Weights) {
        let algorithm = self.home();
        let state = algorithm.state();
        let mut tensors = state.tensors;
        tensors.0.extend(parity_record(algorithm.actor(), &self.description, &self.recent_inputs, step).0);
        let description = CheckpointDescription {
            format_version: CHECKPOINT_FORMAT_VERSION,
            behavior: self.behavior.clone(),
            trainer: algorithm.trainer_type().into(),
            step,
            policy: self.description.clone(),
            optimizer: state.optimizer,
            weights_file: String::new(),
            weights_sha256: String::new(),
            reward: self.last_mean_reward,
            creation_time: checkpoint::now(),
            curriculum,
            self_play: None,
            trainer_state: state.record,
        };
        (description, tensors)
    }

    /// What of the experience between updates a checkpoint keeps (SAC's replay buffer with
    /// `save_replay_buffer`).
    pub fn experience_to_keep(&self) -> Option<Weights> {
        self.home().experience_to_keep()
    }

    /// Takes back experience a checkpoint kept; returns the rows taken.
    pub fn restore_experience(&mut self, experience: &Weights) -> Result<usize, String> {
        self.algorithm.as_mut().expect("restored before training").restore_experience(experience)
    }

    /// Loads a checkpoint's networks, and, when `resume`, the optimizer state and the step
    /// count (`--initialize-from` starts again at step 0 with a fresh optimizer).
    pub fn restore(&mut self, checkpoint: &Checkpoint, resume: bool) -> Result<(), TrainError> {
        let trainer = &checkpoint.description.trainer;
        let trainer_type = self.home().trainer_type();
        if trainer != trainer_type {
            return Err(TrainError::Mismatch(format!(
                "{}: the checkpoint was trained with trainer_type {trainer}, this run's {} is {}; their networks and optimizers differ (start a new run, or give {} the checkpoint's trainer_type)",
                checkpoint.path.display(),
                self.behavior,
                trainer_type,
                self.behavior
            )));
        }
        let differences = checkpoint.description.policy.differences(&self.description);
        if !differences.is_empty() {
            let what_to_do = if resume {
                "resume with the run's own configuration.yaml, or start a new network with --initialize-from"
            } else {
                "--initialize-from needs the same network: give this run the checkpoint's network_settings"
            };
            return Err(TrainError::Mismatch(format!("{}: the checkpoint's network differs from this run's ({}); {what_to_do}", checkpoint.path.display(), differences.join("; "))));
        }
        let skipped = self.algorithm.as_mut().expect("restored before training").restore(&checkpoint.tensors, &checkpoint.description.optimizer, checkpoint.description.trainer_state.as_ref(), resume)?;
        if !skipped.is_empty() {
            log::warn!("{}: no tensors for {skipped:?}; they keep their fresh values", checkpoint.path.display());
        }
        if resume {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ActionSpec, ObservationSpec};
    use crate::train::config::RunOptions;

    /// A position and a goal signal, as 0.28's GridWorld sends its goal.
    fn goal_behavior() -> BehaviorSpec {
        let goal = ObservationSpec { observation_type: ObservationType::GoalSignal, ..ObservationSpec::vector(2, "goal") };
        BehaviorSpec { observation_specs: vec![ObservationSpec::vector(3, "position"), goal], action_spec: ActionSpec::discrete(&[3]) }
    }

    fn settings(yaml: &str) -> TrainerSettings {
        RunOptions::from_yaml(yaml, "t.yaml").unwrap().behaviors["B"].clone()
    }

    /// Goal signals train under `hyper` (0.28's default) and `none`, signals included, except a
    /// `hyper` signal beside a `none` policy, refused naming the way out.
    #[test]
    fn goal_signals_train_under_either_conditioning() {
        let hyper = settings("behaviors:\n  B:\n    reward_signals: {extrinsic: {}, rnd: {}}\n");
        check_observations("B", &goal_behavior(), &hyper).unwrap();
        let none = settings("behaviors:\n  B:\n    network_settings: {goal_conditioning_type: none}\n");
        check_observations("B", &goal_behavior(), &none).unwrap();
        let signal = settings("behaviors:\n  B:\n    network_settings: {goal_conditioning_type: none}\n    reward_signals: {rnd: {}}\n");
        let error = check_observations("B", &goal_behavior(), &signal).unwrap_err().to_string();
        assert!(error.contains("\"goal\" is a goal signal") && error.contains("reward_signals.rnd.network_settings.goal_conditioning_type: none"), "{error}");
        let no_goal = BehaviorSpec { observation_specs: vec![ObservationSpec::vector(3, "position")], action_spec: ActionSpec::discrete(&[3]) };
        check_observations("B", &no_goal, &hyper).unwrap();
    }
}
