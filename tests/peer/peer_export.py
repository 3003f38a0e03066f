"""Our ONNX exports against the reference tools: each file written by
examples/export_random.rs passes onnx.checker (full check) and has the ML-Agents v3 interface
(names, dtypes); then peer_onnx_parity.py compares our runner with onnxruntime on them.
Usage: python peer_export.py PATH/TO/export_random PATH/TO/mlagents-run"""
import os
import subprocess
import sys
import tempfile

import onnx

passed = failed = 0
with tempfile.TemporaryDirectory() as folder:
    subprocess.run([sys.argv[1], folder], check=True)
    for name in sorted(os.listdir(folder)):
        model = onnx.load(os.path.join(folder, name))
        problems = []
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # noqa: BLE001
            problems.append(f"onnx.checker: {e}")
        outputs = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
        if outputs.get("version_number") != onnx.TensorProto.FLOAT or outputs.get("memory_size") != onnx.TensorProto.FLOAT:
            problems.append(f"constants: {outputs}")
        for o in ("discrete_actions", "deterministic_discrete_actions"):
            if o in outputs and outputs[o] != onnx.TensorProto.INT64:
                problems.append(f"{o} is not int64")
        if model.opset_import[0].version != 9:
            problems.append(f"opset {model.opset_import[0].version}")
        ok = not problems
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: opset 9, outputs {sorted(outputs)}{'; ' + '; '.join(problems) if problems else ''}")
    parity = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "peer_onnx_parity.py"), sys.argv[2], folder])
    passed += parity.returncode == 0
    failed += parity.returncode != 0
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
