//! When SAC updates (sac.md §3.1): after every advance that ingested experience, once the
//! buffer holds `batch_size` rows and `buffer_init_steps` agent steps are done, gradient steps
//! run while `(step − buffer_init_steps) / update_steps > steps_per_update`, so that the
//! gradient steps keep pace with the agent steps (catching up in bursts when experience
//! arrives in bursts).

use serde::{Deserialize, Serialize};

/// The ratio of agent steps to updates, and the updates counted so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UpdateCadence {
    pub steps_per_update: f64,
    pub buffer_init_steps: u64,
    /// 1 + the updates done (0.28 starts its counter at 1).
    pub update_steps: u64,
}

impl UpdateCadence {
    pub fn new(steps_per_update: f64, buffer_init_steps: u64) -> Self {
        Self { steps_per_update, buffer_init_steps, update_steps: 1 }
    }

    /// Whether updates may run at all: enough rows for a minibatch and the initial steps done.
    pub fn ready(&self, step: u64, rows: usize, batch_size: usize) -> bool {
        rows >= batch_size && step >= self.buffer_init_steps
    }

    /// Whether at least one update is due at agent step `step` (counts nothing).
    pub fn any_due(&self, step: u64) -> bool {
        (step as f64 - self.buffer_init_steps as f64) / self.update_steps as f64 > self.steps_per_update
    }

    /// How many updates are due at agent step `step`; counts them as done.
    pub fn take_due(&mut self, step: u64) -> u64 {
        let since_start = step as f64 - self.buffer_init_steps as f64;
        let mut due = 0;
        while since_start / self.update_steps as f64 > self.steps_per_update {
            self.update_steps += 1;
            due += 1;
        }
        due
    }

    /// The counter of a run resumed at `step` from a checkpoint that did not record it (0.28
    /// computes `step / steps_per_update` and forgets `buffer_init_steps`, which then stops
    /// updates for another `buffer_init_steps` steps: sac.md §9 row 2).
    pub fn resumed_without_record(steps_per_update: f64, buffer_init_steps: u64, step: u64) -> Self {
        let done = (step.saturating_sub(buffer_init_steps) as f64 / steps_per_update) as u64;
        Self { steps_per_update, buffer_init_steps, update_steps: done.max(1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sac.md's worked example: init 100, spu 1; an advance at step 103 runs 2 updates, and
    /// updates total ceil((S − init) / spu) − 1 over a run.
    #[test]
    fn updates_keep_pace_with_steps() {
        let mut cadence = UpdateCadence::new(1.0, 100);
        assert!(!cadence.ready(99, 1000, 8));
        assert!(!cadence.ready(200, 7, 8));
        assert!(cadence.any_due(103));
        assert_eq!(cadence.take_due(103), 2);
        assert!(!cadence.any_due(103));
        assert_eq!(cadence.take_due(103), 0);
        let mut total = 2;
        for step in (104..=1000).step_by(7) {
            total += cadence.take_due(step);
        }
        total += cadence.take_due(1000);
        assert_eq!(total, 899, "ceil((1000 - 100) / 1) - 1");
    }

    /// With steps_per_update 10 and bursts of 1200 steps: one burst of ~120 updates each.
    #[test]
    fn bursts_catch_up() {
        let mut cadence = UpdateCadence::new(10.0, 0);
        assert_eq!(cadence.take_due(12_000), 1199);
        assert_eq!(cadence.take_due(24_000), 1200);
        let mut fractional = UpdateCadence::new(0.5, 0);
        assert_eq!(fractional.take_due(10), 19, "several updates per step below 1");
        assert_eq!(UpdateCadence::resumed_without_record(2.0, 1000, 5000).update_steps, 2000);
    }
}
