"""Peer test: `.demo` files recorded by `mlagents-run --record-demo` are read by the real
ML-Agents 0.28 loader (`mlagents.trainers.demo_loader`, the one GAIL and behavioral cloning
use) as Unity's own recordings are (reward-signals.md §7):

- continuous (3DBall.onnx on sim:3DBall), discrete (Basic.nn on sim:Basic) and visual with
  action masks (GridWorld.nn on sim:GridWorld);
- 0.28 finds the behavior spec, every record (rows = records - 1) and every episode end that
  `mlagents-run inspect` reports;
- actions follow Unity's convention (each record holds the action that led into it): on 3DBall,
  where an action tilts the platform by a fixed amount, the tilt's change after a record's
  observation follows the *next* record's action exactly, and 0.28's own pairing (the record's
  action) does not.

Usage: peer_demo.py MLAGENTS_RUN MODELS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
from mlagents.trainers.buffer import BufferKey, ObservationKeyPrefix  # noqa: E402
from mlagents.trainers.demo_loader import demo_to_buffer, load_demonstration  # noqa: E402

RUN, MODELS = sys.argv[1], sys.argv[2]
CASES = [
    ("onnx/3DBall.onnx", "3DBall", 2, [(8,)], (2, ())),
    ("nn/Basic.nn", "Basic", 6, [(20,)], (0, (3,))),
    ("nn/GridWorld.nn", "GridWorld", 6, [(64, 84, 3)], (0, (5,))),
]


def record(model, scene, episodes, out):
    subprocess.run([RUN, os.path.join(MODELS, model), "--env", f"sim:{scene}", "--episodes", str(episodes), "--deterministic", "--record-demo", out], check=True, stdout=subprocess.DEVNULL)
    report = subprocess.run([RUN, "inspect", out, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(report)


failures = []
with tempfile.TemporaryDirectory() as folder:
    for model, scene, episodes, shapes, (continuous, branches) in CASES:
        path = os.path.join(folder, f"{scene}.demo")
        ours = record(model, scene, episodes, path)
        spec, infos, total = load_demonstration(path)
        _, buffer = demo_to_buffer(path, 1, spec)
        found = {
            "shapes": [tuple(o.shape) for o in spec.observation_specs],
            "actions": (spec.action_spec.continuous_size, tuple(spec.action_spec.discrete_branches)),
            "records": total,
            "rows": buffer.num_experiences,
            "dones": int(np.array(buffer[BufferKey.DONE]).sum()),
        }
        expected = {"shapes": shapes, "actions": (continuous, branches), "records": ours["records"], "rows": ours["records"] - 1, "dones": ours["episodes"]}
        status = "ok" if found == expected else "MISMATCH"
        print(f"{scene}: 0.28 reads {found}; ours {expected}: {status}")
        if found != expected:
            failures.append(scene)
        if scene == "3DBall":
            o = np.array(buffer[(ObservationKeyPrefix.OBSERVATION, 0)])
            a = np.array(buffer[BufferKey.CONTINUOUS_ACTION])
            d = np.array(buffer[BufferKey.DONE])
            # Transitions inside an episode: rows k and k + 1 are decisions (not terminal records).
            rows = [k for k in range(1, len(o) - 2) if not (d[k - 1] or d[k] or d[k + 1])]
            change = o[[k + 1 for k in rows]][:, :2] - o[rows][:, :2]
            taken = min(np.corrcoef(change[:, i], a[[k + 1 for k in rows]][:, i])[0, 1] for i in range(2))
            stored = max(np.corrcoef(change[:, i], a[rows][:, i])[0, 1] for i in range(2))
            print(f"3DBall: tilt change against the next record's action r = {taken:.5f}, against the record's own r = {stored:.3f}")
            if not (taken > 0.99 and stored < 0.9):
                failures.append("3DBall action convention")

if failures:
    print("FAILED:", failures)
    sys.exit(1)
print("every recording reads in 0.28 as Unity's do")
