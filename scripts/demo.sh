#!/usr/bin/env bash
# The main job end to end: train Basic briefly on its stand-in scene (PPO on tch, the shipped
# Basic configuration with a 30000-step budget, checkpoints on the way), export the final
# checkpoint with mlagents-export (ONNX, .nn, parity record), check the ONNX against the scene,
# play both exports with the parity check against the training network's recorded outputs,
# compare the two formats on live decisions; then play Unity-trained policies of both formats
# on the stand-ins, and migrate Unity's 3DBall.nn to ONNX and play the converted file. Installs libtorch (PyPI torch==2.13.0) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
MODELS=$(models_dir)
TORCH_VENV=$(scripts/torch-venv.sh)
LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo build --release --quiet --features train --bins
BIN="$CARGO_TARGET_DIR/release"
RESULTS=${RESULTS:-results}
echo "== train: mlagents-learn config/Basic-quick.yaml --env sim:Basic"
"$BIN/mlagents-learn" config/Basic-quick.yaml --run-id demo --env sim:Basic --results-dir "$RESULTS" --force
echo "== export the final checkpoint (no libtorch involved)"
"$BIN/mlagents-export" demo --results-dir "$RESULTS"
echo "== check the export, then play both formats after checking them against the training outputs"
"$BIN/mlagents-run" check "$RESULTS/demo/Basic.onnx" --env sim:Basic
"$BIN/mlagents-run" "$RESULTS/demo/Basic.onnx" --env sim:Basic --episodes 20 --deterministic --parity "$RESULTS/demo/Basic.parity.json"
"$BIN/mlagents-run" "$RESULTS/demo/Basic.nn" --env sim:Basic --episodes 20 --deterministic --parity "$RESULTS/demo/Basic.parity.json"
"$BIN/mlagents-run" compare "$RESULTS/demo/Basic.onnx" "$RESULTS/demo/Basic.nn" --env sim:Basic
for model in nn/Basic.nn:Basic nn/3DBall.nn:3DBall onnx/3DBall.onnx:3DBall; do
  echo "== Unity-trained ${model%%:*} on sim:${model##*:}"
  "$BIN/mlagents-run" "$MODELS/${model%%:*}" --env "sim:${model##*:}" --episodes 20 --deterministic
done
echo "== migrate Unity's 3DBall.nn to ONNX (mlagents-export convert), play it with its parity record"
"$BIN/mlagents-export" convert "$MODELS/nn/3DBall.nn" "$RESULTS/3DBall-converted.onnx"
"$BIN/mlagents-run" "$RESULTS/3DBall-converted.onnx" --env sim:3DBall --episodes 20 --deterministic --parity "$RESULTS/3DBall-converted.parity.json"
