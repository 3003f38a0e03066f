//! `hyperparameters`: PPO's (training.md §2) and SAC's (sac.md §1) as the YAML gives them and
//! resolved with 0.28's defaults for the behavior's trainer type, their decay schedules
//! (training.md §3), and the keys of one trainer type refused under the other, as 0.28 refuses
//! them.

use super::context::Context;
use super::ConfigError;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

/// The hyperparameters as the YAML gives them (all optional; PPO's and SAC's keys, each
/// refused under the other trainer type).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHyperparameters {
    pub(super) batch_size: Option<usize>,
    pub(super) buffer_size: Option<usize>,
    pub(super) learning_rate: Option<f64>,
    pub(super) beta: Option<f64>,
    pub(super) epsilon: Option<f64>,
    pub(super) lambd: Option<f64>,
    pub(super) num_epoch: Option<usize>,
    pub(super) learning_rate_schedule: Option<Schedule>,
    pub(super) beta_schedule: Option<Schedule>,
    pub(super) epsilon_schedule: Option<Schedule>,
    pub(super) shared_critic: Option<bool>,
    pub(super) buffer_init_steps: Option<i64>,
    pub(super) tau: Option<f64>,
    pub(super) steps_per_update: Option<f64>,
    pub(super) reward_signal_steps_per_update: Option<f64>,
    pub(super) init_entcoef: Option<f64>,
    pub(super) save_replay_buffer: Option<bool>,
    /// The name 0.28's documentation gives `reward_signal_steps_per_update`; refused with a hint.
    pub(super) reward_signal_num_update: Option<serde_norway::Value>,
}

impl RawHyperparameters {
    /// The keys written of those only PPO has.
    fn ppo_keys(&self) -> Vec<&'static str> {
        let written = [
            ("beta", self.beta.is_some()),
            ("epsilon", self.epsilon.is_some()),
            ("lambd", self.lambd.is_some()),
            ("num_epoch", self.num_epoch.is_some()),
            ("beta_schedule", self.beta_schedule.is_some()),
            ("epsilon_schedule", self.epsilon_schedule.is_some()),
            ("shared_critic", self.shared_critic.is_some()),
        ];
        written.into_iter().filter(|(_, w)| *w).map(|(k, _)| k).collect()
    }

    /// The keys written of those only SAC has.
    fn sac_keys(&self) -> Vec<&'static str> {
        let written = [
            ("buffer_init_steps", self.buffer_init_steps.is_some()),
            ("tau", self.tau.is_some()),
            ("steps_per_update", self.steps_per_update.is_some()),
            ("reward_signal_steps_per_update", self.reward_signal_steps_per_update.is_some()),
            ("init_entcoef", self.init_entcoef.is_some()),
            ("save_replay_buffer", self.save_replay_buffer.is_some()),
            ("reward_signal_num_update", self.reward_signal_num_update.is_some()),
        ];
        written.into_iter().filter(|(_, w)| *w).map(|(k, _)| k).collect()
    }
}

/// `linear` or `constant` decay (training.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Linear,
    Constant,
}

/// The hyperparameters, resolved: the ones every trainer has, PPO's (training.md §2 defaults;
/// unused by SAC), and SAC's when the trainer type is `sac`. `configuration.yaml` shows those of
/// the behavior's trainer type only.
#[derive(Debug, Clone, PartialEq)]
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
    /// SAC's own (sac.md §1.1), for `trainer_type: sac`.
    pub sac: Option<SacHyperparameters>,
}

/// SAC's own hyperparameters, resolved (sac.md §1.1 defaults).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SacHyperparameters {
    /// Agent steps before the first update.
    pub buffer_init_steps: u64,
    /// Polyak factor of the target value network, in (0, 1].
    pub tau: f64,
    /// Agent steps per gradient step (above 0).
    pub steps_per_update: f64,
    /// Agent steps per reward-signal update (above 0; follows `steps_per_update` by default).
    pub reward_signal_steps_per_update: f64,
    /// The entropy coefficients' initial value (above 0).
    pub init_entcoef: f64,
    /// Keep the replay buffer beside each checkpoint, so `--resume` continues exactly.
    pub save_replay_buffer: bool,
}

impl Serialize for Hyperparameters {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("batch_size", &self.batch_size)?;
        map.serialize_entry("buffer_size", &self.buffer_size)?;
        map.serialize_entry("learning_rate", &self.learning_rate)?;
        match &self.sac {
            Some(sac) => {
                map.serialize_entry("learning_rate_schedule", &self.learning_rate_schedule)?;
                map.serialize_entry("buffer_init_steps", &sac.buffer_init_steps)?;
                map.serialize_entry("tau", &sac.tau)?;
                map.serialize_entry("steps_per_update", &sac.steps_per_update)?;
                map.serialize_entry("save_replay_buffer", &sac.save_replay_buffer)?;
                map.serialize_entry("init_entcoef", &sac.init_entcoef)?;
                map.serialize_entry("reward_signal_steps_per_update", &sac.reward_signal_steps_per_update)?;
            }
            None => {
                map.serialize_entry("beta", &self.beta)?;
                map.serialize_entry("epsilon", &self.epsilon)?;
                map.serialize_entry("lambd", &self.lambd)?;
                map.serialize_entry("num_epoch", &self.num_epoch)?;
                map.serialize_entry("shared_critic", &self.shared_critic)?;
                map.serialize_entry("learning_rate_schedule", &self.learning_rate_schedule)?;
                map.serialize_entry("beta_schedule", &self.beta_schedule)?;
                map.serialize_entry("epsilon_schedule", &self.epsilon_schedule)?;
            }
        }
        map.end()
    }
}
impl Context<'_> {
    /// The hyperparameters of a behavior of `trainer_type` with ML-Agents' defaults (a
    /// behavior's own, else `default_settings`'). A key of the other trainer type is refused
    /// as 0.28 refuses it.
    pub(super) fn hyperparameters(&self, name: &str, trainer_type: &str, own: Option<&RawHyperparameters>, defaults: Option<&RawHyperparameters>) -> Result<Hyperparameters, ConfigError> {
        let hp_raw = own.cloned().unwrap_or_default();
        let hb = defaults.cloned().unwrap_or_default();
        let sac = trainer_type == "sac";
        let (foreign, settings) = if sac { (RawHyperparameters::ppo_keys as fn(&RawHyperparameters) -> Vec<&'static str>, "SACSettings") } else { (RawHyperparameters::sac_keys as fn(&RawHyperparameters) -> Vec<&'static str>, "PPOSettings") };
        for (raw, section) in [(&hp_raw, name), (&hb, "default_settings")] {
            if let Some(key) = foreign(raw).first() {
                return Err(self.foreign_key(name, section, key, settings));
            }
        }
        if hp_raw.reward_signal_num_update.is_some() || hb.reward_signal_num_update.is_some() {
            return Err(self.out_of_range(name, "reward_signal_num_update", "given", "the key is reward_signal_steps_per_update (0.28's documentation names it reward_signal_num_update, which 0.28 itself refuses)"));
        }
        let lr_schedule = hp_raw.learning_rate_schedule.or(hb.learning_rate_schedule);
        let (batch_default, buffer_default, schedule_default) = if sac { (128, 50_000, Schedule::Constant) } else { (1024, 10240, Schedule::Linear) };
        let sac = if sac { Some(self.sac_hyperparameters(name, &hp_raw, &hb)?) } else { None };
        // PPO's schedules copy the learning rate's (unused, and at their defaults, for SAC).
        let coupled = if sac.is_none() { lr_schedule } else { None };
        Ok(Hyperparameters {
            batch_size: hp_raw.batch_size.or(hb.batch_size).unwrap_or(batch_default),
            buffer_size: hp_raw.buffer_size.or(hb.buffer_size).unwrap_or(buffer_default),
            learning_rate: hp_raw.learning_rate.or(hb.learning_rate).unwrap_or(3.0e-4),
            beta: hp_raw.beta.or(hb.beta).unwrap_or(5.0e-3),
            epsilon: hp_raw.epsilon.or(hb.epsilon).unwrap_or(0.2),
            lambd: hp_raw.lambd.or(hb.lambd).unwrap_or(0.95),
            num_epoch: hp_raw.num_epoch.or(hb.num_epoch).unwrap_or(3),
            shared_critic: hp_raw.shared_critic.or(hb.shared_critic).unwrap_or(false),
            learning_rate_schedule: lr_schedule.unwrap_or(schedule_default),
            // A YAML that sets the learning-rate schedule but not these copies it (§1.1).
            beta_schedule: hp_raw.beta_schedule.or(hb.beta_schedule).or(coupled).unwrap_or(Schedule::Linear),
            epsilon_schedule: hp_raw.epsilon_schedule.or(hb.epsilon_schedule).or(coupled).unwrap_or(Schedule::Linear),
            sac,
        })
    }

    /// SAC's own keys with their defaults, and the values that hang or break 0.28 refused
    /// (sac.md §1.3).
    fn sac_hyperparameters(&self, name: &str, own: &RawHyperparameters, defaults: &RawHyperparameters) -> Result<SacHyperparameters, ConfigError> {
        let steps_per_update = own.steps_per_update.or(defaults.steps_per_update).unwrap_or(1.0);
        let resolved = SacHyperparameters {
            buffer_init_steps: 0,
            tau: own.tau.or(defaults.tau).unwrap_or(0.005),
            steps_per_update,
            // As 0.28: it follows steps_per_update when neither section writes it.
            reward_signal_steps_per_update: own.reward_signal_steps_per_update.or(defaults.reward_signal_steps_per_update).unwrap_or(steps_per_update),
            init_entcoef: own.init_entcoef.or(defaults.init_entcoef).unwrap_or(1.0),
            save_replay_buffer: own.save_replay_buffer.or(defaults.save_replay_buffer).unwrap_or(false),
        };
        let init_steps = own.buffer_init_steps.or(defaults.buffer_init_steps).unwrap_or(0);
        if init_steps < 0 {
            return Err(self.out_of_range(name, "buffer_init_steps", init_steps, "it must be 0 or more agent steps"));
        }
        let positive = "it must be a finite number above 0 (0.28 loops forever at 0)";
        for (key, value, rule, holds) in [
            ("steps_per_update", resolved.steps_per_update, positive, resolved.steps_per_update.is_finite() && resolved.steps_per_update > 0.0),
            ("reward_signal_steps_per_update", resolved.reward_signal_steps_per_update, positive, resolved.reward_signal_steps_per_update.is_finite() && resolved.reward_signal_steps_per_update > 0.0),
            ("tau", resolved.tau, "it must be above 0 and at most 1 (the share of the value network the target takes at each update)", resolved.tau > 0.0 && resolved.tau <= 1.0),
            ("init_entcoef", resolved.init_entcoef, "it must be a finite number above 0 (the entropy coefficients are learnt as logarithms)", resolved.init_entcoef.is_finite() && resolved.init_entcoef > 0.0),
        ] {
            if !holds {
                return Err(self.out_of_range(name, key, value, rule));
            }
        }
        Ok(SacHyperparameters { buffer_init_steps: init_steps as u64, ..resolved })
    }

    /// A key of another trainer type's hyperparameters, in 0.28's words.
    fn foreign_key(&self, behavior: &str, section: &str, key: &str, settings: &str) -> ConfigError {
        ConfigError::ForeignKey { file: self.file.into(), line: self.line_of(key, section), behavior: behavior.into(), key: key.into(), settings: settings.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::config::RunOptions;

    #[test]
    fn schedules_couple_and_max_steps_accepts_floats() {
        let yaml = "behaviors:\n  B:\n    hyperparameters:\n      learning_rate_schedule: constant\n    max_steps: 5.0e5\n";
        let b = &RunOptions::from_yaml(yaml, "t.yaml").unwrap().behaviors["B"];
        assert_eq!(b.hyperparameters.beta_schedule, Schedule::Constant);
        assert_eq!(b.hyperparameters.epsilon_schedule, Schedule::Constant);
        assert_eq!(b.max_steps, 500_000);
    }

    /// A SAC behavior gets SAC's defaults (sac.md §1.1), and configuration.yaml shows SAC's
    /// keys, not PPO's.
    #[test]
    fn sac_takes_its_own_defaults_and_shows_its_own_keys() {
        let yaml = "behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters:\n      steps_per_update: 4\n";
        let run = RunOptions::from_yaml(yaml, "t.yaml").unwrap();
        let h = &run.behaviors["B"].hyperparameters;
        let sac = h.sac.as_ref().unwrap();
        assert_eq!((h.batch_size, h.buffer_size, h.learning_rate_schedule), (128, 50_000, Schedule::Constant));
        assert_eq!((sac.buffer_init_steps, sac.tau, sac.steps_per_update, sac.reward_signal_steps_per_update, sac.init_entcoef, sac.save_replay_buffer), (0, 0.005, 4.0, 4.0, 1.0, false));
        let shown = run.to_yaml();
        assert!(shown.contains("tau: 0.005") && shown.contains("init_entcoef: 1.0") && !shown.contains("beta") && !shown.contains("lambd"), "{shown}");
        let again = RunOptions::from_yaml(&shown, "configuration.yaml").unwrap();
        assert_eq!(again.behaviors["B"], run.behaviors["B"], "configuration.yaml reads back as the same settings");
    }

    /// A PPO key under SAC (and a SAC key under PPO) is refused in 0.28's words, with its line.
    #[test]
    fn keys_of_the_other_trainer_type_are_refused() {
        let sac = "behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters:\n      tau: 0.01\n      beta: 0.005\n";
        let e = RunOptions::from_yaml(sac, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 6") && e.contains("option beta was specified in your YAML file for SACSettings, but is invalid"), "{e}");
        let ppo = "behaviors:\n  B:\n    hyperparameters:\n      buffer_init_steps: 100\n";
        let e = RunOptions::from_yaml(ppo, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("buffer_init_steps was specified in your YAML file for PPOSettings"), "{e}");
        let defaults = "default_settings:\n  trainer_type: ppo\n  hyperparameters: {beta: 0.01}\nbehaviors:\n  B:\n    trainer_type: sac\n";
        let e = RunOptions::from_yaml(defaults, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("beta was specified") && e.contains("SACSettings"), "{e}");
        let documented = "behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters: {reward_signal_num_update: 2}\n";
        let e = RunOptions::from_yaml(documented, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("reward_signal_steps_per_update"), "{e}");
    }

    /// The values that hang or break 0.28's SAC are errors naming key, behavior and line
    /// (sac.md §1.3).
    #[test]
    fn values_that_break_sac_are_refused() {
        let cases = [
            ("steps_per_update: 0", "steps_per_update of B is 0"),
            ("reward_signal_steps_per_update: -1", "reward_signal_steps_per_update of B is -1"),
            ("tau: 0", "tau of B is 0"),
            ("tau: 1.5", "tau of B is 1.5"),
            ("init_entcoef: 0", "init_entcoef of B is 0"),
            ("buffer_init_steps: -5", "buffer_init_steps of B is -5"),
            ("batch_size: 256\n      buffer_size: 128", "buffer_size (128) must be at least batch_size (256)"),
        ];
        for (keys, expected) in cases {
            let yaml = format!("behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters:\n      {keys}\n");
            let e = RunOptions::from_yaml(&yaml, "t.yaml").unwrap_err().to_string();
            assert!(e.contains(expected), "{keys}: {e}");
            assert!(expected.starts_with("buffer_size") || e.contains("line 5"), "{keys}: {e}");
        }
        let tau_one = "behaviors:\n  B:\n    trainer_type: sac\n    hyperparameters: {tau: 1.0, buffer_init_steps: 0}\n";
        assert!(RunOptions::from_yaml(tau_one, "t.yaml").is_ok());
    }
}
