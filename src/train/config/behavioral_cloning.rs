//! `behavioral_cloning`: imitation of demonstrations beside the trainer's own updates, with
//! 0.28's defaults (reward-signals.md §1.1, §6): `demo_path` required, `steps` 0 (a constant
//! learning rate), `strength` 1 (it scales the learning rate), `samples_per_update` 0 (every
//! demonstration row), `num_epoch` 3, `batch_size` the trainer's.

use super::context::Context;
use super::ConfigError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBehavioralCloning {
    pub(super) demo_path: Option<String>,
    pub(super) steps: Option<f64>,
    pub(super) strength: Option<f64>,
    pub(super) samples_per_update: Option<f64>,
    pub(super) num_epoch: Option<f64>,
    pub(super) batch_size: Option<f64>,
}

/// `behavioral_cloning`, resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BehavioralCloningSettings {
    /// A `.demo` file or a folder of them (relative paths from the working directory, as 0.28).
    pub demo_path: String,
    /// Agent steps over which the learning rate decays linearly to 1e-10 (0: constant).
    pub steps: u64,
    /// Multiplies the trainer's learning rate.
    pub strength: f64,
    /// Demonstration rows per epoch (0: all).
    pub samples_per_update: u64,
    pub num_epoch: usize,
    pub batch_size: usize,
}

impl Context<'_> {
    /// The `behavioral_cloning` block of `name` (its own keys over `default_settings`'), with
    /// 0.28's defaults; `trainer_batch_size` is the default minibatch.
    pub(super) fn behavioral_cloning(&self, name: &str, own: Option<&RawBehavioralCloning>, defaults: Option<&RawBehavioralCloning>, trainer_batch_size: usize) -> Result<Option<BehavioralCloningSettings>, ConfigError> {
        if own.is_none() && defaults.is_none() {
            return Ok(None);
        }
        let empty = RawBehavioralCloning::default();
        let (s, b) = (own.unwrap_or(&empty), defaults.unwrap_or(&empty));
        let demo_path = s.demo_path.clone().or_else(|| b.demo_path.clone()).ok_or_else(|| ConfigError::Invalid {
            file: self.file.into(),
            message: format!("line {}: {name}: behavioral_cloning needs demo_path (a .demo file or a folder of them)", self.line_of("behavioral_cloning", name)),
        })?;
        let whole = |key: &str, value: Option<f64>, default: u64, least: u64| -> Result<u64, ConfigError> {
            match value {
                None => Ok(default),
                Some(v) if v.is_finite() && v >= least as f64 && v <= u32::MAX as f64 => Ok(v as u64),
                Some(v) => Err(self.out_of_range(name, key, v, &format!("it must be a whole number, at least {least}"))),
            }
        };
        let strength = s.strength.or(b.strength).unwrap_or(1.0);
        if !(strength.is_finite() && strength > 0.0) {
            return Err(self.out_of_range(name, "strength", strength, "the behavioral cloning strength scales a learning rate: a finite number above 0"));
        }
        Ok(Some(BehavioralCloningSettings {
            demo_path,
            steps: whole("steps", s.steps.or(b.steps), 0, 0)?,
            strength,
            samples_per_update: whole("samples_per_update", s.samples_per_update.or(b.samples_per_update), 0, 0)?,
            num_epoch: whole("num_epoch", s.num_epoch.or(b.num_epoch), 3, 1)? as usize,
            batch_size: whole("batch_size", s.batch_size.or(b.batch_size), trainer_batch_size as u64, 1)? as usize,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;

    #[test]
    fn defaults_are_0_28s_and_demo_path_is_required() {
        let options = RunOptions::from_yaml("behaviors:\n  B:\n    hyperparameters: {batch_size: 32, buffer_size: 320}\n    behavioral_cloning: {demo_path: Demos/x.demo, strength: 0.5}\n", "t.yaml").unwrap();
        let bc = options.behaviors["B"].behavioral_cloning.clone().unwrap();
        assert_eq!((bc.demo_path.as_str(), bc.steps, bc.strength, bc.samples_per_update, bc.num_epoch, bc.batch_size), ("Demos/x.demo", 0, 0.5, 0, 3, 32));
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    behavioral_cloning: {steps: 10}\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("needs demo_path"), "{e}");
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    behavioral_cloning: {demo_path: x.demo, bogus: 1}\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    behavioral_cloning: {demo_path: x.demo, num_epoch: 0}\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("num_epoch"), "{e}");
    }
}
