#!/usr/bin/env bash
# Single-decision policy latency, as deterministic play runs it, at batch 1, 12 and 64: our
# tract runner on the ONNX and the .nn file of the same network, and onnxruntime (one thread)
# on the ONNX file, taking turns. Networks: the Unity-trained 3DBall, and the random-weight
# networks of examples/bench_models.rs (3DBall-sized, Walker-sized 3 x 512, an 84 x 84 x 3
# visual encoder, a Hallway-sized recurrent one with its memory output). Prints the CPU, one
# JSON line per measurement, and the table with ratios.
# Usage: scripts/bench-policy.sh [MODELS_DIR]   (default ../shared/models; BATCHES=1,12,64)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
MODELS=${1:-$(models_dir)}
VENV=$(scripts/peer-venv.sh)
GENERATED=$(mktemp -d)
trap 'rm -rf "$GENERATED"' EXIT
cargo run -q --release --example bench_models -- "$GENERATED"
cargo bench --bench policy_latency --no-run -q
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(grep -o -w 'avx[0-9a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
pairs=("$MODELS/onnx/3DBall.onnx $MODELS/nn/3DBall.nn")
for name in mlp-small mlp-wide visual recurrent; do pairs+=("$GENERATED/$name.onnx $GENERATED/$name.nn"); done
results="$GENERATED/results.jsonl"
# The machines are shared and noisy: in each case the engines take turns in 50 ms slices
# (benches/policy_latency.rs), so that a neighbour's load falls on all of them alike; each
# case runs in ROUNDS rounds, the networks in a new random order each round, and the table
# takes each case's lowest median.
for round in $(seq "${ROUNDS:-2}"); do
  mapfile -t order < <(printf '%s\n' "${pairs[@]}" | shuf)
  for pair in "${order[@]}"; do
    read -r onnx nn <<<"$pair"
    cargo bench -q --bench policy_latency -- --onnxruntime "$VENV/bin/python" "$onnx" "$nn" | tee -a "$results"
  done
done
"$VENV/bin/python" - "$results" "${pairs[@]}" <<'PY'
import json, os, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# The table's order: the networks as listed (argv: "ONNX NN" pairs), then by batch.
order = [os.path.basename(pair.split()[0]) for pair in sys.argv[2:]]
rows.sort(key=lambda r: (order.index(r["model"]) if r["model"] in order else len(order), r["batch"]))
median, p10, seen = {}, {}, []
for r in rows:
    key = (r["engine"].split()[0], r["model"], r["batch"])
    median[key] = min(median.get(key, float("inf")), r["median_us"])
    p10[key] = min(p10.get(key, float("inf")), r["p10_us"])
print(f"\nlowest median of each case over the rounds, µs (p10 o/ort: the lowest 10th percentiles' ratio)")
print(f"{'network':<14}{'batch':>6}{'ours .onnx':>12}{'ours .nn':>10}{'onnxruntime':>13}{'onnx/ort':>10}{'nn/ort':>8}{'onnx/nn':>9}{'p10 o/ort':>11}")
for r in rows:
    if r["engine"].startswith("onnxruntime") and (r["model"], r["batch"]) not in seen:
        seen.append((r["model"], r["batch"]))
        stem, b = r["model"].rsplit(".", 1)[0], r["batch"]
        ours, nn, ort = median[("mlagents-rs", r["model"], b)], median.get(("mlagents-rs", stem + ".nn", b)), median[("onnxruntime", r["model"], b)]
        nn_text = f"{nn:10.1f}" if nn else f"{'-':>10}"
        ratios = f"{ours / ort:10.2f}{nn / ort:8.2f}{ours / nn:9.2f}" if nn else f"{ours / ort:10.2f}{'-':>8}{'-':>9}"
        quiet = p10[("mlagents-rs", r["model"], b)] / p10[("onnxruntime", r["model"], b)]
        print(f"{stem:<14}{b:>6}{ours:12.1f}{nn_text}{ort:13.1f}{ratios}{quiet:11.2f}")
PY
