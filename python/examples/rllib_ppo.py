"""RLlib PPO on a Unity scene through our ``mlagents_envs`` (``mlagents_envs.rllib``), on one
machine or a Ray cluster.

Every env runner starts its own Unity player (a build on that node's disk, or a stand-in scene
``sim:SCENE`` with ``mlagents-sim`` on that node's PATH or in ``MLAGENTS_SIM``) on a free
loopback port, and closes it with the runner. A player that dies mid-run is replaced by its
runner (RLlib's ``restart_failed_sub_environments``) and a runner that dies is restarted by
RLlib (``restart_failed_env_runners``); training goes on.

Each iteration prints one JSON line: the iteration, the mean return of the Unity episodes that
ended in it (``unity_return_mean``; RLlib's own ``episode_return_mean`` sums RLlib episodes,
which hold many Unity episodes), their count, the env steps sampled, how many
players were replaced so far and the seconds since the start; after the first
and the last iteration a line gives each remote env runner's Ray node, its players' seeds and
its peak memory.

Examples::

    python rllib_ppo.py --file-name sim:3DBall --iterations 20                  # on this machine
    ray start --head --port 6379                                                 # a cluster:
    ray start --address HEAD:6379                                                # on each other node
    python rllib_ppo.py --address HEAD:6379 --env-runners 4 --file-name /opt/game/3DBall.x86_64
"""

import argparse
import json
import resource
import time
from typing import Dict, List

import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.tune.registry import register_env

from mlagents_envs.rllib import UnityMultiAgentEnv, module_ids, policy_of

UNITY_RETURN_SUM = "unity_return_sum"
UNITY_EPISODES = "unity_episodes"
NUM_ENV_STEP_FAILURES = "num_env_step_failures"


class UnityEpisodeReturns(RLlibCallback):
    """Sums the returns of the Unity episodes that ended (``UnityMultiAgentEnv.drain_returns``)
    per iteration; RLlib's own episode returns sum RLlib episodes, which hold many."""

    def on_episode_end(self, *, env=None, env_index=0, metrics_logger=None, **kwargs) -> None:
        unity_env = getattr(env, "envs", [env])[env_index].unwrapped
        for episode_return in unity_env.drain_returns():
            metrics_logger.log_value(UNITY_RETURN_SUM, float(episode_return), reduce="sum")
            metrics_logger.log_value(UNITY_EPISODES, 1, reduce="sum")


def ppo_config(args: argparse.Namespace) -> PPOConfig:
    """PPO for the scene's behaviors, one policy each."""
    env_config = {"file_name": args.file_name, "horizon": args.horizon, "seed": args.seed}
    # RLlib hands each env its EnvContext: env_config plus the runner's worker_index (the seed
    # offset of its player).
    register_env("unity", UnityMultiAgentEnv)
    return (
        PPOConfig()
        .environment("unity", env_config=env_config)
        .multi_agent(policies=module_ids(env_config), policy_mapping_fn=policy_of)
        .env_runners(
            num_env_runners=args.env_runners,
            num_cpus_per_env_runner=1,
            sample_timeout_s=args.sample_timeout,
            # RLlib 2.60 numpy-izes every finished episode again at each step of a sample
            # (quadratic in the episodes per sample); the learner takes lists as well.
            episodes_to_numpy=False,
        )
        .fault_tolerance(restart_failed_env_runners=True, restart_failed_sub_environments=True)
        .learners(num_learners=0)
        .training(
            lr=args.lr,
            train_batch_size_per_learner=args.batch,
            minibatch_size=args.minibatch,
            num_epochs=args.epochs,
            gamma=0.99,
            lambda_=0.95,
        )
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[128, 128], vf_share_layers=False))
        .callbacks(UnityEpisodeReturns)
        .debugging(seed=args.seed)
        .reporting(metrics_num_episodes_for_smoothing=1)
    )


def summary(iteration: int, result: Dict, started: float) -> Dict:
    """What one iteration did, for the JSON line."""
    runners = result.get("env_runners", {})
    episodes = int(runners.get(UNITY_EPISODES, 0))
    return {
        "iteration": iteration,
        "unity_return_mean": float(runners.get(UNITY_RETURN_SUM, 0.0)) / episodes if episodes else None,
        "unity_episodes": episodes,
        "env_steps": int(runners.get("num_env_steps_sampled", 0)),
        "players_replaced": int(runners.get(NUM_ENV_STEP_FAILURES, 0)),
        "seconds": round(time.time() - started, 1),
    }


def runner_report(algorithm) -> Dict:
    """Where the remote env runners run (Ray node ids), their players' seeds and their peak
    memory (MB)."""

    def where_and_size(runner) -> Dict:
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "player_seeds": [env.unwrapped.player_seed for env in runner.env.envs],
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }

    return {"env_runners": algorithm.env_runner_group.foreach_env_runner(where_and_size, local_env_runner=False)}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file-name", default="sim:3DBall", help="a Unity build, or sim:SCENE for a stand-in")
    parser.add_argument("--address", default=None, help="a Ray cluster (HEAD:PORT or auto); none starts Ray here")
    parser.add_argument("--env-runners", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=1000, help="env steps at most per RLlib episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch", type=int, default=4000, help="agent steps per iteration")
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--sample-timeout", type=float, default=120.0)
    parser.add_argument("--checkpoint", default=None, help="save the trained algorithm here at the end")
    args = parser.parse_args(argv)

    ray.init(address=args.address, log_to_driver=False, include_dashboard=False)
    algorithm = ppo_config(args).build_algo()
    started = time.time()
    try:
        for iteration in range(1, args.iterations + 1):
            print(json.dumps(summary(iteration, algorithm.train(), started)), flush=True)
            if iteration in (1, args.iterations):
                print(json.dumps(runner_report(algorithm)), flush=True)
        if args.checkpoint:
            algorithm.save_to_path(args.checkpoint)
    finally:
        algorithm.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
