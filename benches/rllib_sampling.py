"""RLlib 2.60 sampling through the drop-in (`mlagents_envs.rllib`) on a stand-in scene: PPO's
env runners (1, then 2, on this machine), each with its own `mlagents-sim` player, sample
`STEPS` env steps each at the same time with the untrained policy; prints one JSON line per
runner count: env steps and agent steps per second over all runners, and each runner's peak
memory (MB; the runner process, torch included, not its player).

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python rllib_sampling.py [SCENE] [STEPS]
"""

import json
import resource
import sys
import time

import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune.registry import register_env

from mlagents_envs.rllib import UnityMultiAgentEnv, module_ids, policy_of

SCENE = sys.argv[1] if len(sys.argv) > 1 else "3DBall"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 3000


def timed_sample(runner) -> dict:
    """One runner's warm-up, then a timed sample of STEPS env steps."""
    runner.sample(num_timesteps=200, random_actions=False)
    started = time.perf_counter()
    episodes = runner.sample(num_timesteps=STEPS, random_actions=False)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "env_steps": sum(episode.env_steps() for episode in episodes),
        "agent_steps": sum(episode.agent_steps() for episode in episodes),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


env_config = {"file_name": f"sim:{SCENE}", "horizon": 1000, "seed": 0}
register_env("unity", UnityMultiAgentEnv)
ray.init(log_to_driver=False, include_dashboard=False)
for runners in (1, 2):
    algorithm = (
        PPOConfig()
        .environment("unity", env_config=env_config)
        .multi_agent(policies=module_ids(env_config), policy_mapping_fn=policy_of)
        .env_runners(num_env_runners=runners, num_cpus_per_env_runner=0.5, episodes_to_numpy=False)
        .learners(num_learners=0)
        .build_algo()
    )
    try:
        results = algorithm.env_runner_group.foreach_env_runner(timed_sample, local_env_runner=False)
    finally:
        algorithm.stop()
    wall = max(result["seconds"] for result in results)
    print(json.dumps({
        "scene": SCENE,
        "env_runners": runners,
        "env_steps_per_second": round(sum(r["env_steps"] for r in results) / wall, 1),
        "agent_steps_per_second": round(sum(r["agent_steps"] for r in results) / wall, 1),
        "runner_max_rss_mb": [round(r["max_rss_mb"], 1) for r in results],
    }), flush=True)
ray.shutdown()
