//! `mlagents-learn` configuration: ML-Agents 0.28's YAML (`behaviors:`, `default_settings`,
//! `env_settings`, `engine_settings`, `environment_parameters`, `checkpoint_settings`,
//! `torch_settings`, `debug`; training.md §1), resolved with every default filled in.
//!
//! Parsing is strict: an unknown key is an error with its line. Keys ML-Agents knows but this
//! trainer does not implement (SAC, POCA, curiosity, GAIL, RND, behavioral cloning, self-play,
//! curricula, memory) are errors naming the key and its line, never silently ignored.

// A configuration error names the file, line, behavior, key, value and rule: it is made once
// per run, so its size does not matter.
#![allow(clippy::result_large_err)]

use super::memory_cost;
use super::environment_parameters::{self, EnvironmentParameterSettings};
use super::self_play::SelfPlaySettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `environment_parameters` as 0.28 writes it into `configuration.yaml`.
fn serialize_parameters<S: serde::Serializer>(parameters: &[EnvironmentParameterSettings], serializer: S) -> Result<S::Ok, S::Error> {
    environment_parameters::to_value(parameters).serialize(serializer)
}

/// Why a configuration cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}, line {line}: {what} is not supported by this trainer yet ({detail})")]
    Unsupported { file: String, line: usize, what: String, detail: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{file}, line {line}: {key} of {behavior} is {value}; {rule}")]
    OutOfRange { file: String, line: usize, behavior: String, key: String, value: String, rule: String },
    #[error("{file}, line {line}: environment parameter {parameter}: {message}")]
    Parameter { file: String, line: usize, parameter: String, message: String },
}

/// Every `trainer_type` ML-Agents 0.28 knows (this trainer implements `ppo`).
pub const KNOWN_TRAINER_TYPES: [&str; 3] = ["ppo", "sac", "poca"];

/// Buffers of more steps than this get a warning.
const LARGE_BUFFER_STEPS: usize = 10_000_000;

/// Networks whose weights and optimizer state need more bytes than this get a warning.
const MEMORY_WARNING_BYTES: f64 = 4.0 * (1u64 << 30) as f64;

/// PPO hyperparameters as the YAML gives them (all optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHyperparameters {
    batch_size: Option<usize>,
    buffer_size: Option<usize>,
    learning_rate: Option<f64>,
    beta: Option<f64>,
    epsilon: Option<f64>,
    lambd: Option<f64>,
    num_epoch: Option<usize>,
    learning_rate_schedule: Option<Schedule>,
    beta_schedule: Option<Schedule>,
    epsilon_schedule: Option<Schedule>,
    shared_critic: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetworkSettings {
    normalize: Option<bool>,
    hidden_units: Option<usize>,
    num_layers: Option<usize>,
    vis_encode_type: Option<VisualEncoder>,
    memory: Option<serde_norway::Value>,
    goal_conditioning_type: Option<GoalConditioning>,
    deterministic: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRewardSignal {
    gamma: Option<f64>,
    strength: Option<f64>,
    network_settings: Option<RawNetworkSettings>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRewardSignals {
    extrinsic: Option<RawRewardSignal>,
    curiosity: Option<serde_norway::Value>,
    gail: Option<serde_norway::Value>,
    rnd: Option<serde_norway::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrainerSettings {
    trainer_type: Option<String>,
    hyperparameters: Option<RawHyperparameters>,
    network_settings: Option<RawNetworkSettings>,
    reward_signals: Option<RawRewardSignals>,
    init_path: Option<String>,
    keep_checkpoints: Option<i64>,
    checkpoint_interval: Option<f64>,
    max_steps: Option<f64>,
    time_horizon: Option<usize>,
    summary_freq: Option<usize>,
    threaded: Option<bool>,
    self_play: Option<RawSelfPlay>,
    behavioral_cloning: Option<serde_norway::Value>,
}

/// A `self_play` block as the YAML gives it (self-play.md §1; numbers may be written as
/// floats, `5.0e4`, as 0.28 converts them with `int()`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSelfPlay {
    save_steps: Option<f64>,
    team_change: Option<f64>,
    swap_steps: Option<f64>,
    window: Option<f64>,
    play_against_latest_model_ratio: Option<f64>,
    initial_elo: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunConfig {
    behaviors: Option<BTreeMap<String, RawTrainerSettings>>,
    default_settings: Option<RawTrainerSettings>,
    env_settings: Option<EnvSettings>,
    engine_settings: Option<EngineSettings>,
    environment_parameters: Option<serde_norway::Value>,
    checkpoint_settings: Option<CheckpointSettings>,
    torch_settings: Option<TorchSettings>,
    debug: Option<bool>,
}

/// `linear` or `constant` decay (training.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Linear,
    Constant,
}

/// Visual encoders ML-Agents knows (`vis_encode_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisualEncoder {
    Simple,
    NatureCnn,
    Resnet,
    Match3,
    FullyConnected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GoalConditioning {
    Hyper,
    None,
}

/// PPO hyperparameters, resolved (training.md §2 defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hyperparameters {
    pub batch_size: usize,
    pub buffer_size: usize,
    pub learning_rate: f64,
    pub beta: f64,
    pub epsilon: f64,
    pub lambd: f64,
    pub num_epoch: usize,
    pub shared_critic: bool,
    pub learning_rate_schedule: Schedule,
    pub beta_schedule: Schedule,
    pub epsilon_schedule: Schedule,
}

/// Network settings, resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkSettings {
    pub normalize: bool,
    pub hidden_units: usize,
    pub num_layers: usize,
    pub vis_encode_type: VisualEncoder,
    /// The recurrent memory (`memory:`), if the network has one (lstm.md §1.1).
    pub memory: Option<MemorySettings>,
    pub goal_conditioning_type: GoalConditioning,
    pub deterministic: bool,
}

/// `network_settings.memory` with 0.28's defaults: an LSTM of `memory_size / 2` hidden units
/// in the actor and in the critic, trained on sequences of `sequence_length` steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemorySettings {
    pub memory_size: usize,
    pub sequence_length: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self { memory_size: 128, sequence_length: 64 }
    }
}

/// A `memory` block as the YAML gives it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    memory_size: Option<i64>,
    sequence_length: Option<i64>,
}

/// The extrinsic reward signal, resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardSignal {
    pub gamma: f64,
    pub strength: f64,
    pub network_settings: NetworkSettings,
}

/// Everything one behavior's trainer uses, every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainerSettings {
    pub trainer_type: String,
    pub hyperparameters: Hyperparameters,
    pub network_settings: NetworkSettings,
    pub reward_signals: BTreeMap<String, RewardSignal>,
    pub init_path: Option<String>,
    pub keep_checkpoints: i64,
    pub checkpoint_interval: u64,
    pub max_steps: u64,
    pub time_horizon: usize,
    pub summary_freq: usize,
    pub threaded: bool,
    /// `self_play`, when the behavior has the block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_play: Option<SelfPlaySettings>,
}

impl TrainerSettings {
    /// The sizes that turn into memory ([`memory_cost`]).
    pub fn sizes(&self) -> memory_cost::Sizes {
        memory_cost::Sizes {
            buffer_size: self.hyperparameters.buffer_size,
            time_horizon: self.time_horizon,
            hidden_units: self.network_settings.hidden_units,
            num_layers: self.network_settings.num_layers,
            memory_size: self.network_settings.memory.map(|m| m.memory_size),
            window: self.self_play.as_ref().map(|s| s.window),
        }
    }
}

/// What `mlagents-learn`'s command line sets over the YAML (`None`/`false`/empty: not given),
/// with ML-Agents' flag names; the binary's parser takes them from here.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommandLineOverrides {
    /// A Unity build, `sim:SCENE`, or nothing to wait for the Editor on port 5004.
    #[arg(long)]
    pub env: Option<String>,
    #[arg(long)]
    pub run_id: Option<String>,
    #[arg(long)]
    pub results_dir: Option<String>,
    #[arg(long)]
    pub num_envs: Option<usize>,
    #[arg(long)]
    pub base_port: Option<u16>,
    #[arg(long)]
    pub seed: Option<i64>,
    /// Overwrite an existing run folder (its earlier files are removed first).
    #[arg(long)]
    pub force: bool,
    /// Continue the run `--run-id` from its latest checkpoints (step, weights, optimizer).
    #[arg(long, alias = "load")]
    pub resume: bool,
    /// Start from the latest checkpoints of another run (its run id, or a run folder).
    #[arg(long)]
    pub initialize_from: Option<String>,
    #[arg(long)]
    pub time_scale: Option<f32>,
    #[arg(long)]
    pub width: Option<i32>,
    #[arg(long)]
    pub height: Option<i32>,
    #[arg(long)]
    pub quality_level: Option<i32>,
    #[arg(long)]
    pub target_frame_rate: Option<i32>,
    #[arg(long)]
    pub capture_frame_rate: Option<i32>,
    /// Start the environment with `-nographics -batchmode`.
    #[arg(long)]
    pub no_graphics: bool,
    /// Arguments passed to the environment executable (everything after the flag).
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    pub env_args: Vec<String>,
    /// Verbose logging.
    #[arg(long)]
    pub debug: bool,
}

/// `env_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSettings {
    pub env_path: Option<String>,
    pub env_args: Option<Vec<String>>,
    pub base_port: u16,
    pub num_envs: usize,
    pub num_areas: usize,
    pub seed: i64,
    pub max_lifetime_restarts: i64,
    pub restarts_rate_limit_n: i64,
    pub restarts_rate_limit_period_s: i64,
}

impl Default for EnvSettings {
    fn default() -> Self {
        Self {
            env_path: None,
            env_args: None,
            base_port: 5005,
            num_envs: 1,
            num_areas: 1,
            seed: -1,
            max_lifetime_restarts: 10,
            restarts_rate_limit_n: 1,
            restarts_rate_limit_period_s: 60,
        }
    }
}

/// `engine_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSettings {
    pub width: i32,
    pub height: i32,
    pub quality_level: i32,
    pub time_scale: f32,
    pub target_frame_rate: i32,
    pub capture_frame_rate: i32,
    pub no_graphics: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self { width: 84, height: 84, quality_level: 5, time_scale: 20.0, target_frame_rate: -1, capture_frame_rate: 60, no_graphics: false }
    }
}

/// `checkpoint_settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointSettings {
    pub run_id: String,
    pub initialize_from: Option<String>,
    pub load_model: bool,
    pub resume: bool,
    pub force: bool,
    pub train_model: bool,
    pub inference: bool,
    pub results_dir: String,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        Self {
            run_id: "ppo".into(),
            initialize_from: None,
            load_model: false,
            resume: false,
            force: false,
            train_model: false,
            inference: false,
            results_dir: "results".into(),
        }
    }
}

/// `torch_settings`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TorchSettings {
    pub device: Option<String>,
}

/// The resolved configuration (ML-Agents' `RunOptions`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOptions {
    pub behaviors: BTreeMap<String, TrainerSettings>,
    pub default_settings: Option<TrainerSettings>,
    pub env_settings: EnvSettings,
    pub engine_settings: EngineSettings,
    /// In YAML order (it decides the seeds), each as a curriculum of lessons.
    #[serde(serialize_with = "serialize_parameters")]
    pub environment_parameters: Vec<EnvironmentParameterSettings>,
    pub checkpoint_settings: CheckpointSettings,
    pub torch_settings: TorchSettings,
    pub debug: bool,
}

impl RunOptions {
    /// Parses and resolves a YAML configuration. `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, ConfigError> {
        let ctx = Context { text, file };
        // A trainer this crate lacks is named before its keys are refused one by one (a SAC
        // configuration has keys PPO has not).
        ctx.refuse_unsupported_trainers()?;
        let raw: RawRunConfig = if text.trim().is_empty() {
            RawRunConfig::default()
        } else {
            serde_norway::from_str(text).map_err(|e| ConfigError::Parse { file: file.into(), message: e.to_string() })?
        };
        let default_settings = match &raw.default_settings {
            Some(d) => Some(ctx.resolve("default_settings", d, None)?),
            None => None,
        };
        let mut behaviors = BTreeMap::new();
        for (name, settings) in raw.behaviors.unwrap_or_default() {
            behaviors.insert(name.clone(), ctx.resolve(&name, &settings, raw.default_settings.as_ref())?);
        }
        let section = raw.environment_parameters.as_ref().unwrap_or(&serde_norway::Value::Null);
        let environment_parameters = ctx.environment_parameters(section, &behaviors, default_settings.is_some())?;
        Ok(Self {
            behaviors,
            default_settings,
            env_settings: raw.env_settings.unwrap_or_default(),
            engine_settings: raw.engine_settings.unwrap_or_default(),
            environment_parameters,
            checkpoint_settings: raw.checkpoint_settings.unwrap_or_default(),
            torch_settings: raw.torch_settings.unwrap_or_default(),
            debug: raw.debug.unwrap_or(false),
        })
    }

    /// Reads a configuration file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Parse { file: file.clone(), message: e.to_string() })?;
        Self::from_yaml(&text, &file)
    }

    /// The settings for a behavior (by brain name, without `?team=`), or the defaults.
    pub fn settings_for(&self, brain_name: &str) -> Option<&TrainerSettings> {
        self.behaviors.get(brain_name).or(self.default_settings.as_ref())
    }

    /// Applies what `mlagents-learn`'s flags set over the YAML, as ML-Agents does: a flag given
    /// wins; `--resume` with `--initialize-from` resumes.
    pub fn apply_overrides(&mut self, flags: CommandLineOverrides) {
        let env = &mut self.env_settings;
        env.env_path = flags.env.or(env.env_path.take());
        env.num_envs = flags.num_envs.unwrap_or(env.num_envs);
        env.base_port = flags.base_port.unwrap_or(env.base_port);
        env.seed = flags.seed.unwrap_or(env.seed);
        if !flags.env_args.is_empty() {
            env.env_args = Some(flags.env_args);
        }
        let checkpoints = &mut self.checkpoint_settings;
        checkpoints.run_id = flags.run_id.unwrap_or(std::mem::take(&mut checkpoints.run_id));
        checkpoints.results_dir = flags.results_dir.unwrap_or(std::mem::take(&mut checkpoints.results_dir));
        checkpoints.force |= flags.force;
        checkpoints.resume |= flags.resume;
        if flags.initialize_from.is_some() {
            checkpoints.initialize_from = flags.initialize_from;
        }
        if flags.resume && checkpoints.initialize_from.is_some() {
            log::warn!("both --resume and --initialize-from were given; resuming");
            checkpoints.initialize_from = None;
        }
        let engine = &mut self.engine_settings;
        engine.time_scale = flags.time_scale.unwrap_or(engine.time_scale);
        engine.width = flags.width.unwrap_or(engine.width);
        engine.height = flags.height.unwrap_or(engine.height);
        engine.quality_level = flags.quality_level.unwrap_or(engine.quality_level);
        engine.target_frame_rate = flags.target_frame_rate.unwrap_or(engine.target_frame_rate);
        engine.capture_frame_rate = flags.capture_frame_rate.unwrap_or(engine.capture_frame_rate);
        engine.no_graphics |= flags.no_graphics;
        self.debug |= flags.debug;
    }

    /// Checks the run-wide settings once command-line flags have overridden the YAML: engine
    /// settings (`--time-scale`, `--width`, ...), `--num-envs`. `file` names the configuration.
    pub fn check_run_settings(&self, file: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { file: file.into(), message };
        let e = &self.engine_settings;
        if !(e.time_scale.is_finite() && e.time_scale > 0.0) {
            return Err(invalid(format!("time_scale is {} (engine_settings.time_scale or --time-scale); it must be a finite number above 0", e.time_scale)));
        }
        for (key, value) in [("width", e.width), ("height", e.height)] {
            if value < 1 {
                return Err(invalid(format!("{key} is {value} (engine_settings.{key} or --{key}); it must be at least 1")));
            }
        }
        if self.env_settings.num_envs < 1 {
            return Err(invalid("num_envs is 0 (env_settings.num_envs or --num-envs); it must be at least 1".into()));
        }
        Ok(())
    }

    /// Draws the run seed when it is -1 (in [0, 10000), as mlagents-learn does) and assigns
    /// the environment parameters' seeds left at -1 from it, in YAML order (curriculum.md
    /// §2.9). Calling it again changes nothing.
    pub fn resolve_seeds(&mut self) {
        if self.env_settings.seed < 0 {
            self.env_settings.seed = (rand::random::<u64>() % 10_000) as i64;
        }
        environment_parameters::assign_seeds(&mut self.environment_parameters, self.env_settings.seed);
    }

    /// The resolved configuration as `configuration.yaml` holds it.
    pub fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_default()
    }
}

struct Context<'a> {
    text: &'a str,
    file: &'a str,
}

impl Context<'_> {
    /// The 1-based line of the first `key:` at or after the line of `after:` (0 = anywhere).
    fn line_of(&self, key: &str, after: &str) -> usize {
        let start = self
            .text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{after}:")))
            .unwrap_or(0);
        self.text
            .lines()
            .enumerate()
            .skip(start)
            .find(|(_, l)| l.trim_start().trim_start_matches("- ").starts_with(&format!("{key}:")) || l.contains(&format!(" {key}:")) || l.contains(&format!("{{{key}:")))
            .map(|(i, _)| i + 1)
            .unwrap_or(0)
    }

    /// The line of `key` after `after` ([`Self::line_of`]); for a key the YAML does not write
    /// (a default broke a rule), the line of the section that would hold it, a list entry
    /// `name: key` (a lesson), or `after` itself.
    fn line_of_setting(&self, key: &str, after: &str) -> usize {
        let section = match key {
            "sequence_length" | "memory_size" => Some("memory"),
            "batch_size" | "buffer_size" | "learning_rate" | "beta" | "epsilon" | "lambd" | "num_epoch" => Some("hyperparameters"),
            "hidden_units" | "num_layers" | "normalize" => Some("network_settings"),
            "window" | "save_steps" | "swap_steps" | "team_change" | "play_against_latest_model_ratio" | "initial_elo" => Some("self_play"),
            _ => None,
        };
        let start = self.text.lines().position(|l| l.trim_start().starts_with(&format!("{after}:"))).unwrap_or(0);
        let entry = || self.text.lines().enumerate().skip(start).find(|(_, l)| l.trim_start().trim_start_matches("- ").trim() == format!("name: {key}")).map_or(0, |(i, _)| i + 1);
        [self.line_of(key, after), section.map_or(0, |s| self.line_of(s, after)), entry(), if start > 0 || self.text.starts_with(&format!("{after}:")) { start + 1 } else { 0 }]
            .into_iter()
            .find(|line| *line > 0)
            .unwrap_or(0)
    }

    fn unsupported(&self, what: &str, key: &str, after: &str, detail: &str) -> ConfigError {
        ConfigError::Unsupported { file: self.file.into(), line: self.line_of(key, after), what: what.into(), detail: detail.into() }
    }

    fn resolve(&self, name: &str, s: &RawTrainerSettings, base: Option<&RawTrainerSettings>) -> Result<TrainerSettings, ConfigError> {
        let empty = RawTrainerSettings::default();
        let b = base.unwrap_or(&empty);
        let trainer_type = self.supported_features(name, s, b)?;
        let hyperparameters = Self::hyperparameters(s, b);
        if hyperparameters.shared_critic {
            return Err(self.unsupported(&format!("shared_critic of {name}"), "shared_critic", name, "separate actor and critic only"));
        }
        let network_settings = self.network(name, s.network_settings.as_ref(), b.network_settings.as_ref())?;
        let reward_signals = self.reward_signals(name, s, b)?;
        let steps = |key: &str, v: Option<f64>, least: f64| -> Result<Option<u64>, ConfigError> {
            match v {
                Some(x) if !x.is_finite() || x < least || x > u64::MAX as f64 => {
                    Err(self.out_of_range(name, key, x, &format!("it must be a whole number of steps, at least {least}")))
                }
                other => Ok(other.map(|x| x as u64)),
            }
        };
        let checkpoint_interval = steps("checkpoint_interval", s.checkpoint_interval.or(b.checkpoint_interval), 1.0)?;
        let max_steps = steps("max_steps", s.max_steps.or(b.max_steps), 0.0)?;
        let settings = TrainerSettings {
            trainer_type,
            hyperparameters,
            network_settings,
            reward_signals,
            init_path: s.init_path.clone().or_else(|| b.init_path.clone()),
            keep_checkpoints: s.keep_checkpoints.or(b.keep_checkpoints).unwrap_or(5),
            checkpoint_interval: checkpoint_interval.unwrap_or(500_000),
            max_steps: max_steps.unwrap_or(500_000),
            time_horizon: s.time_horizon.or(b.time_horizon).unwrap_or(64),
            summary_freq: s.summary_freq.or(b.summary_freq).unwrap_or(50_000),
            threaded: s.threaded.or(b.threaded).unwrap_or(false),
            self_play: None,
        };
        let invalid = |message: String| ConfigError::Invalid { file: self.file.into(), message: format!("{name}: {message}") };
        let h = &settings.hyperparameters;
        if h.batch_size == 0 || h.buffer_size < h.batch_size {
            return Err(invalid(format!("buffer_size ({}) must be at least batch_size ({}) and both positive", h.buffer_size, h.batch_size)));
        }
        if settings.time_horizon == 0 || settings.summary_freq == 0 || h.num_epoch == 0 {
            return Err(invalid("time_horizon, summary_freq and num_epoch must be positive".into()));
        }
        if let Some(memory) = settings.network_settings.memory.filter(|m| m.sequence_length > h.batch_size) {
            let rule = format!("When using memory, sequence length must be less than or equal to batch size ({}).", h.batch_size);
            return Err(self.out_of_range(name, "sequence_length", memory.sequence_length, &rule));
        }
        self.check_ranges(name, &settings)?;
        let self_play = match s.self_play.as_ref().or(b.self_play.as_ref()) {
            Some(raw) => Some(self.self_play(name, raw, settings.max_steps)?),
            None => None,
        };
        let settings = TrainerSettings { self_play, ..settings };
        self.check_memory(name, &settings)?;
        Ok(settings)
    }

    /// Every size the settings make the trainer allocate, against the machine's memory
    /// ([`memory_cost`], the least any behavior of these settings needs).
    fn check_memory(&self, name: &str, settings: &TrainerSettings) -> Result<(), ConfigError> {
        let Some(available) = memory_cost::physical_memory() else { return Ok(()) };
        let sizes = settings.sizes();
        match memory_cost::beyond(memory_cost::costs(&sizes, memory_cost::BehaviorShape::least(&sizes)), available) {
            Some(cost) => Err(self.out_of_range(name, cost.key, &cost.value, &memory_cost::rule(&cost, available))),
            None => Ok(()),
        }
    }

    /// A `self_play` block with 0.28's defaults (`team_change`: 5 × the given `save_steps`),
    /// checked where 0.28 crashes or says nothing: `window` at least 1, whole non-negative step
    /// counts, the ratio in [0, 1], a finite rating; the `team_change > max_steps` warning.
    fn self_play(&self, name: &str, raw: &RawSelfPlay, max_steps: u64) -> Result<SelfPlaySettings, ConfigError> {
        let defaults = SelfPlaySettings::default();
        let whole = |key: &str, v: Option<f64>, default: u64, least: f64| -> Result<u64, ConfigError> {
            match v {
                None => Ok(default),
                Some(x) if x.is_finite() && x >= least && x <= u64::MAX as f64 => Ok(x as u64),
                Some(x) => Err(self.out_of_range(name, key, x, &format!("it must be a whole number, at least {least}"))),
            }
        };
        let save_steps = whole("save_steps", raw.save_steps, defaults.save_steps, 0.0)?;
        let settings = SelfPlaySettings {
            save_steps,
            team_change: whole("team_change", raw.team_change, save_steps.saturating_mul(5), 0.0)?,
            swap_steps: whole("swap_steps", raw.swap_steps, defaults.swap_steps, 0.0)?,
            window: whole("window", raw.window, defaults.window as u64, 1.0)? as usize,
            play_against_latest_model_ratio: raw.play_against_latest_model_ratio.unwrap_or(defaults.play_against_latest_model_ratio),
            initial_elo: raw.initial_elo.unwrap_or(defaults.initial_elo),
        };
        if !(0.0..=1.0).contains(&settings.play_against_latest_model_ratio) {
            let ratio = settings.play_against_latest_model_ratio;
            return Err(self.out_of_range(name, "play_against_latest_model_ratio", ratio, "it is a probability, between 0 and 1"));
        }
        if !settings.initial_elo.is_finite() {
            return Err(self.out_of_range(name, "initial_elo", settings.initial_elo, "it must be a finite number"));
        }
        if settings.team_change > max_steps {
            log::warn!(
                "The max steps of the GhostTrainer for behavior name {name} is less than team change. This team will not face opposition that has been trained if the opponent is managed by a different GhostTrainer as in an asymmetric game."
            );
        }
        Ok(settings)
    }

    /// The trainer type, once the features this trainer lacks are refused by name: another
    /// trainer type (an unknown one is out of range), behavioral cloning.
    fn supported_features(&self, name: &str, s: &RawTrainerSettings, b: &RawTrainerSettings) -> Result<String, ConfigError> {
        let trainer_type = s.trainer_type.clone().or_else(|| b.trainer_type.clone()).unwrap_or_else(|| "ppo".into());
        if trainer_type != "ppo" {
            if !KNOWN_TRAINER_TYPES.contains(&trainer_type.as_str()) {
                return Err(ConfigError::OutOfRange {
                    file: self.file.into(),
                    line: self.line_of("trainer_type", name),
                    behavior: name.into(),
                    key: "trainer_type".into(),
                    value: trainer_type,
                    rule: format!("ML-Agents knows {}", KNOWN_TRAINER_TYPES.join(", ")),
                });
            }
            return Err(self.unsupported(&format!("trainer_type {trainer_type} of {name}"), "trainer_type", name, "only ppo"));
        }
        if s.behavioral_cloning.is_some() || b.behavioral_cloning.is_some() {
            return Err(self.unsupported(&format!("behavioral_cloning of {name}"), "behavioral_cloning", name, "PPO with the extrinsic reward only"));
        }
        Ok(trainer_type)
    }

    /// The hyperparameters with ML-Agents' defaults (a behavior's own, else `default_settings`).
    fn hyperparameters(s: &RawTrainerSettings, b: &RawTrainerSettings) -> Hyperparameters {
        let hp_raw = s.hyperparameters.clone().unwrap_or_default();
        let hb = b.hyperparameters.clone().unwrap_or_default();
        let lr_schedule = hp_raw.learning_rate_schedule.or(hb.learning_rate_schedule);
        Hyperparameters {
            batch_size: hp_raw.batch_size.or(hb.batch_size).unwrap_or(1024),
            buffer_size: hp_raw.buffer_size.or(hb.buffer_size).unwrap_or(10240),
            learning_rate: hp_raw.learning_rate.or(hb.learning_rate).unwrap_or(3.0e-4),
            beta: hp_raw.beta.or(hb.beta).unwrap_or(5.0e-3),
            epsilon: hp_raw.epsilon.or(hb.epsilon).unwrap_or(0.2),
            lambd: hp_raw.lambd.or(hb.lambd).unwrap_or(0.95),
            num_epoch: hp_raw.num_epoch.or(hb.num_epoch).unwrap_or(3),
            shared_critic: hp_raw.shared_critic.or(hb.shared_critic).unwrap_or(false),
            learning_rate_schedule: lr_schedule.unwrap_or(Schedule::Linear),
            // A YAML that sets the learning-rate schedule but not these copies it (§1.1).
            beta_schedule: hp_raw.beta_schedule.or(hb.beta_schedule).or(lr_schedule).unwrap_or(Schedule::Linear),
            epsilon_schedule: hp_raw.epsilon_schedule.or(hb.epsilon_schedule).or(lr_schedule).unwrap_or(Schedule::Linear),
        }
    }

    /// The reward signals: the extrinsic one (its default when none is given); the others
    /// are refused by name.
    fn reward_signals(&self, name: &str, s: &RawTrainerSettings, b: &RawTrainerSettings) -> Result<BTreeMap<String, RewardSignal>, ConfigError> {
        let signals = s.reward_signals.clone().or_else(|| b.reward_signals.clone());
        let mut reward_signals = BTreeMap::new();
        match signals {
            None => {
                reward_signals.insert(
                    "extrinsic".into(),
                    RewardSignal { gamma: 0.99, strength: 1.0, network_settings: self.network(name, None, None)? },
                );
            }
            Some(signals) => {
                for (key, present) in [("curiosity", signals.curiosity.is_some()), ("gail", signals.gail.is_some()), ("rnd", signals.rnd.is_some())] {
                    if present {
                        return Err(self.unsupported(&format!("reward signal {key} of {name}"), key, name, "extrinsic only"));
                    }
                }
                if let Some(e) = signals.extrinsic {
                    reward_signals.insert(
                        "extrinsic".into(),
                        RewardSignal {
                            gamma: e.gamma.unwrap_or(0.99),
                            strength: e.strength.unwrap_or(1.0),
                            network_settings: self.network(name, e.network_settings.as_ref(), None)?,
                        },
                    );
                }
            }
        }
        if !reward_signals.contains_key("extrinsic") {
            return Err(ConfigError::Invalid {
                file: self.file.into(),
                message: format!("{name}: reward_signals has no extrinsic signal (the only one this trainer implements)"),
            });
        }
        Ok(reward_signals)
    }

    /// Names a `trainer_type` ML-Agents knows and this trainer does not implement, from a
    /// lenient reading of the YAML (anything malformed is left for the strict parse).
    fn refuse_unsupported_trainers(&self) -> Result<(), ConfigError> {
        let Ok(document) = serde_norway::from_str::<serde_norway::Value>(self.text) else { return Ok(()) };
        let trainer_of = |settings: &serde_norway::Value| settings.get("trainer_type").and_then(|t| t.as_str()).map(str::to_string);
        let mut sections: Vec<(String, String)> = vec![];
        if let Some(trainer) = document.get("default_settings").and_then(trainer_of) {
            sections.push(("default_settings".into(), trainer));
        }
        if let Some(behaviors) = document.get("behaviors").and_then(|b| b.as_mapping()) {
            for (name, settings) in behaviors {
                if let (Some(name), Some(trainer)) = (name.as_str(), trainer_of(settings)) {
                    sections.push((name.to_string(), trainer));
                }
            }
        }
        match sections.into_iter().find(|(_, trainer)| trainer != "ppo" && KNOWN_TRAINER_TYPES.contains(&trainer.as_str())) {
            Some((name, trainer)) => Err(self.unsupported(&format!("trainer_type {trainer} of {name}"), "trainer_type", &name, "only ppo")),
            None => Ok(()),
        }
    }

    fn out_of_range(&self, behavior: &str, key: &str, value: impl std::fmt::Display, rule: &str) -> ConfigError {
        ConfigError::OutOfRange {
            file: self.file.into(),
            line: self.line_of_setting(key, behavior),
            behavior: behavior.into(),
            key: key.into(),
            value: value.to_string(),
            rule: rule.into(),
        }
    }

    /// The ranges 0.28 leaves unchecked (its own checks are in [`Self::resolve`]): no NaN or
    /// infinity anywhere, positive sizes, probabilities and discounts in [0, 1]; warnings for
    /// values that train but are likely mistakes, or networks that will not fit in memory.
    fn check_ranges(&self, name: &str, settings: &TrainerSettings) -> Result<(), ConfigError> {
        let h = &settings.hyperparameters;
        let extrinsic = &settings.reward_signals["extrinsic"];
        type Rule = (&'static str, fn(f64) -> bool);
        const POSITIVE: Rule = ("it must be a finite number above 0", |v| v.is_finite() && v > 0.0);
        const NON_NEGATIVE: Rule = ("it must be a finite number, 0 or more", |v| v.is_finite() && v >= 0.0);
        const UNIT: Rule = ("it must be a finite number between 0 and 1", |v| (0.0..=1.0).contains(&v));
        const FINITE: Rule = ("it must be a finite number", f64::is_finite);
        let reals: [(&str, f64, Rule); 6] = [
            ("learning_rate", h.learning_rate, POSITIVE),
            ("beta", h.beta, NON_NEGATIVE),
            ("epsilon", h.epsilon, POSITIVE),
            ("lambd", h.lambd, UNIT),
            ("gamma", extrinsic.gamma, UNIT),
            ("strength", extrinsic.strength, FINITE),
        ];
        for (key, value, (rule, holds)) in reals {
            if !holds(value) {
                return Err(self.out_of_range(name, key, value, rule));
            }
        }
        let network = &settings.network_settings;
        for (key, value) in [("hidden_units", network.hidden_units), ("num_layers", network.num_layers)] {
            if value == 0 {
                return Err(self.out_of_range(name, key, value, "it must be at least 1"));
            }
        }
        if settings.keep_checkpoints < 1 {
            return Err(self.out_of_range(name, "keep_checkpoints", settings.keep_checkpoints, "at least 1 checkpoint must be kept"));
        }
        if h.learning_rate > 1.0 {
            log::warn!("{}: learning_rate of {name} is {} (above 1); training is likely to diverge", self.file, h.learning_rate);
        }
        if h.epsilon >= 1.0 {
            log::warn!("{}: epsilon of {name} is {} (1 or more): the PPO clip no longer limits the update", self.file, h.epsilon);
        }
        if h.buffer_size > LARGE_BUFFER_STEPS {
            log::warn!(
                "{}: buffer_size of {name} is {} steps; each step keeps its observations, actions and estimates (at 100 floats a step, {:.1} GiB): it may not fit in memory",
                self.file,
                h.buffer_size,
                h.buffer_size as f64 * 400.0 / f64::from(1 << 30)
            );
        }
        // Weights, gradients and Adam's two moments, for the actor and the critic.
        let parameters = (network.hidden_units as f64).powi(2) * network.num_layers as f64 * 2.0;
        let bytes = parameters * 4.0 * 4.0;
        if bytes > MEMORY_WARNING_BYTES {
            log::warn!(
                "{}: the networks of {name} ({} hidden units x {} layers) need about {:.1} GiB for weights and optimizer state; they may not fit in memory",
                self.file,
                network.hidden_units,
                network.num_layers,
                bytes / f64::from(1 << 30)
            );
        }
        Ok(())
    }

    fn network(&self, name: &str, s: Option<&RawNetworkSettings>, b: Option<&RawNetworkSettings>) -> Result<NetworkSettings, ConfigError> {
        let empty = RawNetworkSettings::default();
        let (s, b) = (s.unwrap_or(&empty), b.unwrap_or(&empty));
        let memory = match s.memory.as_ref().or(b.memory.as_ref()).filter(|m| !m.is_null()) {
            Some(raw) => Some(self.memory(name, raw)?),
            None => None,
        };
        Ok(NetworkSettings {
            normalize: s.normalize.or(b.normalize).unwrap_or(false),
            hidden_units: s.hidden_units.or(b.hidden_units).unwrap_or(128),
            num_layers: s.num_layers.or(b.num_layers).unwrap_or(2),
            vis_encode_type: s.vis_encode_type.or(b.vis_encode_type).unwrap_or(VisualEncoder::Simple),
            memory,
            goal_conditioning_type: s.goal_conditioning_type.or(b.goal_conditioning_type).unwrap_or(GoalConditioning::Hyper),
            deterministic: s.deterministic.or(b.deterministic).unwrap_or(false),
        })
    }

    /// A `memory` block: 0.28's defaults and checks (`memory_size` above 0 and even, with its
    /// messages), and a `sequence_length` of at least 1 (0.28 takes 0 and fails later).
    fn memory(&self, name: &str, raw: &serde_norway::Value) -> Result<MemorySettings, ConfigError> {
        let raw: RawMemory = serde_norway::from_value(raw.clone()).map_err(|e| ConfigError::Parse {
            file: self.file.into(),
            message: format!("line {}: memory of {name}: {e}", self.line_of("memory", name)),
        })?;
        let defaults = MemorySettings::default();
        let memory_size = raw.memory_size.unwrap_or(defaults.memory_size as i64);
        let sequence_length = raw.sequence_length.unwrap_or(defaults.sequence_length as i64);
        if memory_size <= 0 {
            return Err(self.out_of_range(name, "memory_size", memory_size, "When using a recurrent network, memory size must be greater than 0."));
        }
        if memory_size % 2 != 0 {
            return Err(self.out_of_range(name, "memory_size", memory_size, "When using a recurrent network, memory size must be divisible by 2."));
        }
        if sequence_length <= 0 {
            return Err(self.out_of_range(name, "sequence_length", sequence_length, "it must be at least 1 step"));
        }
        Ok(MemorySettings { memory_size: memory_size as usize, sequence_length: sequence_length as usize })
    }

    /// The `environment_parameters` section (environment_parameters.rs). A completion
    /// criteria's `behavior` must be one a trainer will have: a name under `behaviors:` (or
    /// any name when `default_settings` is given), without `?team=` (0.28 silently never
    /// advances such a lesson).
    fn environment_parameters(&self, section: &serde_norway::Value, behaviors: &BTreeMap<String, TrainerSettings>, has_default: bool) -> Result<Vec<EnvironmentParameterSettings>, ConfigError> {
        if let Some((line, parameter, message)) = environment_parameters::find_yaml_1_1_string(self.text) {
            return Err(ConfigError::Parameter { file: self.file.into(), line, parameter, message });
        }
        let parameters = environment_parameters::parse(section).map_err(|e| ConfigError::Parameter {
            file: self.file.into(),
            line: self.line_of_setting(&e.key, &e.parameter),
            parameter: e.parameter,
            message: e.message,
        })?;
        for p in &parameters {
            for criteria in p.curriculum.iter().filter_map(|l| l.completion_criteria.as_ref()) {
                let behavior = &criteria.behavior;
                let without_self_play = behaviors.get(behavior).is_some_and(|b| b.self_play.is_none());
                let problem = if criteria.measure == environment_parameters::Measure::Elo && without_self_play {
                    format!("measure Elo needs a self-play behavior, and {behavior} has no self_play block")
                } else if behavior.contains('?') {
                    format!("behavior {behavior} names a team; completion criteria take the behavior name alone ({})", behavior.split('?').next().unwrap_or_default())
                } else if !has_default && !behaviors.contains_key(behavior) {
                    let named: Vec<&str> = behaviors.keys().map(String::as_str).collect();
                    format!("behavior {behavior} has no trainer (behaviors: names {}); its lessons would never advance", if named.is_empty() { "none".into() } else { named.join(", ") })
                } else {
                    continue;
                };
                let line = self.text.lines().enumerate().skip(self.line_of(&p.name, &p.name).saturating_sub(1)).find(|(_, l)| l.contains("behavior:") && l.contains(behavior.as_str())).map_or(0, |(i, _)| i + 1);
                return Err(ConfigError::Parameter { file: self.file.into(), line, parameter: p.name.clone(), message: problem });
            }
        }
        Ok(parameters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::environment_parameters::ParameterSampler;

    #[test]
    fn defaults_fill_an_empty_behavior() {
        let o = RunOptions::from_yaml("behaviors:\n  B: {}\n", "t.yaml").unwrap();
        let b = &o.behaviors["B"];
        assert_eq!(b.hyperparameters.batch_size, 1024);
        assert_eq!(b.max_steps, 500_000);
        assert_eq!(b.reward_signals["extrinsic"].gamma, 0.99);
        assert_eq!(o.env_settings.base_port, 5005);
        assert_eq!(o.checkpoint_settings.run_id, "ppo");
    }

    #[test]
    fn schedules_couple_and_max_steps_accepts_floats() {
        let yaml = "behaviors:\n  B:\n    hyperparameters:\n      learning_rate_schedule: constant\n    max_steps: 5.0e5\n";
        let b = &RunOptions::from_yaml(yaml, "t.yaml").unwrap().behaviors["B"];
        assert_eq!(b.hyperparameters.beta_schedule, Schedule::Constant);
        assert_eq!(b.hyperparameters.epsilon_schedule, Schedule::Constant);
        assert_eq!(b.max_steps, 500_000);
    }

    #[test]
    fn default_settings_merge_field_by_field() {
        let yaml = "default_settings:\n  hyperparameters: {batch_size: 32, beta: 0.01}\n  max_steps: 1000\nbehaviors:\n  B:\n    hyperparameters: {batch_size: 64}\n";
        let o = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        let b = &o.behaviors["B"];
        assert_eq!((b.hyperparameters.batch_size, b.hyperparameters.beta, b.max_steps), (64, 0.01, 1000));
        assert_eq!(o.settings_for("Other").unwrap().hyperparameters.batch_size, 32);
    }

    #[test]
    fn unknown_keys_name_the_key_and_line() {
        let yaml = "behaviors:\n  B:\n    hyperparameters:\n      batch_size: 32\n      bogus_knob: 1\n";
        let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("bogus_knob") && e.contains("line 5"), "{e}");
    }

    #[test]
    fn memory_takes_0_28_defaults_and_checks() {
        let parse = |memory: &str| RunOptions::from_yaml(&format!("behaviors:\n  B:\n    hyperparameters: {{batch_size: 64, buffer_size: 128}}\n    network_settings:\n      memory: {memory}\n"), "t.yaml");
        let o = parse("{}").unwrap();
        assert_eq!(o.settings_for("B").unwrap().network_settings.memory, Some(MemorySettings { memory_size: 128, sequence_length: 64 }));
        let o = parse("{memory_size: 16, sequence_length: 8}").unwrap();
        assert_eq!(o.settings_for("B").unwrap().network_settings.memory, Some(MemorySettings { memory_size: 16, sequence_length: 8 }));
        for (memory, expected) in [
            ("{memory_size: 0}", "memory size must be greater than 0"),
            ("{memory_size: 15}", "memory size must be divisible by 2"),
            ("{sequence_length: 0}", "at least 1 step"),
            ("{sequence_length: 65}", "sequence length must be less than or equal to batch size (64)"),
            ("{memory_sise: 16}", "memory_sise"),
        ] {
            let e = parse(memory).unwrap_err().to_string();
            assert!(e.contains(expected) && e.contains("line 5"), "{memory}: {e}");
        }
    }

    /// A default that breaks a rule points at the section that left it out (bad-input report
    /// of 2 December, U6: "line 0").
    #[test]
    fn defaults_that_break_a_rule_name_the_line_that_left_them() {
        let memory = "behaviors:\n  1D:\n    hyperparameters: {batch_size: 32, buffer_size: 64}\n    network_settings:\n      memory: {}\n";
        let e = RunOptions::from_yaml(memory, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("sequence_length of 1D is 64"), "{e}");
        let lessons = "behaviors:\n  B: {}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: Near\n        completion_criteria: {behavior: B, threshold: 0.5}\n        value: 1\n      - name: Middle\n        value: 2\n      - name: Far\n        value: 3\n";
        let e = RunOptions::from_yaml(lessons, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9") && e.contains("does not have a completion_criteria"), "{e}");
    }

    #[test]
    fn unsupported_features_name_the_key_and_line() {
        let cases = [
            ("behaviors:\n  B:\n    reward_signals:\n      curiosity:\n        strength: 0.02\n", "curiosity", 4),
            ("behaviors:\n  B:\n    trainer_type: sac\n", "sac", 3),
        ];
        for (yaml, what, line) in cases {
            let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err();
            let text = e.to_string();
            assert!(text.contains(what) && text.contains(&format!("line {line}")) && text.contains("not supported"), "{text}");
        }
    }

    /// `self_play` takes 0.28's defaults (team_change: 5 x the given save_steps; floats as
    /// whole numbers) and refuses what 0.28 crashes on or ignores, with the line.
    #[test]
    fn self_play_blocks() {
        let run = RunOptions::from_yaml("behaviors:\n  B:\n    self_play: {save_steps: 5.0e+4}\n", "t.yaml").unwrap();
        let sp = run.behaviors["B"].self_play.clone().unwrap();
        assert_eq!((sp.save_steps, sp.team_change, sp.swap_steps, sp.window, sp.play_against_latest_model_ratio, sp.initial_elo), (50000, 250000, 2000, 10, 0.5, 1200.0));
        assert!(RunOptions::from_yaml("behaviors:\n  B: {}\n", "t.yaml").unwrap().behaviors["B"].self_play.is_none());
        let empty = RunOptions::from_yaml("behaviors:\n  B:\n    self_play: {}\n", "t.yaml").unwrap();
        assert_eq!(empty.behaviors["B"].self_play, Some(SelfPlaySettings::default()));
        for (block, key) in [("{window: 0}", "window"), ("{swap_steps: -5}", "swap_steps"), ("{play_against_latest_model_ratio: 1.5}", "play_against_latest_model_ratio"), ("{initial_elo: .nan}", "initial_elo")] {
            let e = RunOptions::from_yaml(&format!("behaviors:\n  B:\n    max_steps: 10\n    self_play: {block}\n"), "t.yaml").unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("line 4"), "{block}: {e}");
        }
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    self_play:\n      play_against_current_self_ratio: 0.5\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("play_against_current_self_ratio") && e.contains("line 4"), "{e}");
    }

    /// Sizes that would make the trainer allocate more than any machine has are refused with
    /// the key, its line and the bytes (bad-input report of 2 December, P1: a window of 1e9
    /// grew the trainer to 22 GB until the kernel killed it).
    #[test]
    fn sizes_beyond_the_machine_name_the_key_and_the_bytes() {
        let cases = [
            ("    self_play:\n      window: 1000000000\n", "window", 5),
            ("    hyperparameters: {buffer_size: 1000000000000000, batch_size: 1024}\n", "buffer_size", 4),
            ("    time_horizon: 100000000000000\n", "time_horizon", 4),
            ("    network_settings: {hidden_units: 100000000}\n", "hidden_units", 4),
        ];
        for (body, key, line) in cases {
            let yaml = format!("behaviors:\n  Basic:\n    max_steps: 10\n{body}");
            let e = RunOptions::from_yaml(&yaml, "t.yaml").unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(&format!("line {line}")) && e.contains("bytes") && e.contains("this machine's"), "{yaml}: {e}");
        }
        // ML-Agents' own large settings pass (Walker's 512 x 3, a 2-million-step buffer).
        let large = "behaviors:\n  Walker:\n    hyperparameters: {buffer_size: 2000000, batch_size: 2048}\n    network_settings: {hidden_units: 512, num_layers: 3}\n    time_horizon: 1000\n    self_play: {window: 100}\n";
        RunOptions::from_yaml(large, "t.yaml").unwrap();
    }

    #[test]
    fn environment_parameter_errors_name_their_line() {
        let yaml = "behaviors:\n  B: {}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: A\n        completion_criteria:\n          behavior: B\n          thresh: 0.5\n        value: 1\n      - name: Z\n        value: 2\n";
        let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("t.yaml, line 9: environment parameter p: The option thresh"), "{e}");
        // A behavior no trainer has, or one with its team: refused with the line.
        let lesson = |behavior: &str| format!("behaviors:\n  B: {{}}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: A\n        completion_criteria:\n          measure: progress\n          behavior: {behavior}\n        value: 1\n      - name: Z\n        value: 2\n");
        let e = RunOptions::from_yaml(&lesson("Bb"), "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9: environment parameter p: behavior Bb has no trainer (behaviors: names B)"), "{e}");
        let e = RunOptions::from_yaml(&lesson("B?team=0"), "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9") && e.contains("names a team"), "{e}");
        // A curriculum of several lessons on a known behavior is accepted.
        let run = RunOptions::from_yaml(&lesson("B"), "t.yaml").unwrap();
        assert_eq!(run.environment_parameters[0].curriculum.len(), 2);
        let elo = lesson("B").replace("measure: progress", "measure: Elo");
        let e = RunOptions::from_yaml(&elo, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("measure Elo needs a self-play behavior"), "{e}");
        RunOptions::from_yaml(&elo.replace("  B: {}", "  B: {self_play: {}}"), "t.yaml").unwrap();
        let with_default = lesson("Other").replace("behaviors:", "default_settings: {}\nbehaviors:");
        RunOptions::from_yaml(&with_default, "t.yaml").unwrap();
    }

    #[test]
    fn environment_parameters_parse() {
        let yaml = "environment_parameters:\n  mass: 2.0\n  scale:\n    sampler_type: uniform\n    sampler_parameters: {min_value: 0.5, max_value: 1.5}\n  g:\n    sampler_type: multirangeuniform\n    sampler_parameters: {intervals: [[7, 10], [15, 20]], seed: 3}\n";
        let p = RunOptions::from_yaml(yaml, "t.yaml").unwrap().environment_parameters;
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["mass", "scale", "g"], "YAML order");
        assert_eq!(p[0].curriculum[0].value, ParameterSampler::Constant { value: 2.0, seed: -1 });
        assert_eq!(p[1].curriculum[0].value, ParameterSampler::Uniform { min_value: 0.5, max_value: 1.5, seed: -1 });
        assert_eq!(p[2].curriculum[0].value, ParameterSampler::MultiRangeUniform { intervals: vec![(7.0, 10.0), (15.0, 20.0)], seed: 3 });
    }

    #[test]
    fn a_behavior_needs_the_extrinsic_signal() {
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    reward_signals: {}\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("no extrinsic signal"), "{e}");
    }

    #[test]
    fn an_unsupported_trainer_is_named_before_its_keys() {
        let sac = "behaviors:\n  Walker:\n    trainer_type: sac\n    hyperparameters:\n      buffer_init_steps: 1000\n      tau: 0.005\n";
        let e = RunOptions::from_yaml(sac, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("trainer_type sac of Walker") && e.contains("line 3") && e.contains("not supported"), "{e}");
        let poca = "default_settings:\n  trainer_type: poca\nbehaviors:\n  B: {}\n";
        assert!(RunOptions::from_yaml(poca, "t.yaml").unwrap_err().to_string().contains("trainer_type poca"));
    }

    #[test]
    fn numbers_out_of_range_name_key_behavior_and_line() {
        let cases = [
            ("hyperparameters:\n      learning_rate: .nan\n", "learning_rate", 4),
            ("hyperparameters:\n      learning_rate: .inf\n", "learning_rate", 4),
            ("hyperparameters:\n      learning_rate: -0.001\n", "learning_rate", 4),
            ("hyperparameters:\n      learning_rate: 0\n", "learning_rate", 4),
            ("hyperparameters:\n      beta: -1\n", "beta", 4),
            ("hyperparameters:\n      epsilon: -0.2\n", "epsilon", 4),
            ("hyperparameters:\n      lambd: 2\n", "lambd", 4),
            ("reward_signals:\n      extrinsic:\n        gamma: 2\n", "gamma", 5),
            ("reward_signals:\n      extrinsic:\n        gamma: -1\n", "gamma", 5),
            ("reward_signals:\n      extrinsic:\n        strength: .nan\n", "strength", 5),
            ("network_settings:\n      hidden_units: 0\n", "hidden_units", 4),
            ("network_settings:\n      num_layers: 0\n", "num_layers", 4),
            ("checkpoint_interval: 0\n", "checkpoint_interval", 3),
            ("checkpoint_interval: .nan\n", "checkpoint_interval", 3),
            ("max_steps: -1\n", "max_steps", 3),
            ("keep_checkpoints: 0\n", "keep_checkpoints", 3),
            ("keep_checkpoints: -1\n", "keep_checkpoints", 3),
            ("trainer_type: bogus\n", "trainer_type", 3),
        ];
        for (body, key, line) in cases {
            let yaml = format!("behaviors:\n  Basic:\n    {body}");
            let e = RunOptions::from_yaml(&yaml, "t.yaml").unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, ConfigError::OutOfRange { .. }), "{yaml}: {text}");
            assert!(text.contains(key) && text.contains("Basic") && text.contains(&format!("line {line}")), "{yaml}: {text}");
        }
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    trainer_type: bogus\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("ppo, sac, poca"), "{e}");
        // The limits themselves are accepted.
        let edges = "behaviors:\n  B:\n    hyperparameters: {beta: 0, lambd: 1}\n    reward_signals:\n      extrinsic: {gamma: 0, strength: -1}\n    max_steps: 0\n    keep_checkpoints: 1\n";
        RunOptions::from_yaml(edges, "t.yaml").unwrap();
    }

    #[test]
    fn flags_override_the_yaml_and_are_recorded() {
        let yaml = "behaviors:\n  B: {}\nenv_settings: {env_path: builds/Old, seed: 3}\nengine_settings: {time_scale: 5}\n";
        let mut o = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        o.apply_overrides(CommandLineOverrides {
            env: Some("sim:3DBall".into()),
            run_id: Some("r".into()),
            resume: true,
            initialize_from: Some("other".into()),
            width: Some(128),
            ..Default::default()
        });
        assert_eq!(o.env_settings.env_path.as_deref(), Some("sim:3DBall"));
        assert_eq!((o.env_settings.seed, o.engine_settings.time_scale, o.engine_settings.width), (3, 5.0, 128));
        assert_eq!(o.checkpoint_settings.run_id, "r");
        assert!(o.checkpoint_settings.resume && o.checkpoint_settings.initialize_from.is_none(), "resume wins");
        assert!(o.to_yaml().contains("sim:3DBall"), "configuration.yaml records --env");
    }

    #[test]
    fn run_settings_are_checked_after_the_flags() {
        let mut o = RunOptions::from_yaml("behaviors:\n  B: {}\n", "t.yaml").unwrap();
        o.check_run_settings("t.yaml").unwrap();
        for time_scale in [f32::NAN, -1.0, 0.0, f32::INFINITY] {
            o.engine_settings.time_scale = time_scale;
            assert!(o.check_run_settings("t.yaml").unwrap_err().to_string().contains("time_scale"));
        }
        o.engine_settings.time_scale = 20.0;
        o.env_settings.num_envs = 0;
        assert!(o.check_run_settings("t.yaml").unwrap_err().to_string().contains("--num-envs"));
    }

    #[test]
    fn environment_parameters_must_be_finite_and_ordered() {
        let cases = [
            "environment_parameters:\n  mass: .nan\n",
            "environment_parameters:\n  s:\n    sampler_type: uniform\n    sampler_parameters: {min_value: 2, max_value: 1}\n",
            "environment_parameters:\n  s:\n    sampler_type: gaussian\n    sampler_parameters: {mean: 0, st_dev: -1}\n",
            "environment_parameters:\n  s:\n    sampler_type: uniform\n    sampler_parameters: {min_value: .nan, max_value: 1}\n",
            "environment_parameters:\n  s:\n    sampler_type: multirangeuniform\n    sampler_parameters: {intervals: [[3, 1]]}\n",
        ];
        for yaml in cases {
            let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err().to_string();
            assert!(e.contains("environment parameter"), "{yaml}: {e}");
        }
    }

    #[test]
    fn inconsistent_sizes_are_refused() {
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    hyperparameters: {batch_size: 64, buffer_size: 32}\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("buffer_size (32)"), "{e}");
    }
}
