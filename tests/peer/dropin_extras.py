"""What the mlagents_envs drop-in does beyond 0.28 (run in the drop-in's venv):

- `base_port=0`: two environments at once, each on a free port the system picked;
- `file_name="sim:SCENE"`: a stand-in scene found through MLAGENTS_SIM;
- the GIL is released while waiting for Unity: another Python thread keeps counting while
  one waits for a player that stopped answering (counted, not timed);
- `close()` twice does nothing, and a closed environment refuses `step()` with 0.28's
  `UnityEnvironmentException`;
- a discrete action outside its branch is refused with `UnityActionException`;
- `import mlagents_envs` pulls in neither protobuf nor grpc;
- `registry.default_registry` lists the stand-in scenes offline and makes them.

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_extras.py
"""
import os
import sys
import threading

import numpy as np
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import UnityActionException, UnityEnvironmentException, UnityTimeOutException
from report import check, finish



check(not any(name.startswith(("google.protobuf", "grpc")) for name in sys.modules),
      "importing mlagents_envs loads neither protobuf nor grpc")

first = UnityEnvironment("sim:3DBall", base_port=0, no_graphics=True)
second = UnityEnvironment("sim:GridWorldVector", base_port=0, no_graphics=True)
check(first._port != 0 and second._port != 0 and first._port != second._port,
      f"base_port=0: two environments on free ports {first._port} and {second._port}")

# While one thread waits for a player that stopped answering (the stand-in's hang fault),
# another thread counts: with the GIL held during the wait it could not count at all.
hanging = UnityEnvironment("sim:3DBall", base_port=0, no_graphics=True, timeout_wait=2,
                           additional_args=["--fault", "hang@2"])
counted = [0]
waiting = threading.Event()


def count():
    while not waiting.is_set():
        pass
    while waiting.is_set():
        counted[0] += 1


counter = threading.Thread(target=count)
counter.start()
hanging.reset()
before = counted[0]
waiting.set()
try:
    hanging.step()
except UnityTimeOutException:
    pass
during = counted[0] - before
waiting.clear()
counter.join()
hanging.close()
check(during > 100000, f"the GIL is released while waiting for Unity ({during} counts by another thread during a 2 s wait)")

from mlagents_envs import env_utils  # noqa: E402
from mlagents_envs import _native  # noqa: E402

try:
    _native.step_all([first._native, first._native], [b"", b""])
    check(False, "stepping one environment twice in one call is refused")
except _native.NativeError as error:
    check("given twice" in str(error), f"stepping one environment twice in one call is refused: {error.args[1]}")
check(env_utils.validate_environment_path(os.environ["MLAGENTS_SIM"]) == os.environ["MLAGENTS_SIM"]
      and env_utils.validate_environment_path("/nonexistent/Build") is None,
      "env_utils.validate_environment_path finds a build by its path and nothing for a missing one")

second.reset()
name = next(iter(second.behavior_specs))
decisions, _ = second.get_steps(name)
try:
    second.set_actions(name, ActionTuple(discrete=np.full((len(decisions), 1), 7, dtype=np.int32)))
    second.step()
    check(False, "a discrete action outside its branch is refused")
except UnityActionException as error:
    check("outside" in str(error), f"a discrete action outside its branch is refused: {error}")

first.close()
first.close()
check(True, "close() twice does nothing")
try:
    first.step()
    check(False, "a closed environment refuses step()")
except UnityEnvironmentException:
    check(True, "a closed environment refuses step() with UnityEnvironmentException")
second.close()

from mlagents_envs.registry import SimRegistryEntry, UnityEnvRegistry, default_registry  # noqa: E402

scenes = list(default_registry)
ball = default_registry["3DBall"].make(base_port=0, no_graphics=True)
ball.reset()
agents = len(ball.get_steps(next(iter(ball.behavior_specs)))[0])
ball.close()
check(len(scenes) >= 30 and "GridWorld" in default_registry and agents == 12,
      f"default_registry lists {len(scenes)} stand-in scenes offline; its 3DBall makes an environment of {agents} agents")
mine = UnityEnvRegistry()
mine.register(SimRegistryEntry("Basic", "one agent"))
check(list(mine) == ["Basic"] and mine["Basic"].description == "one agent", "a registry of one registered entry")
mine.clear()
try:
    mine["Basic"]
    check(False, "a cleared registry forgets its entries")
except KeyError:
    check(True, "a cleared registry forgets its entries")

finish()
