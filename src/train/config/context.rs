//! The YAML being resolved: where a key is, so that every refusal names its line.

use super::ConfigError;

/// The YAML being resolved and the file it came from.
pub(super) struct Context<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
}

impl Context<'_> {
    /// The 1-based line of the first `key:` at or after the line of `after:` (0 = anywhere).
    pub(super) fn line_of(&self, key: &str, after: &str) -> usize {
        let start = self
            .text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{after}:")))
            .unwrap_or(0);
        self.text
            .lines()
            .enumerate()
            .skip(start)
            .find(|(_, l)| l.trim_start().trim_start_matches("- ").starts_with(&format!("{key}:")) || l.contains(&format!(" {key}:")) || l.contains(&format!("{{{key}:")))
            .map(|(i, _)| i + 1)
            .unwrap_or(0)
    }

    /// The line of `key` after `after` ([`Self::line_of`]); for a key the YAML does not write
    /// (a default broke a rule), the line of the section that would hold it, a list entry
    /// `name: key` (a lesson), or `after` itself.
    pub(super) fn line_of_setting(&self, key: &str, after: &str) -> usize {
        let section = match key {
            "sequence_length" | "memory_size" => Some("memory"),
            "batch_size" | "buffer_size" | "learning_rate" | "beta" | "epsilon" | "lambd" | "num_epoch" | "buffer_init_steps" | "tau" | "steps_per_update" | "reward_signal_steps_per_update" | "init_entcoef" => {
                Some("hyperparameters")
            }
            "hidden_units" | "num_layers" | "normalize" => Some("network_settings"),
            "window" | "save_steps" | "swap_steps" | "team_change" | "play_against_latest_model_ratio" | "initial_elo" => Some("self_play"),
            _ => None,
        };
        let start = self.text.lines().position(|l| l.trim_start().starts_with(&format!("{after}:"))).unwrap_or(0);
        let entry = || self.text.lines().enumerate().skip(start).find(|(_, l)| l.trim_start().trim_start_matches("- ").trim() == format!("name: {key}")).map_or(0, |(i, _)| i + 1);
        [self.line_of(key, after), section.map_or(0, |s| self.line_of(s, after)), entry(), if start > 0 || self.text.starts_with(&format!("{after}:")) { start + 1 } else { 0 }]
            .into_iter()
            .find(|line| *line > 0)
            .unwrap_or(0)
    }

    pub(super) fn unsupported(&self, what: &str, key: &str, after: &str, detail: &str) -> ConfigError {
        ConfigError::Unsupported { file: self.file.into(), line: self.line_of(key, after), what: what.into(), detail: detail.into() }
    }

    pub(super) fn out_of_range(&self, behavior: &str, key: &str, value: impl std::fmt::Display, rule: &str) -> ConfigError {
        ConfigError::OutOfRange {
            file: self.file.into(),
            line: self.line_of_setting(key, behavior),
            behavior: behavior.into(),
            key: key.into(),
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;

    /// A default that breaks a rule points at the section that left it out (bad-input report
    /// of 2 December, U6: "line 0").
    #[test]
    fn defaults_that_break_a_rule_name_the_line_that_left_them() {
        let memory = "behaviors:\n  1D:\n    hyperparameters: {batch_size: 32, buffer_size: 64}\n    network_settings:\n      memory: {}\n";
        let e = RunOptions::from_yaml(memory, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("sequence_length of 1D is 64"), "{e}");
        let lessons = "behaviors:\n  B: {}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: Near\n        completion_criteria: {behavior: B, threshold: 0.5}\n        value: 1\n      - name: Middle\n        value: 2\n      - name: Far\n        value: 3\n";
        let e = RunOptions::from_yaml(lessons, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9") && e.contains("does not have a completion_criteria"), "{e}");
    }
}
