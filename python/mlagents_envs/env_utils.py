"""Finding a Unity player build from the name a user gives (0.28's rules)."""

import glob
import logging
import os
from sys import platform
from typing import Optional

logger = logging.getLogger("mlagents_envs")


def get_platform():
    """The platform name (``sys.platform``)."""
    return platform


def validate_environment_path(env_path: str) -> Optional[str]:
    """The executable ``env_path`` names, or None: the name without .app/.exe/.x86_64/.x86,
    then ``<name>.x86_64``/``.x86`` in the working folder and beside the name, then the path
    itself (macOS: the app bundle's binary; Windows: ``<name>.exe``)."""
    env_path = env_path.strip().replace(".app", "").replace(".exe", "").replace(".x86_64", "").replace(".x86", "")
    true_filename = os.path.basename(os.path.normpath(env_path))
    candidates = []
    if platform in ("linux", "linux2"):
        cwd = os.getcwd()
        candidates += glob.glob(os.path.join(cwd, env_path) + ".x86_64")
        candidates += glob.glob(os.path.join(cwd, env_path) + ".x86")
        candidates += glob.glob(env_path + ".x86_64")
        candidates += glob.glob(env_path + ".x86")
        candidates += glob.glob(env_path)
    elif platform == "darwin":
        app = env_path + ".app"
        candidates += glob.glob(os.path.join(os.getcwd(), app, "Contents", "MacOS", true_filename))
        candidates += glob.glob(os.path.join(app, "Contents", "MacOS", true_filename))
        candidates += glob.glob(os.path.join(app, "Contents", "MacOS", "*"))
    elif platform == "win32":
        candidates += glob.glob(os.path.join(os.getcwd(), env_path + ".exe"))
        candidates += glob.glob(env_path + ".exe")
    return next((c for c in candidates if os.path.isfile(c)), None)
