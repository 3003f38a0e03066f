"""Environment registries (``default_registry``: mlagents-rs' stand-in scenes)."""

from mlagents_envs.registry.unity_env_registry import UnityEnvRegistry, default_registry  # noqa: F401
from mlagents_envs.registry.base_registry_entry import BaseRegistryEntry  # noqa: F401
from mlagents_envs.registry.sim_registry_entry import SimRegistryEntry  # noqa: F401
