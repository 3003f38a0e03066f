//! The cooperative stand-ins over the real protocol (a `mlagents-sim` child process, our
//! client): group ids and group rewards where poca.md §7.1 says Unity sends them, early
//! finishers' terminal steps and their silence until the group's next episode, new or kept
//! agent ids, interruptions of a whole group at its step limit, the sacrifice that opens the
//! door, and the entity observation's shape, dimension properties and padding.

mod common;

use mlagents::env::{ActionTuple, DecisionSteps, TerminalSteps, UnityEnvironment};
use mlagents::spec::DimensionProperty;
use std::collections::BTreeMap;

const BEHAVIOR: &str = "1D?team=0";

/// Steps the scene once, each deciding agent taking the discrete action `choose(agent id,
/// its observation)`; returns what the next message brings.
fn step(env: &mut UnityEnvironment, decisions: &DecisionSteps, choose: impl Fn(i32, &[f32]) -> i32) -> (DecisionSteps, TerminalSteps) {
    let discrete = (0..decisions.len()).map(|i| choose(decisions.agent_id[i], decisions.obs[0].agent(i))).collect();
    env.set_actions(BEHAVIOR, ActionTuple { continuous: vec![], discrete }).unwrap();
    env.step().unwrap();
    env.get_steps(BEHAVIOR).unwrap()
}

/// Each agent walks towards its goal sign (action 1: right).
fn towards_goal(_: i32, observation: &[f32]) -> i32 {
    i32::from(observation[0] > 0.0)
}

/// CoopReach1D, agents walking to their goals: both finish at the fifth step in id order, so
/// the first finisher's terminal comes alone (reward min(−0.01, 1.06) = −0.01, no group
/// reward, not interrupted) and the second's carries reward 0 and the group reward 1.06; then
/// both begin again, with new ids or (CoopReach1DSameIds) the same ones.
#[test]
fn an_early_finisher_ends_alone_and_the_last_one_brings_the_group_reward() {
    for (scene, keep_ids) in [("CoopReach1D", false), ("CoopReach1DSameIds", true)] {
        let mut env = common::start(scene);
        env.reset().unwrap();
        let (mut decisions, _) = env.get_steps(BEHAVIOR).unwrap();
        assert_eq!(decisions.group_id, vec![1, 1], "{scene}: both agents in group 1");
        let first_ids = decisions.agent_id.clone();
        let mut ended: Vec<(i32, f32, f32, bool)> = vec![];
        for _ in 0..5 {
            let (next, terminals) = step(&mut env, &decisions, towards_goal);
            for i in 0..terminals.len() {
                assert_eq!(terminals.group_id[i], 1);
                ended.push((terminals.agent_id[i], terminals.reward[i], terminals.group_reward[i], terminals.interrupted[i]));
            }
            decisions = next;
        }
        assert_eq!(ended, vec![(first_ids[0], -0.01, 0.0, false), (first_ids[1], 0.0, 1.06, false)], "{scene}");
        assert_eq!(decisions.len(), 2, "{scene}: the next group episode begins with both members");
        assert_eq!(decisions.group_id, vec![1, 1]);
        if keep_ids {
            assert_eq!(decisions.agent_id, first_ids, "{scene}");
        } else {
            assert!(decisions.agent_id.iter().all(|id| !first_ids.contains(id)), "{scene}: new ids {:?} after {first_ids:?}", decisions.agent_id);
        }
        env.close().unwrap();
    }
}

/// One agent of CoopReach1D walks to its goal while the other never reaches a side: the
/// finisher's terminal comes at the fifth step and it sends no decision while its mate goes on.
#[test]
fn a_finished_member_waits_for_its_group() {
    let mut env = common::start("CoopReach1D");
    env.reset().unwrap();
    let (mut decisions, _) = env.get_steps(BEHAVIOR).unwrap();
    let (runner, waiter) = (decisions.agent_id[0], decisions.agent_id[1]);
    for k in 1..=12 {
        // The mate steps back and forth, never reaching a side.
        let (next, terminals) = step(&mut env, &decisions, |id, observation| if id == runner { towards_goal(id, observation) } else { (k % 2) as i32 });
        assert_eq!(terminals.agent_id, if k == 5 { vec![runner] } else { vec![] }, "step {k}");
        let deciding = if k < 5 { vec![runner, waiter] } else { vec![waiter] };
        assert_eq!(next.agent_id, deciding, "step {k}: only members still in the group's episode decide");
        decisions = next;
    }
    env.close().unwrap();
}

/// CoopTimeout: two groups (ids 1 and 2) of agents that never reach a side (they alternate):
/// after 8 steps every member of both groups ends interrupted, then all decide again.
#[test]
fn a_group_step_limit_interrupts_every_member() {
    let mut env = common::start("CoopTimeout");
    env.reset().unwrap();
    let (mut decisions, _) = env.get_steps(BEHAVIOR).unwrap();
    assert_eq!(decisions.group_id, vec![1, 1, 2, 2]);
    let mut endings: BTreeMap<usize, Vec<(i32, bool)>> = BTreeMap::new();
    for k in 1..=9 {
        let (next, terminals) = step(&mut env, &decisions, |_, _| (k % 2) as i32);
        if !terminals.is_empty() {
            endings.insert(k, (0..terminals.len()).map(|i| (terminals.group_id[i], terminals.interrupted[i])).collect());
        }
        decisions = next;
    }
    assert_eq!(endings, BTreeMap::from([(8, vec![(1, true), (1, true), (2, true), (2, true)])]));
    assert_eq!(decisions.len(), 4);
    env.close().unwrap();
}

/// CoopSacrifice: in every area the first slot walks left to the dragon, the others right to
/// the door. The first slot's episode ends after 4 moves with nothing; the others, at the door
/// from the same step, end with a group reward of 1 each; a walk to the door with no key
/// gives nothing.
#[test]
fn the_sacrifice_opens_the_door_for_the_rest_of_the_group() {
    let mut env = common::start("CoopSacrifice");
    env.reset().unwrap();
    let (mut decisions, _) = env.get_steps(BEHAVIOR).unwrap();
    assert_eq!(decisions.len(), 12);
    let slot_of = |observation: &[f32]| observation[2..].iter().position(|x| *x == 1.0).unwrap();
    let mut terminals_seen = vec![];
    for k in 1..=4 {
        let (next, terminals) = step(&mut env, &decisions, |_, observation| i32::from(slot_of(observation) != 0));
        if k < 4 {
            assert!(terminals.is_empty(), "step {k}");
            assert!(next.obs[0].data.chunks(5).all(|o| o[1] == 0.0), "no key before the dragon");
        }
        terminals_seen = (0..terminals.len()).map(|i| (terminals.reward[i], terminals.group_reward[i], terminals.interrupted[i])).collect();
        decisions = next;
    }
    let sacrificed = terminals_seen.iter().filter(|t| **t == (0.0, 0.0, false)).count();
    let rewarded = terminals_seen.iter().filter(|t| **t == (0.0, 1.0, false)).count();
    assert_eq!((sacrificed, rewarded, terminals_seen.len()), (4, 8, 12), "{terminals_seen:?}");
    assert_eq!(decisions.len(), 12, "every group begins again");

    // Everyone to the door: no key, nothing, until the 20-step limit interrupts them.
    let mut ended = vec![];
    for _ in 0..20 {
        let (next, terminals) = step(&mut env, &decisions, |_, _| 1);
        ended.extend((0..terminals.len()).map(|i| (terminals.group_reward[i], terminals.interrupted[i])));
        decisions = next;
    }
    assert_eq!(ended, vec![(0.0, true); 12]);
    env.close().unwrap();
}

/// EntityGoal1D sends a `[10, 5]` observation with dimension properties (VARIABLE_SIZE, NONE):
/// 1 to 10 real entities `[goal, noise, noise, noise, 1]`, the rest zeros.
#[test]
fn entity_observations_carry_the_goal_in_a_padded_buffer() {
    let mut env = common::start("EntityGoal1D");
    env.reset().unwrap();
    let spec = env.behavior_specs()[BEHAVIOR].clone();
    assert_eq!(spec.observation_specs[0].dimension_properties, vec![DimensionProperty::VariableSize, DimensionProperty::None]);
    let mut counts = std::collections::BTreeSet::new();
    let (mut decisions, _) = env.get_steps(BEHAVIOR).unwrap();
    for _ in 0..300 {
        let entities: Vec<&[f32]> = decisions.obs[0].agent(0).chunks(5).collect();
        let real = entities.iter().take_while(|e| e[4] == 1.0).count();
        assert!((1..=10).contains(&real));
        assert!(entities[real..].iter().all(|e| e.iter().all(|x| *x == 0.0)), "padding is zeros");
        assert!(entities[..real].iter().all(|e| e[0].abs() == 1.0 && e[0] == entities[0][0]), "every real entity shows the goal");
        counts.insert(real);
        let goal = entities[0][0];
        (decisions, _) = step(&mut env, &decisions, |_, _| i32::from(goal > 0.0));
    }
    assert!(counts.len() > 5, "the number of real entities varies by episode: {counts:?}");
    env.close().unwrap();
}
