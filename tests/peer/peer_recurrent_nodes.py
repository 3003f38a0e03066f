"""ONNX LSTM, GRU and RNN nodes with every attribute form: our runner (`mlagents-run eval`)
against a float64 evaluation written here from the ONNX definitions and onnxruntime's reading of
them (clip on each gate's input, alpha/beta taken in order by the activations that use them),
and onnxruntime itself (which must agree with the float64 evaluation, so that the reference is
right). Forms: clip, input_forget, peepholes, every activation with its alpha/beta, reverse and
bidirectional directions, GRU's linear_before_reset, batch-first layout (opset 14; onnxruntime
does not run it, the float64 evaluation does), initial states given or not, several steps; then
random combinations of them (PEER_RECURRENT_CASES, default 40, seeds from PEER_RECURRENT_SEED).
A node with sequence_lens must be refused, naming the node.

The bar is 1e-5 + 1e-4 |value| against the float64 evaluation, or four times onnxruntime's own
error where that is larger (gates that amplify float32 rounding step after step move every
float32 engine alike). A random form whose values leave float32 is skipped. onnxruntime's RNN
reads activation_alpha/beta by direction and takes 0 when they are absent (the ONNX operators'
defaults otherwise): random RNN forms give them for every direction.

Usage: python peer_recurrent_nodes.py PATH/TO/mlagents-run
Prints one line per model and batch and a final "N passed, N failed" line.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from runner_eval import eval_outputs

ort.set_default_logger_severity(3)

ABSOLUTE, RELATIVE = 1e-5, 1e-4
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
# onnxruntime's rule: which activations take alpha / beta, and their defaults.
USES = {"affine": (True, True), "leakyrelu": (True, False), "thresholdedrelu": (True, False), "scaledtanh": (True, True),
        "hardsigmoid": (True, True), "elu": (True, False)}
DEFAULTS = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}
ACTIVATIONS = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"]


def activation_functions(names, alphas, betas, positional=False):
    """The activations with their alpha and beta: LSTM and GRU take the values in turn, by the
    activations that use them; an RNN's activation k takes entry k (positional)."""
    if positional:
        return [activation_functions([name], list(alphas[k:k + 1]), list(betas[k:k + 1]))[0] for k, name in enumerate(names)]
    alphas, betas = list(alphas), list(betas)
    functions = []
    for name in names:
        key = name.lower()
        uses_alpha, uses_beta = USES.get(key, (False, False))
        default_alpha, default_beta = DEFAULTS.get(key, (0.0, 0.0))
        alpha = (alphas.pop(0) if alphas else default_alpha) if uses_alpha else 0.0
        beta = (betas.pop(0) if betas else default_beta) if uses_beta else 0.0
        functions.append(lambda x, k=key, a=alpha, b=beta: activate(k, x, a, b))
    return functions


def activate(key, x, alpha, beta):
    if key == "relu":
        return np.maximum(x, 0)
    if key == "tanh":
        return np.tanh(x)
    if key == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if key == "affine":
        return alpha * x + beta
    if key == "leakyrelu":
        return np.where(x >= 0, x, alpha * x)
    if key == "thresholdedrelu":
        return np.where(x > alpha, x, 0.0)
    if key == "scaledtanh":
        return alpha * np.tanh(beta * x)
    if key == "hardsigmoid":
        return np.clip(alpha * x + beta, 0, 1)
    if key == "elu":
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1))
    if key == "softsign":
        return x / (1 + np.abs(x))
    if key == "softplus":
        return np.logaddexp(0, x)
    raise ValueError(key)


def reference(form, x, w, r, b, h0, c0, p):
    """Y, Y_h, Y_c in float64 (layout 0 shapes; the caller transposes for layout 1)."""
    op, hidden = form["op"], form["hidden"]
    directions = 2 if form["direction"] == "bidirectional" else 1
    per = len(DEFAULT_ACTIVATIONS[op])
    functions = activation_functions(form["activations"], form.get("alpha", []), form.get("beta", []), positional=op == "RNN")
    clip = form.get("clip")
    clipped = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    steps, batch = x.shape[0], x.shape[1]
    y = np.zeros((steps, directions, batch, hidden))
    y_h = np.zeros((directions, batch, hidden))
    y_c = np.zeros((directions, batch, hidden))
    for d in range(directions):
        reverse = form["direction"] == "reverse" or d == 1
        f_act = functions[d * per]
        g_act = functions[d * per + 1] if per > 1 else None
        h_act = functions[d * per + 2] if per > 2 else None
        wd, rd = w[d], r[d]
        gates = GATES[op]
        wb = b[d][:gates * hidden] if b is not None else np.zeros(gates * hidden)
        rb = b[d][gates * hidden:] if b is not None else np.zeros(gates * hidden)
        h = h0[d].copy() if h0 is not None else np.zeros((batch, hidden))
        c = c0[d].copy() if c0 is not None else np.zeros((batch, hidden))
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        for t in order:
            if op == "LSTM":
                pre = x[t] @ wd.T + h @ rd.T + wb + rb
                i, o, f, g = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
                if p is not None:
                    i = i + p[d][:hidden] * c
                    f = f + p[d][2 * hidden:] * c
                i = f_act(clipped(i))
                f = 1 - i if form.get("input_forget") else f_act(clipped(f))
                c = f * c + i * g_act(clipped(g))
                if p is not None:
                    o = o + p[d][hidden:2 * hidden] * c
                o = f_act(clipped(o))
                h = o * h_act(c)
            elif op == "GRU":
                xz, xr, xh = (x[t] @ wd[k * hidden:(k + 1) * hidden].T for k in range(3))
                rz, rr, rh = (rd[k * hidden:(k + 1) * hidden] for k in range(3))
                z = f_act(clipped(xz + h @ rz.T + wb[:hidden] + rb[:hidden]))
                reset = f_act(clipped(xr + h @ rr.T + wb[hidden:2 * hidden] + rb[hidden:2 * hidden]))
                if form.get("linear_before_reset"):
                    candidate = xh + wb[2 * hidden:] + reset * (h @ rh.T + rb[2 * hidden:])
                else:
                    candidate = xh + (reset * h) @ rh.T + rb[2 * hidden:] + wb[2 * hidden:]
                h = (1 - z) * g_act(clipped(candidate)) + z * h
            else:
                h = f_act(clipped(x[t] @ wd.T + h @ rd.T + wb + rb))
            y[t, d] = h
        y_h[d], y_c[d] = h, c
    return y, y_h, y_c


def make_model(form, path):
    """Writes the form's model; returns the weights (float32) it holds."""
    op, hidden, features = form["op"], form["hidden"], form["features"]
    rng = np.random.default_rng(form["seed"])
    directions = 2 if form["direction"] == "bidirectional" else 1
    gates = GATES[op]
    scale = form.get("scale", 0.6)
    w = rng.uniform(-scale, scale, (directions, gates * hidden, features)).astype(np.float32)
    r = rng.uniform(-scale, scale, (directions, gates * hidden, hidden)).astype(np.float32)
    b = rng.uniform(-scale, scale, (directions, 2 * gates * hidden)).astype(np.float32) if form.get("bias", True) else None
    p = rng.uniform(-scale, scale, (directions, 3 * hidden)).astype(np.float32) if form.get("peepholes") else None
    layout = form.get("layout", 0)
    initializers = [helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel()), helper.make_tensor("R", TensorProto.FLOAT, r.shape, r.ravel())]
    inputs = ["X", "W", "R", "B" if b is not None else ""]
    if b is not None:
        initializers.append(helper.make_tensor("B", TensorProto.FLOAT, b.shape, b.ravel()))
    state_dims = ["batch", directions, hidden] if layout else [directions, "batch", hidden]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", "steps", features] if layout else ["steps", "batch", features])]
    inputs.append("")  # sequence_lens
    inputs.append("initial_h" if form.get("initial") else "")
    if form.get("initial"):
        graph_inputs.append(helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, state_dims))
    if op == "LSTM":
        inputs.append("initial_c" if form.get("initial") else "")
        if form.get("initial"):
            graph_inputs.append(helper.make_tensor_value_info("initial_c", TensorProto.FLOAT, state_dims))
        if p is not None:
            inputs.append("P")
            initializers.append(helper.make_tensor("P", TensorProto.FLOAT, p.shape, p.ravel()))
    while inputs and inputs[-1] == "":
        inputs.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attributes = {"hidden_size": hidden}
    if form["direction"] != "forward" or form.get("explicit_forward"):
        attributes["direction"] = form["direction"]
    if form["activations"] != DEFAULT_ACTIVATIONS[op] * directions or form.get("explicit_activations"):
        attributes["activations"] = form["activations"]
    for key in ("alpha", "beta"):
        if form.get(key):
            attributes[f"activation_{key}"] = form[key]
    if form.get("clip"):
        attributes["clip"] = form["clip"]
    if form.get("input_forget"):
        attributes["input_forget"] = 1
    if form.get("linear_before_reset"):
        attributes["linear_before_reset"] = 1
    if layout:
        attributes["layout"] = 1
    node = helper.make_node(op, inputs, outputs, name=f"{op.lower()}_node", **attributes)
    graph = helper.make_graph([node], "recurrent", graph_inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14 if layout else 9)])
    model.ir_version = 7
    onnx.save(model, path)
    return w, r, b, p


def run_ours(runner, path, inputs):
    outputs, error = eval_outputs(runner, path, inputs, deterministic=False)
    if error:
        return None, error
    return {k: np.asarray(v["data"], dtype=np.float64).reshape(v["shape"]) for k, v in outputs.items()}, None


# Forms whose values leave float32 (an unbounded activation over several steps) are not
# compared: no float32 engine can hold them.
FLOAT32_LIMIT = 1e30
# onnxruntime and the float64 evaluation disagree on what a form computes when they differ by
# more than this share of the value (not by float32 rounding along the sequence).
SEMANTIC = 1e-2
# Past this magnitude (unbounded activations compounding over the steps) onnxruntime's own
# activations overflow (its Softplus is log(1 + exp(x))): its reading is not checked there.
ORT_CHECKED_MAGNITUDE = 1e6


def worst_excess(got, expected, onnxruntime=None):
    """The largest error beyond the bar (<= 0 passes), and the largest error. The bar is
    1e-5 + 1e-4 |expected|, or four times onnxruntime's own error where that is larger (a form whose
    gates amplify float32 rounding step after step moves both engines alike)."""
    error = np.where(np.isfinite(got), np.abs(got - expected), np.inf)
    bar = ABSOLUTE + RELATIVE * np.abs(expected)
    if onnxruntime is not None:
        bar = np.maximum(bar, 4 * np.where(np.isfinite(onnxruntime), np.abs(onnxruntime - expected), 0.0))
    return float(np.max(error - bar)), float(np.max(error))


def named_forms():
    forms = []

    def add(**form):
        form.setdefault("hidden", 3)
        form.setdefault("features", 4)
        form.setdefault("steps", 4)
        form.setdefault("direction", "forward")
        directions = 2 if form["direction"] == "bidirectional" else 1
        form.setdefault("activations", DEFAULT_ACTIVATIONS[form["op"]] * directions)
        form.setdefault("seed", len(forms) + 1)
        forms.append(form)

    add(op="LSTM", name="defaults")
    add(op="LSTM", name="defaults, one step, states given", steps=1, initial=True)
    add(op="LSTM", name="clip 0.5", clip=0.5, scale=1.5)
    add(op="LSTM", name="input_forget", input_forget=1)
    add(op="LSTM", name="Sigmoid, Relu, Relu", activations=["Sigmoid", "Relu", "Relu"], scale=1.2)
    add(op="LSTM", name="HardSigmoid with alpha/beta", activations=["HardSigmoid", "Tanh", "Tanh"], alpha=[0.3], beta=[0.4])
    add(op="LSTM", name="ScaledTanh", activations=["Sigmoid", "ScaledTanh", "ScaledTanh"], alpha=[1.5, 0.8], beta=[0.7, 1.2])
    add(op="LSTM", name="reverse", direction="reverse", initial=True)
    add(op="LSTM", name="bidirectional, other activations per direction", direction="bidirectional",
        activations=["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Elu", "Softsign"], alpha=[0.25, 0.9])
    add(op="LSTM", name="peepholes", peepholes=True, initial=True)
    add(op="LSTM", name="peepholes, clip, input_forget, reverse", peepholes=True, clip=0.8, input_forget=1, direction="reverse", scale=1.4)
    add(op="LSTM", name="Affine, LeakyRelu, ThresholdedRelu", activations=["Sigmoid", "LeakyRelu", "ThresholdedRelu"], alpha=[0.2, 0.1])
    add(op="LSTM", name="Affine, Softplus", activations=["Sigmoid", "Affine", "Softplus"], alpha=[0.7], beta=[-0.2])
    add(op="LSTM", name="default alphas", activations=["HardSigmoid", "LeakyRelu", "Elu"])
    add(op="LSTM", name="no bias, layout 1", bias=False, layout=1, initial=True)
    add(op="GRU", name="defaults")
    add(op="GRU", name="linear_before_reset", linear_before_reset=1, initial=True)
    add(op="GRU", name="reverse", direction="reverse")
    add(op="GRU", name="clip 0.3", clip=0.3, scale=1.5)
    add(op="GRU", name="Sigmoid, Relu", activations=["Sigmoid", "Relu"])
    add(op="GRU", name="bidirectional", direction="bidirectional", linear_before_reset=1, activations=["Sigmoid", "Tanh", "HardSigmoid", "Softsign"])
    add(op="RNN", name="defaults")
    add(op="RNN", name="Relu", activations=["Relu"])
    add(op="RNN", name="Sigmoid", activations=["Sigmoid"])
    add(op="RNN", name="reverse, clip", direction="reverse", clip=0.7, scale=1.3)
    add(op="RNN", name="bidirectional", direction="bidirectional", activations=["Tanh", "Relu"], initial=True)
    add(op="RNN", name="layout 1", layout=1)
    return forms


def random_forms(count, first_seed):
    forms = []
    for k in range(count):
        rng = np.random.default_rng(first_seed + k)
        op = ["LSTM", "GRU", "RNN"][rng.integers(3)]
        direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
        directions = 2 if direction == "bidirectional" else 1
        per = len(DEFAULT_ACTIVATIONS[op])
        activations = [ACTIVATIONS[i] for i in rng.integers(len(ACTIVATIONS), size=per * directions)] if rng.random() < 0.7 else DEFAULT_ACTIVATIONS[op] * directions
        form = {"op": op, "name": f"random {first_seed + k}", "seed": 1000 + first_seed + k, "direction": direction, "activations": activations,
                "hidden": int(rng.integers(1, 9)), "features": int(rng.integers(1, 9)), "steps": int(rng.integers(1, 7)),
                "alpha": [float(a) for a in rng.uniform(0.05, 1.5, size=int(rng.integers(0, 4)))],
                "beta": [float(a) for a in rng.uniform(-0.5, 1.0, size=int(rng.integers(0, 3)))],
                "initial": bool(rng.random() < 0.5), "bias": bool(rng.random() < 0.8), "scale": float(rng.uniform(0.2, 1.2)),
                "layout": int(rng.random() < 0.15)}
        if rng.random() < 0.4:
            form["clip"] = float(rng.uniform(0.2, 3.0))
        if op == "LSTM":
            form["input_forget"] = int(rng.random() < 0.3)
            form["peepholes"] = bool(rng.random() < 0.4)
        if op == "GRU":
            form["linear_before_reset"] = int(rng.random() < 0.5)
        if op == "RNN":
            # onnxruntime's RNN reads entry d for direction d, fails an assertion on a list
            # shorter than the directions, and takes 0 (not the ONNX operator's default) when
            # the attribute is absent: give every direction its values.
            for key in ("alpha", "beta"):
                form[key] = [float(v) for v in rng.uniform(0.05, 1.2, size=directions)]
        forms.append(form)
    return forms


def check_form(runner, folder, form):
    """(passed, line) for each batch of one form."""
    path = os.path.join(folder, f"{form['op']}-{form['seed']}.onnx")
    w, r, b, p = make_model(form, path)
    directions = 2 if form["direction"] == "bidirectional" else 1
    layout = form.get("layout", 0)
    results = []
    for batch in (1, 5):
        rng = np.random.default_rng(form["seed"] * 10 + batch)
        x = rng.uniform(-2, 2, (form["steps"], batch, form["features"])).astype(np.float32)
        h0 = rng.uniform(-1, 1, (directions, batch, form["hidden"])).astype(np.float32) if form.get("initial") else None
        c0 = rng.uniform(-1, 1, (directions, batch, form["hidden"])).astype(np.float32) if form.get("initial") and form["op"] == "LSTM" else None
        as64 = lambda a: None if a is None else a.astype(np.float64)
        y, y_h, y_c = reference(form, as64(x), as64(w), as64(r), as64(b), as64(h0), as64(c0), as64(p))
        expected = {"Y": y, "Y_h": y_h, "Y_c": y_c}
        inputs = {"X": x}
        if h0 is not None:
            inputs["initial_h"] = h0
        if c0 is not None:
            inputs["initial_c"] = c0
        if layout:
            inputs = {k: np.ascontiguousarray(np.swapaxes(v, 0, 1)) for k, v in inputs.items()}
            expected = {"Y": np.transpose(y, (2, 0, 1, 3)), "Y_h": np.swapaxes(y_h, 0, 1), "Y_c": np.swapaxes(y_c, 0, 1)}
        names = ["Y", "Y_h"] + (["Y_c"] if form["op"] == "LSTM" else [])
        problems, worst = [], 0.0
        if any(not np.all(np.isfinite(v)) or np.max(np.abs(v)) > FLOAT32_LIMIT for v in expected.values()):
            results.append((None, f"skip {form['op']} {form['name']} batch {batch}: its values leave float32"))
            continue
        ort_outputs = {}
        try:
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            ort_outputs = {k: v.astype(np.float64) for k, v in zip(names, session.run(names, inputs))}
            for name in names:
                if np.max(np.abs(expected[name])) > ORT_CHECKED_MAGNITUDE:
                    continue
                finite = np.isfinite(ort_outputs[name])
                error = np.abs(ort_outputs[name] - expected[name])[finite]
                if error.size and np.max(error - SEMANTIC * np.abs(expected[name])[finite]) > ABSOLUTE:
                    problems.append(f"onnxruntime {name} is {np.max(error):.2e} from the float64 evaluation (the reference reads the form otherwise)")
            engine = "onnxruntime and float64"
        except Exception:  # noqa: BLE001 (onnxruntime refuses batch-first recurrences)
            engine = "float64 (onnxruntime does not run it)"
        ours, error_text = run_ours(runner, path, inputs)
        if error_text:
            problems.append(error_text)
        else:
            for name in names:
                got = ours[name]
                if got.shape != expected[name].shape:
                    problems.append(f"{name}: shape {got.shape} vs {expected[name].shape}")
                    continue
                excess, error = worst_excess(got, expected[name], ort_outputs.get(name))
                worst = max(worst, error)
                if excess > 0:
                    problems.append(f"{name}: max abs error {error:.2e}")
        ok = not problems
        results.append((ok, f"{'ok  ' if ok else 'FAIL'} {form['op']} {form['name']} batch {batch} against {engine}: max abs error {worst:.2e}"
                            f"{'; ' + '; '.join(problems) if problems else ''}"))
    return results


def check_refusal(runner, folder):
    """A node with sequence_lens is refused, naming the node and the input."""
    path = os.path.join(folder, "sequence_lens.onnx")
    w = np.zeros((1, 4, 2), np.float32)
    r = np.zeros((1, 4, 1), np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R", "", "lengths"], ["Y"], name="lstm_with_lengths", hidden_size=1)
    graph = helper.make_graph([node], "lengths", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 1, 2]), helper.make_tensor_value_info("lengths", TensorProto.INT32, [1])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel()), helper.make_tensor("R", TensorProto.FLOAT, r.shape, r.ravel())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]), path)
    result = subprocess.run([runner, "inspect", path], capture_output=True, text=True)
    ok = result.returncode != 0 and "lstm_with_lengths" in result.stderr and "sequence_lens" in result.stderr
    return ok, f"{'ok  ' if ok else 'FAIL'} sequence_lens refused: {result.stderr.strip() or result.stdout.strip()}"


def main():
    runner = sys.argv[1]
    count = int(os.environ.get("PEER_RECURRENT_CASES", "40"))
    first_seed = int(os.environ.get("PEER_RECURRENT_SEED", "1"))
    passed = failed = skipped = 0
    with tempfile.TemporaryDirectory() as folder:
        for form in named_forms() + random_forms(count, first_seed):
            for ok, line in check_form(runner, folder, form):
                if ok is None:
                    skipped += 1
                else:
                    passed += ok
                    failed += not ok
                print(line, flush=True)
        ok, line = check_refusal(runner, folder)
        passed += ok
        failed += not ok
        print(line)
    print(f"{passed} passed, {failed} failed ({skipped} skipped: their values leave float32)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
