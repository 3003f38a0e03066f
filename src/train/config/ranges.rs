//! The ranges 0.28 leaves unchecked: finite numbers, positive sizes, probabilities and
//! discounts in [0, 1], warnings for values that train but are likely mistakes, and every size
//! against the machine's memory ([`crate::train::memory_cost`]).

use super::context::Context;
use super::trainer::TrainerSettings;
use super::ConfigError;
use crate::train::memory_cost;

/// Buffers of more steps than this get a warning.
const LARGE_BUFFER_STEPS: usize = 10_000_000;

/// Networks whose weights and optimizer state need more bytes than this get a warning.
const MEMORY_WARNING_BYTES: f64 = 4.0 * (1u64 << 30) as f64;

impl Context<'_> {
    /// The ranges 0.28 leaves unchecked (its own checks are in [`Self::resolve`]): no NaN or
    /// infinity anywhere, positive sizes, probabilities and discounts in [0, 1]; warnings for
    /// values that train but are likely mistakes, or networks that will not fit in memory.
    pub(super) fn check_ranges(&self, name: &str, settings: &TrainerSettings) -> Result<(), ConfigError> {
        let h = &settings.hyperparameters;
        type Rule = (&'static str, fn(f64) -> bool);
        const POSITIVE: Rule = ("it must be a finite number above 0", |v| v.is_finite() && v > 0.0);
        const NON_NEGATIVE: Rule = ("it must be a finite number, 0 or more", |v| v.is_finite() && v >= 0.0);
        const UNIT: Rule = ("it must be a finite number between 0 and 1", |v| (0.0..=1.0).contains(&v));
        const FINITE: Rule = ("it must be a finite number", f64::is_finite);
        let mut reals: Vec<(&str, f64, Rule)> = vec![
            ("learning_rate", h.learning_rate, POSITIVE),
            ("beta", h.beta, NON_NEGATIVE),
            ("epsilon", h.epsilon, POSITIVE),
            ("lambd", h.lambd, UNIT),
        ];
        for signal in settings.reward_signals.values() {
            reals.extend([("gamma", signal.gamma, UNIT), ("strength", signal.strength, FINITE)]);
        }
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

    /// Every size the settings make the trainer allocate, against the machine's memory
    /// ([`memory_cost`], the least any behavior of these settings needs).
    pub(super) fn check_memory(&self, name: &str, settings: &TrainerSettings) -> Result<(), ConfigError> {
        let Some(available) = memory_cost::physical_memory() else { return Ok(()) };
        let sizes = settings.sizes();
        match memory_cost::beyond(memory_cost::costs(&sizes, memory_cost::BehaviorShape::least(&sizes)), available) {
            Some(cost) => Err(self.out_of_range(name, cost.key, &cost.value, &memory_cost::rule(&cost, available))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::{ConfigError, RunOptions};

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
}
