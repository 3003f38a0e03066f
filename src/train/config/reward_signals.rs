//! `reward_signals`: the extrinsic signal with its discount and strength; the signals this
//! trainer does not implement yet are refused by name.

use super::context::Context;
use super::network::{NetworkSettings, RawNetworkSettings};
use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRewardSignal {
    pub(super) gamma: Option<f64>,
    pub(super) strength: Option<f64>,
    pub(super) network_settings: Option<RawNetworkSettings>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRewardSignals {
    pub(super) extrinsic: Option<RawRewardSignal>,
    pub(super) curiosity: Option<serde_norway::Value>,
    pub(super) gail: Option<serde_norway::Value>,
    pub(super) rnd: Option<serde_norway::Value>,
}

/// The extrinsic reward signal, resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardSignal {
    pub gamma: f64,
    pub strength: f64,
    pub network_settings: NetworkSettings,
}

impl Context<'_> {
    /// The reward signals: the extrinsic one (its default when none is given); the others
    /// are refused by name.
    pub(super) fn reward_signals(&self, name: &str, own: Option<&RawRewardSignals>, defaults: Option<&RawRewardSignals>) -> Result<BTreeMap<String, RewardSignal>, ConfigError> {
        let signals = own.or(defaults).cloned();
        let mut reward_signals = BTreeMap::new();
        match signals {
            None => {
                reward_signals.insert(
                    "extrinsic".into(),
                    RewardSignal { gamma: 0.99, strength: 1.0, network_settings: self.network(name, None, None)? },
                );
            }
            Some(signals) => {
                for (key, present) in [("curiosity", signals.curiosity.is_some()), ("gail", signals.gail.is_some()), ("rnd", signals.rnd.is_some())] {
                    if present {
                        return Err(self.unsupported(&format!("reward signal {key} of {name}"), key, name, "extrinsic only"));
                    }
                }
                if let Some(e) = signals.extrinsic {
                    reward_signals.insert(
                        "extrinsic".into(),
                        RewardSignal {
                            gamma: e.gamma.unwrap_or(0.99),
                            strength: e.strength.unwrap_or(1.0),
                            network_settings: self.network(name, e.network_settings.as_ref(), None)?,
                        },
                    );
                }
            }
        }
        if !reward_signals.contains_key("extrinsic") {
            return Err(ConfigError::Invalid {
                file: self.file.into(),
                message: format!("{name}: reward_signals has no extrinsic signal (the only one this trainer implements)"),
            });
        }
        Ok(reward_signals)
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;

    #[test]
    fn a_behavior_needs_the_extrinsic_signal() {
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    reward_signals: {}\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("no extrinsic signal"), "{e}");
    }
}
