"""Single-decision latency of an ONNX policy on onnxruntime (Python, 1 intra-op thread), the
reference for benches/policy_latency.rs: the same inputs, the same outputs (the ones
deterministic play reads, and a recurrent model's memory), median, p10 and p90 after warm-up.
Usage: python policy_latency_onnxruntime.py MODEL.onnx...   (BATCHES=1,12,64)"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

RUNS, BUDGET = 20000, 3.0
ort.set_default_logger_severity(3)
batches = [int(b) for b in os.environ.get("BATCHES", "1,12,64").split(",")]
for path in sys.argv[1:]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    available = [o.name for o in session.get_outputs()]
    names = [n for n in ("deterministic_continuous_actions", "deterministic_discrete_actions") if n in available] or ["action"]
    names += [n for n in ("recurrent_out",) if n in available]
    for batch in batches:
        feed = {}
        for i in session.get_inputs():
            shape = [batch] + [d if isinstance(d, int) and d > 0 else 1 for d in i.shape[1:]]
            n = int(np.prod(shape))
            data = np.ones(n, np.float32) if i.name == "action_masks" else (np.arange(n) * 37 % 100 / 100).astype(np.float32)
            feed[i.name] = data.reshape(shape)
        warm = time.perf_counter()
        while time.perf_counter() - warm < BUDGET / 10:
            session.run(names, feed)
        times = []
        start = time.perf_counter()
        while len(times) < RUNS and time.perf_counter() - start < BUDGET:
            t = time.perf_counter()
            session.run(names, feed)
            times.append((time.perf_counter() - t) * 1e6)
        times.sort()
        at = lambda q: times[int((len(times) - 1) * q)]
        print(json.dumps({"engine": "onnxruntime " + ort.__version__, "model": os.path.basename(path), "outputs": names, "batch": batch,
                          "runs": len(times), "median_us": round(at(0.5), 2), "p10_us": round(at(0.1), 2), "p90_us": round(at(0.9), 2)}))
