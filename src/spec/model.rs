//! The ML-Agents model interface, named once: every tensor name and constant a policy model
//! carries, for ONNX model API v1 to v3 and Barracuda `.nn` (onnx-export.md, barracuda-nn.md).
//! The exporters write these names, the runner and its checks read them; no other module
//! spells them.

/// `version_number`: the model API version (2 for `.nn` and ONNX v1/v2, 3 for ONNX v3).
pub const VERSION_NUMBER: &str = "version_number";
/// `memory_size`: the width of the recurrent memory (0 for feed-forward policies).
pub const MEMORY_SIZE: &str = "memory_size";
/// `is_continuous_control` (model API 2 and `.nn`): 1 continuous, 0 discrete.
pub const IS_CONTINUOUS_CONTROL: &str = "is_continuous_control";
/// `action_output_shape` (model API 2 and `.nn`): the width of `action`.
pub const ACTION_OUTPUT_SHAPE: &str = "action_output_shape";
/// `continuous_action_output_shape` (model API 3): the number of continuous actions.
pub const CONTINUOUS_ACTION_OUTPUT_SHAPE: &str = "continuous_action_output_shape";
/// `discrete_action_output_shape` (model API 3): the branch sizes (API 2: their sum).
pub const DISCRETE_ACTION_OUTPUT_SHAPE: &str = "discrete_action_output_shape";

/// The ML-Agents constants a policy model carries (as `.nn` tensors or ONNX outputs), in
/// the order `mlagents-run inspect` lists them.
pub const MODEL_CONSTANTS: &[&str] =
    &[VERSION_NUMBER, MEMORY_SIZE, IS_CONTINUOUS_CONTROL, ACTION_OUTPUT_SHAPE, CONTINUOUS_ACTION_OUTPUT_SHAPE, DISCRETE_ACTION_OUTPUT_SHAPE];

/// Sampled continuous actions (model API 3), clipped and scaled.
pub const CONTINUOUS_ACTIONS: &str = "continuous_actions";
/// Continuous actions without noise (model API 3).
pub const DETERMINISTIC_CONTINUOUS_ACTIONS: &str = "deterministic_continuous_actions";
/// Sampled discrete actions, one index per branch (model API 3).
pub const DISCRETE_ACTIONS: &str = "discrete_actions";
/// The most probable action of each branch (model API 3).
pub const DETERMINISTIC_DISCRETE_ACTIONS: &str = "deterministic_discrete_actions";
/// The action output of model API 1/2 and `.nn`: continuous actions, or the masked
/// log-probabilities of every discrete branch, concatenated.
pub const ACTION: &str = "action";
/// The log-probabilities of continuous actions some TF-era `.nn` models also output.
pub const ACTION_PROBS: &str = "action_probs";
/// The memory a recurrent ONNX model outputs (`[batch, 1, memory_size]`).
pub const RECURRENT_OUT: &str = "recurrent_out";

/// All vector observations concatenated (model API 1/2 and `.nn`).
pub const VECTOR_OBSERVATION: &str = "vector_observation";
/// 1 where an action is allowed, one column per action of every branch.
pub const ACTION_MASKS: &str = "action_masks";
/// The previous discrete action of each branch (recurrent TF-era models).
pub const PREV_ACTION: &str = "prev_action";
/// The memory a recurrent model reads.
pub const RECURRENT_IN: &str = "recurrent_in";
/// The noise TF-era continuous models take as an input.
pub const EPSILON: &str = "epsilon";
/// The sequence length TF-era recurrent models take as an input.
pub const SEQUENCE_LENGTH: &str = "sequence_length";
/// Prefix of observation `i`'s input in model API 3 (`obs_0`, `obs_1`, ...).
pub const OBSERVATION_PREFIX: &str = "obs_";
/// Prefix of the k-th camera's input in model API 1/2 and `.nn`.
pub const VISUAL_OBSERVATION_PREFIX: &str = "visual_observation_";

/// The most values one tensor read from a file or a caller may hold (256 MiB of floats): far
/// above any policy's observations, far below what would exhaust a machine.
pub const MAX_INPUT_ELEMENTS: usize = 1 << 26;

/// The number of elements of `shape`, if it is at most [`MAX_INPUT_ELEMENTS`] (a product that
/// overflows never is).
pub fn bounded_elements(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d)).filter(|n| *n <= MAX_INPUT_ELEMENTS)
}

/// ML-Agents clips sampled continuous actions to [-CLIP, CLIP] and divides them by CLIP.
pub const ACTION_CLIP: f32 = 3.0;

/// An input a policy model may declare, and where Unity takes its values from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelInput {
    /// Observation i as the sensor gives it (`obs_i`, model API 3).
    Observation(usize),
    /// The rank-1 observations concatenated (`vector_observation`).
    VectorObservation,
    /// The k-th camera (`visual_observation_k`).
    VisualObservation(usize),
    ActionMasks,
    PreviousAction,
    RecurrentIn,
    Epsilon,
    SequenceLength,
}

impl ModelInput {
    /// The input a tensor name stands for, if it is one of the interface's.
    pub fn parse(name: &str) -> Option<Self> {
        let index = |prefix: &str| name.strip_prefix(prefix).and_then(|k| k.parse::<usize>().ok());
        Some(match name {
            VECTOR_OBSERVATION => Self::VectorObservation,
            ACTION_MASKS => Self::ActionMasks,
            PREV_ACTION => Self::PreviousAction,
            RECURRENT_IN => Self::RecurrentIn,
            EPSILON => Self::Epsilon,
            SEQUENCE_LENGTH => Self::SequenceLength,
            _ => {
                if let Some(i) = index(OBSERVATION_PREFIX) {
                    Self::Observation(i)
                } else {
                    Self::VisualObservation(index(VISUAL_OBSERVATION_PREFIX)?)
                }
            }
        })
    }

    /// The tensor name of this input.
    pub fn name(&self) -> String {
        match self {
            Self::Observation(i) => format!("{OBSERVATION_PREFIX}{i}"),
            Self::VectorObservation => VECTOR_OBSERVATION.into(),
            Self::VisualObservation(k) => format!("{VISUAL_OBSERVATION_PREFIX}{k}"),
            Self::ActionMasks => ACTION_MASKS.into(),
            Self::PreviousAction => PREV_ACTION.into(),
            Self::RecurrentIn => RECURRENT_IN.into(),
            Self::Epsilon => EPSILON.into(),
            Self::SequenceLength => SEQUENCE_LENGTH.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_parse_and_name_back() {
        for input in [
            ModelInput::Observation(0),
            ModelInput::Observation(12),
            ModelInput::VectorObservation,
            ModelInput::VisualObservation(1),
            ModelInput::ActionMasks,
            ModelInput::PreviousAction,
            ModelInput::RecurrentIn,
            ModelInput::Epsilon,
            ModelInput::SequenceLength,
        ] {
            assert_eq!(ModelInput::parse(&input.name()), Some(input));
        }
        assert_eq!(ModelInput::parse("obs_x"), None);
        assert_eq!(ModelInput::parse("bogus"), None);
    }
}
