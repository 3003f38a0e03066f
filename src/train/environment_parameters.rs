//! `environment_parameters` as ML-Agents 0.28 reads them (curriculum.md §1): each parameter,
//! in YAML order, is a curriculum of lessons; a constant (`mass: 2.0`) or a sampler block is a
//! one-lesson curriculum named after the parameter. Samplers take 0.28's defaults; seeds of -1
//! are assigned from the run seed in YAML order (§2.9). 0.28's messages are kept; where 0.28
//! silently accepts a mistake (§6, §9.2) it is an error here: unknown keys in a sampler block,
//! its parameters, a lesson or its completion criteria, negative lengths or deviations, empty
//! interval lists or curricula.

use crate::comm::side_channel::{ParameterValue, Sampler};
use serde::Serialize;
use serde_norway::{Mapping, Value};

/// One lesson's value: a constant or a sampler, with its seed (-1 until assigned).
#[derive(Debug, Clone, PartialEq)]
pub enum ParameterSampler {
    Constant { value: f64, seed: i64 },
    Uniform { min_value: f64, max_value: f64, seed: i64 },
    Gaussian { mean: f64, st_dev: f64, seed: i64 },
    MultiRangeUniform { intervals: Vec<(f64, f64)>, seed: i64 },
}

/// What a lesson's completion is measured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// The behavior's step over its `max_steps`.
    Progress,
    /// The mean of the behavior's recent episode rewards.
    Reward,
    /// The behavior's self-play rating (ours: ML-Agents 0.28 has no such measure).
    #[serde(rename = "Elo")]
    Elo,
}

/// When a lesson is complete (`completion_criteria`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionCriteria {
    pub behavior: String,
    pub measure: Measure,
    pub min_lesson_length: u64,
    pub signal_smoothing: bool,
    pub threshold: f64,
    pub require_reset: bool,
}

/// One lesson of a curriculum.
#[derive(Debug, Clone, PartialEq)]
pub struct Lesson {
    pub name: String,
    pub value: ParameterSampler,
    /// `None` on the last lesson (where 0.28 ignores any, with a warning).
    pub completion_criteria: Option<CompletionCriteria>,
}

/// An environment parameter and its lessons (one for a constant or a sampler).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvironmentParameterSettings {
    pub name: String,
    pub curriculum: Vec<Lesson>,
}

/// Why a parameter's settings are refused: what, and the key whose line to show.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterError {
    pub parameter: String,
    pub key: String,
    pub message: String,
}

type Parsed<T> = Result<T, ParameterError>;

impl ParameterSampler {
    fn seed(&self) -> i64 {
        match self {
            Self::Constant { seed, .. } | Self::Uniform { seed, .. } | Self::Gaussian { seed, .. } | Self::MultiRangeUniform { seed, .. } => *seed,
        }
    }

    fn set_seed(&mut self, new: i64) {
        match self {
            Self::Constant { seed, .. } | Self::Uniform { seed, .. } | Self::Gaussian { seed, .. } | Self::MultiRangeUniform { seed, .. } => *seed = new,
        }
    }

    /// What is sent on the environment parameters channel: constants as floats (no seed),
    /// samplers with their seed.
    pub fn to_side_channel(&self) -> ParameterValue {
        let seed = self.seed().clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        match self {
            Self::Constant { value, .. } => ParameterValue::Float(*value as f32),
            Self::Uniform { min_value, max_value, .. } => ParameterValue::Sampled { seed, sampler: Sampler::Uniform { min: *min_value as f32, max: *max_value as f32 } },
            Self::Gaussian { mean, st_dev, .. } => ParameterValue::Sampled { seed, sampler: Sampler::Gaussian { mean: *mean as f32, std_dev: *st_dev as f32 } },
            Self::MultiRangeUniform { intervals, .. } => ParameterValue::Sampled {
                seed,
                sampler: Sampler::MultiRangeUniform { intervals: intervals.iter().map(|(a, b)| (*a as f32, *b as f32)).collect() },
            },
        }
    }

    /// The sampler as 0.28 prints it in its lesson line (`Float: value=2.0`,
    /// `Uniform sampler: min=0.0, max=4.0`, ...).
    pub fn describe(&self) -> String {
        let f = python_float;
        match self {
            Self::Constant { value, .. } => format!("Float: value={}", f(*value)),
            Self::Uniform { min_value, max_value, .. } => format!("Uniform sampler: min={}, max={}", f(*min_value), f(*max_value)),
            Self::Gaussian { mean, st_dev, .. } => format!("Gaussian sampler: mean={}, stddev={}", f(*mean), f(*st_dev)),
            Self::MultiRangeUniform { intervals, .. } => {
                let list: Vec<String> = intervals.iter().map(|(a, b)| format!("({}, {})", f(*a), f(*b))).collect();
                format!("MultiRangeUniform sampler: intervals=[{}]", list.join(", "))
            }
        }
    }
}

/// A float as Python's `str()` writes it (`4.0`, `0.5`, `1e-05`).
fn python_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 { format!("{v:.1}") } else { format!("{v}") }
}

/// Reads the `environment_parameters` section (a mapping, or null for none).
pub fn parse(section: &Value) -> Parsed<Vec<EnvironmentParameterSettings>> {
    let top = |message: String| ParameterError { parameter: String::new(), key: "environment_parameters".into(), message };
    let mapping = match section {
        Value::Null => return Ok(vec![]),
        Value::Mapping(m) => m,
        other => return Err(top(format!("Unsupported parameter environment parameter settings {}.", show(other)))),
    };
    let mut parameters = Vec::with_capacity(mapping.len());
    for (key, value) in mapping {
        let name = key.as_str().map(str::to_string).unwrap_or_else(|| show(key));
        let curriculum = match value {
            Value::Mapping(m) if m.contains_key("curriculum") => curriculum(&name, m)?,
            other => vec![Lesson { name: name.clone(), value: sampler(&name, other)?, completion_criteria: None }],
        };
        parameters.push(EnvironmentParameterSettings { name, curriculum });
    }
    Ok(parameters)
}

/// Assigns the seeds left at -1 from the run seed, one offset per lesson in YAML order
/// (constants too), as 0.28's `_set_sampler_seeds` does; explicit seeds stay.
pub fn assign_seeds(parameters: &mut [EnvironmentParameterSettings], run_seed: i64) {
    let mut offset = 0;
    for lesson in parameters.iter_mut().flat_map(|p| p.curriculum.iter_mut()) {
        if lesson.value.seed() == -1 {
            lesson.value.set_seed(run_seed + offset);
            offset += 1;
        }
    }
}

/// A number YAML 1.2 reads as a float but PyYAML (YAML 1.1), which 0.28 reads configurations
/// with, takes for a string: an exponent without a decimal point or without a sign (`1e5`,
/// `1.0e5`; `1.0e+5` is a float to both).
fn is_yaml_1_1_string(token: &str) -> bool {
    let Some((mantissa, exponent)) = token.split_once(['e', 'E']) else { return false };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '_');
    let mantissa = mantissa.trim_start_matches(['-', '+']);
    let well_formed = mantissa.split_once('.').is_some_and(|(whole, fraction)| (whole.is_empty() || digits(whole)) && (fraction.is_empty() || digits(fraction)))
        && exponent.starts_with(['-', '+'])
        && digits(&exponent[1..]);
    token.parse::<f64>().is_ok() && !well_formed
}

/// In a configuration's text, the first constant of `environment_parameters` (a parameter's
/// shorthand value or a lesson's `value:`) that 0.28 would read as a string, with its line
/// (1-based), the parameter and 0.28's message. Block-style YAML is scanned; values inside
/// `sampler_parameters` are converted with `float()` by 0.28 and so are fine.
pub fn find_yaml_1_1_string(text: &str) -> Option<(usize, String, String)> {
    let mut in_section = false;
    let mut parents: Vec<(usize, String)> = vec![];
    let mut parameter = String::new();
    for (i, line) in text.lines().enumerate() {
        let content = line.split(" #").next().unwrap_or_default().trim_end();
        let trimmed = content.trim_start().trim_start_matches("- ").trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = content.len() - trimmed.len();
        if indent == 0 {
            in_section = trimmed.starts_with("environment_parameters:");
            parents = vec![(0, "environment_parameters".into())];
            continue;
        }
        let Some((key, token)) = trimmed.split_once(':') else { continue };
        if !in_section {
            continue;
        }
        while parents.last().is_some_and(|(at, _)| *at >= indent) {
            parents.pop();
        }
        let parent = parents.last().map(|(_, k)| k.as_str()).unwrap_or_default();
        if parent == "environment_parameters" {
            parameter = key.to_string();
        }
        let token = token.trim();
        if (parent == "environment_parameters" || (key == "value" && parent != "sampler_parameters")) && is_yaml_1_1_string(token) {
            let message = format!("Unsupported parameter randomization configuration {token}. (ML-Agents reads YAML 1.1, where {token} is a string; write it with a decimal point and a signed exponent, such as 1.0e+5)");
            return Some((i + 1, parameter, message));
        }
        parents.push((indent, key.to_string()));
    }
    None
}

/// A YAML value as 0.28's messages print it.
fn show(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::String(s) => s.clone(),
        other => serde_norway::to_string(other).map(|s| s.trim().to_string()).unwrap_or_default(),
    }
}

fn error(parameter: &str, key: &str, message: String) -> ParameterError {
    ParameterError { parameter: parameter.into(), key: key.into(), message }
}

/// A number of a sampler or criteria block (YAML ints and floats; not strings).
fn number(parameter: &str, key: &str, value: &Value) -> Parsed<f64> {
    let v = value.as_f64().ok_or_else(|| error(parameter, key, format!("{key} is {}; it must be a number", show(value))))?;
    if !v.is_finite() {
        return Err(error(parameter, key, format!("{key} is {v}; it must be a finite number")));
    }
    Ok(v)
}

fn check_keys(parameter: &str, block: &Mapping, known: &[&str], class: &str) -> Parsed<()> {
    for key in block.keys() {
        let key = key.as_str().map(str::to_string).unwrap_or_else(|| show(key));
        if !known.contains(&key.as_str()) {
            return Err(error(parameter, &key, format!("The option {key} was specified in your YAML file for {class}, but is invalid. (Known: {}.)", known.join(", "))));
        }
    }
    Ok(())
}

/// A constant (`2.0`, `true`) or a sampler block.
fn sampler(parameter: &str, value: &Value) -> Parsed<ParameterSampler> {
    match value {
        Value::Number(_) => Ok(ParameterSampler::Constant { value: number(parameter, parameter, value)?, seed: -1 }),
        Value::Bool(b) => Ok(ParameterSampler::Constant { value: if *b { 1.0 } else { 0.0 }, seed: -1 }),
        Value::Mapping(block) => sampler_block(parameter, block),
        other => Err(error(parameter, parameter, format!("Unsupported parameter randomization configuration {}.", show(other)))),
    }
}

fn sampler_block(parameter: &str, block: &Mapping) -> Parsed<ParameterSampler> {
    let shown = || show(&Value::Mapping(block.clone())).replace('\n', ", ");
    let sampler_type = block
        .get("sampler_type")
        .ok_or_else(|| error(parameter, parameter, format!("Sampler configuration does not contain sampler_type : {}.", shown())))?;
    let Some(Value::Mapping(p)) = block.get("sampler_parameters") else {
        return Err(error(parameter, parameter, format!("Sampler configuration does not contain sampler_parameters : {}.", shown())));
    };
    // 0.28 ignores other keys here (a `seed:` beside `sampler_type` is silently dropped).
    check_keys(parameter, block, &["sampler_type", "sampler_parameters"], "a sampler (put seed inside sampler_parameters)")?;
    let value_or = |key: &str, default: f64| p.get(key).map_or(Ok(default), |v| number(parameter, key, v));
    let seed = match p.get("seed") {
        None => -1,
        Some(v) => number(parameter, "seed", v)?.trunc() as i64,
    };
    let kind = sampler_type.as_str().unwrap_or_default();
    match kind {
        "uniform" => {
            check_keys(parameter, p, &["min_value", "max_value", "seed"], "UniformSettings")?;
            let (min_value, max_value) = (value_or("min_value", 0.0)?, value_or("max_value", 1.0)?);
            if min_value > max_value {
                return Err(error(parameter, "min_value", "Minimum value is greater than maximum value in uniform sampler.".into()));
            }
            Ok(ParameterSampler::Uniform { min_value, max_value, seed })
        }
        "gaussian" => {
            check_keys(parameter, p, &["mean", "st_dev", "seed"], "GaussianSettings")?;
            let (mean, st_dev) = (value_or("mean", 1.0)?, value_or("st_dev", 1.0)?);
            if st_dev < 0.0 {
                return Err(error(parameter, "st_dev", format!("st_dev is {st_dev}; a standard deviation is 0 or more (ML-Agents 0.28 accepts it and samples nonsense)")));
            }
            Ok(ParameterSampler::Gaussian { mean, st_dev, seed })
        }
        "multirangeuniform" => {
            check_keys(parameter, p, &["intervals", "seed"], "MultiRangeUniformSettings")?;
            let intervals = match p.get("intervals") {
                None => vec![(0.0, 1.0)],
                Some(v) => intervals(parameter, v)?,
            };
            Ok(ParameterSampler::MultiRangeUniform { intervals, seed })
        }
        "constant" => {
            check_keys(parameter, p, &["value", "seed"], "ConstantSettings")?;
            Ok(ParameterSampler::Constant { value: value_or("value", 0.0)?, seed })
        }
        _ => Err(error(
            parameter,
            "sampler_type",
            format!("'{}' is not a valid ParameterRandomizationType (uniform, gaussian, multirangeuniform or constant)", show(sampler_type)),
        )),
    }
}

fn intervals(parameter: &str, value: &Value) -> Parsed<Vec<(f64, f64)>> {
    let list = value.as_sequence().ok_or_else(|| error(parameter, "intervals", format!("intervals is {}; it is a list of [min, max] pairs", show(value))))?;
    if list.is_empty() {
        return Err(error(parameter, "intervals", "intervals is empty; give at least one [min, max] pair (ML-Agents 0.28 accepts it and fails when sampling)".into()));
    }
    list.iter()
        .map(|interval| {
            let values: Vec<f64> = interval.as_sequence().into_iter().flatten().map(|v| number(parameter, "intervals", v)).collect::<Parsed<_>>()?;
            let tuple = format!("({})", values.iter().map(|v| python_float(*v)).collect::<Vec<_>>().join(", ") + if values.len() == 1 { "," } else { "" });
            match values[..] {
                [low, high] if low <= high => Ok((low, high)),
                [_, _] => Err(error(parameter, "intervals", format!("Minimum value is greater than maximum value in interval {tuple}."))),
                _ => Err(error(parameter, "intervals", format!("The sampling interval {tuple} must contain exactly two values."))),
            }
        })
        .collect()
}

fn curriculum(parameter: &str, block: &Mapping) -> Parsed<Vec<Lesson>> {
    check_keys(parameter, block, &["curriculum"], "EnvironmentParameterSettings")?;
    let list = block["curriculum"]
        .as_sequence()
        .ok_or_else(|| error(parameter, "curriculum", "curriculum is a list of lessons (each starting with '-')".into()))?;
    if list.is_empty() {
        return Err(error(parameter, "curriculum", "curriculum has no lesson (ML-Agents 0.28 accepts it and fails at the first reset)".into()));
    }
    let mut lessons = Vec::with_capacity(list.len());
    for (k, lesson) in list.iter().enumerate() {
        let Value::Mapping(lesson) = lesson else {
            return Err(error(parameter, "curriculum", format!("lesson {k} is {}; a lesson has name, value and completion_criteria", show(lesson))));
        };
        check_keys(parameter, lesson, &["name", "value", "completion_criteria"], "Lesson")?;
        let name = lesson.get("name").ok_or_else(|| error(parameter, "curriculum", format!("lesson {k} has no name")))?;
        let name = name.as_str().map(str::to_string).unwrap_or_else(|| show(name));
        let value = lesson.get("value").ok_or_else(|| error(parameter, &name, format!("lesson {name} has no value")))?;
        let last = k + 1 == list.len();
        let criteria = match lesson.get("completion_criteria") {
            None | Some(Value::Null) => None,
            Some(_) if last => {
                log::warn!("Your final lesson definition contains completion_criteria for {parameter}.It will be ignored.");
                None
            }
            Some(Value::Mapping(c)) => Some(criteria(parameter, c)?),
            Some(other) => return Err(error(parameter, "completion_criteria", format!("completion_criteria is {}; it is a mapping", show(other)))),
        };
        if criteria.is_none() && !last {
            return Err(error(parameter, &name, format!("A non-terminal lesson does not have a completion_criteria for {parameter}.")));
        }
        lessons.push(Lesson { value: sampler(parameter, value)?, name, completion_criteria: criteria });
    }
    Ok(lessons)
}

fn criteria(parameter: &str, c: &Mapping) -> Parsed<CompletionCriteria> {
    const KEYS: [&str; 6] = ["behavior", "measure", "min_lesson_length", "signal_smoothing", "threshold", "require_reset"];
    check_keys(parameter, c, &KEYS, "CompletionCriteriaSettings")?;
    let behavior = c.get("behavior").ok_or_else(|| error(parameter, "completion_criteria", "completion_criteria needs behavior (the behavior name, without ?team=)".into()))?;
    let behavior = behavior.as_str().map(str::to_string).unwrap_or_else(|| show(behavior));
    let measure = match c.get("measure").map(show).as_deref() {
        None | Some("reward") => Measure::Reward,
        Some("progress") => Measure::Progress,
        Some("Elo") => Measure::Elo,
        Some(other) => return Err(error(parameter, "measure", format!("'{other}' is not a valid CompletionCriteriaSettings.MeasureType (progress, reward, or Elo for a self-play behavior)"))),
    };
    let flag = |key: &str, default: bool| match c.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(error(parameter, key, format!("{key} is {}; it is true or false", show(other)))),
    };
    let min_lesson_length = match c.get("min_lesson_length") {
        None => 0,
        Some(v) => {
            let n = number(parameter, "min_lesson_length", v)?;
            if n < 0.0 {
                return Err(error(parameter, "min_lesson_length", format!("min_lesson_length is {n}; it is a number of episodes, 0 or more")));
            }
            n.trunc() as u64
        }
    };
    let threshold = c.get("threshold").map_or(Ok(0.0), |v| number(parameter, "threshold", v))?;
    if measure == Measure::Progress && threshold > 1.0 {
        return Err(error(parameter, "threshold", "Threshold for next lesson cannot be greater than 1 when the measure is progress.".into()));
    }
    if measure == Measure::Progress && threshold < 0.0 {
        return Err(error(parameter, "threshold", "Threshold for next lesson cannot be negative when the measure is progress.".into()));
    }
    Ok(CompletionCriteria {
        behavior,
        measure,
        min_lesson_length,
        signal_smoothing: flag("signal_smoothing", true)?,
        threshold,
        require_reset: flag("require_reset", false)?,
    })
}

/// The section as 0.28 writes it into `configuration.yaml` (every parameter as a curriculum,
/// samplers with their type and seed; §1.7), which [`parse`] reads back.
pub fn to_value(parameters: &[EnvironmentParameterSettings]) -> Value {
    let mut section = Mapping::new();
    for parameter in parameters {
        let lessons: Vec<Value> = parameter
            .curriculum
            .iter()
            .map(|lesson| {
                let mut l = Mapping::new();
                l.insert("value".into(), sampler_value(&lesson.value));
                l.insert("name".into(), lesson.name.clone().into());
                l.insert("completion_criteria".into(), serde_norway::to_value(&lesson.completion_criteria).unwrap_or(Value::Null));
                Value::Mapping(l)
            })
            .collect();
        let mut c = Mapping::new();
        c.insert("curriculum".into(), Value::Sequence(lessons));
        section.insert(parameter.name.clone().into(), Value::Mapping(c));
    }
    Value::Mapping(section)
}

fn sampler_value(sampler: &ParameterSampler) -> Value {
    let mut p = Mapping::new();
    p.insert("seed".into(), sampler.seed().into());
    let kind = match sampler {
        ParameterSampler::Constant { value, .. } => {
            p.insert("value".into(), (*value).into());
            "constant"
        }
        ParameterSampler::Uniform { min_value, max_value, .. } => {
            p.insert("min_value".into(), (*min_value).into());
            p.insert("max_value".into(), (*max_value).into());
            "uniform"
        }
        ParameterSampler::Gaussian { mean, st_dev, .. } => {
            p.insert("mean".into(), (*mean).into());
            p.insert("st_dev".into(), (*st_dev).into());
            "gaussian"
        }
        ParameterSampler::MultiRangeUniform { intervals, .. } => {
            let list: Vec<Value> = intervals.iter().map(|(a, b)| Value::Sequence(vec![(*a).into(), (*b).into()])).collect();
            p.insert("intervals".into(), Value::Sequence(list));
            "multirangeuniform"
        }
    };
    let mut block = Mapping::new();
    block.insert("sampler_type".into(), kind.into());
    block.insert("sampler_parameters".into(), Value::Mapping(p));
    Value::Mapping(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(yaml: &str) -> Parsed<Vec<EnvironmentParameterSettings>> {
        parse(&serde_norway::from_str::<Value>(yaml).unwrap())
    }

    fn message(yaml: &str) -> String {
        parsed(yaml).unwrap_err().message
    }

    /// test_create_manager's seeds: param_1 (3 lessons) 1337..1339, param_2 1340, param_3
    /// (a constant) 1341; explicit seeds stay and take no offset; YAML order, not sorted.
    #[test]
    fn seeds_follow_yaml_order_with_one_offset_per_lesson() {
        let yaml = "param_1:\n  curriculum:\n    - name: L1\n      completion_criteria: {behavior: fake_behavior, threshold: 30, min_lesson_length: 100, require_reset: true}\n      value: 1\n    - name: L2\n      completion_criteria: {behavior: fake_behavior, measure: progress, threshold: 0.5}\n      value: 2\n    - name: L3\n      value: {sampler_type: uniform, sampler_parameters: {min_value: 1, max_value: 3}}\nparam_2:\n  sampler_type: gaussian\n  sampler_parameters: {mean: 4, st_dev: 5}\nparam_3: 20\nfixed:\n  sampler_type: uniform\n  sampler_parameters: {seed: 7}\n";
        let mut p = parsed(yaml).unwrap();
        assign_seeds(&mut p, 1337);
        let seeds: Vec<i64> = p.iter().flat_map(|p| p.curriculum.iter().map(|l| l.value.seed())).collect();
        assert_eq!(seeds, [1337, 1338, 1339, 1340, 1341, 7]);
        assert_eq!(p[0].curriculum[2].value, ParameterSampler::Uniform { min_value: 1.0, max_value: 3.0, seed: 1339 });
        assert_eq!(p[1].curriculum[0].value, ParameterSampler::Gaussian { mean: 4.0, st_dev: 5.0, seed: 1340 });
        assert_eq!(p[2].curriculum[0].name, "param_3");
        let first = p[0].curriculum[0].completion_criteria.as_ref().unwrap();
        assert_eq!((first.measure, first.threshold, first.min_lesson_length, first.require_reset, first.signal_smoothing), (Measure::Reward, 30.0, 100, true, true));
        assert!(p[0].curriculum[2].completion_criteria.is_none());
        // The fixed seed is sent as given; -1 seeds never reach the environment once assigned.
        assert_eq!(p[3].curriculum[0].value.to_side_channel(), ParameterValue::Sampled { seed: 7, sampler: Sampler::Uniform { min: 0.0, max: 1.0 } });
    }

    #[test]
    fn samplers_take_the_defaults_of_0_28() {
        let p = parsed("u: {sampler_type: uniform, sampler_parameters: {}}\ng: {sampler_type: gaussian, sampler_parameters: {}}\nm: {sampler_type: multirangeuniform, sampler_parameters: {}}\nc: {sampler_type: constant, sampler_parameters: {value: 4}}\nb: true\n").unwrap();
        let values: Vec<&ParameterSampler> = p.iter().map(|p| &p.curriculum[0].value).collect();
        assert_eq!(values[0], &ParameterSampler::Uniform { min_value: 0.0, max_value: 1.0, seed: -1 });
        assert_eq!(values[1], &ParameterSampler::Gaussian { mean: 1.0, st_dev: 1.0, seed: -1 });
        assert_eq!(values[2], &ParameterSampler::MultiRangeUniform { intervals: vec![(0.0, 1.0)], seed: -1 });
        assert_eq!(values[3], &ParameterSampler::Constant { value: 4.0, seed: -1 });
        assert_eq!(values[4], &ParameterSampler::Constant { value: 1.0, seed: -1 });
    }

    /// 0.28's messages (test_settings.py::test_env_parameter_structure and the spec's probes).
    #[test]
    fn mistakes_get_the_messages_of_0_28() {
        assert_eq!(message("p: '2'"), "Unsupported parameter randomization configuration 2.");
        assert_eq!(message("p:"), "Unsupported parameter randomization configuration None.");
        assert!(message("p: {sampler_parameters: {}}").starts_with("Sampler configuration does not contain sampler_type : "));
        assert!(message("p: {sampler_type: uniform}").starts_with("Sampler configuration does not contain sampler_parameters : "));
        assert!(message("p: {sampler_type: beta, sampler_parameters: {}}").starts_with("'beta' is not a valid ParameterRandomizationType"));
        assert!(message("p: {sampler_type: multirange_uniform, sampler_parameters: {}}").starts_with("'multirange_uniform' is not a valid"));
        assert!(message("p: {sampler_type: uniform, sampler_parameters: {min: 1}}").starts_with("The option min was specified in your YAML file for UniformSettings, but is invalid."));
        assert_eq!(message("p: {sampler_type: uniform, sampler_parameters: {min_value: 3}}"), "Minimum value is greater than maximum value in uniform sampler.");
        assert_eq!(message("p: {sampler_type: multirangeuniform, sampler_parameters: {intervals: [[2.0, 1.0]]}}"), "Minimum value is greater than maximum value in interval (2.0, 1.0).");
        assert_eq!(message("p: {sampler_type: multirangeuniform, sampler_parameters: {intervals: [[1.0, 2.0], [3.0]]}}"), "The sampling interval (3.0,) must contain exactly two values.");
        assert_eq!(message("5"), "Unsupported parameter environment parameter settings 5.");
        let progress = "p:\n  curriculum:\n    - name: A\n      completion_criteria: {behavior: B, measure: progress, threshold: 10}\n      value: 1\n    - name: Z\n      value: 2\n";
        assert_eq!(message(progress), "Threshold for next lesson cannot be greater than 1 when the measure is progress.");
        let missing = "p:\n  curriculum:\n    - name: A\n      value: 1\n    - name: Z\n      value: 2\n";
        assert_eq!(message(missing), "A non-terminal lesson does not have a completion_criteria for p.");
        let elo = "p:\n  curriculum:\n    - name: A\n      completion_criteria: {behavior: B, measure: ELO}\n      value: 1\n    - name: Z\n      value: 2\n";
        assert!(message(elo).starts_with("'ELO' is not a valid CompletionCriteriaSettings.MeasureType"));
        let keyed = "p:\n  curriculum:\n    - Lesson0: {value: 1}\n";
        assert!(message(keyed).starts_with("The option Lesson0 was specified in your YAML file for Lesson, but is invalid."));
    }

    /// Where 0.28 accepts a mistake silently, it is an error here (curriculum.md §9.2).
    #[test]
    fn silent_mistakes_of_0_28_are_errors() {
        let typo = "p:\n  curriculum:\n    - name: A\n      completion_criteria: {behavior: B, thresh: 0.5}\n      value: 1\n    - name: Z\n      value: 2\n";
        let e = parsed(typo).unwrap_err();
        assert_eq!((e.parameter.as_str(), e.key.as_str()), ("p", "thresh"));
        assert!(e.message.contains("CompletionCriteriaSettings"), "{e:?}");
        assert!(message("p: {sampler_type: uniform, seed: 3, sampler_parameters: {}}").contains("put seed inside sampler_parameters"));
        assert!(message("p: {sampler_type: gaussian, sampler_parameters: {st_dev: -1}}").contains("0 or more"));
        assert!(message("p: {sampler_type: multirangeuniform, sampler_parameters: {intervals: []}}").contains("empty"));
        assert!(message("p: {curriculum: []}").contains("no lesson"));
        let negative = "p:\n  curriculum:\n    - name: A\n      completion_criteria: {behavior: B, min_lesson_length: -3}\n      value: 1\n    - name: Z\n      value: 2\n";
        assert!(message(negative).contains("0 or more"));
    }

    /// The `configuration.yaml` form (every parameter a curriculum, samplers with type and
    /// seed) reads back to the same settings.
    #[test]
    fn the_dump_reads_back() {
        let yaml = "q: 7\np:\n  curriculum:\n    - name: A\n      completion_criteria: {behavior: B, measure: progress, threshold: 0.1}\n      value: {sampler_type: uniform, sampler_parameters: {min_value: 0.0, max_value: 4.0}}\n    - name: Z\n      value: {sampler_type: multirangeuniform, sampler_parameters: {intervals: [[1, 2], [3, 4]]}}\n";
        let mut p = parsed(yaml).unwrap();
        assign_seeds(&mut p, 1000);
        let dumped = serde_norway::to_string(&to_value(&p)).unwrap();
        assert!(dumped.find("q:").unwrap() < dumped.find("p:").unwrap(), "{dumped}");
        assert!(dumped.contains("sampler_type: constant") && dumped.contains("seed: 1000"), "{dumped}");
        assert_eq!(parsed(&dumped).unwrap(), p);
    }

    /// PyYAML reads `1e5` and `1.0e5` as strings, so 0.28 refuses them as constants (but
    /// converts them inside sampler_parameters).
    #[test]
    fn yaml_1_1_strings_are_found_where_0_28_refuses_them() {
        for token in ["1e5", "1.0e5", "-2E3"] {
            assert!(is_yaml_1_1_string(token), "{token}");
        }
        for token in ["1.0e+5", "1.e-3", ".5e+2", "100000", "2.5", "abc", "e5", ""] {
            assert!(!is_yaml_1_1_string(token), "{token}");
        }
        let text = "behaviors:\n  B: {max_steps: 1e5}\nenvironment_parameters:\n  ok: 1.0e+5\n  s:\n    sampler_type: uniform\n    sampler_parameters:\n      max_value: 1e5\n  wall:\n    curriculum:\n      - name: A # first\n        completion_criteria:\n          behavior: B\n          threshold: 1e5\n        value: 1e5\n";
        let (line, parameter, message) = find_yaml_1_1_string(text).unwrap();
        assert_eq!((line, parameter.as_str()), (15, "wall"));
        assert!(message.starts_with("Unsupported parameter randomization configuration 1e5."), "{message}");
        assert_eq!(find_yaml_1_1_string("environment_parameters:\n  mass: 2e1\n").map(|f| f.0), Some(2));
        assert_eq!(find_yaml_1_1_string(&text.replace("value: 1e5", "value: 1.0e+5")), None);
    }

    /// 0.28's lesson-line forms (test_settings.py asserts them).
    #[test]
    fn samplers_print_as_0_28_prints_them() {
        let p = parsed("u: {sampler_type: uniform, sampler_parameters: {min_value: 1, max_value: 2}}\ng: {sampler_type: gaussian, sampler_parameters: {mean: 1, st_dev: 2}}\nm: {sampler_type: multirangeuniform, sampler_parameters: {intervals: [[1, 2], [3, 4]]}}\nc: 9.81\n").unwrap();
        let text: Vec<String> = p.iter().map(|p| p.curriculum[0].value.describe()).collect();
        assert_eq!(text, ["Uniform sampler: min=1.0, max=2.0", "Gaussian sampler: mean=1.0, stddev=2.0", "MultiRangeUniform sampler: intervals=[(1.0, 2.0), (3.0, 4.0)]", "Float: value=9.81"]);
    }
}
