"""A registry entry for one of mlagents-rs' stand-in scenes (``mlagents-sim``)."""

from typing import Any, Optional

from mlagents_envs.base_env import BaseEnv
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.registry.base_registry_entry import BaseRegistryEntry


class SimRegistryEntry(BaseRegistryEntry):
    """Makes ``UnityEnvironment("sim:SCENE", **kwargs)`` (mlagents-sim found through
    MLAGENTS_SIM or PATH)."""

    def __init__(self, scene: str, description: Optional[str] = None, expected_reward: Optional[float] = None):
        super().__init__(scene, expected_reward, description)

    def make(self, **kwargs: Any) -> BaseEnv:
        kwargs.pop("file_name", None)
        return UnityEnvironment(f"sim:{self.identifier}", **kwargs)
