"""Environment steps per second with random actions, driven by the mlagents_envs client of the
venv that runs it (the real 0.28, or our drop-in from python/), against the same
`mlagents-sim` binary as benches/env_steps.rs.
Usage: python env_steps_python.py PATH/TO/mlagents-sim [SCENE] [STEPS] [PORT]"""
import json
import sys
import time

import numpy as np
import mlagents_envs
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.environment import UnityEnvironment

sim = sys.argv[1]
scene = sys.argv[2] if len(sys.argv) > 2 else "3DBall"
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
port = int(sys.argv[4]) if len(sys.argv) > 4 else 6105
env = UnityEnvironment(file_name=sim, base_port=port, no_graphics=True, additional_args=["--scene", scene])
env.reset()
rng = np.random.default_rng(0)
agent_steps = 0
start = time.perf_counter()
for _ in range(steps):
    for name, spec in env.behavior_specs.items():
        decisions, _ = env.get_steps(name)
        n = len(decisions)
        agent_steps += n
        continuous = rng.uniform(-1, 1, (n, spec.action_spec.continuous_size)).astype(np.float32)
        discrete = np.stack([rng.integers(0, b, n) for b in spec.action_spec.discrete_branches], axis=1) \
            if spec.action_spec.discrete_branches else np.zeros((n, 0), dtype=np.int32)
        env.set_actions(name, ActionTuple(continuous=continuous, discrete=discrete.astype(np.int32)))
    env.step()
seconds = time.perf_counter() - start
env.close()
client = "mlagents_envs drop-in (mlagents-rs)" if getattr(mlagents_envs, "IS_RUST_BACKEND", False) else "mlagents_envs 0.28.0"
print(json.dumps({"client": client, "scene": scene, "steps": steps, "agent_steps": agent_steps,
                  "seconds": round(seconds, 3), "steps_per_second": round(steps / seconds, 1)}))
