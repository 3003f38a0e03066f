//! `mlagents-learn` configuration: ML-Agents 0.28's YAML (`behaviors:`, `default_settings`,
//! `env_settings`, `engine_settings`, `environment_parameters`, `checkpoint_settings`,
//! `torch_settings`, `debug`; training.md §1), resolved with every default filled in into
//! [`RunOptions`].
//!
//! Parsing is strict: an unknown key is an error with its line. What ML-Agents knows but this
//! trainer does not implement (`shared_critic`, a recurrent POCA critic) is an error naming
//! the key and its line, never silently ignored.
//!
//! One file per section or concern: [`trainer`] (trainer types, a behavior's settings),
//! [`hyperparameters`], [`network`], [`reward_signals`], [`self_play`], [`parameters`] (the
//! `environment_parameters` section against the behaviors), [`run_settings`] (the run-wide
//! sections and the command line), [`ranges`] (the rules 0.28 leaves unchecked), and
//! [`context`] (the lines of what is refused).

// A configuration error names the file, line, behavior, key, value and rule: it is made once
// per run, so its size does not matter.
#![allow(clippy::result_large_err)]

mod context;
pub mod behavioral_cloning;
pub mod hyperparameters;
pub mod network;
mod parameters;
mod ranges;
pub mod reward_signals;
pub mod run_settings;
mod self_play;
pub mod trainer;

pub use behavioral_cloning::BehavioralCloningSettings;
pub use hyperparameters::{Hyperparameters, SacHyperparameters, Schedule};
pub use network::{GoalConditioning, MemorySettings, NetworkSettings, VisualEncoder};
pub use reward_signals::{RewardSignal, RewardSignalKind};
pub use run_settings::{CheckpointSettings, CommandLineOverrides, EngineSettings, EnvSettings, TorchSettings};
pub use trainer::{TrainerSettings, KNOWN_TRAINER_TYPES};

use super::environment_parameters::{self, EnvironmentParameterSettings};
use context::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use trainer::RawTrainerSettings;

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
    #[error("{file}, line {line}: the option {key} was specified in your YAML file for {settings}, but is invalid ({behavior}'s trainer_type has no {key})")]
    ForeignKey { file: String, line: usize, behavior: String, key: String, settings: String },
    #[error("{file}, line {line}: environment parameter {parameter}: {message}")]
    Parameter { file: String, line: usize, parameter: String, message: String },
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
    /// Ours, not 0.28's: what `--compat-0-28` sets, so that `configuration.yaml` reads back.
    compat_0_28: Option<bool>,
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
    /// `--compat-0-28`: every behavior follows 0.28 where it is wrong
    /// ([`TrainerSettings::follow_0_28`]); written to `configuration.yaml` only when set (0.28
    /// has no such key).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compat_0_28: bool,
}

impl RunOptions {
    /// Parses and resolves a YAML configuration. `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, ConfigError> {
        let ctx = Context { text, file };
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
        let mut options = Self {
            behaviors,
            default_settings,
            env_settings: raw.env_settings.unwrap_or_default(),
            engine_settings: raw.engine_settings.unwrap_or_default(),
            environment_parameters,
            checkpoint_settings: raw.checkpoint_settings.unwrap_or_default(),
            torch_settings: raw.torch_settings.unwrap_or_default(),
            debug: raw.debug.unwrap_or(false),
            compat_0_28: false,
        };
        if raw.compat_0_28 == Some(true) {
            options.follow_0_28();
        }
        Ok(options)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
