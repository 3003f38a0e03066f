"""``UnityEnvRegistry``: environments by name. ``default_registry`` holds mlagents-rs'
stand-in scenes, read from ``mlagents-sim --scene list --json`` on first use (offline; 0.28's
default registry downloads Unity's example builds instead)."""

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Callable, Dict, Iterator, List, Optional

from mlagents_envs.exception import UnityEnvironmentException
from mlagents_envs.registry.base_registry_entry import BaseRegistryEntry
from mlagents_envs.registry.sim_registry_entry import SimRegistryEntry


class UnityEnvRegistry(Mapping):
    """A read-only mapping from names to registry entries, filled by :meth:`register` and,
    on first access, by the loaders given."""

    def __init__(self, loaders: Optional[List[Callable[[], List[BaseRegistryEntry]]]] = None):
        self._entries: Dict[str, BaseRegistryEntry] = {}
        self._loaders = list(loaders or [])

    def register(self, new_entry: BaseRegistryEntry) -> None:
        """Adds (or replaces) an entry."""
        self._entries[new_entry.identifier] = new_entry

    def register_from_yaml(self, path_to_yaml: str) -> None:
        """0.28 registers Unity's remote builds from a YAML manifest; this drop-in does not
        download builds yet."""
        raise UnityEnvironmentException(
            f"register_from_yaml({path_to_yaml!r}): remote Unity builds are not supported by the mlagents-rs "
            "drop-in yet; register entries with register(), or use the stand-in scenes of default_registry"
        )

    def clear(self) -> None:
        """Forgets every entry (and the loaders not run yet)."""
        self._entries = {}
        self._loaders = []

    def _load(self) -> None:
        while self._loaders:
            for entry in self._loaders.pop(0)():
                self._entries.setdefault(entry.identifier, entry)

    def __getitem__(self, identifier: str) -> BaseRegistryEntry:
        self._load()
        if identifier not in self._entries:
            raise KeyError(f"The entry {identifier} is not present in the registry.")
        return self._entries[identifier]

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        self._load()
        yield from list(self._entries)


def stand_in_scenes() -> List[BaseRegistryEntry]:
    """One entry per scene ``mlagents-sim --scene list --json`` prints (none when the binary
    is not found through MLAGENTS_SIM or PATH)."""
    sim = os.environ.get("MLAGENTS_SIM") or shutil.which("mlagents-sim")
    if sim is None:
        return []
    listing = subprocess.run([sim, "--scene", "list", "--json"], capture_output=True, text=True, check=True).stdout
    return [SimRegistryEntry(scene["name"], scene.get("description")) for scene in json.loads(listing)]


default_registry = UnityEnvRegistry([stand_in_scenes])
