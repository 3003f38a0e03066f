"""`mlagents-export convert` on every Unity-trained .nn: onnxruntime runs the converted ONNX on
the inputs of the parity record the conversion wrote, and its deterministic outputs must equal
what our runner computed on the .nn (the record's outputs): continuous actions and memories
within 1e-5, discrete choices equal. Float32 sums differ by CPU and engine: where a network's
large pre-activations put onnxruntime itself further than 5e-6 from a float64 evaluation of
the same graph (onnx.reference), an error up to twice that distance is float32 rounding and
passes; both figures are printed. The converted files must also pass onnx.checker (full
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
import onnx.utils
import onnxruntime as ort
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

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


def float64_outputs(model, feed, names):
    """The graph evaluated in float64 (numpy, onnx.reference) on the same inputs."""
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    converted = []
    for t in wide.graph.initializer:
        a = numpy_helper.to_array(t)
        converted.append(numpy_helper.from_array(a.astype(np.float64) if a.dtype == np.float32 else a, t.name))
    del wide.graph.initializer[:]
    wide.graph.initializer.extend(converted)
    for i in wide.graph.input:
        i.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    del wide.graph.output[:]
    wide.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    # Only the nodes the outputs need (the sampling ops have no float64 reference).
    wide = onnx.utils.Extractor(wide).extract_model(list(feed), names)
    values = ReferenceEvaluator(wide).run(names, {k: v.astype(np.float64) for k, v in feed.items()})
    return dict(zip(names, values))


def compare(name, got, expected, n, exact=None):
    """(passed, text). `exact`: the float64 evaluation, consulted above TOLERANCE."""
    got = np.asarray(got).reshape(n, -1)
    expected = np.asarray(expected).reshape(n, -1)
    if got.dtype.kind == "i":
        rows = int((got != expected).any(axis=1).sum())
        return rows == 0, f"{name} {rows} rows differ"
    err = float(np.abs(got.astype(np.float64) - expected).max())
    if err <= TOLERANCE or exact is None:
        return err <= TOLERANCE, f"{name} {err:.1e}"
    floor = float(np.abs(got.astype(np.float64) - np.asarray(exact(name)).reshape(n, -1)).max())
    ok = floor > TOLERANCE / 2 and err <= 2 * floor
    return ok, f"{name} {err:.1e} (onnxruntime vs float64: {floor:.1e})"


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
                feed = feeds(session, record)
                got = dict(zip(names, session.run(None, feed)))
                n = record["batch"]
                exact = lambda name: float64_outputs(model, feed, [name])[name]
                checks = [
                    compare(name, got[name], record[name], n, exact)
                    for name in ("deterministic_continuous_actions", "deterministic_discrete_actions", "recurrent_out")
                    if name in got
                ]
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
