"""Stable-Baselines3 2.9.2 PPO through the drop-in's SB3 ``VecEnv``
(`mlagents_envs.envs.sb3_vec_env.UnityVecEnv`): two `mlagents-sim --scene 3DBall` players,
24 SB3 envs (one per agent), under SB3's `VecMonitor`; after 60k steps the mean return of the
last finished episodes is at least 3x the first rollout's. Also: SB3's same-step autoreset
holds (a done slot has its terminal observation in its info and a fresh one in `obs`), and
the gymnasium `VectorEnv` over the same slots (same-step autoreset) gives observations
within its batched space, `final_obs` exactly where episodes end, and gymnasium's own
`RecordEpisodeStatistics` records every episode.

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_sb3.py
"""

import time

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor

from gymnasium.wrappers.vector import RecordEpisodeStatistics

from mlagents_envs.envs.gymnasium_vector_env import UnityVectorEnv
from mlagents_envs.envs.sb3_vec_env import UnityVecEnv
from mlagents_envs.exception import UnityEnvironmentException
from report import check, finish


class RolloutReturns(BaseCallback):
    """The mean return of SB3's last 100 finished episodes at the end of each rollout."""

    def __init__(self):
        super().__init__()
        self.means = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.model.ep_info_buffer:
            self.means.append(float(np.mean([episode["r"] for episode in self.model.ep_info_buffer])))


env = UnityVecEnv("sim:3DBall", num_players=2, seed=4)
try:
    check(env.num_envs == 24 and env.observation_space.shape == (8,) and env.action_space.shape == (2,),
          f"3DBall x2 players: {env.num_envs} SB3 envs, observations {env.observation_space}, actions {env.action_space}")
    observations = env.reset()
    dones_seen, autoreset_ok = 0, True
    # 2000 steps: the two players fall out of step with each other (one ends an episode between
    # decision steps while the other decides), where a slot once kept a stale observation.
    for _ in range(2000):
        observations, rewards, dones, infos = env.step(np.random.uniform(-1, 1, (24, 2)).astype(np.float32))
        for slot in np.flatnonzero(dones):
            dones_seen += 1
            final = infos[slot].get("terminal_observation")
            autoreset_ok &= final is not None and final.shape == (8,) and "TimeLimit.truncated" in infos[slot]
            autoreset_ok &= not np.array_equal(final, observations[slot])
    check(dones_seen > 0 and autoreset_ok and observations.dtype == np.float32,
          f"same-step autoreset: {dones_seen} episodes ended in 2000 random steps, each with its terminal "
          "observation in its info and its next episode's first in obs")

    callback = RolloutReturns()
    started = time.time()
    model = PPO("MlpPolicy", VecMonitor(env), n_steps=256, batch_size=512, learning_rate=3e-4, seed=4, verbose=0,
                device="cpu")
    model.learn(60_000, callback=callback)
    seconds = time.time() - started
    first, last = (callback.means[0], callback.means[-1]) if callback.means else (0.0, 0.0)
    check(first > 0 and last >= 3 * first,
          f"SB3 PPO, 60k steps in {seconds:.0f} s: mean episode return {first:.2f} after the first rollout, "
          f"{last:.2f} after the last ({last / first if first else 0:.1f}x, at least 3x); per rollout "
          f"{[round(m, 2) for m in callback.means]}")
finally:
    env.close()

# Other action and observation kinds: one discrete branch (GridWorldVector, 9 agents), two
# branches (Simple2DDiscrete), two observations as a Dict (3DBallHard); hybrid actions and an
# unnamed behavior among two are refused with a clear error.
for scene, behavior in (("GridWorldVector", None), ("Simple2DDiscrete", None), ("3DBallHard", None), ("Ghost1D", "1D?team=1")):
    try:
        other = UnityVecEnv(f"sim:{scene}", num_players=2, seed=6, behavior_name=behavior)
        try:
            observations = other.reset()
            steps_ok, ended = True, 0
            for _ in range(100):
                actions = np.stack([other.action_space.sample() for _ in range(other.num_envs)])
                observations, rewards, dones, infos = other.step(actions)
                steps_ok &= other.observation_space.contains(
                    observations[0] if isinstance(observations, np.ndarray) else {k: v[0] for k, v in observations.items()})
                steps_ok &= rewards.shape == (other.num_envs,) and all("terminal_observation" in infos[i] for i in np.flatnonzero(dones))
                ended += int(dones.sum())
            check(steps_ok, f"{scene}: {other.num_envs} SB3 envs, observations {other.observation_space}, actions "
                  f"{other.action_space}; 100 random steps, {ended} episodes ended")
        finally:
            other.close()
    except Exception as error:  # noqa: BLE001 - reported as the failure
        check(False, f"{scene}: {type(error).__name__}: {error}")
for scene, refused in (("SimpleHybrid", "not both"), ("Ghost1D", "name the one")):
    try:
        UnityVecEnv(f"sim:{scene}").close()
        check(False, f"{scene} is refused")
    except UnityEnvironmentException as error:
        check(refused in str(error), f"{scene} is refused: {error}")

envs = RecordEpisodeStatistics(UnityVectorEnv("sim:3DBall", num_players=2, seed=5))
try:
    observations, _ = envs.reset(seed=5)
    contained, masks_ok, ended, recorded = envs.observation_space.contains(observations), True, 0, []
    for _ in range(300):
        observations, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
        done = terminated | truncated
        ended += int(done.sum())
        contained &= envs.observation_space.contains(observations)
        masks_ok &= np.array_equal(infos.get("_final_obs", np.zeros(24, bool)), done)
        if "episode" in infos:
            recorded += list(infos["episode"]["r"][infos["_episode"]])
    check(envs.num_envs == 24 and contained and masks_ok and ended > 0 and len(recorded) == ended
          and np.all(np.isfinite(recorded)),
          f"gymnasium VectorEnv (same-step autoreset): 24 sub-envs, observations within the batched space, "
          f"final_obs exactly where an episode ended ({ended} in 300 steps), gymnasium's RecordEpisodeStatistics "
          f"records {len(recorded)} returns (mean {np.mean(recorded) if recorded else float('nan'):.2f})")
finally:
    envs.close()

finish()
