"""`mlagents-export convert` on every Unity-trained .nn: onnxruntime runs the converted ONNX on
the inputs of the parity record the conversion wrote, and its deterministic outputs must equal
what our runner computed on the .nn (the record's outputs): continuous actions and memories
within 1e-5, discrete choices equal. The converted files must also pass onnx.checker (full
check), declare opset_import domain "", integer discrete outputs and NCHW images.

Usage: python peer_convert.py PATH/TO/mlagents-export NN_DIR
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

ort.set_default_logger_severity(3)

TOLERANCE = 1e-5


def feeds(session, record):
    n = record["batch"]
    policy = record["policy"]
    feed = {}
    declared = {i.name: i for i in session.get_inputs()}
    for k, (shape, data) in enumerate(zip(policy["observation_shapes"], record["observations"])):
        x = np.asarray(data, np.float32).reshape([n] + shape)
        if len(shape) == 3:
            x = x.transpose(0, 3, 1, 2)  # the environment's HWC -> the model's NCHW
        feed[f"obs_{k}"] = x
    if "action_masks" in declared:
        feed["action_masks"] = np.asarray(record["action_masks"], np.float32).reshape(n, -1)
    if "recurrent_in" in declared:
        feed["recurrent_in"] = np.asarray(record["recurrent_in"], np.float32).reshape(n, 1, -1)
    if "prev_action" in declared:
        # The record's agents have taken no action yet: Unity feeds zeros.
        feed["prev_action"] = np.zeros([n, declared["prev_action"].shape[1]], np.float32)
    missing = set(declared) - set(feed)
    if missing:
        raise AssertionError(f"the converted model declares inputs the record does not feed: {sorted(missing)}")
    return feed


def check_structure(model):
    onnx.checker.check_model(model, full_check=True)
    domains = [o.domain for o in model.opset_import]
    assert "" in domains, f"opset_import domains {domains}: no default domain \"\""
    outputs = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
    for name in ("discrete_actions", "deterministic_discrete_actions"):
        if name in outputs:
            assert outputs[name] == onnx.TensorProto.INT64, f"{name} is of element type {outputs[name]}, not int64"
    for i in model.graph.input:
        dims = i.type.tensor_type.shape.dim
        if i.name.startswith("obs_") and len(dims) == 4:
            assert dims[1].dim_value in (1, 3, 4) or dims[1].dim_value < dims[2].dim_value, f"{i.name} does not look NCHW: {dims}"


def compare(name, got, expected, n, discrete=False):
    got = np.asarray(got).reshape(n, -1)
    expected = np.asarray(expected).reshape(n, -1)
    if discrete:
        rows = int((got != expected).any(axis=1).sum())
        return rows == 0, f"{name} {rows} rows differ"
    err = float(np.abs(got.astype(np.float64) - expected).max())
    return err <= TOLERANCE, f"{name} {err:.1e}"


def main():
    exporter, nn_dir = sys.argv[1], sys.argv[2]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for file in sorted(f for f in os.listdir(nn_dir) if f.endswith(".nn")):
            out = os.path.join(tmp, file[:-3] + ".onnx")
            result = subprocess.run([exporter, "convert", os.path.join(nn_dir, file), out], capture_output=True, text=True)
            if result.returncode != 0:
                print(f"FAIL {file}: convert failed: {result.stderr.strip()}")
                failed += 1
                continue
            try:
                model = onnx.load(out)
                check_structure(model)
                with open(out[:-5] + ".parity.json") as f:
                    record = json.load(f)
                session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
                names = [o.name for o in session.get_outputs()]
                got = dict(zip(names, session.run(None, feeds(session, record))))
                n = record["batch"]
                checks = []
                if "deterministic_continuous_actions" in got:
                    checks.append(compare("deterministic_continuous_actions", got["deterministic_continuous_actions"], record["deterministic_continuous_actions"], n))
                if "deterministic_discrete_actions" in got:
                    checks.append(compare("deterministic_discrete_actions", got["deterministic_discrete_actions"], record["deterministic_discrete_actions"], n, discrete=True))
                if "recurrent_out" in got:
                    checks.append(compare("recurrent_out", got["recurrent_out"], record["recurrent_out"], n))
                assert checks, f"no deterministic output among {names}"
                ok = all(c[0] for c in checks)
                print(f"{'ok  ' if ok else 'FAIL'} {file}: {n} rows, " + ", ".join(c[1] for c in checks))
                passed += ok
                failed += not ok
            except Exception as e:  # report every model, then fail
                print(f"FAIL {file}: {type(e).__name__}: {e}")
                failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
