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

/// What the critic says of a trajectory: each step's values and the bootstrap value after
/// the last step (`(n + 1) × heads`, step-major), and each step's baselines (`n × heads`).
/// `observations` are the trajectory's rows, its `n` steps then the observation after.
pub fn trajectory_estimates(critic: &MultiAgentCritic, t: &Trajectory, observations: &[Tensor], sizes: &[usize], spec: &ActionSpec) -> (Vec<f32>, Vec<f32>) {
    let n = t.steps.len() as i64;
    tch::no_grad(|| {
        let own: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, 0, n)).collect();
        let mates: Vec<&[GroupmateStatus]> = t.steps.iter().map(|s| s.group_status.as_slice()).collect();
        let (values, baselines) = critic.values_and_baselines(&group_observations(own, &mates, sizes, spec));
        let next: Vec<Tensor> = observations.iter().map(|o| o.narrow(0, n, 1)).collect();
        let next_mates: Vec<GroupmateStatus> = t
            .next_group_obs
            .iter()
            .map(|obs| GroupmateStatus { obs: obs.clone(), continuous: vec![0.0; spec.continuous_size], discrete: vec![0; spec.discrete_size()], reward: 0.0, done: false })
            .collect();
        let latest = group_observations(next, &[next_mates.as_slice()], sizes, spec);
        let bootstrap = critic.values(&latest);
        let values = Tensor::cat(&[values, bootstrap], 0);
        let flat = |x: Tensor| Vec::<f32>::try_from(x.to_kind(Kind::Float).flatten(0, -1)).unwrap_or_default();
        (flat(values), flat(baselines))
    })
}
