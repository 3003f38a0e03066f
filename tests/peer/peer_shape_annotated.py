"""Unity-trained models saved after onnx.shape_inference.infer_shapes (value_info with the
symbolic batch, as onnxsim and newer exporters write): our runner inspects and evaluates each
as it does the original (the same outputs, bit for bit, at batch 1 and 3, or the same refusal
for a model that runs for one agent only), and `check --target ml-agents@3.0.0` gives it the
verdict of the original.

Usage: python peer_shape_annotated.py PATH/TO/mlagents-run MODELS_DIR
Prints one line per model and a final "N passed, N failed" line.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from runner_eval import eval_outputs

ort.set_default_logger_severity(3)


def verdict(runner, path):
    result = subprocess.run([runner, "check", path, "--target", "ml-agents@3.0.0", "--json"], capture_output=True, text=True)
    report = json.loads(result.stdout)
    target = report["targets"][0]
    return target["verdict"], sorted({f["id"] for f in target["findings"] if f["severity"] == "error"})


def main():
    runner, models = sys.argv[1], sys.argv[2]
    passed = failed = 0
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as folder:
        for name in sorted(os.listdir(models)):
            if not name.endswith(".onnx"):
                continue
            original = os.path.join(models, name)
            model = onnx.load(original)
            annotated = onnx.shape_inference.infer_shapes(model)
            path = os.path.join(folder, name)
            onnx.save(annotated, path)
            problems = []
            symbolic = sum(any(d.dim_param for d in v.type.tensor_type.shape.dim) for v in annotated.graph.value_info)
            inspect = subprocess.run([runner, "inspect", path], capture_output=True, text=True)
            if inspect.returncode != 0:
                problems.append(f"inspect: {inspect.stderr.strip()}")
            session = ort.InferenceSession(original, providers=["CPUExecutionProvider"])
            for batch in (1, 3):
                inputs = {}
                for i in session.get_inputs():
                    shape = [batch if not isinstance(d, int) or d <= 0 else d for d in i.shape]
                    inputs[i.name] = np.ones(shape, np.float32) if i.name == "action_masks" else rng.uniform(-1, 1, shape).astype(np.float32)
                want, error = eval_outputs(runner, original, inputs)
                got, error_annotated = eval_outputs(runner, path, inputs)
                if error and error_annotated:
                    # A model that runs for one agent only fails the same way annotated or not.
                    if error.replace(original, "") != error_annotated.replace(path, ""):
                        problems.append(f"batch {batch}: {error_annotated} where the original says {error}")
                elif error or error_annotated:
                    problems.append(f"batch {batch}: {error_annotated or error}")
                elif want != got:
                    problems.append(f"batch {batch}: the outputs differ from the original's")
            before, after = verdict(runner, original), verdict(runner, path)
            if before != after:
                problems.append(f"check --target ml-agents@3.0.0: {after} where the original has {before}")
            ok = not problems
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(annotated.graph.value_info)} value_info ({symbolic} symbolic), verdict {after[0]}"
                  f"{'; ' + '; '.join(problems) if problems else ''}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
