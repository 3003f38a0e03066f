//! Hyperparameter schedules (training.md §3): `linear` decays from the initial value to a
//! floor at `max_steps`; `constant` keeps it. The step is the trainer's agent-step count.

use super::config::Schedule;

/// A value that decays with the training step (ML-Agents' `DecayedValue`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayedValue {
    pub schedule: Schedule,
    pub initial: f64,
    pub min: f64,
    pub max_steps: u64,
}

impl DecayedValue {
    /// The learning rate's schedule (floor 1e-10).
    pub fn learning_rate(schedule: Schedule, initial: f64, max_steps: u64) -> Self {
        Self { schedule, initial, min: 1e-10, max_steps }
    }

    /// The PPO clip range's schedule (floor 0.1).
    pub fn epsilon(schedule: Schedule, initial: f64, max_steps: u64) -> Self {
        Self { schedule, initial, min: 0.1, max_steps }
    }

    /// The entropy coefficient's schedule (floor 1e-5).
    pub fn beta(schedule: Schedule, initial: f64, max_steps: u64) -> Self {
        Self { schedule, initial, min: 1e-5, max_steps }
    }

    /// The value at `step`.
    pub fn value(&self, step: u64) -> f64 {
        match self.schedule {
            Schedule::Constant => self.initial,
            Schedule::Linear => {
                let progress = if self.max_steps == 0 { 1.0 } else { step.min(self.max_steps) as f64 / self.max_steps as f64 };
                (self.initial - self.min) * (1.0 - progress) + self.min
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_decays_to_its_floor_and_constant_stays() {
        let lr = DecayedValue::learning_rate(Schedule::Linear, 3e-4, 1000);
        assert_eq!(lr.value(0), 3e-4);
        assert!((lr.value(500) - (1.5e-4 + 0.5e-10)).abs() < 1e-15);
        assert_eq!(lr.value(1000), 1e-10);
        assert_eq!(lr.value(5000), 1e-10, "past max_steps the floor holds");
        let eps = DecayedValue::epsilon(Schedule::Linear, 0.05, 100);
        assert!(eps.value(100) > eps.value(0), "an epsilon below its floor grows towards 0.1");
        assert_eq!(DecayedValue::beta(Schedule::Constant, 5e-3, 10).value(9), 5e-3);
    }
}
