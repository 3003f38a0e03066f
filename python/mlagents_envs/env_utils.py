"""Finding a Unity player build from the name a user gives (0.28's rules, as the Rust client
applies them when it launches a player)."""

from sys import platform
from typing import Optional

from mlagents_envs import _native


def get_platform():
    """The platform name (``sys.platform``)."""
    return platform


def validate_environment_path(env_path: str) -> Optional[str]:
    """The executable ``env_path`` names, or None: the name without .app/.exe/.x86_64/.x86 as
    ``<name>.x86_64``/``.x86`` in the working folder and beside the name, then the path itself."""
    path = _native.resolve_executable(env_path.strip())
    return None if path is None else str(path)
