"""An entry of an environment registry: a name, the reward a trained policy reaches, a
description, and how to make the environment."""

from abc import ABC, abstractmethod
from typing import Any, Optional

from mlagents_envs.base_env import BaseEnv


class BaseRegistryEntry(ABC):
    """One environment a registry can make."""

    def __init__(self, identifier: str, expected_reward: Optional[float], description: Optional[str]):
        self._identifier = identifier
        self._expected_reward = expected_reward
        self._description = description

    @property
    def identifier(self) -> str:
        """The name the registry knows the environment by."""
        return self._identifier

    @property
    def expected_reward(self) -> Optional[float]:
        """The mean reward a trained policy reaches, when known."""
        return self._expected_reward

    @property
    def description(self) -> Optional[str]:
        """What the environment is."""
        return self._description

    @abstractmethod
    def make(self, **kwargs: Any) -> BaseEnv:
        """Starts the environment; ``kwargs`` go to ``UnityEnvironment``."""
