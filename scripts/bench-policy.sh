#!/usr/bin/env bash
# Single-decision policy latency at batch 1 and 12: our tract runner against onnxruntime on the
# same ONNX file, in the same run, and our runner on the .nn of the same scene.
# Usage: scripts/bench-policy.sh [MODELS_DIR]   (default ../shared/models)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
MODELS=${1:-$(models_dir)}
VENV=$(scripts/peer-venv.sh)
cargo bench --bench policy_latency --no-run -q
echo "machine: $(nproc) cores"
for round in 1 2; do
  echo "round $round"
  cargo bench -q --bench policy_latency -- "$MODELS/onnx/3DBall.onnx" "$MODELS/nn/3DBall.nn" | sed 's/^/  /'
  "$VENV/bin/python" benches/policy_latency_onnxruntime.py "$MODELS/onnx/3DBall.onnx" | sed 's/^/  /'
done
