//! The `environment_parameters` section: parsed by [`crate::train::environment_parameters`],
//! then checked against the behaviors the configuration trains, with the lines of what it
//! refuses.

use super::context::Context;
use super::trainer::TrainerSettings;
use super::ConfigError;
use crate::train::environment_parameters::{self, EnvironmentParameterSettings};
use std::collections::BTreeMap;

impl Context<'_> {
    /// The `environment_parameters` section (environment_parameters.rs). A completion
    /// criteria's `behavior` must be one a trainer will have: a name under `behaviors:` (or
    /// any name when `default_settings` is given), without `?team=` (0.28 silently never
    /// advances such a lesson).
    pub(super) fn environment_parameters(&self, section: &serde_norway::Value, behaviors: &BTreeMap<String, TrainerSettings>, has_default: bool) -> Result<Vec<EnvironmentParameterSettings>, ConfigError> {
        if let Some((line, parameter, message)) = environment_parameters::find_yaml_1_1_string(self.text) {
            return Err(ConfigError::Parameter { file: self.file.into(), line, parameter, message });
        }
        let parameters = environment_parameters::parse(section).map_err(|e| ConfigError::Parameter {
            file: self.file.into(),
            line: self.line_of_setting(&e.key, &e.parameter),
            parameter: e.parameter,
            message: e.message,
        })?;
        for p in &parameters {
            for criteria in p.curriculum.iter().filter_map(|l| l.completion_criteria.as_ref()) {
                let behavior = &criteria.behavior;
                let without_self_play = behaviors.get(behavior).is_some_and(|b| b.self_play.is_none());
                let problem = if criteria.measure == environment_parameters::Measure::Elo && without_self_play {
                    format!("measure Elo needs a self-play behavior, and {behavior} has no self_play block")
                } else if behavior.contains('?') {
                    format!("behavior {behavior} names a team; completion criteria take the behavior name alone ({})", behavior.split('?').next().unwrap_or_default())
                } else if !has_default && !behaviors.contains_key(behavior) {
                    let named: Vec<&str> = behaviors.keys().map(String::as_str).collect();
                    format!("behavior {behavior} has no trainer (behaviors: names {}); its lessons would never advance", if named.is_empty() { "none".into() } else { named.join(", ") })
                } else {
                    continue;
                };
                let line = self.text.lines().enumerate().skip(self.line_of(&p.name, &p.name).saturating_sub(1)).find(|(_, l)| l.contains("behavior:") && l.contains(behavior.as_str())).map_or(0, |(i, _)| i + 1);
                return Err(ConfigError::Parameter { file: self.file.into(), line, parameter: p.name.clone(), message: problem });
            }
        }
        Ok(parameters)
    }
}

#[cfg(test)]
mod tests {
    use crate::train::config::RunOptions;
    use crate::train::environment_parameters::ParameterSampler;

    #[test]
    fn environment_parameter_errors_name_their_line() {
        let yaml = "behaviors:\n  B: {}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: A\n        completion_criteria:\n          behavior: B\n          thresh: 0.5\n        value: 1\n      - name: Z\n        value: 2\n";
        let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("t.yaml, line 9: environment parameter p: The option thresh"), "{e}");
        // A behavior no trainer has, or one with its team: refused with the line.
        let lesson = |behavior: &str| format!("behaviors:\n  B: {{}}\nenvironment_parameters:\n  p:\n    curriculum:\n      - name: A\n        completion_criteria:\n          measure: progress\n          behavior: {behavior}\n        value: 1\n      - name: Z\n        value: 2\n");
        let e = RunOptions::from_yaml(&lesson("Bb"), "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9: environment parameter p: behavior Bb has no trainer (behaviors: names B)"), "{e}");
        let e = RunOptions::from_yaml(&lesson("B?team=0"), "t.yaml").unwrap_err().to_string();
        assert!(e.contains("line 9") && e.contains("names a team"), "{e}");
        // A curriculum of several lessons on a known behavior is accepted.
        let run = RunOptions::from_yaml(&lesson("B"), "t.yaml").unwrap();
        assert_eq!(run.environment_parameters[0].curriculum.len(), 2);
        let elo = lesson("B").replace("measure: progress", "measure: Elo");
        let e = RunOptions::from_yaml(&elo, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("measure Elo needs a self-play behavior"), "{e}");
        RunOptions::from_yaml(&elo.replace("  B: {}", "  B: {self_play: {}}"), "t.yaml").unwrap();
        let with_default = lesson("Other").replace("behaviors:", "default_settings: {}\nbehaviors:");
        RunOptions::from_yaml(&with_default, "t.yaml").unwrap();
    }

    #[test]
    fn environment_parameters_parse() {
        let yaml = "environment_parameters:\n  mass: 2.0\n  scale:\n    sampler_type: uniform\n    sampler_parameters: {min_value: 0.5, max_value: 1.5}\n  g:\n    sampler_type: multirangeuniform\n    sampler_parameters: {intervals: [[7, 10], [15, 20]], seed: 3}\n";
        let p = RunOptions::from_yaml(yaml, "t.yaml").unwrap().environment_parameters;
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["mass", "scale", "g"], "YAML order");
        assert_eq!(p[0].curriculum[0].value, ParameterSampler::Constant { value: 2.0, seed: -1 });
        assert_eq!(p[1].curriculum[0].value, ParameterSampler::Uniform { min_value: 0.5, max_value: 1.5, seed: -1 });
        assert_eq!(p[2].curriculum[0].value, ParameterSampler::MultiRangeUniform { intervals: vec![(7.0, 10.0), (15.0, 20.0)], seed: 3 });
    }

    #[test]
    fn environment_parameters_must_be_finite_and_ordered() {
        let cases = [
            "environment_parameters:\n  mass: .nan\n",
            "environment_parameters:\n  s:\n    sampler_type: uniform\n    sampler_parameters: {min_value: 2, max_value: 1}\n",
            "environment_parameters:\n  s:\n    sampler_type: gaussian\n    sampler_parameters: {mean: 0, st_dev: -1}\n",
            "environment_parameters:\n  s:\n    sampler_type: uniform\n    sampler_parameters: {min_value: .nan, max_value: 1}\n",
            "environment_parameters:\n  s:\n    sampler_type: multirangeuniform\n    sampler_parameters: {intervals: [[3, 1]]}\n",
        ];
        for yaml in cases {
            let e = RunOptions::from_yaml(yaml, "t.yaml").unwrap_err().to_string();
            assert!(e.contains("environment parameter"), "{yaml}: {e}");
        }
    }
}
