//! Decision and terminal steps (mlagents_envs `DecisionSteps`/`TerminalSteps`) and actions
//! (`ActionTuple`), plus their conversion from and to the wire.

use super::EnvError;
use crate::comm::{convert, observation};
use crate::proto::{AgentInfoProto, AgentActionProto};
use crate::spec::{ActionSpec, BehaviorSpec};

/// One observation (sensor) for a batch of agents: `data` holds `n * prod(shape)` floats.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObservationBatch {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl ObservationBatch {
    fn new(shape: &[usize]) -> Self {
        Self { shape: shape.to_vec(), data: vec![] }
    }

    /// Floats per agent.
    pub fn agent_len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The observation of the i-th agent in the batch.
    pub fn agent(&self, i: usize) -> &[f32] {
        let n = self.agent_len();
        &self.data[i * n..(i + 1) * n]
    }
}

/// Agents that need an action (`done == false`), in the order Unity sent them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecisionSteps {
    /// One batch per observation of the behavior spec.
    pub obs: Vec<ObservationBatch>,
    pub reward: Vec<f32>,
    pub agent_id: Vec<i32>,
    /// Per discrete branch, `n * branch_size` flags; `true` = action NOT allowed (as Unity
    /// and mlagents_envs mean it). `None` when the behavior has no discrete actions.
    pub action_mask: Option<Vec<Vec<bool>>>,
    pub group_id: Vec<i32>,
    pub group_reward: Vec<f32>,
}

impl DecisionSteps {
    pub fn len(&self) -> usize {
        self.agent_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agent_id.is_empty()
    }

    /// Agent `i`'s decision step as a batch of one.
    pub fn row(&self, i: usize) -> DecisionSteps {
        DecisionSteps {
            obs: self.obs.iter().map(|b| ObservationBatch { shape: b.shape.clone(), data: b.agent(i).to_vec() }).collect(),
            reward: vec![self.reward[i]],
            agent_id: vec![self.agent_id[i]],
            action_mask: self.action_mask.as_ref().map(|branches| {
                branches.iter().map(|flags| {
                    let size = flags.len() / self.len().max(1);
                    flags[i * size..(i + 1) * size].to_vec()
                }).collect()
            }),
            group_id: vec![self.group_id[i]],
            group_reward: vec![self.group_reward[i]],
        }
    }

    /// The i-th agent's mask over all branches in branch order (`true` = not allowed); empty
    /// when the behavior has no discrete actions.
    pub fn agent_mask(&self, i: usize) -> Vec<bool> {
        let n = self.len().max(1);
        self.action_mask
            .iter()
            .flatten()
            .flat_map(|branch| {
                let size = branch.len() / n;
                branch[i * size..(i + 1) * size].iter().copied()
            })
            .collect()
    }

    /// The masks as policy models take them: `n * (sum of branches)` floats, 1.0 = allowed.
    pub fn allowed_actions(&self) -> Vec<f32> {
        (0..self.len()).flat_map(|i| self.agent_mask(i)).map(|masked| if masked { 0.0 } else { 1.0 }).collect()
    }

    /// Index of an agent in this batch.
    pub fn index_of(&self, agent_id: i32) -> Option<usize> {
        self.agent_id.iter().position(|a| *a == agent_id)
    }
}

/// Agents whose episode ended (`done == true`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TerminalSteps {
    pub obs: Vec<ObservationBatch>,
    pub reward: Vec<f32>,
    /// True when the episode was cut (max step), not ended by the agent: bootstrap.
    pub interrupted: Vec<bool>,
    pub agent_id: Vec<i32>,
    pub group_id: Vec<i32>,
    pub group_reward: Vec<f32>,
}

impl TerminalSteps {
    pub fn len(&self) -> usize {
        self.agent_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agent_id.is_empty()
    }
}

/// Actions for a batch of agents: `continuous` is `n * continuous_size`, `discrete` is
/// `n * number_of_branches` branch indices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ActionTuple {
    pub continuous: Vec<f32>,
    pub discrete: Vec<i32>,
}

impl ActionTuple {
    /// Zero actions for `n` agents (what Unity gets when the user set none).
    pub fn zeros(spec: &ActionSpec, n: usize) -> Self {
        Self { continuous: vec![0.0; n * spec.continuous_size], discrete: vec![0; n * spec.discrete_size()] }
    }

    /// Uniformly random valid actions (continuous in [-1, 1]) that respect the action masks.
    pub fn random(spec: &ActionSpec, steps: &DecisionSteps, rng: &mut impl rand::Rng) -> Self {
        let n = steps.len();
        let continuous = (0..n * spec.continuous_size).map(|_| rng.random_range(-1.0..=1.0)).collect();
        let mut discrete = Vec::with_capacity(n * spec.discrete_size());
        for agent in 0..n {
            for (b, size) in spec.discrete_branches.iter().enumerate() {
                let allowed: Vec<usize> = (0..*size)
                    .filter(|a| steps.action_mask.as_ref().is_none_or(|m| !m[b][agent * size + a]))
                    .collect();
                discrete.push(if allowed.is_empty() { 0 } else { allowed[rng.random_range(0..allowed.len())] as i32 });
            }
        }
        Self { continuous, discrete }
    }

    /// Checks the shape for `n` agents and the discrete ranges.
    pub fn validate(&self, behavior: &str, spec: &ActionSpec, n: usize) -> Result<(), EnvError> {
        let invalid = |detail: String| Err(EnvError::InvalidAction { behavior: behavior.into(), detail });
        if self.continuous.len() != n * spec.continuous_size {
            return invalid(format!(
                "continuous actions have {} values; {} agents x {} continuous actions need {}",
                self.continuous.len(),
                n,
                spec.continuous_size,
                n * spec.continuous_size
            ));
        }
        if self.discrete.len() != n * spec.discrete_size() {
            return invalid(format!(
                "discrete actions have {} values; {} agents x {} branches need {}",
                self.discrete.len(),
                n,
                spec.discrete_size(),
                n * spec.discrete_size()
            ));
        }
        let branches = spec.discrete_size();
        for (i, a) in self.discrete.iter().enumerate() {
            let size = spec.discrete_branches[i % branches];
            if *a < 0 || *a as usize >= size {
                return invalid(format!("agent {} branch {}: action {a} is outside 0..{size}", i / branches, i % branches));
            }
        }
        Ok(())
    }

    /// The wire actions, one per agent.
    pub fn to_proto(&self, spec: &ActionSpec, n: usize) -> Vec<AgentActionProto> {
        let (c, d) = (spec.continuous_size, spec.discrete_size());
        (0..n)
            .map(|i| convert::agent_action_to_proto(&self.continuous[i * c..(i + 1) * c], &self.discrete[i * d..(i + 1) * d]))
            .collect()
    }
}

/// Splits one behavior's agent infos into decision and terminal steps (protocol.md §7),
/// checking sizes and NaN against the spec, and that no agent asks for two decisions (or ends
/// two episodes) in one message: their steps would interleave in one trajectory.
pub fn steps_from_proto(
    behavior: &str,
    spec: &BehaviorSpec,
    infos: &[AgentInfoProto],
) -> Result<(DecisionSteps, TerminalSteps), EnvError> {
    let shapes: Vec<&[usize]> = spec.observation_specs.iter().map(|o| o.shape.as_slice()).collect();
    let mut decision = DecisionSteps { obs: shapes.iter().map(|s| ObservationBatch::new(s)).collect(), ..Default::default() };
    let mut terminal = TerminalSteps { obs: shapes.iter().map(|s| ObservationBatch::new(s)).collect(), ..Default::default() };
    let branches = &spec.action_spec.discrete_branches;
    let mut masks: Vec<Vec<bool>> = branches.iter().map(|_| vec![]).collect();
    let mut deciding = std::collections::HashSet::new();
    let mut ending = std::collections::HashSet::new();
    for info in infos {
        let bad = |field: String, detail: String| EnvError::InvalidData { behavior: behavior.into(), agent_id: info.id, field, detail };
        let first_time = if info.done { ending.insert(info.id) } else { deciding.insert(info.id) };
        if !first_time {
            let what = if info.done { "ends two episodes" } else { "asks for two decisions" };
            return Err(bad("agent id".into(), format!("the agent {what} in one step; agent ids must be unique among a behavior's agents of a message")));
        }
        if !info.reward.is_finite() {
            return Err(bad("reward".into(), format!("{} is not finite", info.reward)));
        }
        if !info.group_reward.is_finite() {
            return Err(bad("group_reward".into(), format!("{} is not finite", info.group_reward)));
        }
        if info.observations.len() != shapes.len() {
            return Err(bad(
                "observations".into(),
                format!("{} observations, the behavior spec has {}", info.observations.len(), shapes.len()),
            ));
        }
        let target = if info.done { &mut terminal.obs } else { &mut decision.obs };
        for (i, (o, batch)) in info.observations.iter().zip(target.iter_mut()).enumerate() {
            let field = format!("observation {i} ({})", if o.name.is_empty() { "unnamed" } else { &o.name });
            let wire_shape: Vec<usize> = o.shape.iter().map(|d| (*d).max(0) as usize).collect();
            if wire_shape != batch.shape {
                return Err(bad(field, format!("shape {:?}, the behavior spec says {:?}", o.shape, batch.shape)));
            }
            let values = observation::decode(o).map_err(|e| bad(field.clone(), e.to_string()))?;
            if o.compression_type == crate::proto::CompressionTypeProto::None as i32 {
                if let Some(k) = values.iter().position(|v| !v.is_finite()) {
                    return Err(bad(field, format!("value {k} is {}", values[k])));
                }
            }
            batch.data.extend_from_slice(&values);
        }
        if info.done {
            terminal.reward.push(info.reward);
            terminal.interrupted.push(info.max_step_reached);
            terminal.agent_id.push(info.id);
            terminal.group_id.push(info.group_id);
            terminal.group_reward.push(info.group_reward);
        } else {
            decision.reward.push(info.reward);
            decision.agent_id.push(info.id);
            decision.group_id.push(info.group_id);
            decision.group_reward.push(info.group_reward);
            // A mask of the wrong length means "everything allowed", as in mlagents_envs.
            let usable = info.action_mask.len() == spec.action_spec.mask_len();
            let mut offset = 0;
            for (b, size) in branches.iter().enumerate() {
                if usable {
                    masks[b].extend_from_slice(&info.action_mask[offset..offset + size]);
                } else {
                    masks[b].extend(std::iter::repeat_n(false, *size));
                }
                offset += size;
            }
        }
    }
    decision.action_mask = (!branches.is_empty()).then_some(masks);
    Ok((decision, terminal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ActionSpec, ObservationSpec};

    fn info(id: i32, done: bool) -> AgentInfoProto {
        let spec = ObservationSpec::vector(2, "VectorSensor");
        AgentInfoProto { id, done, observations: vec![crate::comm::observation::float_observation(&spec, vec![0.5, -0.5])], ..Default::default() }
    }

    /// An agent's two decisions in one message would interleave two streams in its
    /// trajectory (bad-input report of 2 December, S7); an episode's end and the next
    /// decision of the same agent in one message are how Unity restarts it.
    #[test]
    fn an_agent_decides_once_and_ends_once_per_message() {
        let spec = BehaviorSpec { observation_specs: vec![ObservationSpec::vector(2, "VectorSensor")], action_spec: ActionSpec::continuous(1) };
        let (decisions, terminals) = steps_from_proto("F?team=0", &spec, &[info(7, true), info(7, false), info(8, false)]).unwrap();
        assert_eq!((decisions.agent_id, terminals.agent_id), (vec![7, 8], vec![7]));
        for (infos, what) in [(vec![info(3, false), info(7, false), info(7, false)], "asks for two decisions"), (vec![info(7, true), info(7, true)], "ends two episodes")] {
            let error = steps_from_proto("F?team=0", &spec, &infos).unwrap_err().to_string();
            assert!(error.contains("agent 7") && error.contains(what) && error.contains("F?team=0"), "{error}");
        }
    }
}
