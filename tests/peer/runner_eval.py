"""Our runner from the peer tests: `mlagents-run eval` on numpy inputs (imported by the peer
scripts beside it)."""
import json
import os
import subprocess
import tempfile


def eval_outputs(runner, path, inputs, deterministic=True):
    """The outputs of `mlagents-run eval` as its JSON gives them ({name: {"shape", "data"}}),
    and None; or None and the error line."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"inputs": {k: {"shape": list(v.shape), "data": v.ravel().tolist()} for k, v in inputs.items()}}, f)
    command = [runner, "eval", path, "--inputs", f.name, "--json"] + (["--deterministic"] if deterministic else [])
    result = subprocess.run(command, capture_output=True, text=True)
    os.unlink(f.name)
    if result.returncode != 0:
        return None, result.stderr.strip()
    return json.loads(result.stdout)["outputs"], None
