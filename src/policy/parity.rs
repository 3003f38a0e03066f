//! The parity record (`<Behavior>.parity.json`): observations recorded from a run's own
//! rollouts, the trained network's outputs on them, and the sha256 of each exported file.
//! `mlagents-export` writes it from a checkpoint; `mlagents-run --parity` checks a model
//! against it.

use crate::spec::model;
use super::PolicyDescription;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the parity record layout.
pub const PARITY_FORMAT_VERSION: u32 = 1;

/// Recorded inputs and the training network's outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParityRecord {
    pub format_version: u32,
    pub behavior: String,
    /// Step of the checkpoint the outputs come from.
    pub step: u64,
    /// Observation shapes and action spec of the policy.
    pub policy: PolicyDescription,
    /// Exported file name -> sha256 (hex).
    pub files: BTreeMap<String, String>,
    /// Rows recorded.
    pub batch: usize,
    /// One flattened `[batch, size]` buffer per observation, in sensor order.
    pub observations: Vec<Vec<f32>>,
    /// `[batch, sum of branches]`, 1 = allowed (empty without discrete actions).
    pub action_masks: Vec<f32>,
    /// Standard-normal draws `[batch, continuous]` used for `continuous_actions`.
    pub noise: Vec<f32>,
    /// clip(mu, -3, 3) / 3, `[batch, continuous]`.
    pub deterministic_continuous_actions: Vec<f32>,
    /// clip(mu + σ·noise, -3, 3) / 3, `[batch, continuous]`.
    pub continuous_actions: Vec<f32>,
    /// Argmax of each masked branch, `[batch, branches]`.
    pub deterministic_discrete_actions: Vec<i64>,
    /// Uniform draws in [0, 1) `[batch, branches]` used for `discrete_actions` (empty in
    /// records without sampled discrete actions).
    #[serde(default)]
    pub uniform: Vec<f32>,
    /// Each branch sampled with `uniform` by [`inverse_cdf`] of its masked probabilities,
    /// `[batch, branches]`.
    #[serde(default)]
    pub discrete_actions: Vec<i64>,
    /// A recurrent policy's memory before each row's step, `[batch, memory_size]` (`[h | c]`;
    /// the memory the network read when it acted). Absent for feed-forward policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recurrent_in: Vec<f32>,
    /// The memory after each row's step, `[batch, memory_size]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recurrent_out: Vec<f32>,
}

/// Whether row `row` of a recurrent record starts from its own recorded memory when the rows
/// are replayed in order: the first row, and every row whose recorded memory is all zeros (an
/// episode's first decision); every other row continues from the memory the row before left.
/// The trainer writes records by this rule and `--parity` checks them by it.
pub fn starts_sequence(row: usize, recorded_memory: &[f32]) -> bool {
    row == 0 || recorded_memory.iter().all(|v| *v == 0.0)
}

/// The class a uniform draw `u` picks from probabilities `p` (normalised here): the number of
/// cumulative probabilities below `u`, at most the last class. Exports sample the same way
/// when their `Multinomial` is replaced for a parity check.
pub fn inverse_cdf(p: &[f32], u: f32) -> i64 {
    let total: f32 = p.iter().sum();
    let mut cumulative = 0.0f32;
    let mut below = 0;
    for v in p {
        cumulative += v / total;
        if cumulative < u {
            below += 1;
        }
    }
    below.min(p.len().saturating_sub(1) as i64)
}

/// Why a parity record cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ParityFileError {
    #[error("{path}: {detail}")]
    Read { path: String, detail: String },
    #[error("{path}: parity format version {found} is not supported (this build reads {supported})")]
    Version { path: String, found: u64, supported: u32 },
    #[error("{path}: {detail}")]
    Inconsistent { path: String, detail: String },
}

impl ParityRecord {
    /// Reads and checks a record: version, and every buffer's length against `batch` and
    /// the policy's shapes.
    pub fn read(path: &std::path::Path) -> Result<Self, ParityFileError> {
        let label = path.display().to_string();
        let read = |detail: String| ParityFileError::Read { path: label.clone(), detail };
        let bytes = std::fs::read(path).map_err(|e| read(e.to_string()))?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| read(format!("not JSON: {e}")))?;
        let found = value.get("format_version").and_then(|v| v.as_u64()).ok_or_else(|| read("no format_version".into()))?;
        if found != PARITY_FORMAT_VERSION as u64 {
            return Err(ParityFileError::Version { path: label, found, supported: PARITY_FORMAT_VERSION });
        }
        let record: Self = serde_json::from_value(value).map_err(|e| read(e.to_string()))?;
        record.validate().map_err(|detail| ParityFileError::Inconsistent { path: label, detail })?;
        Ok(record)
    }

    /// Checks the buffer lengths.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.batch;
        let spec = &self.policy.action_spec;
        if self.observations.len() != self.policy.observation_shapes.len() {
            return Err(format!("{} observation buffers for {} observations", self.observations.len(), self.policy.observation_shapes.len()));
        }
        for (i, (buffer, size)) in self.observations.iter().zip(self.policy.observation_sizes()).enumerate() {
            if buffer.len() != n * size {
                return Err(format!("observation {i} has {} values, {n} rows of {size} need {}", buffer.len(), n * size));
            }
        }
        let expect = |name: &str, len: usize, width: usize| -> Result<(), String> {
            if len != n * width {
                return Err(format!("{name} has {len} values, {n} rows of {width} need {}", n * width));
            }
            Ok(())
        };
        expect(model::ACTION_MASKS, self.action_masks.len(), spec.mask_len())?;
        expect("noise", self.noise.len(), spec.continuous_size)?;
        expect(model::DETERMINISTIC_CONTINUOUS_ACTIONS, self.deterministic_continuous_actions.len(), spec.continuous_size)?;
        expect(model::CONTINUOUS_ACTIONS, self.continuous_actions.len(), spec.continuous_size)?;
        expect(model::DETERMINISTIC_DISCRETE_ACTIONS, self.deterministic_discrete_actions.len(), spec.discrete_size())?;
        expect(model::RECURRENT_IN, self.recurrent_in.len(), self.policy.memory_size)?;
        expect(model::RECURRENT_OUT, self.recurrent_out.len(), self.policy.memory_size)?;
        if !self.uniform.is_empty() || !self.discrete_actions.is_empty() {
            expect("uniform", self.uniform.len(), spec.discrete_size())?;
            expect(model::DISCRETE_ACTIONS, self.discrete_actions.len(), spec.discrete_size())?;
        }
        Ok(())
    }
}
