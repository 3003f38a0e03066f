"""A gymnasium ``VectorEnv`` over every agent of one behavior in several Unity players
(:class:`~mlagents_envs.envs.slots.AgentSlots`): one sub-env per (player, agent) slot, the
players stepped together in one call into Rust. Same-step autoreset
(``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``): a slot whose agent's Unity
episode ended is ``terminated`` (or ``truncated`` when Unity interrupted it) with its terminal
observation in ``infos["final_obs"]`` (mask ``infos["_final_obs"]``), and its next episode's
first observation in the returned observations.

Example::

    from gymnasium.wrappers.vector import RecordEpisodeStatistics
    from mlagents_envs.envs.gymnasium_vector_env import UnityVectorEnv
    envs = RecordEpisodeStatistics(UnityVectorEnv("sim:3DBall", num_players=2))   # 24 sub-envs
"""

from typing import Any, Dict, Optional

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from mlagents_envs.envs.slots import AgentSlots


class UnityVectorEnv(VectorEnv):
    """``num_players`` players of ``file_name`` (a build or ``"sim:SCENE"``, free ports, seeds
    ``seed + i``), one sub-env per agent of ``behavior_name`` (the only behavior when None);
    ``options`` are those of :meth:`AgentSlots.launch`."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, file_name: str, num_players: int = 1, **options):
        self.slots = AgentSlots.launch(file_name, num_players, **options)
        self.num_envs = self.slots.num_slots
        self.single_observation_space = self.slots.observation_space
        self.single_action_space = self.slots.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Resets every player (the seeds were given to the players at launch)."""
        super().reset(seed=seed)
        return self.slots.reset(), {}

    def step(self, actions):
        """Acts for every slot and steps until each has its next observation."""
        observations, rewards, terminated, truncated, final = self.slots.step(np.asarray(actions))
        infos: Dict[str, Any] = {}
        for slot, observation in final.items():
            infos = self._add_info(infos, {"final_obs": observation, "final_info": {}}, slot)
        return observations, rewards.astype(np.float64), terminated, truncated, infos

    def close_extras(self, **kwargs) -> None:
        """Closes every player."""
        self.slots.close()
