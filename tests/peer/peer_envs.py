"""Peer test: the real Python client, mlagents_envs 0.28.0 from PyPI, drives `mlagents-sim`
as its `file_name` executable (the scene chosen with `additional_args`) through reset, step,
side channels (engine configuration, environment parameters with samplers, stats) and close,
for every scene; the specs it reports must match envs.md (written out below).

Usage: python peer_envs.py PATH/TO/mlagents-sim [BASE_PORT]
Prints one line per scene and a final "N passed, N failed" line; exits 1 on any failure.
"""
import sys
import time
import traceback

import numpy as np
from mlagents_envs.base_env import ActionTuple, DimensionProperty, ObservationType
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
from mlagents_envs.side_channel.stats_side_channel import StatsAggregationMethod, StatsSideChannel

ONE = [(1,)]
# scene -> {behavior: (observation shapes, continuous size, discrete branches, agents)}, from envs.md
EXPECTED = {
    "Basic": {"Basic?team=0": ([(20,)], 0, (3,), 1)},
    "3DBall": {"3DBall?team=0": ([(8,)], 2, (), 12)},
    "3DBallHard": {"3DBallHard?team=0": ([(27,), (18,)], 2, (), 12)},
    "3DBallHardLegacy": {"3DBallHard?team=0": ([(45,)], 2, (), 12)},
    "GridWorld": {"GridWorld?team=0": ([(64, 84, 3)], 0, (5,), 9)},
    "GridWorldVector": {"GridWorld?team=0": ([(6,)], 0, (5,), 9)},
    "Simple1DDiscrete": {"1D?team=0": (ONE, 0, (2,), 1)},
    "Simple1DContinuous": {"1D?team=0": (ONE, 1, (), 1)},
    "Simple2DDiscrete": {"1D?team=0": (ONE, 0, (2, 2), 1)},
    "Simple2DContinuous": {"1D?team=0": (ONE, 2, (), 1)},
    "SimpleHybrid": {"1D?team=0": (ONE, 1, (2,), 1)},
    "SimpleHybrid2x2": {"1D?team=0": (ONE, 2, (2, 2), 1)},
    "SimpleVisualDiscrete": {"1D?team=0": ([(20, 20, 3)], 0, (2,), 1)},
    "SimpleVisualContinuous": {"1D?team=0": ([(20, 20, 3)], 1, (), 1)},
    "SimpleVisualHybrid": {"1D?team=0": ([(20, 20, 3)], 1, (2,), 1)},
    "SimpleVisualVector": {"1D?team=0": ([(1,), (20, 20, 3), (20, 20, 3)], 0, (2,), 1)},
    "Memory1DDiscrete": {"1D?team=0": (ONE, 0, (2,), 1)},
    "Memory1DContinuous": {"1D?team=0": (ONE, 1, (), 1)},
    "MemoryHybrid": {"1D?team=0": (ONE, 1, (2,), 1)},
    "Memory1DContinuousWide": {"1D?team=0": (ONE, 1, (), 1)},
    "MultiAgentGroup": {"1D?team=0": (ONE, 1, (), 2)},
    "Ghost1D": {"1D?team=0": (ONE, 0, (2,), 1), "1D?team=1": (ONE, 0, (2,), 1)},
    "AsymmetricGhost1D": {"1D?team=0": (ONE, 0, (2,), 1), "1DOpp?team=1": (ONE, 0, (2,), 1)},
    "Ghost1DContinuous": {"1D?team=0": (ONE, 1, (), 1), "1D?team=1": (ONE, 1, (), 1)},
    "AsymmetricGhost1DContinuous": {"1D?team=0": (ONE, 1, (), 1), "1DOpp?team=1": (ONE, 1, (), 1)},
    "CoopReach1D": {"1D?team=0": (ONE, 0, (2,), 2)},
    "CoopReach1DContinuous": {"1D?team=0": (ONE, 1, (), 2)},
    "CoopReach1DSameIds": {"1D?team=0": (ONE, 0, (2,), 2)},
    "CoopTimeout": {"1D?team=0": (ONE, 0, (2,), 4)},
    "CoopSacrifice": {"1D?team=0": ([(5,)], 0, (2,), 12)},
    "EntityGoal1D": {"1D?team=0": ([(10, 5)], 0, (2,), 1)},
    "EntityGoal1DGroup": {"1D?team=0": ([(10, 5)], 0, (2,), 2)},
    "SparseSwitch": {"SparseSwitch?team=0": ([(13,)], 0, (4,), 8)},
    "Corridor": {"Corridor?team=0": ([(3,)], 0, (3,), 8)},
    "Pong": {"Pong?team=0": ([(6,)], 0, (3,), 1), "Pong?team=1": ([(6,)], 0, (3,), 1)},
    "Race": {"Race?team=0": ([(3,)], 0, (3,), 1), "Race?team=1": ([(3,)], 0, (3,), 1)},
    "RaceAsymmetric": {"RaceDuo?team=0": ([(3,)], 0, (3,), 2), "RaceSolo?team=1": ([(3,)], 0, (3,), 1)},
}
# Grouped scenes: the group ids their agents carry, and what 200 random steps must show in the
# terminal steps: a group reward (a group episode ended by its last finisher) or an interruption
# (a group step limit).
GROUPS = {
    "MultiAgentGroup": ({1}, "group reward"),
    "EntityGoal1DGroup": ({1}, "group reward"),
    "CoopReach1D": ({1}, "group reward"),
    "CoopReach1DContinuous": ({1}, "group reward"),
    "CoopReach1DSameIds": ({1}, "group reward"),
    "CoopTimeout": ({1, 2}, "interrupted"),
    "CoopSacrifice": ({1, 2, 3, 4}, "interrupted"),
    "RaceAsymmetric": ({0, 1}, None),
}
# Observations with dimension properties other than NONE per dimension.
ENTITIES = [(DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)]
DIMENSION_PROPERTIES = {"EntityGoal1D": ENTITIES, "EntityGoal1DGroup": ENTITIES}
STEPS = 200


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def random_actions(spec, decision_steps, rng):
    n = len(decision_steps)
    continuous = rng.uniform(-1, 1, (n, spec.action_spec.continuous_size)).astype(np.float32)
    discrete = np.zeros((n, len(spec.action_spec.discrete_branches)), dtype=np.int32)
    for b, size in enumerate(spec.action_spec.discrete_branches):
        for i in range(n):
            allowed = [a for a in range(size) if not decision_steps.action_mask[b][i][a]]
            discrete[i, b] = rng.choice(allowed) if allowed else 0
    return ActionTuple(continuous=continuous, discrete=discrete)


def run_scene(sim, scene, port):
    engine = EngineConfigurationChannel()
    params = EnvironmentParametersChannel()
    stats = StatsSideChannel()
    engine.set_configuration_parameters(width=84, height=84, quality_level=5, time_scale=20.0,
                                        target_frame_rate=-1, capture_frame_rate=60)
    params.set_float_parameter("peer_float", 1.5)
    params.set_uniform_sampler_parameters("peer_uniform", 1.0, 3.0, 7)
    params.set_gaussian_sampler_parameters("peer_gaussian", 4.0, 0.5, 7)
    params.set_multirangeuniform_sampler_parameters("peer_multi", [[0.0, 1.0], [3.0, 5.0]], 7)
    env = UnityEnvironment(file_name=sim, base_port=port, seed=3, no_graphics=True, timeout_wait=30,
                           additional_args=["--scene", scene], side_channels=[engine, params, stats])
    try:
        env.reset()
        expected = EXPECTED[scene]
        check(sorted(env.behavior_specs.keys()) == sorted(expected), f"behaviors {list(env.behavior_specs)}")
        for name, (shapes, continuous, branches, agents) in expected.items():
            spec = env.behavior_specs[name]
            got = [tuple(o.shape) for o in spec.observation_specs]
            check(got == shapes, f"{name}: observation shapes {got}, expected {shapes}")
            check(all(o.observation_type == ObservationType.DEFAULT for o in spec.observation_specs), "obs type")
            check(spec.action_spec.continuous_size == continuous, f"{name}: continuous {spec.action_spec}")
            check(tuple(spec.action_spec.discrete_branches) == branches, f"{name}: branches {spec.action_spec}")
            if scene in DIMENSION_PROPERTIES:
                got = [tuple(o.dimension_property) for o in spec.observation_specs]
                check(got == DIMENSION_PROPERTIES[scene], f"{name}: dimension properties {got}")
            decisions, terminals = env.get_steps(name)
            check(len(decisions) == agents and len(terminals) == 0, f"{name}: {len(decisions)} agents after reset")
        rng = np.random.default_rng(0)
        ended = {name: 0 for name in expected}
        received = {}
        group_ids, group_rewards, interruptions = set(), 0, 0
        for _ in range(STEPS):
            for name in expected:
                spec = env.behavior_specs[name]
                decisions, terminals = env.get_steps(name)
                ended[name] += len(terminals)
                group_ids.update(int(g) for g in decisions.group_id)
                group_ids.update(int(g) for g in terminals.group_id)
                group_rewards += int(np.count_nonzero(terminals.group_reward))
                interruptions += int(np.count_nonzero(terminals.interrupted))
                for agent_id in terminals.agent_id:
                    step = terminals[agent_id]
                    check(step.group_reward == terminals.group_reward[terminals.agent_id_to_index[agent_id]], "terminal step")
                for obs, o_spec in zip(decisions.obs, spec.observation_specs):
                    check(obs.shape == (len(decisions),) + tuple(o_spec.shape), f"{name}: batch {obs.shape}")
                if len(decisions) > 0:
                    env.set_actions(name, random_actions(spec, decisions, rng))
            env.step()
            for key, values in stats.get_and_reset_stats().items():
                received.setdefault(key, []).extend(values)
        check(all(n > 0 for n in ended.values()), f"episodes ended: {ended}")
        groups, shown = GROUPS.get(scene, ({0}, None))
        check(group_ids == groups, f"group ids {group_ids}, expected {groups}")
        if shown == "group reward":
            check(group_rewards > 0, "no terminal step carried a group reward")
        if shown == "interrupted":
            check(interruptions > 0, "no group episode was interrupted")
        most_recent = StatsAggregationMethod.MOST_RECENT
        check(received["Sim/Parameter/peer_float"][0] == (1.5, most_recent), "float parameter reached the scene")
        check(received["Sim/Parameter/peer_uniform"][0][0] == 2.0, "uniform sampler reached the scene")
        check(received["Sim/Parameter/peer_gaussian"][0][0] == 4.0, "gaussian sampler reached the scene")
        check(received["Sim/Parameter/peer_multi"][0][0] == 2.25, "multi-range sampler reached the scene")
        check(received["Sim/Engine/Time Scale"][0][0] == 20.0, "engine configuration reached the scene")
        check(received["Sim/Engine/Quality Level"][0][0] == 5.0, "quality level reached the scene")
        scene_stats = sorted(k for k in received if not k.startswith("Sim/"))
        return f"{STEPS} steps, episodes ended {ended}, groups {sorted(group_ids)}, group rewards {group_rewards}, interrupted {interruptions}, scene stats {scene_stats}"
    finally:
        env.close()


def main():
    sim = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 6005
    passed = failed = 0
    for k, scene in enumerate(EXPECTED):
        start = time.time()
        try:
            detail = run_scene(sim, scene, port + k)
            passed += 1
            print(f"ok   {scene}: {detail} ({time.time() - start:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL {scene}:\n{traceback.format_exc()}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
