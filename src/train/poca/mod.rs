//! MA-POCA as ML-Agents 0.28 trains it (poca.md §1–§5). POCA's settings are PPO's and so is
//! its update loop: [`crate::train::ppo::trainer::Ppo`] trains `trainer_type: poca` with the
//! centralized critic of [`crate::train::networks::multi_agent`] in place of PPO's own. What
//! differs is here:
//!
//! - the critic reads each step's groupmates ([`group_observations`]);
//! - a trajectory bootstraps from the value of the agent *and* its mates' latest observations,
//!   and only stops bootstrapping when the agent's episode ended, every mate's ended with it
//!   and nothing was interrupted ([`bootstrap_ends`]): an agent that leaves early still
//!   receives what the group earns after it (posthumous credit);
//! - the extrinsic reward adds the groupmates' individual rewards
//!   ([`crate::train::rewards::RewardSignals::with_groupmate_rewards`]);
//! - advantages are the λ-returns less the counterfactual baseline b_i, and the loss adds the
//!   baseline's clipped loss: policy + 0.5·(value + 0.5·baseline) − β·entropy.

use crate::spec::ActionSpec;
use crate::train::networks::multi_agent::{flat_actions, GroupObservations, MultiAgentCritic};
use crate::train::trajectory::{GroupmateStatus, Trajectory};
use tch::{Kind, Tensor};

/// The critic's input for rows of steps: `own` (one tensor `[B, size]` per observation) and
/// each row's mates. Slots are as many as the row with most mates has; a row's mates fill the
/// first slots in their order, the rest are absent (zero observations and actions, masked).
pub fn group_observations(own: Vec<Tensor>, mates: &[&[GroupmateStatus]], sizes: &[usize], spec: &ActionSpec) -> GroupObservations {
    let rows = mates.len();
    let slots = mates.iter().map(|m| m.len()).max().unwrap_or(0);
    let (c, nb) = (spec.continuous_size, spec.discrete_size());
    let mut slot_obs = Vec::with_capacity(slots);
    let mut slot_actions = Vec::with_capacity(slots);
    let mut absent = vec![0.0f32; rows * slots];
    for j in 0..slots {
        let obs: Vec<Tensor> = sizes
            .iter()
            .enumerate()
            .map(|(i, size)| {
                let data: Vec<f32> = mates.iter().flat_map(|m| m.get(j).map_or_else(|| vec![0.0; *size], |s| s.obs[i].clone())).collect();
                Tensor::from_slice(&data).reshape([rows as i64, *size as i64])
            })
            .collect();
        let continuous: Vec<f32> = mates.iter().flat_map(|m| m.get(j).map_or_else(|| vec![0.0; c], |s| s.continuous.clone())).collect();
        let discrete: Vec<i64> = mates.iter().flat_map(|m| m.get(j).map_or_else(|| vec![0; nb], |s| s.discrete.iter().map(|d| *d as i64).collect())).collect();
        let continuous = Tensor::from_slice(&continuous).reshape([rows as i64, c as i64]);
        let discrete = Tensor::from_slice(&discrete).reshape([rows as i64, nb as i64]);
        slot_actions.push(flat_actions(spec, &continuous, &discrete));
        slot_obs.push(obs);
        for (r, m) in mates.iter().enumerate() {
            if m.len() <= j {
                absent[r * slots + j] = 1.0;
            }
        }
    }
    GroupObservations { own, mates: slot_obs, mate_actions: slot_actions, absent: Tensor::from_slice(&absent).reshape([rows as i64, slots as i64]) }
}

/// Whether a trajectory's returns stop at its end (bootstrap 0): the agent's episode ended,
/// not interrupted, and every mate beside its last step ended with it (a last survivor has
/// none left, which counts as the group's end).
pub fn bootstrap_ends(t: &Trajectory) -> bool {
    t.terminal && t.steps.last().is_none_or(|s| s.group_status.iter().all(|m| m.done))
}

/// The memories a recurrent centralized critic carries between sequences: the value's and
/// the baseline's streams (`memory_size` floats each).
#[derive(Debug, Clone, PartialEq)]
pub struct CriticMemories {
    pub value: Vec<f32>,
    pub baseline: Vec<f32>,
}

impl CriticMemories {
    /// Both streams at zeros.
    pub fn zeros(size: usize) -> Self {
        Self { value: vec![0.0; size], baseline: vec![0.0; size] }
    }
}

/// What the critic says of a trajectory of `n` steps.
pub struct TrajectoryEstimates {
    /// Each step's values, then the bootstrap value after the last step (`(n + 1) × heads`,
    /// step-major).
    pub values: Vec<f32>,
    /// Each step's baselines (`n × heads`).
    pub baselines: Vec<f32>,
    /// A recurrent critic's memories each step's sequence starts from (`n × memory_size`
    /// each; empty for a feed-forward critic).
    pub value_memories: Vec<f32>,
    pub baseline_memories: Vec<f32>,
    /// A recurrent critic's memories after the last step.
    pub final_memories: Option<CriticMemories>,
}

/// What the critic says of a trajectory. `observations` are the trajectory's rows, its `n`
/// steps then the observation after. A recurrent critic (`recurrent`: the memories it starts
/// from and the sequence length) runs the steps in sequences from the start, the last one
/// shorter and unpadded, each from the memories the previous one left (0.28's
/// `_evaluate_by_sequence_team`), and bootstraps from the value memory after the last step.
pub fn trajectory_estimates(critic: &MultiAgentCritic, t: &Trajectory, observations: &[Tensor], sizes: &[usize], spec: &ActionSpec, recurrent: Option<(CriticMemories, usize)>) -> TrajectoryEstimates {
    let n = t.steps.len();
    let flat = |x: Tensor| Vec::<f32>::try_from(x.to_kind(Kind::Float).flatten(0, -1)).unwrap_or_default();
    let as_memory = |m: &[f32]| Tensor::from_slice(m).reshape([1, 1, m.len() as i64]);
    let mates: Vec<&[GroupmateStatus]> = t.steps.iter().map(|s| s.group_status.as_slice()).collect();
    let sequence_length = recurrent.as_ref().map_or(n, |(_, l)| *l).max(1);
    let mut memories = recurrent.map(|(m, _)| m);
    let mut estimates = TrajectoryEstimates { values: vec![], baselines: vec![], value_memories: vec![], baseline_memories: vec![], final_memories: None };
    tch::no_grad(|| {
        let mut start = 0;
        while start < n {
            let length = sequence_length.min(n - start);
            let own: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, start as i64, length as i64)).collect();
            let rows = group_observations(own, &mates[start..start + length], sizes, spec);
            let starts = memories.as_ref().map(|m| (as_memory(&m.value), as_memory(&m.baseline)));
            let (values, baselines) = critic.values_and_baselines(&rows, starts.as_ref().map(|s| &s.0), starts.as_ref().map(|s| &s.1));
            estimates.values.extend(flat(values.estimates));
            estimates.baselines.extend(flat(baselines.estimates));
            if let Some(m) = memories.as_mut() {
                for _ in 0..length {
                    estimates.value_memories.extend_from_slice(&m.value);
                    estimates.baseline_memories.extend_from_slice(&m.baseline);
                }
                if let (Some(value), Some(baseline)) = (values.memories, baselines.memories) {
                    *m = CriticMemories { value: flat(value), baseline: flat(baseline) };
                }
            }
            start += length;
        }
        let next: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, n as i64, 1)).collect();
        let next_mates: Vec<GroupmateStatus> = t
            .next_group_obs
            .iter()
            .map(|obs| GroupmateStatus { obs: obs.clone(), continuous: vec![0.0; spec.continuous_size], discrete: vec![0; spec.discrete_size()], reward: 0.0, done: false })
            .collect();
        let latest = group_observations(next, &[next_mates.as_slice()], sizes, spec);
        let value_memory = memories.as_ref().map(|m| as_memory(&m.value));
        estimates.values.extend(flat(critic.values(&latest, value_memory.as_ref()).estimates));
    });
    estimates.final_memories = memories;
    estimates
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyDescription, POLICY_FORMAT_VERSION};
    use crate::train::trajectory::{Decision, Experience};
    use tch::{nn, Device};

    fn description(actions: ActionSpec) -> PolicyDescription {
        PolicyDescription {
            format_version: POLICY_FORMAT_VERSION,
            observation_shapes: vec![vec![3]],
            action_spec: actions,
            hidden_units: 8,
            num_layers: 1,
            normalize: false,
            memory_size: 0,
            vis_encode_type: crate::policy::EncoderType::Simple,
            goal_observations: vec![],
            continuous_head: crate::policy::ContinuousHead::default(),
        }
    }

    fn mate(obs: f32, action: i32, reward: f32, done: bool) -> GroupmateStatus {
        GroupmateStatus { obs: vec![vec![obs; 3]], continuous: vec![], discrete: vec![action], reward, done }
    }

    fn trajectory(mates_at_end: Vec<GroupmateStatus>, terminal: bool, interrupted: bool) -> Trajectory {
        let step = |mates| Experience { obs: vec![vec![0.5; 3]], action_mask: vec![], decision: Decision { discrete: vec![1], ..Default::default() }, reward: 0.0, group_reward: 0.0, done: false, group_status: mates };
        Trajectory {
            agent: (0, 1),
            steps: vec![step(vec![mate(0.1, 0, 0.0, false)]), step(mates_at_end.clone())],
            next_obs: vec![vec![0.25; 3]],
            terminal,
            interrupted,
            next_group_obs: mates_at_end.iter().map(|m| m.obs.clone()).collect(),
        }
    }

    /// poca.md §1.7: an agent ending beside a living mate bootstraps from the group's value;
    /// returns stop only when every mate ended with it (or none is left), never on an
    /// interruption.
    #[test]
    fn returns_stop_only_where_the_whole_group_ended() {
        assert!(!bootstrap_ends(&trajectory(vec![mate(0.2, 1, 0.0, false)], true, false)), "a mate lives on: posthumous bootstrap");
        assert!(bootstrap_ends(&trajectory(vec![mate(0.2, 1, 0.0, true)], true, false)), "the group ended together");
        assert!(bootstrap_ends(&trajectory(vec![], true, false)), "the last survivor");
        assert!(!bootstrap_ends(&trajectory(vec![mate(0.2, 1, 0.0, true)], false, true)), "interrupted");
        assert!(!bootstrap_ends(&trajectory(vec![], false, false)), "cut at the time horizon");
    }

    /// Rows with fewer mates than the batch's most leave their last slots absent: zero
    /// observations and actions, masked; actions are continuous values, then each branch's
    /// one-hot.
    #[test]
    fn mate_slots_are_padded_and_masked() {
        let spec = ActionSpec { continuous_size: 1, discrete_branches: vec![3] };
        let with_action = |obs: f32, c: f32, d: i32| GroupmateStatus { obs: vec![vec![obs; 3]], continuous: vec![c], discrete: vec![d], reward: 0.0, done: false };
        let rows: Vec<Vec<GroupmateStatus>> = vec![vec![with_action(1.0, 0.5, 2), with_action(2.0, -0.5, 0)], vec![with_action(3.0, 0.25, 1)], vec![]];
        let mates: Vec<&[GroupmateStatus]> = rows.iter().map(Vec::as_slice).collect();
        let own = vec![Tensor::zeros([3, 3], (Kind::Float, Device::Cpu))];
        let g = group_observations(own, &mates, &[3], &spec);
        let values = |t: &Tensor| Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
        assert_eq!(values(&g.absent), vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(values(&g.mates[0][0]), vec![1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 0.0, 0.0, 0.0]);
        // An absent mate's discrete action is 0, one-hot [1, 0, 0] as in 0.28 (masked anyway).
        assert_eq!(values(&g.mate_actions[0]), vec![0.5, 0.0, 0.0, 1.0, 0.25, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(values(&g.mate_actions[1]), vec![-0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    }

    /// An absent slot changes nothing: a row padded with absent mates has the value and the
    /// baseline of the same row without the slots. The agent count is 2·n / max − 1 with the
    /// running maximum updated first (upstream `test_multinetworkbody_num_agents`), so a lone
    /// agent's value moves once the critic has seen a pair.
    #[test]
    fn absent_mates_change_nothing_and_the_count_follows_the_maximum() {
        tch::manual_seed(7);
        let d = description(ActionSpec::discrete(&[2]));
        let vs = nn::VarStore::new(Device::Cpu);
        let critic = MultiAgentCritic::new(&(vs.root() / "critic"), &d, &["extrinsic"]);
        let own = || vec![Tensor::from_slice(&[0.3f32, -0.2, 0.9]).reshape([1, 3])];
        let alone = group_observations(own(), &[&[]], &[3], &d.action_spec);
        let estimates = |g: &GroupObservations| {
            let (v, b) = critic.values_and_baselines(g, None, None);
            (v.estimates, b.estimates)
        };
        let (v1, b1) = estimates(&alone);
        assert_eq!(critic.max_agents(), 1.0);
        // The same agent in a batch whose other row has a mate: its slot is absent.
        let pair = [mate(0.7, 1, 0.0, false)];
        let own_two = vec![Tensor::cat(&[own()[0].shallow_clone(), own()[0].shallow_clone()], 0)];
        let padded = group_observations(own_two, &[&[], &pair], &[3], &d.action_spec);
        let (v2, b2) = estimates(&padded);
        assert_eq!(critic.max_agents(), 2.0, "a row of two agents raised the maximum");
        let first = |t: &Tensor| t.get(0).double_value(&[0]);
        // The lone agent's count feature went from 2·1/1 − 1 = 1 to 2·1/2 − 1 = 0: recompute
        // it alone now, and compare that with its padded row.
        let (v1_now, b1_now) = estimates(&alone);
        assert!((first(&v2) - first(&v1_now)).abs() < 1e-6 && (first(&b2) - first(&b1_now)).abs() < 1e-6);
        assert!((first(&v1) - first(&v1_now)).abs() > 0.0 && (first(&b1) - first(&b1_now)).abs() > 0.0, "the count feature moved");
        // With a mate present, the baseline (mate with its action, self without) differs from
        // the value (both observations only).
        assert!((v2.get(1).double_value(&[0]) - b2.get(1).double_value(&[0])).abs() > 1e-6);
    }

    /// A trajectory's estimates: one value per step and the bootstrap from the agent's and
    /// its mates' latest observations, one baseline per step.
    #[test]
    fn trajectory_estimates_cover_every_step_and_the_bootstrap() {
        tch::manual_seed(8);
        let d = description(ActionSpec::discrete(&[2]));
        let vs = nn::VarStore::new(Device::Cpu);
        let critic = MultiAgentCritic::new(&(vs.root() / "critic"), &d, &["extrinsic", "curiosity"]);
        let t = trajectory(vec![mate(0.2, 1, 0.0, false)], true, false);
        let observations = crate::train::algorithm::trajectory_observations(&t, &[3]);
        let estimates = trajectory_estimates(&critic, &t, &observations, &[3], &d.action_spec, None);
        let (values, baselines) = (estimates.values, estimates.baselines);
        assert_eq!((values.len(), baselines.len()), (3 * 2, 2 * 2));
        assert!(estimates.value_memories.is_empty() && estimates.final_memories.is_none());
        let next = vec![Tensor::from_slice(&[0.25f32; 3]).reshape([1, 3])];
        let bootstrap = critic.values(&group_observations(next, &[&t.steps[1].group_status], &[3], &d.action_spec), None);
        assert_eq!(values[4..].to_vec(), Vec::<f32>::try_from(bootstrap.estimates.flatten(0, -1)).unwrap());
    }

    /// A recurrent critic over a 5-step trajectory in sequences of 2 (2, 2, then 1 unpadded):
    /// each step is given the value and baseline memories its sequence starts from, both
    /// streams move from one sequence to the next and differ from each other, and the values
    /// equal one pass over the whole trajectory from the same memories (the memory carries
    /// across the sequences); the bootstrap runs from the value memory after the last step.
    #[test]
    fn a_recurrent_critic_runs_a_trajectory_sequence_by_sequence() {
        tch::manual_seed(9);
        let d = PolicyDescription { memory_size: 8, ..description(ActionSpec::discrete(&[2])) };
        let vs = nn::VarStore::new(Device::Cpu);
        let critic = MultiAgentCritic::new(&(vs.root() / "critic"), &d, &["extrinsic"]);
        let mut t = trajectory(vec![mate(0.2, 1, 0.0, false)], false, false);
        for k in 0..3 {
            let mut step = t.steps[0].clone();
            step.obs = vec![vec![0.1 * k as f32; 3]];
            t.steps.push(step);
        }
        let observations = crate::train::algorithm::trajectory_observations(&t, &[3]);
        let initial = CriticMemories { value: (0..8).map(|k| k as f32 / 10.0).collect(), baseline: vec![-0.3; 8] };
        let e = trajectory_estimates(&critic, &t, &observations, &[3], &d.action_spec, Some((initial.clone(), 2)));
        assert_eq!((e.values.len(), e.baselines.len(), e.value_memories.len(), e.baseline_memories.len()), (6, 5, 5 * 8, 5 * 8));
        let value_memory = |k: usize| e.value_memories[k * 8..(k + 1) * 8].to_vec();
        let baseline_memory = |k: usize| e.baseline_memories[k * 8..(k + 1) * 8].to_vec();
        assert!(value_memory(0) == initial.value && value_memory(1) == initial.value && baseline_memory(1) == initial.baseline);
        assert!(value_memory(2) == value_memory(3) && value_memory(2) != initial.value && value_memory(4) != value_memory(2));
        assert!(baseline_memory(2) != initial.baseline && baseline_memory(2) != value_memory(2));
        let last = e.final_memories.clone().unwrap();
        assert!(last.value != value_memory(4) && last.baseline != baseline_memory(4));
        let mates: Vec<&[GroupmateStatus]> = t.steps.iter().map(|s| s.group_status.as_slice()).collect();
        let whole = tch::no_grad(|| {
            let own = vec![observations[0].narrow(0, 0, 5)];
            let start = Tensor::from_slice(&initial.value).reshape([1, 1, 8]);
            let v = critic.values(&group_observations(own, &mates, &[3], &d.action_spec), Some(&start));
            (Vec::<f32>::try_from(v.estimates.flatten(0, -1)).unwrap(), Vec::<f32>::try_from(v.memories.unwrap().flatten(0, -1)).unwrap())
        });
        for (a, b) in e.values[..5].iter().zip(&whole.0).chain(last.value.iter().zip(&whole.1)) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        let next = vec![observations[0].narrow(0, 5, 1)];
        let bootstrap = tch::no_grad(|| critic.values(&group_observations(next, &[t.next_group_obs.iter().map(|o| GroupmateStatus { obs: o.clone(), continuous: vec![], discrete: vec![0], reward: 0.0, done: false }).collect::<Vec<_>>().as_slice()], &[3], &d.action_spec), Some(&Tensor::from_slice(&last.value).reshape([1, 1, 8]))));
        assert!((e.values[5] - bootstrap.estimates.double_value(&[0, 0]) as f32).abs() < 1e-6);
    }
}
