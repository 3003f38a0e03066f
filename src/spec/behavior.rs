//! Behavior specs: what observations an agent sends and what actions it takes.
//! Mirrors `mlagents_envs.base_env.BehaviorSpec` / `ActionSpec` / `ObservationSpec`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Per-dimension flags of an observation (`DimensionPropertyProto` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DimensionProperty {
    Unspecified,
    None,
    TranslationalEquivariance,
    VariableSize,
}

impl DimensionProperty {
    /// The wire value (flags: 0, 1, 2, 4).
    pub fn to_wire(self) -> i32 {
        match self {
            Self::Unspecified => 0,
            Self::None => 1,
            Self::TranslationalEquivariance => 2,
            Self::VariableSize => 4,
        }
    }

    /// Reads a wire value; unknown flags are kept as `Unspecified`.
    pub fn from_wire(v: i32) -> Self {
        match v {
            1 => Self::None,
            2 => Self::TranslationalEquivariance,
            4 => Self::VariableSize,
            _ => Self::Unspecified,
        }
    }
}

/// Whether an observation is an ordinary input or a goal signal (`ObservationTypeProto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ObservationType {
    Default,
    GoalSignal,
}

/// Shape and meaning of one observation (one sensor), without the batch dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservationSpec {
    pub shape: Vec<usize>,
    pub dimension_properties: Vec<DimensionProperty>,
    pub observation_type: ObservationType,
    pub name: String,
}

impl ObservationSpec {
    /// A rank-1 vector observation as Unity's `VectorSensor` reports it.
    pub fn vector(size: usize, name: &str) -> Self {
        Self {
            shape: vec![size],
            dimension_properties: vec![DimensionProperty::None],
            observation_type: ObservationType::Default,
            name: name.into(),
        }
    }

    /// A visual observation in Unity <= 2.x layout: `[height, width, channels]`.
    pub fn visual_hwc(height: usize, width: usize, channels: usize, name: &str) -> Self {
        Self {
            shape: vec![height, width, channels],
            dimension_properties: vec![
                DimensionProperty::TranslationalEquivariance,
                DimensionProperty::TranslationalEquivariance,
                DimensionProperty::None,
            ],
            observation_type: ObservationType::Default,
            name: name.into(),
        }
    }

    /// A variable-length observation as Unity's `BufferSensor` reports it: `[max entities,
    /// entity size]`, dimension properties (VARIABLE_SIZE, NONE).
    pub fn entities(max_entities: usize, entity_size: usize, name: &str) -> Self {
        Self {
            shape: vec![max_entities, entity_size],
            dimension_properties: vec![DimensionProperty::VariableSize, DimensionProperty::None],
            observation_type: ObservationType::Default,
            name: name.into(),
        }
    }

    /// Whether this is an entity observation as 0.28's trainers read one (poca.md §4.5): rank
    /// 2 with dimension properties exactly (VARIABLE_SIZE, NONE).
    pub fn is_entities(&self) -> bool {
        self.shape.len() == 2 && self.dimension_properties == [DimensionProperty::VariableSize, DimensionProperty::None]
    }

    /// Number of floats in one agent's observation.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True for a zero-sized observation.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The action space of a behavior: continuous actions plus discrete branches.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ActionSpec {
    pub continuous_size: usize,
    pub discrete_branches: Vec<usize>,
}

impl ActionSpec {
    pub fn continuous(size: usize) -> Self {
        Self { continuous_size: size, discrete_branches: vec![] }
    }

    pub fn discrete(branches: &[usize]) -> Self {
        Self { continuous_size: 0, discrete_branches: branches.to_vec() }
    }

    pub fn hybrid(continuous: usize, branches: &[usize]) -> Self {
        Self { continuous_size: continuous, discrete_branches: branches.to_vec() }
    }

    /// Number of discrete branches.
    pub fn discrete_size(&self) -> usize {
        self.discrete_branches.len()
    }

    /// Length of an action mask: the sum of the branch sizes.
    pub fn mask_len(&self) -> usize {
        self.discrete_branches.iter().sum()
    }

    pub fn is_hybrid(&self) -> bool {
        self.continuous_size > 0 && !self.discrete_branches.is_empty()
    }
}

impl fmt::Display for ActionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "continuous {}, discrete branches {:?}", self.continuous_size, self.discrete_branches)
    }
}

/// Everything a trainer needs to know about a behavior.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BehaviorSpec {
    pub observation_specs: Vec<ObservationSpec>,
    pub action_spec: ActionSpec,
}

/// A fully qualified behavior name `Name?team=N`, parsed as ML-Agents parses it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BehaviorName {
    pub name: String,
    pub team_id: i32,
}

impl BehaviorName {
    /// Splits `Name?team=N`; a missing or unparsable team means team 0.
    pub fn parse(full: &str) -> Self {
        match full.split_once('?') {
            None => Self { name: full.into(), team_id: 0 },
            Some((name, query)) => {
                let team_id = query
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| *k == "team")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                Self { name: name.into(), team_id }
            }
        }
    }

    /// [`BehaviorName::parse`], refusing a team that is not an integer (ML-Agents 0.28 fails
    /// on it with a ValueError).
    pub fn parse_strict(full: &str) -> Result<Self, String> {
        let team = full.split_once('?').and_then(|(_, query)| query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == "team"));
        match team {
            Some((_, v)) if !v.is_empty() && v.parse::<i32>().is_err() => {
                Err(format!("behavior {full:?}: team {v:?} is not an integer (Unity sends Name?team=N, N being the Behavior Parameters' Team Id)"))
            }
            _ => Ok(Self::parse(full)),
        }
    }

    /// The fully qualified name Unity uses on the wire.
    pub fn fully_qualified(&self) -> String {
        format!("{}?team={}", self.name, self.team_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behavior_names_parse_like_mlagents() {
        assert_eq!(BehaviorName::parse("Walker?team=1"), BehaviorName { name: "Walker".into(), team_id: 1 });
        assert_eq!(BehaviorName::parse("Basic").team_id, 0);
        assert_eq!(BehaviorName::parse_strict("Walker?team=2"), Ok(BehaviorName { name: "Walker".into(), team_id: 2 }));
        assert_eq!(BehaviorName::parse_strict("Walker?team=").map(|b| b.team_id), Ok(0));
        assert!(BehaviorName::parse_strict("Walker?team=blue").unwrap_err().contains("team \"blue\" is not an integer"));
        assert_eq!(BehaviorName::parse("A?team=x").team_id, 0);
        assert_eq!(BehaviorName::parse("A?team=0").fully_qualified(), "A?team=0");
    }

    #[test]
    fn action_spec_sizes() {
        let a = ActionSpec::hybrid(2, &[3, 2]);
        assert_eq!(a.mask_len(), 5);
        assert_eq!(a.discrete_size(), 2);
        assert!(a.is_hybrid());
    }
}

/// One observation of a behavior-spec file: its shape (`[size]`, `[height, width, channels]`,
/// or `[count, size]`) and, optionally, the sensor's name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservationEntry {
    shape: Vec<usize>,
    #[serde(default)]
    name: String,
    /// Accepted (as `check --env --json` prints them) and derived from the shape instead.
    #[serde(default, rename = "dimension_properties")]
    _dimension_properties: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "observation_type")]
    _observation_type: Option<serde::de::IgnoredAny>,
}

/// A behavior-spec file (`--behavior-spec FILE.json`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BehaviorSpecFile {
    observation_specs: Vec<ObservationEntry>,
    action_spec: ActionSpec,
}

impl BehaviorSpec {
    /// Reads a behavior spec from JSON: `{"observation_specs": [{"shape": [8], "name":
    /// "VectorSensor"}, ...], "action_spec": {"continuous_size": 2, "discrete_branches": []}}`,
    /// the observations in the order the environment reports them (`mlagents-run check MODEL
    /// --env ENV --json` prints each behavior's spec in this shape, under `"spec"`).
    pub fn from_json(text: &str) -> Result<Self, String> {
        let file: BehaviorSpecFile = serde_json::from_str(text).map_err(|e| format!("not a behavior spec: {e}"))?;
        let mut observation_specs = vec![];
        for (i, o) in file.observation_specs.into_iter().enumerate() {
            let name = if o.name.is_empty() { format!("observation_{i}") } else { o.name };
            observation_specs.push(match o.shape[..] {
                [size] => ObservationSpec::vector(size, &name),
                [h, w, c] => ObservationSpec::visual_hwc(h, w, c, &name),
                [count, size] => ObservationSpec {
                    shape: vec![count, size],
                    dimension_properties: vec![DimensionProperty::VariableSize, DimensionProperty::None],
                    observation_type: ObservationType::Default,
                    name,
                },
                _ => return Err(format!("observation {i} ({name}): shape {:?} is not [size], [count, size] or [height, width, channels]", o.shape)),
            });
            if observation_specs[i].is_empty() {
                return Err(format!("observation {i}: shape {:?} has no values", observation_specs[i].shape));
            }
        }
        if file.action_spec.discrete_branches.contains(&0) {
            return Err(format!("action_spec: a discrete branch of size 0 in {:?}", file.action_spec.discrete_branches));
        }
        Ok(Self { observation_specs, action_spec: file.action_spec })
    }

    /// Reads a behavior-spec file ([`Self::from_json`]); errors name the file.
    pub fn read_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read behavior spec {}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}
