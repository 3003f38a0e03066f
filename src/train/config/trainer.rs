//! A behavior's trainer settings: the trainer type and every section of a `behaviors:` entry
//! (or `default_settings`) resolved into [`TrainerSettings`], a behavior's own keys over the
//! defaults, field by field.

use super::behavioral_cloning::{BehavioralCloningSettings, RawBehavioralCloning};
use super::context::Context;
use super::hyperparameters::{Hyperparameters, RawHyperparameters};
use super::network::{NetworkSettings, RawNetworkSettings};
use super::reward_signals::{RawRewardSignals, RewardSignal};
use super::self_play::RawSelfPlay;
use super::ConfigError;
use crate::train::memory_cost;
use crate::train::self_play::SelfPlaySettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every `trainer_type` ML-Agents 0.28 knows (all of them train here).
pub const KNOWN_TRAINER_TYPES: [&str; 3] = ["ppo", "sac", "poca"];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrainerSettings {
    pub(super) trainer_type: Option<String>,
    pub(super) hyperparameters: Option<RawHyperparameters>,
    pub(super) network_settings: Option<RawNetworkSettings>,
    pub(super) reward_signals: Option<RawRewardSignals>,
    pub(super) init_path: Option<String>,
    pub(super) keep_checkpoints: Option<i64>,
    pub(super) checkpoint_interval: Option<f64>,
    pub(super) max_steps: Option<f64>,
    pub(super) time_horizon: Option<usize>,
    pub(super) summary_freq: Option<usize>,
    pub(super) threaded: Option<bool>,
    pub(super) self_play: Option<RawSelfPlay>,
    pub(super) behavioral_cloning: Option<RawBehavioralCloning>,
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
    /// `behavioral_cloning`, when the behavior has the block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behavioral_cloning: Option<BehavioralCloningSettings>,
    /// `self_play`, when the behavior has the block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_play: Option<SelfPlaySettings>,
    /// Reproduce 0.28 where it is wrong (`--compat-0-28`, recorded run-wide in
    /// [`super::RunOptions::compat_0_28`]): see [`TrainerSettings::follow_0_28`].
    #[serde(skip)]
    pub compat_0_28: bool,
}

impl TrainerSettings {
    /// Switches the behavior to 0.28's ways where reward-signals.md §11 finds them wrong, for
    /// runs that must match 0.28's: demonstrations paired as 0.28's loader pairs them (#1),
    /// cloning and GAIL comparing PPO's raw continuous actions with the demonstrations' (#2,
    /// #3), GAIL's gradient penalty as 0.28 computes it (#4), padding rows of recurrent
    /// sequences in the GAIL, RND and cloning losses (#7), the `simple` encoder for signals
    /// whose block sets none (#11), and a recurrent POCA critic's memories shared by every
    /// agent and never reset (poca.md §2.4).
    pub fn follow_0_28(&mut self) {
        self.compat_0_28 = true;
        for signal in self.reward_signals.values_mut().filter(|s| s.encoder_inherited) {
            signal.network_settings.vis_encode_type = super::VisualEncoder::Simple;
        }
    }

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

impl Context<'_> {
    pub(super) fn resolve(&self, name: &str, s: &RawTrainerSettings, base: Option<&RawTrainerSettings>) -> Result<TrainerSettings, ConfigError> {
        let empty = RawTrainerSettings::default();
        let b = base.unwrap_or(&empty);
        let trainer_type = self.trainer_type(name, s, b)?;
        let hyperparameters = self.hyperparameters(name, &trainer_type, s.hyperparameters.as_ref(), b.hyperparameters.as_ref())?;
        if hyperparameters.shared_critic {
            return Err(self.unsupported(&format!("shared_critic of {name}"), "shared_critic", name, "separate actor and critic only"));
        }
        let network_settings = self.network(name, s.network_settings.as_ref(), b.network_settings.as_ref())?;
        let reward_signals = self.reward_signals(name, s.reward_signals.as_ref(), b.reward_signals.as_ref(), network_settings.vis_encode_type)?;
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
            behavioral_cloning: None,
            self_play: None,
            compat_0_28: false,
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
        let behavioral_cloning = self.behavioral_cloning(name, s.behavioral_cloning.as_ref(), b.behavioral_cloning.as_ref(), settings.hyperparameters.batch_size)?;
        let settings = TrainerSettings { self_play, behavioral_cloning, ..settings };
        self.check_memory(name, &settings)?;
        self.check_poca(name, &settings)?;
        Ok(settings)
    }

    /// The trainer type; one ML-Agents does not know is out of range.
    pub(super) fn trainer_type(&self, name: &str, s: &RawTrainerSettings, b: &RawTrainerSettings) -> Result<String, ConfigError> {
        let trainer_type = s.trainer_type.clone().or_else(|| b.trainer_type.clone()).unwrap_or_else(|| "ppo".into());
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
        Ok(trainer_type)
    }

    /// POCA's own rule: its critic's attention splits `hidden_units` into 4 heads (0.28
    /// crashes on its first critic pass otherwise, poca.md §1.1).
    fn check_poca(&self, name: &str, settings: &TrainerSettings) -> Result<(), ConfigError> {
        if settings.trainer_type != "poca" {
            return Ok(());
        }
        let hidden = settings.network_settings.hidden_units;
        if !hidden.is_multiple_of(4) {
            return Err(self.out_of_range(name, "hidden_units", hidden, "POCA's critic attends over the group with 4 heads: hidden_units must be a multiple of 4"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;

    #[test]
    fn poca_takes_ppo_hyperparameters_and_checks_its_critic() {
        let yaml = "behaviors:\n  Coop:\n    trainer_type: poca\n    hyperparameters:\n      learning_rate_schedule: constant\n      lambd: 0.9\n";
        let o = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        let h = &o.behaviors["Coop"].hyperparameters;
        assert_eq!((o.behaviors["Coop"].trainer_type.as_str(), h.lambd, h.batch_size, h.buffer_size), ("poca", 0.9, 1024, 10240));
        // An explicit learning-rate schedule is copied to β's and ε's, as for PPO.
        assert_eq!((h.beta_schedule, h.epsilon_schedule), (h.learning_rate_schedule, h.learning_rate_schedule));
        let odd = "behaviors:\n  Coop:\n    trainer_type: poca\n    network_settings:\n      hidden_units: 30\n";
        let e = RunOptions::from_yaml(odd, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("hidden_units") && e.contains("multiple of 4") && e.contains("line 5"), "{e}");
        assert!(RunOptions::from_yaml(&odd.replace("poca", "ppo"), "t.yaml").is_ok());
        let recurrent = "behaviors:\n  Coop:\n    trainer_type: poca\n    network_settings:\n      memory: {memory_size: 16, sequence_length: 8}\n";
        assert!(RunOptions::from_yaml(recurrent, "t.yaml").is_ok(), "POCA trains with memory");
    }

    #[test]
    fn inconsistent_sizes_are_refused() {
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    hyperparameters: {batch_size: 64, buffer_size: 32}\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("buffer_size (32)"), "{e}");
    }
}
