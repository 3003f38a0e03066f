//! Reward signals (reward-signals.md §2): the extrinsic one (the environment's rewards), the
//! intrinsic ones, [`curiosity`] and [`rnd`], and imitation, [`gail`], each a network of its own
//! with its own Adam. A
//! trainer asks [`RewardSignals`] for each signal's strength-scaled rewards of a trajectory
//! (computed once, at ingest, with the networks as they are), gives it each minibatch of its
//! update to train the signals' networks on, and keeps one value head per signal.
//!
//! Where 0.28 is wrong and we do otherwise (§11): the signals' observation normalisers are
//! updated once per trajectory with the policy's data (0.28 never updates curiosity's and
//! updates RND's on every forward pass), padding rows of recurrent sequences count in no loss,
//! and the signals' optimizer states and curiosity's "has updated" flag are checkpointed, so a
//! resumed run goes on exactly.

pub mod curiosity;
pub mod gail;
pub mod rnd;

use crate::checkpoint::AdamState;
use crate::demo::DemoRow;
use crate::comm::side_channel::StatsAggregation;
use crate::policy::{PolicyDescription, Weights};
use crate::train::config::{GoalConditioning, RewardSignal, RewardSignalKind};
use crate::train::networks::adam::Adam;
use crate::train::networks::{load_variables, variables};
use crate::train::stats::StatsReporter;
use crate::train::trajectory::{AgentKey, EndedEpisodes, Trajectory};
use std::collections::{BTreeMap, HashMap};
use tch::{nn, Kind, Tensor};

/// Prefix of the reward signals' tensors in a checkpoint (followed by the signal's key).
pub const REWARD_SIGNALS_PREFIX: &str = "reward_signals";

/// Rows of experience as a reward signal's networks read them.
pub struct SignalBatch<'a> {
    /// Each observation `[n, size]`.
    pub obs: &'a [Tensor],
    /// Each observation after the step `[n, size]` (curiosity's s′).
    pub next_obs: &'a [Tensor],
    /// The policy's raw continuous actions `[n, c]` (before PPO's clip).
    pub continuous: &'a Tensor,
    /// The discrete choices `[n, branches]` (int64).
    pub discrete: &'a Tensor,
    /// 1 for real rows, 0 for padding (None: every row is real).
    pub valid: Option<&'a Tensor>,
    /// `[n]`: 1 where the episode ended with the row's step (GAIL's `use_actions` input; None:
    /// not known, read as 0).
    pub done: Option<&'a Tensor>,
}

impl SignalBatch<'_> {
    /// The mean of `per_row` (`[n]`) over real rows.
    fn masked_mean(&self, per_row: &Tensor) -> Tensor {
        match self.valid {
            Some(valid) => (per_row * valid).sum(Kind::Float) / valid.sum(Kind::Float).clamp_min(1.0),
            None => per_row.mean(Kind::Float),
        }
    }
}

/// An intrinsic reward signal's networks.
pub trait RewardProvider: Send {
    /// The reward of each row `[n]`, before the signal's strength (no gradient).
    fn evaluate(&self, batch: &SignalBatch) -> Tensor;

    /// One optimizer step on a minibatch; returns its statistics (tag, value).
    fn update(&mut self, batch: &SignalBatch) -> Vec<(&'static str, f32)>;

    /// Takes a trajectory's observations into the networks' normalisers.
    fn update_normalizers(&mut self, observations: &[Tensor]);

    /// The stores of its variables, and the optimizer over the trained ones.
    fn stores(&self) -> Vec<&nn::VarStore>;
    fn adam(&self) -> &Adam;
    fn adam_mut(&mut self) -> &mut Adam;

    /// What it keeps besides tensors (curiosity's "has updated" flag), and takes it back.
    fn flags(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn restore_flags(&mut self, _flags: &serde_json::Value) {}
}

/// A signal's view of the behavior's description: the behavior's observations and actions
/// with the signal's own network settings, feed-forward, conditioned on the goal signals as
/// the behavior is when its own `goal_conditioning_type` is `hyper` (the trainer refuses a
/// `hyper` signal beside a `none` behavior).
pub fn signal_description(behavior: &PolicyDescription, signal: &RewardSignal) -> PolicyDescription {
    let n = &signal.network_settings;
    let goal_observations = match n.goal_conditioning_type {
        GoalConditioning::Hyper => behavior.goal_observations.clone(),
        GoalConditioning::None => vec![],
    };
    PolicyDescription { hidden_units: n.hidden_units, num_layers: n.num_layers.max(1), normalize: n.normalize, memory_size: 0, vis_encode_type: n.vis_encode_type, goal_observations, ..behavior.clone() }
}

/// The root a signal's variables are named under (`reward_signals.<key>.`).
fn signal_root(store: &nn::VarStore, kind: RewardSignalKind) -> nn::Path<'_> {
    store.root() / REWARD_SIGNALS_PREFIX / kind.key()
}

/// A linear layer as 0.28's `linear_layer` draws it: Xavier-uniform scaled by `gain`, zero bias.
fn xavier_linear(p: nn::Path, fan_in: i64, fan_out: i64, gain: f64) -> nn::Linear {
    let bound = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
    let config = nn::LinearConfig { ws_init: nn::Init::Uniform { lo: -bound, up: bound }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, fan_in, fan_out, config)
}

/// Actions as one float row each (0.28's `ActionFlattener`): the continuous values, then each
/// branch's choice one-hot `[n, c + Σ branches]`.
pub fn flatten_actions(continuous: &Tensor, discrete: &Tensor, branches: &[i64]) -> Tensor {
    let mut parts = vec![continuous.shallow_clone()];
    for (b, k) in branches.iter().enumerate() {
        parts.push(discrete.narrow(1, b as i64, 1).squeeze_dim(1).one_hot(*k).to_kind(Kind::Float));
    }
    Tensor::cat(&parts, 1)
}

/// One signal of a behavior.
struct Signal {
    kind: RewardSignalKind,
    gamma: f64,
    strength: f64,
    /// None for the extrinsic signal.
    provider: Option<Box<dyn RewardProvider>>,
    /// Its loss counts the padding rows of recurrent sequences (0.28's GAIL and RND, in
    /// `--compat-0-28` runs; §11 #7).
    trains_on_padding: bool,
}

/// A behavior's reward signals, in `reward_signals` key order (which is their value heads').
pub struct RewardSignals {
    signals: Vec<Signal>,
    /// Each agent's strength-scaled rewards per signal in its episode so far.
    episode_rewards: HashMap<AgentKey, Vec<f64>>,
    /// The providers' statistics since the last report.
    update_stats: BTreeMap<&'static str, Vec<f32>>,
    /// The extrinsic reward adds the groupmates' individual rewards (POCA's).
    groupmate_rewards: bool,
}

/// One signal's rewards for rows of experience (strength applied), with what the returns
/// need of the signal.
pub struct SignalRewards {
    pub kind: RewardSignalKind,
    /// `[n]`.
    pub rewards: Tensor,
    pub gamma: f64,
    /// Whether the signal bootstraps past a real episode end (curiosity and RND, not GAIL:
    /// 0.28's `ignore_done`).
    pub ignore_done: bool,
}

impl RewardSignals {
    /// The signals of `settings` for a behavior of `description` (their networks drawn from
    /// libtorch's generator); `demonstrations` are GAIL's. With `compat_0_28`, GAIL and RND
    /// train as 0.28's do where §11 finds them wrong ([`gail`], padding rows in their losses).
    pub fn new(description: &PolicyDescription, settings: &BTreeMap<String, RewardSignal>, demonstrations: Option<&[DemoRow]>, compat_0_28: bool) -> Self {
        let signals = settings
            .values()
            .map(|signal| {
                let provider: Option<Box<dyn RewardProvider>> = match signal.kind {
                    RewardSignalKind::Extrinsic => None,
                    RewardSignalKind::Curiosity => Some(Box::new(curiosity::Curiosity::new(description, signal))),
                    RewardSignalKind::Rnd => Some(Box::new(rnd::Rnd::new(description, signal))),
                    RewardSignalKind::Gail => Some(Box::new(gail::Gail::new(description, signal, demonstrations.unwrap_or_default(), compat_0_28))),
                };
                let trains_on_padding = compat_0_28 && matches!(signal.kind, RewardSignalKind::Gail | RewardSignalKind::Rnd);
                Signal { kind: signal.kind, gamma: signal.gamma, strength: signal.strength, provider, trains_on_padding }
            })
            .collect();
        Self { signals, episode_rewards: HashMap::new(), update_stats: BTreeMap::new(), groupmate_rewards: false }
    }

    /// The extrinsic reward of a step also sums the individual rewards of the agent's
    /// groupmates at that step, as POCA's does (poca.md §1.5).
    pub fn with_groupmate_rewards(mut self) -> Self {
        self.groupmate_rewards = true;
        self
    }

    /// The signals' keys, in order (the value heads' names).
    pub fn keys(&self) -> Vec<&'static str> {
        self.signals.iter().map(|s| s.kind.key()).collect()
    }

    /// The signals' names in TensorBoard tags, in order.
    pub fn tag_names(&self) -> Vec<&'static str> {
        self.signals.iter().map(|s| s.kind.tag_name()).collect()
    }

    /// Whether any signal has networks (their rows need the next observations and actions).
    pub fn has_networks(&self) -> bool {
        self.signals.iter().any(|s| s.provider.is_some())
    }

    /// Each signal's strength-scaled rewards of rows of experience: the environment's
    /// (`environment_rewards` `[n]`) for the extrinsic signal, the networks' for the others
    /// (which need `batch`; without it they give zeros).
    pub fn evaluate(&self, batch: Option<&SignalBatch>, environment_rewards: &Tensor) -> Vec<SignalRewards> {
        self.signals
            .iter()
            .map(|signal| {
                let raw = match (&signal.provider, batch) {
                    (Some(provider), Some(batch)) => provider.evaluate(batch),
                    (Some(_), None) => environment_rewards.zeros_like(),
                    (None, _) => environment_rewards.shallow_clone(),
                };
                SignalRewards { kind: signal.kind, rewards: raw * signal.strength, gamma: signal.gamma, ignore_done: signal.kind.ignores_done() }
            })
            .collect()
    }

    /// Each signal's strength-scaled rewards of trajectory `t` (`observations`: its steps'
    /// rows, then the observation after the last step). The signals' normalisers take the
    /// steps first; at the episode's end, each signal's episode sum goes to
    /// `Policy/<Name> Reward`.
    pub fn rewards(&mut self, t: &Trajectory, observations: &[Tensor], stats: &mut StatsReporter) -> Vec<SignalRewards> {
        let n = t.steps.len() as i64;
        let steps: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, 0, n)).collect();
        let mates = |s: &crate::train::trajectory::Experience| if self.groupmate_rewards { s.group_status.iter().map(|m| m.reward).sum() } else { 0.0 };
        let environment_rewards = Tensor::from_slice(&t.steps.iter().map(|s| s.reward + mates(s)).collect::<Vec<f32>>());
        let out = if self.has_networks() {
            for provider in self.signals.iter_mut().filter_map(|s| s.provider.as_mut()) {
                provider.update_normalizers(&steps);
            }
            let next: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, 1, n)).collect();
            let continuous: Vec<f32> = t.steps.iter().flat_map(|s| s.decision.continuous.iter().copied()).collect();
            let discrete: Vec<i64> = t.steps.iter().flat_map(|s| s.decision.discrete.iter().map(|d| *d as i64)).collect();
            let (continuous, discrete) = (Tensor::from_slice(&continuous).reshape([n, -1]), Tensor::from_slice(&discrete).reshape([n, -1]));
            let mut done = vec![0.0f32; n as usize];
            if let (Some(last), true) = (done.last_mut(), t.terminal || t.interrupted) {
                *last = 1.0;
            }
            let done = Tensor::from_slice(&done);
            let batch = SignalBatch { obs: &steps, next_obs: &next, continuous: &continuous, discrete: &discrete, valid: None, done: Some(&done) };
            self.evaluate(Some(&batch), &environment_rewards)
        } else {
            self.evaluate(None, &environment_rewards)
        };
        let sums = self.episode_rewards.entry(t.agent).or_insert_with(|| vec![0.0; out.len()]);
        for (sum, signal) in sums.iter_mut().zip(&out) {
            *sum += signal.rewards.sum(Kind::Double).double_value(&[]);
        }
        if t.terminal || t.interrupted {
            if let Some(sums) = self.episode_rewards.remove(&t.agent) {
                for (sum, signal) in sums.iter().zip(&self.signals) {
                    stats.add(&format!("Policy/{} Reward", signal.kind.tag_name()), *sum as f32, StatsAggregation::Average);
                }
            }
        }
        out
    }

    /// The number of signals with networks (the ones [`Self::update_network`] trains).
    pub fn network_count(&self) -> usize {
        self.signals.iter().filter(|s| s.provider.is_some()).count()
    }

    /// Trains the `index`-th signal with networks on one minibatch (SAC samples one for each).
    pub fn update_network(&mut self, index: usize, batch: &SignalBatch) {
        if let Some(signal) = self.signals.iter_mut().filter(|s| s.provider.is_some()).nth(index) {
            let unmasked = SignalBatch { valid: None, ..*batch };
            let batch = if signal.trains_on_padding { &unmasked } else { batch };
            let Some(provider) = signal.provider.as_mut() else { return };
            for (tag, value) in provider.update(batch) {
                self.update_stats.entry(tag).or_default().push(value);
            }
        }
    }

    /// Trains every signal's networks on one minibatch of the update (0.28: after each PPO
    /// step, in signal order).
    pub fn update(&mut self, batch: &SignalBatch) {
        for index in 0..self.network_count() {
            self.update_network(index, batch);
        }
    }

    /// Reports the mean of each statistic of the update's minibatches.
    pub fn report_update(&mut self, stats: &mut StatsReporter) {
        for (tag, values) in std::mem::take(&mut self.update_stats) {
            if let Some(mean) = StatsAggregation::Average.aggregate(&values) {
                stats.add(tag, mean, StatsAggregation::Average);
            }
        }
    }

    /// Forgets the episode sums of episodes that ended early (the environments were reset).
    pub fn end_episodes(&mut self, ended: EndedEpisodes) {
        self.episode_rewards.retain(|agent, _| !ended.covers(agent));
    }

    /// The signals' variables and optimizer moments, and their optimizers' step counts and flags
    /// (`{key: {"adam": .., "flags": ..}}`); None without intrinsic signals.
    pub fn state(&self) -> Option<(Weights, serde_json::Value)> {
        if !self.has_networks() {
            return None;
        }
        let mut tensors = Weights::default();
        let mut record = serde_json::Map::new();
        for signal in &self.signals {
            let Some(provider) = &signal.provider else { continue };
            for store in provider.stores() {
                tensors.0.extend(variables(store).0);
            }
            tensors.0.extend(provider.adam().moments().0);
            record.insert(signal.kind.key().into(), serde_json::json!({ "adam": provider.adam().state(), "flags": provider.flags() }));
        }
        Some((tensors, serde_json::Value::Object(record)))
    }

    /// Loads the signals' variables from `tensors` and, when `resume`, their optimizer states
    /// and flags from `record` (as [`Self::state`] wrote them); returns the variables missing.
    pub fn restore(&mut self, tensors: &Weights, record: Option<&serde_json::Value>, resume: bool) -> Vec<String> {
        let mut skipped = vec![];
        for signal in &mut self.signals {
            let Some(provider) = &mut signal.provider else { continue };
            for store in provider.stores() {
                skipped.extend(load_variables(store, tensors));
            }
            let saved = record.and_then(|r| r.get(signal.kind.key()));
            let adam = saved.and_then(|s| serde_json::from_value::<AdamState>(s.get("adam")?.clone()).ok());
            match (resume, adam) {
                (true, Some(adam)) => {
                    provider.adam_mut().restore(&adam, tensors);
                    provider.restore_flags(saved.and_then(|s| s.get("flags")).unwrap_or(&serde_json::Value::Null));
                }
                (true, None) => log::warn!("the checkpoint has no optimizer state for the {} signal; it starts fresh", signal.kind.key()),
                (false, _) => {}
            }
        }
        skipped
    }
}
