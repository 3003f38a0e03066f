"""A Stable-Baselines3 ``VecEnv`` over every agent of one behavior in several Unity players
(:class:`~mlagents_envs.envs.slots.AgentSlots`): one SB3 env per (player, agent) slot, the
players stepped together in one call into Rust. SB3's same-step autoreset: an agent whose
Unity episode ended is ``done`` with ``info["terminal_observation"]`` and
``info["TimeLimit.truncated"]`` (Unity interrupted it), and its next episode's first
observation in ``obs``. Needs ``stable-baselines3`` (2.x).

Example::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from mlagents_envs.envs.sb3_vec_env import UnityVecEnv
    env = VecMonitor(UnityVecEnv("sim:3DBall", num_players=2))   # 24 SB3 envs
    PPO("MlpPolicy", env).learn(100_000)
"""

from typing import Any, List, Optional, Sequence

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from mlagents_envs.envs.slots import AgentSlots


class UnityVecEnv(VecEnv):
    """``num_players`` players of ``file_name`` (a build or ``"sim:SCENE"``, free ports, seeds
    ``seed + i``), one SB3 env per agent of ``behavior_name`` (the only behavior when None);
    ``options`` are those of :meth:`AgentSlots.launch`."""

    def __init__(self, file_name: str, num_players: int = 1, **options):
        self.slots = AgentSlots.launch(file_name, num_players, **options)
        self.render_mode = None
        self._actions: Optional[np.ndarray] = None
        super().__init__(self.slots.num_slots, self.slots.observation_space, self.slots.action_space)

    def reset(self):
        """Resets every player; the first observation of every slot."""
        return self.slots.reset()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, terminated, truncated, final = self.slots.step(self._actions)
        infos: List[dict] = [{} for _ in range(self.num_envs)]
        for slot, observation in final.items():
            infos[slot]["terminal_observation"] = observation
            infos[slot]["TimeLimit.truncated"] = bool(truncated[slot])
        return observations, rewards, terminated | truncated, infos

    def close(self) -> None:
        self.slots.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> List[Any]:
        """The attribute of this env (its slots share it) once per index."""
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets the attribute on this env (its slots share it)."""
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> List[Any]:
        """Calls the method of this env once per index (its slots share it)."""
        method = getattr(self, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> Sequence[bool]:
        """The slots are not gymnasium envs: never wrapped."""
        return [False for _ in self._get_indices(indices)]
