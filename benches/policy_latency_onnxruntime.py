"""Single-decision latency of an ONNX policy on onnxruntime (Python, 1 intra-op thread), the
reference for benches/policy_latency.rs: median, p10, p90 over 20000 runs after warm-up.
Usage: python policy_latency_onnxruntime.py MODEL.onnx..."""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)
for path in sys.argv[1:]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for batch in (1, 12):
        feed = {}
        for i in session.get_inputs():
            shape = [batch] + [d if isinstance(d, int) and d > 0 else 1 for d in i.shape[1:]]
            n = int(np.prod(shape))
            data = np.ones(n, np.float32) if i.name == "action_masks" else (np.arange(n) * 37 % 100 / 100).astype(np.float32)
            feed[i.name] = data.reshape(shape)
        for _ in range(2000):
            session.run(names, feed)
        times = []
        for _ in range(20000):
            start = time.perf_counter()
            session.run(names, feed)
            times.append((time.perf_counter() - start) * 1e6)
        times.sort()
        at = lambda q: times[int((len(times) - 1) * q)]
        print(json.dumps({"engine": "onnxruntime " + ort.__version__, "model": os.path.basename(path), "batch": batch,
                          "median_us": round(at(0.5), 2), "p10_us": round(at(0.1), 2), "p90_us": round(at(0.9), 2)}))
