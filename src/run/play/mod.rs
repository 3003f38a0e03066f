//! Playing a policy against a live environment as Unity's inference does: [`feed`] builds the
//! inputs the model declares (ML-Agents model API v1-v3 and `.nn`), [`actions`] turns its
//! outputs into actions, [`PolicyDriver`] carries memories and previous actions per agent
//! between the two, and [`play`] runs episodes.

mod actions;
mod feed;

pub(super) use actions::{argmax, split_branches};
use crate::demo::recorder::DemoRecorder;
use actions::ActionDecoder;
use feed::{AgentCarry, InputPlan};
use super::{NamedTensors, Policy, RunError};
use crate::env::{ActionTuple, DecisionSteps, EnvError, UnityEnvironment};
use crate::spec::model;
use crate::spec::BehaviorSpec;
use rand::SeedableRng;
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
    /// A match whose environment showed one team only (agents spawned later bring their
    /// team later, so a match waits a while for the others).
    #[error("only team {team} has appeared after {steps} environment steps (behaviors {behaviors:?}); --opponent needs a game of two teams or more")]
    LoneTeam { team: i32, steps: usize, behaviors: Vec<String> },
    /// A model cannot drive a behavior as Unity's checks would say.
    #[error("{model} cannot play behavior {behavior} (team {team}):\n  {}", violations.join("\n  "))]
    Unfit { model: String, behavior: String, team: i32, violations: Vec<String> },
}

/// Feeds a policy from decision steps and turns its outputs into actions.
pub struct PolicyDriver {
    policy: Policy,
    behavior: String,
    spec: BehaviorSpec,
    deterministic: bool,
    rng: ChaCha8Rng,
    plan: InputPlan,
    decoder: ActionDecoder,
    /// The width of an agent's memory, and where each memory output goes in it.
    memory_size: usize,
    memory_outputs: Vec<(String, usize, usize)>,
    carry: AgentCarry,
    /// Seconds spent building inputs, in inference and decoding actions, since creation.
    times: DecisionTimes,
}

/// Where the time of decisions went, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DecisionTimes {
    /// Stepping the environment and exchanging with it (observations in, actions out).
    pub environment: f64,
    /// Building the model's inputs from the observations.
    pub inputs: f64,
    /// Running the model.
    pub inference: f64,
    /// Turning the outputs into actions, and keeping memories and previous actions.
    pub decoding: f64,
}

impl DecisionTimes {
    /// The same times per decision, in microseconds.
    pub fn per_decision_us(&self, decisions: usize) -> Self {
        let per = |s: f64| if decisions == 0 { 0.0 } else { (s * 1e6 / decisions as f64 * 100.0).round() / 100.0 };
        Self { environment: per(self.environment), inputs: per(self.inputs), inference: per(self.inference), decoding: per(self.decoding) }
    }
}

impl PolicyDriver {
    /// Checks that the model's inputs can be fed from `spec` and plans how.
    pub fn new(policy: Policy, behavior: &str, spec: &BehaviorSpec, deterministic: bool, seed: u64) -> Result<Self, PlayError> {
        let interface = policy.interface()?;
        let plan = InputPlan::plan(interface, spec).map_err(|detail| PlayError::Mismatch { behavior: behavior.into(), detail })?;
        let decoder = ActionDecoder { action_spec: spec.action_spec.clone(), version: interface.constant(model::VERSION_NUMBER), deterministic };
        let memory_size = interface.memory_size;
        let memory_outputs = interface.memories.iter().map(|m| (m.output.clone(), m.offset, m.size)).collect();
        Ok(Self {
            policy,
            behavior: behavior.into(),
            spec: spec.clone(),
            deterministic,
            rng: ChaCha8Rng::seed_from_u64(seed),
            plan,
            decoder,
            memory_size,
            memory_outputs,
            carry: AgentCarry::default(),
            times: DecisionTimes::default(),
        })
    }

    /// Makes the policy compute only what [`Self::decide`] reads: the action outputs it picks
    /// and the memories (e.g. not the sampling branch in deterministic play, nor the
    /// constants).
    pub fn compute_only_actions(&mut self) -> Result<(), PlayError> {
        let mut needed = self.decoder.outputs_read(self.policy.outputs());
        needed.extend(self.memory_outputs.iter().map(|(name, _, _)| name.as_str()));
        let needed: Vec<&str> = needed.into_iter().collect();
        Ok(self.policy.keep_outputs(&needed)?)
    }

    /// The policy being driven.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Forgets the memory and previous action of agents whose episode ended.
    pub fn end_episodes(&mut self, agent_ids: &[i32]) {
        for id in agent_ids {
            self.carry.memories.remove(id);
            self.carry.previous_actions.remove(id);
        }
    }

    /// Sets the memory an agent's next decision reads (`memory_size` floats in the model's
    /// memory layout), e.g. one a parity record holds.
    pub fn set_memory(&mut self, agent: i32, memory: Vec<f32>) {
        self.carry.memories.insert(agent, memory);
    }

    /// Each row's memory after a run, `[n, memory_size]`, assembled from the model's memory
    /// outputs (`recurrent_out`, or a `.nn`'s memories side by side).
    pub fn memories_after(&self, outputs: &NamedTensors, n: usize) -> Vec<f32> {
        let mut after = vec![0.0; n * self.memory_size];
        for (name, offset, size) in &self.memory_outputs {
            let Some(t) = outputs.get(name) else { continue };
            let width = t.data.len() / n.max(1);
            let take = (*size).min(width);
            for k in 0..n {
                let row = k * self.memory_size + offset;
                after[row..row + take].copy_from_slice(&t.data[k * width..k * width + take]);
            }
        }
        after
    }

    /// Builds the model inputs for a batch of decisions.
    pub fn inputs(&mut self, steps: &DecisionSteps) -> NamedTensors {
        let noise = (!self.deterministic).then_some(&mut self.rng);
        self.plan.build(steps, &self.spec, &self.carry, noise)
    }

    /// Runs the policy on a batch of decisions and returns the actions (and stores memories
    /// and previous actions).
    pub fn decide(&mut self, steps: &DecisionSteps) -> Result<ActionTuple, PlayError> {
        let n = steps.len();
        if n == 0 {
            return Ok(ActionTuple::zeros(&self.spec.action_spec, 0));
        }
        let start = Instant::now();
        let inputs = self.inputs(steps);
        let built = Instant::now();
        let outputs = self.policy.run(&inputs)?;
        let ran = Instant::now();
        let mismatch = |detail: String| PlayError::Mismatch { behavior: self.behavior.clone(), detail };
        let continuous = self.decoder.continuous(&outputs, n).map_err(mismatch)?;
        let discrete = self.decoder.discrete(&outputs, n, &mut self.rng).map_err(mismatch)?;
        self.remember(steps, &outputs, &discrete);
        self.times.inputs += (built - start).as_secs_f64();
        self.times.inference += (ran - built).as_secs_f64();
        self.times.decoding += ran.elapsed().as_secs_f64();
        Ok(ActionTuple { continuous, discrete })
    }

    /// Stores each agent's discrete action and memory outputs for its next decision.
    fn remember(&mut self, steps: &DecisionSteps, outputs: &NamedTensors, discrete: &[i32]) {
        let n = steps.len();
        let branches = self.spec.action_spec.discrete_size();
        if branches > 0 {
            for (k, id) in steps.agent_id.iter().enumerate() {
                self.carry.previous_actions.insert(*id, discrete[k * branches..(k + 1) * branches].to_vec());
            }
        }
        if self.memory_size == 0 {
            return;
        }
        let after = self.memories_after(outputs, n);
        for (id, memory) in steps.agent_id.iter().zip(after.chunks_exact(self.memory_size)) {
            self.carry.memories.insert(*id, memory.to_vec());
        }
    }
}

/// What a play session measured for one behavior.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlayReport {
    pub behavior: String,
    pub episodes: usize,
    pub mean_reward: f32,
    pub std_reward: f32,
    pub decisions: usize,
    /// Decisions per second of the policy (input building, inference and decoding).
    pub decisions_per_second: f64,
    /// Microseconds per decision in each part of a step.
    pub microseconds_per_decision: DecisionTimes,
    pub returns: Vec<f32>,
    /// Why play stopped before `episodes` episodes ended, when the environment ended the
    /// session (the Editor leaving play mode) after some had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Whether an error is the environment ending the session on its own (a close with a status,
/// as the Editor sends when play mode stops), rather than a failure: its text.
pub(super) fn ended_by_environment(error: &EnvError) -> Option<String> {
    matches!(error, EnvError::Comm(crate::comm::CommError::Closed { .. }) | EnvError::Closed).then(|| error.to_string())
}

/// Plays `driver` on its behavior until `episodes` episodes have ended (other behaviors get
/// zero actions), or `max_steps` environment steps. When the environment ends the session
/// after some episodes ended, they are reported with the reason ([`PlayReport::stopped`]).
pub fn play(env: &mut UnityEnvironment, driver: &mut PolicyDriver, episodes: usize, max_steps: usize) -> Result<PlayReport, PlayError> {
    play_recording(env, driver, episodes, max_steps, None)
}

/// [`play`], recording every decision and episode end into `recorder` (`--record-demo`).
pub fn play_recording(env: &mut UnityEnvironment, driver: &mut PolicyDriver, episodes: usize, max_steps: usize, mut recorder: Option<&mut DemoRecorder>) -> Result<PlayReport, PlayError> {
    if env.needs_reset() {
        env.reset()?;
    }
    let behavior = driver.behavior.clone();
    // Summed in f64, as ML-Agents sums rewards in Python floats.
    let mut running: HashMap<i32, f64> = HashMap::new();
    let mut returns = vec![];
    let mut decisions = 0;
    let mut environment_time = 0.0;
    let policy_before = driver.times;
    let mut environment_start = Instant::now();
    let mut stopped = None;
    for _ in 0..max_steps {
        let (d, t) = env.get_steps(&behavior)?;
        for (i, id) in t.agent_id.iter().enumerate() {
            returns.push((running.remove(id).unwrap_or(0.0) + t.reward[i] as f64) as f32);
        }
        driver.end_episodes(&t.agent_id);
        if let Some(recorder) = recorder.as_deref_mut() {
            recorder.add_terminals(&t);
        }
        if returns.len() >= episodes {
            break;
        }
        for (i, id) in d.agent_id.iter().enumerate() {
            *running.entry(*id).or_default() += d.reward[i] as f64;
        }
        environment_time += environment_start.elapsed().as_secs_f64();
        let actions = driver.decide(&d)?;
        if let Some(recorder) = recorder.as_deref_mut() {
            recorder.add_decisions(&d, &actions);
        }
        decisions += d.len();
        environment_start = Instant::now();
        env.set_actions(&behavior, actions)?;
        match env.step() {
            Ok(()) => {}
            Err(e) => match ended_by_environment(&e).filter(|_| !returns.is_empty()) {
                Some(reason) => {
                    stopped = Some(reason);
                    break;
                }
                None => return Err(e.into()),
            },
        }
    }
    let times = DecisionTimes {
        environment: environment_time,
        inputs: driver.times.inputs - policy_before.inputs,
        inference: driver.times.inference - policy_before.inference,
        decoding: driver.times.decoding - policy_before.decoding,
    };
    let policy_time = times.inputs + times.inference + times.decoding;
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
        microseconds_per_decision: times.per_decision_us(decisions),
        returns,
        stopped,
    })
}
