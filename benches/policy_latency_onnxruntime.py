"""Single-decision latency of an ONNX policy on onnxruntime (Python, 1 intra-op thread), the
reference for benches/policy_latency.rs: the same inputs, the same outputs (the ones
deterministic play reads, and a recurrent model's memory).

Usage: python policy_latency_onnxruntime.py MODEL.onnx...   (BATCHES=1,12,64): median, p10 and
p90 after warm-up, one JSON line per model and batch.
       python policy_latency_onnxruntime.py --serve: what benches/policy_latency.rs runs to
interleave onnxruntime with our runner, time slice by time slice. Each line read,
`run MODEL BATCH SECONDS`, runs that case for that long (the session and its inputs made on
first use) and answers one JSON line: the engine, the outputs read and every run's time."""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

BUDGET = 3.0
ENGINE = "onnxruntime " + ort.__version__
ort.set_default_logger_severity(3)


def open_session(path):
    """A one-thread session of the model and the outputs deterministic play reads."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    available = [o.name for o in session.get_outputs()]
    names = [n for n in ("deterministic_continuous_actions", "deterministic_discrete_actions") if n in available] or ["action"]
    names += [n for n in ("recurrent_out",) if n in available]
    return session, names


def inputs(session, batch):
    """The inputs benches/policy_latency.rs feeds: all-ones action masks, a fixed pattern elsewhere."""
    feed = {}
    for i in session.get_inputs():
        shape = [batch] + [d if isinstance(d, int) and d > 0 else 1 for d in i.shape[1:]]
        n = int(np.prod(shape))
        data = np.ones(n, np.float32) if i.name == "action_masks" else (np.arange(n) * 37 % 100 / 100).astype(np.float32)
        feed[i.name] = data.reshape(shape)
    return feed


def timed_runs(session, names, feed, seconds):
    """Each run's time in µs, runs repeated for `seconds`."""
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = time.perf_counter()
        session.run(names, feed)
        times.append((time.perf_counter() - t) * 1e6)
    return times


def serve():
    sessions, feeds = {}, {}
    for line in sys.stdin:
        command, path, batch, seconds = line.split()
        if command != "run":
            sys.exit(f"unknown command {command!r}")
        if path not in sessions:
            sessions[path] = open_session(path)
        session, names = sessions[path]
        if (path, batch) not in feeds:
            feeds[(path, batch)] = inputs(session, int(batch))
        times = timed_runs(session, names, feeds[(path, batch)], float(seconds))
        print(json.dumps({"engine": ENGINE, "outputs": names, "times_us": [round(t, 3) for t in times]}), flush=True)


def measure(paths):
    batches = [int(b) for b in os.environ.get("BATCHES", "1,12,64").split(",")]
    for path in paths:
        session, names = open_session(path)
        for batch in batches:
            feed = inputs(session, batch)
            timed_runs(session, names, feed, BUDGET / 10)
            times = sorted(timed_runs(session, names, feed, BUDGET))
            at = lambda q: times[int((len(times) - 1) * q)]
            print(json.dumps({"engine": ENGINE, "model": os.path.basename(path), "outputs": names, "batch": batch,
                              "runs": len(times), "median_us": round(at(0.5), 2), "p10_us": round(at(0.1), 2), "p90_us": round(at(0.9), 2)}))


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["--serve"] else measure(sys.argv[1:])
