"""The golden exports (models/golden/<case>/run) against the reference tools: each .onnx
passes onnx.checker (full check), its sha256 is the one the parity record lists, and
onnxruntime reproduces the training network's recorded outputs within 1e-5: deterministic
actions as they are, continuous actions sampled with the recorded noise (the
RandomNormalLike node replaced by an input carrying that noise), and discrete actions sampled
with the recorded uniform draws from the probabilities onnxruntime computes. A recurrent
case's rows are one agent's consecutive decisions: each row runs from its recorded memory
(`recurrent_out` compared too), and the rows run again in order as a sequence, onnxruntime
feeding its own `recurrent_out` back as the next `recurrent_in` (zeros where the record starts
an episode), every step compared with the training network's outputs. Entity observations
(rank 2) are recorded as the environment sends them and fed in the layout the file records
(`mlagents.entity_layout`: Barracuda's transposed view, or natural).
Usage: python peer_golden.py PATH/TO/models/golden"""
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-5


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def with_noise_input(model):
    """The model with its Gaussian noise taken from an input named parity_noise."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for node in model.graph.node:
        if node.op_type == "RandomNormalLike":
            node.op_type = "Identity"
            del node.input[:]
            node.input.append("parity_noise")
            del node.attribute[:]
    model.graph.input.append(onnx.helper.make_tensor_value_info("parity_noise", onnx.TensorProto.FLOAT, ["batch", None]))
    return model


def with_branch_log_probs(model):
    """The model with each Multinomial's input (a branch's log-probabilities) as an output."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    names = [node.input[0] for node in model.graph.node if node.op_type == "Multinomial"]
    for name in names:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return model, names


def inverse_cdf(p, u):
    """The class u picks: the number of cumulative probabilities below u, at most the last."""
    p = p / p.sum()
    return min(int((np.cumsum(p, dtype=np.float32) < u).sum()), len(p) - 1)


def carried_sequence(model, feeds, record, recorded_in, recorded_out):
    """Errors of the rows run in order with onnxruntime's own memory carried."""
    n, m = recorded_in.shape
    run = session(model)
    names = [o.name for o in model.graph.output]
    memory = recorded_in[0]
    worst_memory = worst_action = 0.0
    for r in range(n):
        if r > 0 and not recorded_in[r].any():
            memory = recorded_in[r]
        row = {k: v[r:r + 1] for k, v in feeds.items() if k != "recurrent_in"}
        row["recurrent_in"] = memory.reshape(1, 1, m)
        out = dict(zip(names, run.run(None, row)))
        memory = out["recurrent_out"].reshape(m)
        worst_memory = max(worst_memory, float(np.abs(memory - recorded_out[r]).max()))
        for key in ("deterministic_continuous_actions", "deterministic_discrete_actions"):
            if key in out:
                expected = np.asarray(record[key], np.float64).reshape(n, -1)[r]
                worst_action = max(worst_action, float(np.abs(out[key].reshape(-1) - expected).max()))
    return {"recurrent_out (memory carried)": worst_memory, "deterministic actions (memory carried)": worst_action}


def main(root):
    passed = failed = 0
    for case in sorted(os.listdir(root)):
        run = os.path.join(root, case, "run")
        for name in sorted(os.listdir(run)):
            if not name.endswith(".onnx"):
                continue
            behavior = name[: -len(".onnx")]
            path = os.path.join(run, name)
            record = json.load(open(os.path.join(run, behavior + ".parity.json")))
            problems = []
            model = onnx.load(path)
            try:
                onnx.checker.check_model(model, full_check=True)
            except Exception as e:  # noqa: BLE001
                problems.append(f"onnx.checker: {e}")
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            if record["files"].get(name) != digest:
                problems.append("sha256 differs from the parity record")
            n = record["batch"]
            feeds = {}
            layout = {p.key: p.value for p in model.metadata_props}.get("mlagents.entity_layout")
            for i, (obs, shape) in enumerate(zip(record["observations"], record["policy"]["observation_shapes"])):
                values = np.asarray(obs, np.float32).reshape(n, *shape)
                # Images are recorded as the environment sends them (HWC); ONNX takes NCHW.
                if len(shape) == 3:
                    values = values.transpose(0, 3, 1, 2)
                elif len(shape) == 2 and layout != "natural":
                    # Barracuda's view of [K, E]: [k, e] holds flat index e*K + k.
                    values = np.stack([row.reshape(-1).reshape(shape[1], shape[0]).T for row in values])
                feeds[f"obs_{i}"] = np.ascontiguousarray(values, np.float32)
            spec = record["policy"]["action_spec"]
            c, branches = spec["continuous_size"], spec["discrete_branches"]
            if branches:
                feeds["action_masks"] = np.asarray(record["action_masks"], np.float32).reshape(n, -1)
            m = record["policy"]["memory_size"]
            recorded_in = np.asarray(record.get("recurrent_in", []), np.float32).reshape(n, m) if m else None
            if m:
                feeds["recurrent_in"] = recorded_in.reshape(n, 1, m)
            out = dict(zip([o.name for o in model.graph.output], session(model).run(None, feeds)))
            errors = {}
            if m:
                recorded_out = np.asarray(record["recurrent_out"], np.float32).reshape(n, m)
                errors["recurrent_out"] = float(np.abs(out["recurrent_out"].reshape(n, m) - recorded_out).max())
                errors.update(carried_sequence(model, feeds, record, recorded_in, recorded_out))
            if c:
                errors["deterministic_continuous_actions"] = float(np.abs(out["deterministic_continuous_actions"] - np.asarray(record["deterministic_continuous_actions"]).reshape(n, c)).max())
                noisy = session(with_noise_input(model)).run(["continuous_actions"], {**feeds, "parity_noise": np.asarray(record["noise"], np.float32).reshape(n, c)})[0]
                errors["continuous_actions"] = float(np.abs(noisy - np.asarray(record["continuous_actions"]).reshape(n, c)).max())
            if branches:
                errors["deterministic_discrete_actions"] = float(np.abs(out["deterministic_discrete_actions"] - np.asarray(record["deterministic_discrete_actions"]).reshape(n, -1)).max())
                if record.get("uniform"):
                    # Sampled with the recorded uniform draws, from onnxruntime's probabilities.
                    exposed, names = with_branch_log_probs(model)
                    log_probs = session(exposed).run(names, feeds)
                    uniform = np.asarray(record["uniform"], np.float32).reshape(n, -1)
                    sampled = np.array([[inverse_cdf(np.exp(lp[r]), uniform[r, b]) for b, lp in enumerate(log_probs)] for r in range(n)])
                    errors["discrete_actions"] = float(np.abs(sampled - np.asarray(record["discrete_actions"]).reshape(n, -1)).max())
            problems += [f"{k} max abs error {v:.2e}" for k, v in errors.items() if not v <= TOLERANCE]
            ok = not problems
            passed += ok
            failed += not ok
            summary = ", ".join(f"{k} {v:.1e}" for k, v in errors.items())
            print(f"{'ok  ' if ok else 'FAIL'} {case}/{name}: onnx.checker, sha256, onnxruntime vs training on {n} rows: {summary}{'; ' + '; '.join(problems) if problems else ''}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
