//! `hyperparameters`: PPO's as the YAML gives them and resolved with 0.28's defaults
//! (training.md §2), and their decay schedules (§3).

use super::context::Context;
use serde::{Deserialize, Serialize};

/// PPO hyperparameters as the YAML gives them (all optional).
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
}

/// `linear` or `constant` decay (training.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Linear,
    Constant,
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

impl Context<'_> {
    /// The hyperparameters with ML-Agents' defaults (a behavior's own, else `default_settings`).
    pub(super) fn hyperparameters(own: Option<&RawHyperparameters>, defaults: Option<&RawHyperparameters>) -> Hyperparameters {
        let hp_raw = own.cloned().unwrap_or_default();
        let hb = defaults.cloned().unwrap_or_default();
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
}
