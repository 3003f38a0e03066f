//! Conversions between wire messages and the [`crate::spec`] contract, for both sides.

use super::observation;
use crate::proto::{ActionSpecProto, AgentActionProto, AgentInfoProto, BrainParametersProto};
use crate::spec::{ActionSpec, BehaviorSpec};

/// The action spec of a behavior (protocol.md §8.6): `action_spec` when it names any action,
/// else the deprecated fields (space type 1 = continuous).
pub fn action_spec_from_proto(brain: &BrainParametersProto) -> ActionSpec {
    if let Some(spec) = &brain.action_spec {
        if spec.num_continuous_actions + spec.num_discrete_actions > 0 {
            return ActionSpec {
                continuous_size: spec.num_continuous_actions.max(0) as usize,
                discrete_branches: spec.discrete_branch_sizes.iter().map(|b| (*b).max(0) as usize).collect(),
            };
        }
    }
    let sizes: Vec<usize> = brain.vector_action_size_deprecated.iter().map(|b| (*b).max(0) as usize).collect();
    if brain.vector_action_space_type_deprecated == 1 {
        ActionSpec::continuous(sizes.first().copied().unwrap_or(0))
    } else {
        ActionSpec::discrete(&sizes)
    }
}

/// A behavior spec from its brain parameters and the first agent seen (for the observations).
pub fn behavior_spec_from_proto(brain: &BrainParametersProto, first_agent: &AgentInfoProto) -> BehaviorSpec {
    BehaviorSpec {
        observation_specs: first_agent.observations.iter().map(observation::spec_from_proto).collect(),
        action_spec: action_spec_from_proto(brain),
    }
}

/// Brain parameters as Unity sends them. With `hybrid_capable` false (the trainer did not
/// advertise hybrid actions, or Unity API < 1.3) only the deprecated fields are filled.
pub fn brain_parameters_to_proto(name: &str, spec: &ActionSpec, hybrid_capable: bool) -> BrainParametersProto {
    let (space_type, sizes) = if spec.continuous_size > 0 {
        (1, vec![spec.continuous_size as i32])
    } else {
        (0, spec.discrete_branches.iter().map(|b| *b as i32).collect())
    };
    BrainParametersProto {
        vector_action_size_deprecated: if hybrid_capable { vec![] } else { sizes },
        vector_action_descriptions_deprecated: vec![],
        vector_action_space_type_deprecated: if hybrid_capable { 0 } else { space_type },
        brain_name: name.into(),
        is_training: true,
        action_spec: hybrid_capable.then(|| ActionSpecProto {
            num_continuous_actions: spec.continuous_size as i32,
            num_discrete_actions: spec.discrete_branches.len() as i32,
            discrete_branch_sizes: spec.discrete_branches.iter().map(|b| *b as i32).collect(),
            action_descriptions: vec![],
        }),
    }
}

/// One agent's action in both encodings, as mlagents_envs 0.28 sends it (protocol.md §5.1).
pub fn agent_action_to_proto(continuous: &[f32], discrete: &[i32]) -> AgentActionProto {
    let mut vector = continuous.to_vec();
    vector.extend(discrete.iter().map(|d| *d as f32));
    AgentActionProto {
        vector_actions_deprecated: vector,
        value: 0.0,
        continuous_actions: continuous.to_vec(),
        discrete_actions: discrete.to_vec(),
    }
}

/// Unity side: reads an action for `spec`, from fields 6/7, or from the deprecated field 1
/// (continuous values, then discrete indices as floats) when the trainer is older.
pub fn agent_action_from_proto(action: &AgentActionProto, spec: &ActionSpec) -> (Vec<f32>, Vec<i32>) {
    if !action.continuous_actions.is_empty() || !action.discrete_actions.is_empty() {
        return (action.continuous_actions.clone(), action.discrete_actions.clone());
    }
    let v = &action.vector_actions_deprecated;
    let c = spec.continuous_size.min(v.len());
    (v[..c].to_vec(), v[c..].iter().map(|x| *x as i32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deprecated_and_new_action_specs_agree() {
        for spec in [ActionSpec::continuous(2), ActionSpec::discrete(&[3, 2])] {
            for hybrid in [true, false] {
                assert_eq!(action_spec_from_proto(&brain_parameters_to_proto("B?team=0", &spec, hybrid)), spec);
            }
        }
        let h = ActionSpec::hybrid(2, &[3]);
        assert_eq!(action_spec_from_proto(&brain_parameters_to_proto("B", &h, true)), h);
    }

    #[test]
    fn actions_carry_both_encodings() {
        let p = agent_action_to_proto(&[0.1, 0.2], &[2]);
        assert_eq!(p.vector_actions_deprecated, vec![0.1, 0.2, 2.0]);
        let spec = ActionSpec::hybrid(2, &[3]);
        assert_eq!(agent_action_from_proto(&p, &spec), (vec![0.1, 0.2], vec![2]));
        let old = AgentActionProto { vector_actions_deprecated: vec![0.5, 1.0], ..Default::default() };
        assert_eq!(agent_action_from_proto(&old, &ActionSpec::hybrid(1, &[2])), (vec![0.5], vec![1]));
    }
}
