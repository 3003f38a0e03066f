//! `network_settings`: hidden layers, normalisation, the visual encoder and the recurrent
//! memory, with 0.28's defaults and checks (lstm.md §1.1 for `memory`).

use super::context::Context;
use super::ConfigError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetworkSettings {
    pub(super) normalize: Option<bool>,
    pub(super) hidden_units: Option<usize>,
    pub(super) num_layers: Option<usize>,
    pub(super) vis_encode_type: Option<VisualEncoder>,
    pub(super) memory: Option<serde_norway::Value>,
    pub(super) goal_conditioning_type: Option<GoalConditioning>,
    pub(super) deterministic: Option<bool>,
}

/// Visual encoders ML-Agents knows (`vis_encode_type`).
pub use crate::policy::EncoderType as VisualEncoder;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GoalConditioning {
    Hyper,
    None,
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
pub(super) struct RawMemory {
    pub(super) memory_size: Option<i64>,
    pub(super) sequence_length: Option<i64>,
}

impl Context<'_> {
    pub(super) fn network(&self, name: &str, s: Option<&RawNetworkSettings>, b: Option<&RawNetworkSettings>) -> Result<NetworkSettings, ConfigError> {
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
    pub(super) fn memory(&self, name: &str, raw: &serde_norway::Value) -> Result<MemorySettings, ConfigError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::config::RunOptions;

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
}
