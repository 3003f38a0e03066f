#!/usr/bin/env bash
# Makes the reference exports of the real ML-Agents 0.28 trainer (Python, torch 2.13) kept in
# models/reference/mlagents-0.28/: a short PPO run on each test-suite stand-in (discrete,
# continuous, hybrid actions), its final <Behavior>.onnx copied as <kind>.onnx. The exported
# *interface* (names, shapes, dtypes, constants) is what tests/export_interface.rs compares
# our exports with; the weights are whatever a few hundred steps gave.
# Usage: scripts/make-reference-exports.sh   (needs the torch venv: scripts/torch-venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
SETUP=$(shared_file tools/peer-setup.sh)
TORCH_VENV=$(scripts/torch-venv.sh)
bash "$SETUP" "$TORCH_VENV" >&2
cargo build --quiet --bin mlagents-sim
SIM="$CARGO_TARGET_DIR/debug/mlagents-sim"
OUT=$(mktemp -d)
DEST=models/reference/mlagents-0.28
mkdir -p "$DEST"
cat > "$OUT/config.yaml" <<'YAML'
behaviors:
  1D:
    trainer_type: ppo
    hyperparameters: {batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3}
    network_settings: {hidden_units: 32, num_layers: 1, normalize: true}
    max_steps: 500
    time_horizon: 64
    summary_freq: 250
YAML
port=6500
for pair in discrete:Simple1DDiscrete continuous:Simple1DContinuous hybrid:SimpleHybrid; do
  kind=${pair%%:*}; scene=${pair#*:}
  # (--env-args takes every argument after it: it comes last.)
  (cd "$OUT" && "$TORCH_VENV/bin/mlagents-learn" config.yaml --run-id "$kind" --env "$SIM" --no-graphics \
    --base-port $port --seed 1 --force --env-args --scene "$scene" > "$kind.log" 2>&1)
  cp "$OUT/results/$kind/1D.onnx" "$DEST/$kind.onnx"
  port=$((port + 10))
done
"$TORCH_VENV/bin/python" -c "import mlagents.trainers, torch, onnx; print('mlagents', mlagents.trainers.__version__, '/ torch', torch.__version__, '/ onnx', onnx.__version__)" > "$DEST/VERSIONS"
(cd "$DEST" && sha256sum ./*.onnx > SHA256SUMS)
echo "reference exports in $DEST (logs in $OUT)"
