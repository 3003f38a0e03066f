//! `self_play`: the ghost trainer's block, with 0.28's defaults and the checks 0.28 lacks
//! (self-play.md §1); the settings themselves are [`crate::train::self_play::SelfPlaySettings`].

use super::context::Context;
use super::ConfigError;
use crate::train::self_play::SelfPlaySettings;
use serde::Deserialize;

/// A `self_play` block as the YAML gives it (self-play.md §1; numbers may be written as
/// floats, `5.0e4`, as 0.28 converts them with `int()`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSelfPlay {
    pub(super) save_steps: Option<f64>,
    pub(super) team_change: Option<f64>,
    pub(super) swap_steps: Option<f64>,
    pub(super) window: Option<f64>,
    pub(super) play_against_latest_model_ratio: Option<f64>,
    pub(super) initial_elo: Option<f64>,
}

impl Context<'_> {
    /// A `self_play` block with 0.28's defaults (`team_change`: 5 × the given `save_steps`),
    /// checked where 0.28 crashes or says nothing: `window` at least 1, whole non-negative step
    /// counts, the ratio in [0, 1], a finite rating; the `team_change > max_steps` warning.
    pub(super) fn self_play(&self, name: &str, raw: &RawSelfPlay, max_steps: u64) -> Result<SelfPlaySettings, ConfigError> {
        let defaults = SelfPlaySettings::default();
        let whole = |key: &str, v: Option<f64>, default: u64, least: f64| -> Result<u64, ConfigError> {
            match v {
                None => Ok(default),
                Some(x) if x.is_finite() && x >= least && x <= u64::MAX as f64 => Ok(x as u64),
                Some(x) => Err(self.out_of_range(name, key, x, &format!("it must be a whole number, at least {least}"))),
            }
        };
        let save_steps = whole("save_steps", raw.save_steps, defaults.save_steps, 0.0)?;
        let settings = SelfPlaySettings {
            save_steps,
            team_change: whole("team_change", raw.team_change, save_steps.saturating_mul(5), 0.0)?,
            swap_steps: whole("swap_steps", raw.swap_steps, defaults.swap_steps, 0.0)?,
            window: whole("window", raw.window, defaults.window as u64, 1.0)? as usize,
            play_against_latest_model_ratio: raw.play_against_latest_model_ratio.unwrap_or(defaults.play_against_latest_model_ratio),
            initial_elo: raw.initial_elo.unwrap_or(defaults.initial_elo),
        };
        if !(0.0..=1.0).contains(&settings.play_against_latest_model_ratio) {
            let ratio = settings.play_against_latest_model_ratio;
            return Err(self.out_of_range(name, "play_against_latest_model_ratio", ratio, "it is a probability, between 0 and 1"));
        }
        if !settings.initial_elo.is_finite() {
            return Err(self.out_of_range(name, "initial_elo", settings.initial_elo, "it must be a finite number"));
        }
        if settings.team_change > max_steps {
            log::warn!(
                "The max steps of the GhostTrainer for behavior name {name} is less than team change. This team will not face opposition that has been trained if the opponent is managed by a different GhostTrainer as in an asymmetric game."
            );
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;
    use crate::train::self_play::SelfPlaySettings;

    /// `self_play` takes 0.28's defaults (team_change: 5 x the given save_steps; floats as
    /// whole numbers) and refuses what 0.28 crashes on or ignores, with the line.
    #[test]
    fn self_play_blocks() {
        let run = RunOptions::from_yaml("behaviors:\n  B:\n    self_play: {save_steps: 5.0e+4}\n", "t.yaml").unwrap();
        let sp = run.behaviors["B"].self_play.clone().unwrap();
        assert_eq!((sp.save_steps, sp.team_change, sp.swap_steps, sp.window, sp.play_against_latest_model_ratio, sp.initial_elo), (50000, 250000, 2000, 10, 0.5, 1200.0));
        assert!(RunOptions::from_yaml("behaviors:\n  B: {}\n", "t.yaml").unwrap().behaviors["B"].self_play.is_none());
        let empty = RunOptions::from_yaml("behaviors:\n  B:\n    self_play: {}\n", "t.yaml").unwrap();
        assert_eq!(empty.behaviors["B"].self_play, Some(SelfPlaySettings::default()));
        for (block, key) in [("{window: 0}", "window"), ("{swap_steps: -5}", "swap_steps"), ("{play_against_latest_model_ratio: 1.5}", "play_against_latest_model_ratio"), ("{initial_elo: .nan}", "initial_elo")] {
            let e = RunOptions::from_yaml(&format!("behaviors:\n  B:\n    max_steps: 10\n    self_play: {block}\n"), "t.yaml").unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("line 4"), "{block}: {e}");
        }
        let e = RunOptions::from_yaml("behaviors:\n  B:\n    self_play:\n      play_against_current_self_ratio: 0.5\n", "t.yaml").unwrap_err().to_string();
        assert!(e.contains("play_against_current_self_ratio") && e.contains("line 4"), "{e}");
    }
}
