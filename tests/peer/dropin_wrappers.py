"""The drop-in's batched environment and its gymnasium and PettingZoo wrappers, against
stand-in scenes (run in the drop-in's venv, which holds gymnasium 1.2.2 and PettingZoo 1.27):

- `VecUnityEnvironment` of two 3DBall players, stepped in one call, records exactly what two
  `UnityEnvironment`s stepped one after the other record (same seeds, same actions);
- `UnityToGymnasiumEnv` on Basic passes gymnasium's `check_env` and plays episodes that end
  with `terminated` or `truncated`;
- `parallel_env` passes PettingZoo's `parallel_api_test` and `aec_env` its `api_test`, on
  3DBall (12 agents), Ghost1D (two behaviors) and CoopReach1DSameIds (a group).

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_wrappers.py
"""
import warnings

import numpy as np
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test

from mlagents_envs.base_env import ActionTuple
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.envs.gymnasium_env import UnityToGymnasiumEnv
from mlagents_envs.envs.pettingzoo_env import aec_env, parallel_env
from mlagents_envs.vec_environment import VecUnityEnvironment
from report import check, finish



def record(step_players, players, steps=60):
    """Observations and rewards of every player over `steps` steps of seeded random actions."""
    rng = np.random.default_rng(5)
    seen = []
    for _ in range(steps):
        for env in players:
            name = next(iter(env.behavior_specs))
            decisions, terminals = env.get_steps(name)
            seen += [decisions.obs[0].copy(), decisions.reward.copy(), terminals.reward.copy()]
            env.set_actions(name, ActionTuple(continuous=rng.uniform(-1, 1, (len(decisions), 2)).astype(np.float32)))
        step_players()
    return seen


vec = VecUnityEnvironment("sim:3DBall", 2, seed=11)
vec.reset()
batched = record(vec.step, vec.envs)
vec.close()
single = [UnityEnvironment("sim:3DBall", base_port=0, seed=11 + i, no_graphics=True) for i in range(2)]
for env in single:
    env.reset()


def step_one_by_one():
    for env in single:
        env.step()


alone = record(step_one_by_one, single)
for env in single:
    env.close()
same = len(batched) == len(alone) and all(a.tobytes() == b.tobytes() for a, b in zip(batched, alone))
different_players = batched[0].tobytes() != batched[3].tobytes()
check(same and different_players,
      f"VecUnityEnvironment: two 3DBall players stepped in one call record what they record stepped one by one ({len(batched)} arrays), each its own seed")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    basic = UnityToGymnasiumEnv(UnityEnvironment("sim:Basic", base_port=0, no_graphics=True))
    try:
        check_env(basic, skip_render_check=True)
        check(True, f"UnityToGymnasiumEnv on Basic passes gymnasium's check_env ({len(caught)} warnings)")
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"UnityToGymnasiumEnv on Basic passes gymnasium's check_env: {type(error).__name__}: {error}")
ends = {"terminated": 0, "truncated": 0}
returns = []
observation, _ = basic.reset(seed=1)
episode_return = 0.0
for _ in range(400):
    observation, reward, terminated, truncated, info = basic.step(basic.action_space.sample())
    episode_return += reward
    if terminated or truncated:
        ends["terminated" if terminated else "truncated"] += 1
        returns.append(episode_return)
        episode_return = 0.0
        observation, _ = basic.reset()
basic.close()
check(len(returns) > 0 and basic.observation_space.contains(observation),
      f"UnityToGymnasiumEnv plays Basic: {len(returns)} episodes ({ends}), returns {np.round(returns[:5], 2).tolist()}...")

for scene in ("3DBall", "Ghost1D", "CoopReach1DSameIds"):
    try:
        env = parallel_env(UnityEnvironment(f"sim:{scene}", base_port=0, no_graphics=True), add_group_reward=True)
        parallel_api_test(env, num_cycles=200)
        agents = len(env.possible_agents)
        env.close()
        check(True, f"parallel_env on {scene} ({agents} agents) passes PettingZoo's parallel_api_test")
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"parallel_env on {scene} passes PettingZoo's parallel_api_test: {type(error).__name__}: {error}")
    try:
        env = aec_env(UnityEnvironment(f"sim:{scene}", base_port=0, no_graphics=True))
        api_test(env, num_cycles=100)
        env.close()
        check(True, f"aec_env on {scene} passes PettingZoo's api_test")
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"aec_env on {scene} passes PettingZoo's api_test: {type(error).__name__}: {error}")

finish()
