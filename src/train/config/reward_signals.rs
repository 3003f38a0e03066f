//! `reward_signals`: the extrinsic signal, the intrinsic ones (curiosity, RND) and GAIL, each with
//! its discount, strength and, for those with networks, their own network settings and learning
//! rate, GAIL its demonstrations, with 0.28's defaults and checks (reward-signals.md §1).

use super::context::Context;
use super::network::{NetworkSettings, RawNetworkSettings, VisualEncoder};
use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One signal's block as the YAML gives it (every key any signal takes; [`Context::reward_signals`]
/// refuses the ones a signal does not take, as 0.28 does).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRewardSignal {
    pub(super) gamma: Option<f64>,
    pub(super) strength: Option<f64>,
    pub(super) network_settings: Option<RawNetworkSettings>,
    pub(super) learning_rate: Option<f64>,
    /// Deprecated in 0.28: the width of the signal's network when it has no `network_settings`.
    pub(super) encoding_size: Option<usize>,
    /// GAIL's own keys.
    pub(super) demo_path: Option<String>,
    pub(super) use_actions: Option<bool>,
    pub(super) use_vail: Option<bool>,
}

impl RawRewardSignal {
    /// `self`'s keys over `defaults`' (0.28 deep-merges a behavior's signals into
    /// `default_settings`').
    fn over(&self, defaults: &Self) -> Self {
        Self {
            gamma: self.gamma.or(defaults.gamma),
            strength: self.strength.or(defaults.strength),
            network_settings: self.network_settings.clone().or_else(|| defaults.network_settings.clone()),
            learning_rate: self.learning_rate.or(defaults.learning_rate),
            encoding_size: self.encoding_size.or(defaults.encoding_size),
            demo_path: self.demo_path.clone().or_else(|| defaults.demo_path.clone()),
            use_actions: self.use_actions.or(defaults.use_actions),
            use_vail: self.use_vail.or(defaults.use_vail),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRewardSignals {
    pub(super) extrinsic: Option<RawRewardSignal>,
    pub(super) curiosity: Option<RawRewardSignal>,
    pub(super) rnd: Option<RawRewardSignal>,
    pub(super) gail: Option<RawRewardSignal>,
}

/// What a reward signal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardSignalKind {
    /// The environment's rewards.
    Extrinsic,
    /// The intrinsic curiosity module (ICM): the error of a forward model in a learned feature
    /// space (reward-signals.md §3).
    Curiosity,
    /// Random network distillation: the error of a predictor of a fixed random network (§4).
    Rnd,
    /// Generative adversarial imitation: a discriminator's belief that a step is the
    /// demonstrations' (§5).
    Gail,
}

impl RewardSignalKind {
    /// The key under `reward_signals` (and the value head's name).
    pub fn key(self) -> &'static str {
        match self {
            Self::Extrinsic => "extrinsic",
            Self::Curiosity => "curiosity",
            Self::Rnd => "rnd",
            Self::Gail => "gail",
        }
    }

    /// The name in 0.28's TensorBoard tags (Python's `capitalize()` of the key:
    /// `Policy/Rnd Reward`).
    pub fn tag_name(self) -> &'static str {
        match self {
            Self::Extrinsic => "Extrinsic",
            Self::Curiosity => "Curiosity",
            Self::Rnd => "Rnd",
            Self::Gail => "Gail",
        }
    }

    /// 0.28's learning rate of the signal's own optimizer (none for the extrinsic signal).
    fn default_learning_rate(self) -> Option<f64> {
        match self {
            Self::Extrinsic => None,
            Self::Curiosity => Some(3e-4),
            Self::Rnd => Some(1e-4),
            Self::Gail => Some(3e-4),
        }
    }

    /// The keys the signal's block takes, for error messages.
    fn options(self) -> &'static str {
        match self {
            Self::Extrinsic => "gamma, strength and network_settings",
            Self::Curiosity | Self::Rnd => "gamma, strength, network_settings, learning_rate and encoding_size",
            Self::Gail => "gamma, strength, network_settings, learning_rate, encoding_size, demo_path, use_actions and use_vail",
        }
    }

    /// Whether the signal's value bootstraps past a real episode end (0.28's `ignore_done`:
    /// curiosity and RND do; the extrinsic signal and GAIL do not).
    pub fn ignores_done(self) -> bool {
        matches!(self, Self::Curiosity | Self::Rnd)
    }
}

/// A reward signal, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct RewardSignal {
    #[serde(skip)]
    pub kind: RewardSignalKind,
    pub gamma: f64,
    pub strength: f64,
    /// The signal's own networks (0.28's defaults, independent of the behavior's
    /// `network_settings`, except the visual encoder: the policy's unless the block sets one).
    pub network_settings: NetworkSettings,
    /// The Adam learning rate of the signal's networks (None for the extrinsic signal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// GAIL's demonstrations and options (None for the other signals).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub gail: Option<GailSettings>,
    /// Whether `network_settings.vis_encode_type` is the policy's because the block sets none
    /// (`--compat-0-28` gives such a signal 0.28's `simple` instead).
    #[serde(skip)]
    pub encoder_inherited: bool,
}

/// Two signals are equal when they train alike: where the encoder came from is not compared
/// (`configuration.yaml` writes it out, so a resolved configuration reads back equal).
impl PartialEq for RewardSignal {
    fn eq(&self, other: &Self) -> bool {
        (self.kind, self.gamma, self.strength, &self.network_settings, self.learning_rate, &self.gail) == (other.kind, other.gamma, other.strength, &other.network_settings, other.learning_rate, &other.gail)
    }
}

/// GAIL's own settings (reward-signals.md §1.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GailSettings {
    /// A `.demo` file or a folder of them (relative paths from the working directory, as 0.28).
    pub demo_path: String,
    /// The discriminator also reads the action and whether the episode ended.
    pub use_actions: bool,
    /// A variational information bottleneck in the discriminator (VAIL).
    pub use_vail: bool,
}

impl Context<'_> {
    /// The reward signals: the behavior's over `default_settings`' (merged signal by signal and
    /// key by key, as 0.28 deep-merges them), or the extrinsic signal alone when neither gives
    /// any.
    /// A signal whose block sets no `vis_encode_type` encodes images with the policy's
    /// `policy_encoder` (0.28 uses `simple` whatever the policy's; reward-signals.md §11 #11).
    pub(super) fn reward_signals(&self, name: &str, own: Option<&RawRewardSignals>, defaults: Option<&RawRewardSignals>, policy_encoder: VisualEncoder) -> Result<BTreeMap<String, RewardSignal>, ConfigError> {
        let mut reward_signals = BTreeMap::new();
        if own.is_none() && defaults.is_none() {
            let kind = RewardSignalKind::Extrinsic;
            reward_signals.insert(kind.key().into(), RewardSignal { kind, gamma: 0.99, strength: 1.0, network_settings: self.network(name, None, None)?, learning_rate: None, gail: None, encoder_inherited: false });
            return Ok(reward_signals);
        }
        let empty = RawRewardSignals::default();
        let (own, defaults) = (own.unwrap_or(&empty), defaults.unwrap_or(&empty));
        let blocks = [
            (RewardSignalKind::Extrinsic, &own.extrinsic, &defaults.extrinsic),
            (RewardSignalKind::Curiosity, &own.curiosity, &defaults.curiosity),
            (RewardSignalKind::Rnd, &own.rnd, &defaults.rnd),
            (RewardSignalKind::Gail, &own.gail, &defaults.gail),
        ];
        for (kind, own, defaults) in blocks {
            let raw = match (own, defaults) {
                (None, None) => continue,
                (Some(o), Some(d)) => o.over(d),
                (Some(block), None) | (None, Some(block)) => block.clone(),
            };
            reward_signals.insert(kind.key().into(), self.reward_signal(name, kind, &raw, policy_encoder)?);
        }
        if reward_signals.is_empty() {
            return Err(ConfigError::Invalid { file: self.file.into(), message: format!("{name}: reward_signals names no signal (extrinsic, curiosity, rnd or gail)") });
        }
        Ok(reward_signals)
    }

    /// One signal's block: 0.28's defaults, its refusal of keys the signal does not take, the
    /// deprecated `encoding_size`, and its dropping of a `memory` (the signals' networks are
    /// feed-forward).
    fn reward_signal(&self, name: &str, kind: RewardSignalKind, raw: &RawRewardSignal, policy_encoder: VisualEncoder) -> Result<RewardSignal, ConfigError> {
        let key = kind.key();
        let refused: &[(&str, bool)] = match kind {
            RewardSignalKind::Extrinsic => &[
                ("learning_rate", raw.learning_rate.is_some()),
                ("encoding_size", raw.encoding_size.is_some()),
                ("demo_path", raw.demo_path.is_some()),
                ("use_actions", raw.use_actions.is_some()),
                ("use_vail", raw.use_vail.is_some()),
            ],
            RewardSignalKind::Curiosity | RewardSignalKind::Rnd => &[("demo_path", raw.demo_path.is_some()), ("use_actions", raw.use_actions.is_some()), ("use_vail", raw.use_vail.is_some())],
            RewardSignalKind::Gail => &[],
        };
        if let Some((option, _)) = refused.iter().find(|(_, given)| *given) {
            return Err(ConfigError::Invalid {
                file: self.file.into(),
                message: format!("line {}: {name}: the option {option} was specified for the {key} reward signal, but is invalid (it takes {})", self.line_of(option, key), kind.options()),
            });
        }
        let gail = match kind {
            RewardSignalKind::Gail => Some(GailSettings {
                demo_path: raw.demo_path.clone().ok_or_else(|| ConfigError::Invalid {
                    file: self.file.into(),
                    message: format!("line {}: {name}: the gail reward signal needs demo_path (a .demo file or a folder of them)", self.line_of(key, name)),
                })?,
                use_actions: raw.use_actions.unwrap_or(false),
                use_vail: raw.use_vail.unwrap_or(false),
            }),
            _ => None,
        };
        let mut network_settings = self.network(name, raw.network_settings.as_ref(), None)?;
        let encoder_inherited = raw.network_settings.as_ref().and_then(|n| n.vis_encode_type).is_none();
        if encoder_inherited {
            network_settings.vis_encode_type = policy_encoder;
        }
        if let Some(size) = raw.encoding_size {
            log::warn!("{}: 'encoding_size' was deprecated for RewardSignals. Please use network_settings. ({name}, {key})", self.file);
            if raw.network_settings.is_none() {
                network_settings.hidden_units = size;
            }
        }
        if network_settings.memory.take().is_some() && kind != RewardSignalKind::Extrinsic {
            log::warn!("{}: memory was specified in network_settings but is not supported by {} ({name}). It is being ignored.", self.file, kind.tag_name());
        }
        let signal = RewardSignal {
            kind,
            gamma: raw.gamma.unwrap_or(0.99),
            strength: raw.strength.unwrap_or(1.0),
            network_settings,
            learning_rate: raw.learning_rate.or(kind.default_learning_rate()),
            gail,
            encoder_inherited,
        };
        if let Some(lr) = signal.learning_rate.filter(|lr| !(lr.is_finite() && *lr > 0.0)) {
            return Err(self.out_of_range(name, "learning_rate", lr, &format!("the {key} signal's learning rate must be a finite number above 0")));
        }
        for (setting, value) in [("hidden_units", signal.network_settings.hidden_units), ("num_layers", signal.network_settings.num_layers)] {
            if value == 0 {
                return Err(self.out_of_range(name, setting, value, &format!("the {key} signal's network needs at least 1")));
            }
        }
        Ok(signal)
    }
}

#[cfg(test)]
mod tests {
    use super::RewardSignalKind;
    use crate::train::config::RunOptions;

    fn signals(yaml: &str) -> std::collections::BTreeMap<String, crate::train::config::RewardSignal> {
        RunOptions::from_yaml(yaml, "t.yaml").unwrap().behaviors["B"].reward_signals.clone()
    }

    #[test]
    fn a_behavior_needs_a_signal() {
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    reward_signals: {}\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("names no signal"), "{e}");
    }

    /// 0.28's defaults: curiosity 3e-4, RND 1e-4, each with its own network settings (hidden 128,
    /// 2 layers, no normalisation) whatever the behavior's are.
    #[test]
    fn intrinsic_signals_take_their_own_defaults() {
        let s = signals("behaviors:\n  B:\n    network_settings: {hidden_units: 32, normalize: true}\n    reward_signals:\n      curiosity: {strength: 0.02}\n      rnd: {}\n");
        assert!(!s.contains_key("extrinsic"), "a map of signals replaces the default extrinsic one");
        let (curiosity, rnd) = (&s["curiosity"], &s["rnd"]);
        assert_eq!((curiosity.kind, curiosity.strength, curiosity.gamma, curiosity.learning_rate), (RewardSignalKind::Curiosity, 0.02, 0.99, Some(3e-4)));
        assert_eq!((rnd.learning_rate, rnd.network_settings.hidden_units, rnd.network_settings.num_layers, rnd.network_settings.normalize), (Some(1e-4), 128, 2, false));
    }

    /// `encoding_size` sets the width only without `network_settings`; a signal's `memory` is
    /// dropped.
    #[test]
    fn encoding_size_and_memory_as_0_28_takes_them() {
        let s = signals("behaviors:\n  B:\n    reward_signals:\n      curiosity: {encoding_size: 64}\n      rnd: {encoding_size: 64, network_settings: {num_layers: 3, memory: {memory_size: 8}}}\n");
        assert_eq!(s["curiosity"].network_settings.hidden_units, 64);
        assert_eq!((s["rnd"].network_settings.hidden_units, s["rnd"].network_settings.num_layers, s["rnd"].network_settings.memory), (128, 3, None));
    }

    /// GAIL's defaults: learning rate 3e-4, no actions, no VAIL, its own network settings.
    #[test]
    fn gail_takes_its_demonstrations_and_options() {
        let s = signals("behaviors:\n  B:\n    reward_signals:\n      gail: {demo_path: Demos/x.demo, use_vail: true, strength: 0.01}\n");
        let gail = &s["gail"];
        assert_eq!((gail.kind, gail.strength, gail.learning_rate, gail.network_settings.hidden_units), (RewardSignalKind::Gail, 0.01, Some(3e-4), 128));
        let settings = gail.gail.clone().unwrap();
        assert_eq!((settings.demo_path.as_str(), settings.use_actions, settings.use_vail), ("Demos/x.demo", false, true));
        assert!(!RewardSignalKind::Gail.ignores_done() && RewardSignalKind::Rnd.ignores_done());
    }

    /// `default_settings`' signals and a behavior's are merged signal by signal, key by key.
    #[test]
    fn default_signals_are_merged_into_the_behaviors() {
        let yaml = "default_settings:\n  reward_signals:\n    extrinsic: {gamma: 0.9}\n    curiosity: {strength: 0.1, gamma: 0.95}\nbehaviors:\n  B:\n    reward_signals:\n      curiosity: {strength: 0.5}\n";
        let s = signals(yaml);
        assert_eq!(s["extrinsic"].gamma, 0.9);
        assert_eq!((s["curiosity"].strength, s["curiosity"].gamma), (0.5, 0.95));
    }

    #[test]
    fn keys_a_signal_does_not_take_are_refused() {
        for (yaml, expected) in [
            ("extrinsic: {learning_rate: 0.1}", "learning_rate was specified for the extrinsic"),
            ("curiosity: {demo_path: x.demo}", "demo_path was specified for the curiosity"),
            ("gail: {strength: 0.1}", "gail reward signal needs demo_path"),
            ("curiosity: {bogus: 1}", "bogus"),
            ("rnd: {learning_rate: 0}", "learning rate must be a finite number above 0"),
            ("bogus: {}", "bogus"),
        ] {
            let e = RunOptions::from_yaml(&format!("behaviors:\n  B:\n    reward_signals:\n      {yaml}\n"), "t.yaml").unwrap_err().to_string();
            assert!(e.contains(expected), "{yaml}: {e}");
        }
    }
}
