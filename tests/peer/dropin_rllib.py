"""The drop-in beside ray[rllib] 2.60 (numpy 2, protobuf 7, gymnasium 1.2.2), in one venv:

- `import mlagents_envs` works there (the real 0.28 does not import beside protobuf 7);
- `mlagents_envs.rllib.UnityMultiAgentEnv` passes RLlib's own multi-agent env check
  (`check_multiagent_environments`) on 3DBall, Ghost1D (two behaviors) and CoopReach1D (a
  group whose agents get new ids), and RLlib's `MultiAgentEpisode`, built as its env runners
  build it (the spaces of `possible_agents`), records 600 steps of random play of each scene
  without refusing any of it; every agent id stays within `possible_agents`, every finished
  Unity episode reports its return, every RLlib episode starts with agents to act and nearly
  every step observes some (a reset between Unity's decision steps once gave RLlib episodes of
  1000 empty steps).

Training with RLlib's PPO on a Ray cluster: dropin_rllib_cluster.py.

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_rllib.py
"""

import google.protobuf
import numpy as np
import ray
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils.pre_checks.env import check_multiagent_environments

import mlagents_envs
from mlagents_envs.rllib import UnityMultiAgentEnv, policy_of
from report import check, finish



check(mlagents_envs.IS_RUST_BACKEND and np.__version__ >= "2" and google.protobuf.__version__.split(".")[0] >= "5",
      f"mlagents_envs imports beside ray {ray.__version__} (numpy {np.__version__}, protobuf {google.protobuf.__version__})")

for scene, horizon in (("3DBall", 250), ("Ghost1D", 300), ("CoopReach1D", 300)):
    env = UnityMultiAgentEnv({"file_name": f"sim:{scene}", "horizon": horizon, "seed": 3})
    try:
        check_multiagent_environments(env)
        check(True, f"{scene}: RLlib's check_multiagent_environments passes")
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"{scene}: RLlib's check_multiagent_environments: {type(error).__name__}: {error}")
    episodes, returns, ids_seen, total_steps, empty_resets, observed_steps = 0, [], set(), 0, 0, 0
    env.drain_returns()
    try:
        for _ in range(600):
            observations, infos = env.reset()
            empty_resets += not observations
            episode = MultiAgentEpisode(
                observation_space={aid: env.get_observation_space(aid) for aid in env.possible_agents},
                action_space={aid: env.get_action_space(aid) for aid in env.possible_agents},
                agent_to_module_mapping_fn=policy_of,
            )
            episode.add_env_reset(observations=observations, infos=infos)
            steps, finished = 0, set()
            acting = list(observations)
            while not episode.is_done:
                # As RLlib's env runners do: actions for the agents that got an observation and
                # are not done.
                actions = {aid: env.get_action_space(aid).sample() for aid in acting}
                observations, rewards, terminateds, truncateds, infos = env.step(actions)
                acting = [aid for aid in observations if not (terminateds.get(aid) or truncateds.get(aid))]
                outside = set(observations) - set(env.possible_agents)
                assert not outside, f"agent ids {outside} are not in possible_agents"
                episode.add_env_step(observations, actions, rewards, infos, terminateds=terminateds, truncateds=truncateds)
                ids_seen |= {(episodes, aid) for aid in observations}
                done = {aid for aid in observations if terminateds.get(aid) or truncateds.get(aid)}
                assert not (done & finished), f"ids {done & finished} got data after their episode ended"
                finished |= done
                returns += [info["episode_return"] for info in infos.values() if "episode_return" in info]
                observed_steps += bool(observations)
                steps += 1
            episodes += 1
            total_steps += steps
            if total_steps >= 600:
                break
        behaviors = sorted({policy_of(aid) for _, aid in ids_seen})
        check(episodes > 0 and returns and all(np.isfinite(returns)),
              f"{scene}: MultiAgentEpisode records {episodes} RLlib episodes ({total_steps} steps, horizon {horizon}); "
              f"{len(ids_seen)} agent ids over {behaviors}; {len(returns)} Unity episodes ended, "
              f"mean return {np.mean(returns):.3f}")
        drained = env.drain_returns()
        check(empty_resets == 0 and observed_steps >= 0.9 * total_steps and len(drained) >= len(returns)
              and (len(drained) > len(returns) or np.isclose(np.sum(drained), np.sum(returns))),
              f"{scene}: every RLlib episode starts with agents ({empty_resets} empty resets), "
              f"{observed_steps}/{total_steps} steps observe some agent, drain_returns gives all "
              f"{len(drained)} Unity episode returns ({len(returns)} of them ended under an RLlib id)")
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"{scene}: MultiAgentEpisode records random play: {type(error).__name__}: {error}")
    env.close()

finish()
