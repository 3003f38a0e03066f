"""``gym_unity.envs`` 0.28: ``UnityToGymWrapper`` with the old gym API that code written for
gym_unity calls (``reset()`` returns the observation, ``step()`` returns ``(observation,
reward, done, info)``, ``done`` also when Unity interrupted the episode), over the drop-in's
gymnasium wrapper (:class:`mlagents_envs.envs.gymnasium_env.UnityToGymnasiumEnv`: the same
options, observation layout and exceptions); the spaces are gymnasium's."""

import logging
from typing import Any, Tuple

from mlagents_envs.base_env import BaseEnv
from mlagents_envs.envs.gymnasium_env import ActionFlattener, UnityGymException, UnityToGymnasiumEnv

__all__ = ["ActionFlattener", "UnityGymException", "UnityToGymWrapper"]

logger = logging.getLogger("gym_unity")


class UnityToGymWrapper:
    """Wraps ``unity_env`` (one behavior, one agent) as gym_unity 0.28 did; see
    :class:`~mlagents_envs.envs.gymnasium_env.UnityToGymnasiumEnv` for the options."""

    metadata = {"render.modes": ["rgb_array"]}
    reward_range = (-float("inf"), float("inf"))
    spec = None

    def __init__(self, unity_env: BaseEnv, *options, **named_options):
        """``options``: gym_unity's ``uint8_visual``, ``flatten_branched``,
        ``allow_multiple_obs``, ``action_space_seed``, in that order or by name."""
        self._env = UnityToGymnasiumEnv(unity_env, *options, **named_options)
        self.name = self._env.name
        self.group_spec = self._env.behavior_spec
        self._flattener = self._env._flattener
        self.visual_obs = None

    @property
    def observation_space(self):
        return self._env.observation_space

    @property
    def action_space(self):
        return self._env.action_space

    def reset(self) -> Any:
        """Resets Unity; the agent's first observation."""
        observation, _ = self._env.reset()
        return self._seen(observation)

    def step(self, action) -> Tuple[Any, float, bool, dict]:
        """Acts; ``(observation, reward, done, info)``, ``info["step"]`` Unity's step."""
        observation, reward, terminated, truncated, info = self._env.step(action)
        return self._seen(observation), reward, terminated or truncated, info

    def _seen(self, observation):
        """Keeps the latest image for ``render``."""
        if self._env._visual:
            self.visual_obs = observation[0] if isinstance(observation, list) else observation
        return observation

    def render(self, mode: str = "rgb_array"):
        """The latest image observation (None without one)."""
        return self.visual_obs

    def close(self) -> None:
        """Closes Unity."""
        self._env.close()

    def seed(self, seed: Any = None) -> None:
        """Unity is seeded at launch (``UnityEnvironment(seed=...)``), as in gym_unity."""
        logger.warning("Could not seed environment %s", self.name)

    @property
    def unwrapped(self) -> "UnityToGymWrapper":
        return self
