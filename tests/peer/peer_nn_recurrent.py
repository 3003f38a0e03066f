"""Unity's recurrent .nn policies over sequences: our runner (`mlagents-run eval
--deterministic` on the .nn) against onnxruntime on the same network (the ONNX graph the .nn is
lowered to, written by examples/lower_nn), for RECURRENT_STEPS steps at batch 1 and 3, each
engine feeding its own memory outputs back as the next step's memory inputs (the memories the
.nn declares: `input <- output`). Every deterministic output and every memory must match within
1e-4 at every step.

Usage: python peer_nn_recurrent.py PATH/TO/mlagents-run PATH/TO/lower_nn MODEL.nn...
Prints one line per model and batch and a final "N passed, N failed" line.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort
from runner_eval import eval_outputs

ort.set_default_logger_severity(3)

TOLERANCE = 1e-4
RECURRENT_STEPS = 6


def make_inputs(session, batch, memory_inputs, rng, prev_action_sizes):
    inputs = {}
    for i in session.get_inputs():
        shape = [batch if not isinstance(d, int) or d <= 0 else d for d in i.shape]
        if i.name in memory_inputs or "recurrent" in i.name:
            data = np.zeros(shape, np.float32)
        elif i.name == "action_masks":
            data = np.ones(shape, np.float32)
        elif i.name == "prev_action":
            data = np.stack([rng.integers(0, prev_action_sizes, size=len(prev_action_sizes)) for _ in range(batch)]).reshape(shape).astype(np.float32)
        else:
            data = rng.uniform(0, 1, shape).astype(np.float32)
        inputs[i.name] = data
    return inputs


def run_ours(runner, path, inputs):
    outputs, error = eval_outputs(runner, path, inputs)
    if error:
        return None, error
    return {k: np.asarray(v["data"], dtype=np.float64) for k, v in outputs.items()}, None


def main():
    runner, lower = sys.argv[1], sys.argv[2]
    passed = failed = 0
    rng = np.random.default_rng(11)
    for path in sys.argv[3:]:
        name = os.path.basename(path)
        interface = json.loads(subprocess.run([runner, "inspect", path, "--json"], capture_output=True, text=True, check=True).stdout)
        memories = [(m["input"], m["output"]) for m in interface["memories"]]
        # prev_action is one index per discrete branch: the action_output_shape is their sum,
        # and the OneHot depths are not listed here, so index 0 and 1 only (every branch has >= 2).
        with tempfile.TemporaryDirectory() as folder:
            lowered = os.path.join(folder, "lowered.onnx")
            subprocess.run([lower, path, lowered], check=True)
            session = ort.InferenceSession(lowered, providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            prev = [i for i in session.get_inputs() if i.name == "prev_action"]
            prev_sizes = [2] * (prev[0].shape[-1] if prev else 0)
            for batch in (1, 3):
                carried_ort = carried_ours = None
                worst, problems = 0.0, []
                for step in range(RECURRENT_STEPS):
                    inputs = make_inputs(session, batch, [m[0] for m in memories], rng, prev_sizes)
                    ort_inputs, our_inputs = dict(inputs), dict(inputs)
                    if carried_ort is not None:
                        for (memory_in, _), a, b in zip(memories, carried_ort, carried_ours):
                            shape = inputs[memory_in].shape
                            ort_inputs[memory_in] = a.reshape(shape).astype(np.float32)
                            our_inputs[memory_in] = b.reshape(shape).astype(np.float32)
                    reference = dict(zip(names, session.run(names, ort_inputs)))
                    ours, error = run_ours(runner, path, our_inputs)
                    if error:
                        problems.append(f"step {step}: {error}")
                        break
                    for out, value in reference.items():
                        value = np.asarray(value, dtype=np.float64).ravel()
                        got = ours.get(out)
                        if got is None or got.size != value.size:
                            problems.append(f"step {step}: {out} missing or of another size")
                            continue
                        err = float(np.max(np.abs(got - value))) if value.size else 0.0
                        worst = max(worst, err)
                        if err > TOLERANCE:
                            problems.append(f"step {step}: {out} max abs error {err:.2e}")
                    carried_ort = [np.asarray(reference[o]) for _, o in memories]
                    carried_ours = [ours[o] for _, o in memories]
                    if not any(np.any(m != 0) for m in carried_ours):
                        problems.append(f"step {step}: the memories stayed zero")
                ok = not problems
                passed += ok
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {name} batch {batch}, {RECURRENT_STEPS} steps with memories "
                      f"{[m[0] + ' <- ' + m[1] for m in memories]} carried: max abs error {worst:.2e}"
                      f"{'; ' + '; '.join(problems[:4]) if problems else ''}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
