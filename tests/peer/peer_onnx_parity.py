"""ONNX parity: our runner (`mlagents-run eval --deterministic`, tract) against onnxruntime
from PyPI on every model of ../shared/models/onnx, on fixed inputs at batch 1, 3 and 12 (the
runner takes its own matrix kernels from 4 rows up).
Entity (rank-3 `obs_i` `[batch, K, E]`) inputs hold a random number of real entities (0 to K)
and zero padding, laid out as the file expects: Barracuda's transposed view (0.28's
Transpose(0,2,1) in front, or `mlagents.entity_layout: barracuda` in the metadata) or natural.
Outputs that onnxruntime samples (they differ across 8 runs) are not compared; what they are
sampled from is: the input of every Multinomial (log-probabilities) and RandomNormalLike (the
mean) becomes one more graph output of a copy of the model that both engines run. Every output
compared must match within 1e-4. A recurrent model (`recurrent_in` in, `recurrent_out` out) runs
a sequence of steps, each engine feeding its own `recurrent_out` back as the next
`recurrent_in`, compared at every step.

Usage: python peer_onnx_parity.py PATH/TO/mlagents-run MODELS_DIR
Prints one line per model and batch and a final "N passed, N failed" line.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from runner_eval import eval_outputs

ort.set_default_logger_severity(3)

TOLERANCE = 1e-4


def entity_layout(path, session, name):
    """'barracuda' or 'natural': as recorded in the metadata, else as the graph reads the input."""
    recorded = session.get_modelmeta().custom_metadata_map.get("mlagents.entity_layout")
    if recorded:
        return recorded
    graph = onnx.load(path).graph
    readers = [n for n in graph.node if name in n.input]
    reshaped = {n.input[0] for n in graph.node if n.op_type == "Reshape"}
    swapped = all(n.op_type == "Transpose" and [a.ints for a in n.attribute if a.name == "perm"] == [[0, 2, 1]] and n.output[0] in reshaped for n in readers)
    return "barracuda" if readers and swapped else "natural"


def entities(batch, k, e, layout, rng):
    """A batch of entity buffers: row r holds a random number of real entities then zeros."""
    natural = np.zeros((batch, k, e), np.float32)
    for r in range(batch):
        real = int(rng.integers(0, k + 1))
        natural[r, :real] = rng.uniform(-1, 1, (real, e))
    if layout == "natural":
        return natural
    # Barracuda's view: [k, e] holds flat index e*K + k of the agent's entity-major buffer.
    return np.stack([row.reshape(-1).reshape(e, k).T for row in natural]).astype(np.float32)


def make_inputs(session, batch, rng, path):
    inputs = {}
    for i in session.get_inputs():
        shape = [batch if not isinstance(d, int) or d <= 0 else d for d in i.shape]
        if i.name.startswith("obs_") and len(shape) == 3:
            data = entities(batch, shape[1], shape[2], entity_layout(path, session, i.name), rng)
        elif i.name == "action_masks":
            data = np.ones(shape, np.float32)
        elif "recurrent" in i.name or "memories" in i.name:
            data = np.zeros(shape, np.float32)
        else:
            data = rng.uniform(-1, 1, shape).astype(np.float32)
        inputs[i.name] = data
    return inputs


RECURRENT_STEPS = 6
SAMPLERS = ("Multinomial", "RandomNormalLike")


def with_sampler_inputs(path, folder):
    """A copy of the model whose samplers' inputs are graph outputs too (or the model itself
    when it samples nothing)."""
    model = onnx.load(path)
    declared = {o.name for o in model.graph.output}
    extra = [n.input[0] for n in model.graph.node if n.op_type in SAMPLERS and n.input[0] not in declared]
    if not extra:
        return path
    for name in dict.fromkeys(extra):
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
        model.graph.output[-1].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    copy = os.path.join(folder, os.path.basename(path))
    onnx.save(model, copy)
    return copy


def run_ours(runner, path, inputs):
    """Our runner's outputs as numpy arrays, or an error line."""
    outputs, error = eval_outputs(runner, path, inputs)
    if error:
        return None, error
    return {k: np.asarray(v["data"], dtype=np.float64).reshape(v["shape"]) for k, v in outputs.items()}, None


def compare(names, runs, ours):
    """(compared, skipped, worst error, problems) of one step."""
    compared, skipped, worst, problems = [], [], 0.0, []
    for k, out in enumerate(names):
        reference = np.asarray(runs[0][k], dtype=np.float64)
        if any(not np.array_equal(runs[0][k], r[k]) for r in runs[1:]):
            skipped.append(out)
            continue
        got = ours[out]
        if got.shape != reference.shape:
            problems.append(f"{out}: shape {got.shape} vs {reference.shape}")
            continue
        err = float(np.max(np.abs(got - reference))) if reference.size else 0.0
        worst = max(worst, err)
        compared.append(out)
        if err > TOLERANCE:
            problems.append(f"{out}: max abs error {err:.2e}")
    return compared, skipped, worst, problems


def main():
    runner, models = sys.argv[1], sys.argv[2]
    passed = failed = 0
    rng = np.random.default_rng(7)
    folder = tempfile.mkdtemp()
    for name in sorted(os.listdir(models)):
        if not name.endswith(".onnx"):
            continue
        original = os.path.join(models, name)
        path = with_sampler_inputs(original, folder)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        recurrent = "recurrent_in" in [i.name for i in session.get_inputs()] and "recurrent_out" in names
        batches = [1] if "obsolete_recurr" in name else [1, 3, 12]  # its initial state is batch-1 only
        for batch in batches:
            memory_ort = memory_ours = None
            compared, skipped, worst, problems = set(), set(), 0.0, []
            for step in range(RECURRENT_STEPS if recurrent else 1):
                inputs = make_inputs(session, batch, rng, original)
                ort_inputs, our_inputs = dict(inputs), dict(inputs)
                if memory_ort is not None:
                    shape = inputs["recurrent_in"].shape
                    ort_inputs["recurrent_in"] = memory_ort.reshape(shape).astype(np.float32)
                    our_inputs["recurrent_in"] = memory_ours.reshape(shape).astype(np.float32)
                runs = [session.run(names, ort_inputs) for _ in range(8)]
                ours, error = run_ours(runner, path, our_inputs)
                if error:
                    problems.append(f"step {step}: {error}")
                    break
                c, s, w, p = compare(names, runs, ours)
                compared.update(c)
                skipped.update(s)
                worst = max(worst, w)
                problems.extend(f"step {step}: {x}" for x in p)
                if recurrent:
                    memory_ort = np.asarray(runs[0][names.index("recurrent_out")])
                    memory_ours = ours["recurrent_out"]
            ok = not problems and compared
            passed += bool(ok)
            failed += not ok
            steps = f", {RECURRENT_STEPS} steps with memory carried" if recurrent else ""
            print(f"{'ok  ' if ok else 'FAIL'} {name} batch {batch}{steps}: {len(compared)} outputs compared, max abs error "
                  f"{worst:.2e}; sampled, not compared: {sorted(skipped)}{'; ' + '; '.join(problems) if problems else ''}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
