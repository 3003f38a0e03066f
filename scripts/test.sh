#!/usr/bin/env bash
# Sets up and runs every test: the Rust unit and integration tests (stand-in scenes as real
# child processes over real sockets), then the peer test against the real Python
# mlagents_envs 0.28.0 client (installed into a venv on first use).
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlagents-rs-target}

# The Unity-trained models and the peer set-up script live beside the checkout (../shared).
MODELS=${MLAGENTS_MODELS:-../shared/models}
[ -d "$MODELS/onnx" ] || { echo "Unity-trained models not found in $MODELS (check out beside ../shared, or set MLAGENTS_MODELS)" >&2; exit 1; }
export MLAGENTS_MODELS=$(cd "$MODELS" && pwd)

echo "== Rust tests"
cargo build --bins --quiet
cargo test --all-targets --quiet 2>&1
cargo test --doc --quiet 2>&1

echo "== peer test: mlagents_envs 0.28.0 drives mlagents-sim, every scene"
VENV=$(scripts/peer-venv.sh)
"$VENV/bin/python" tests/peer/peer_envs.py "$CARGO_TARGET_DIR/debug/mlagents-sim" 2>/dev/null

echo "== peer fidelity: Unity-trained ONNX policies (onnxruntime) play mlagents-sim"
"$VENV/bin/python" tests/peer/peer_fidelity.py "$CARGO_TARGET_DIR/debug/mlagents-sim" "$MODELS/onnx" 2>/dev/null

echo "== peer ONNX parity: our tract runner against onnxruntime on every Unity-trained ONNX model"
"$VENV/bin/python" tests/peer/peer_onnx_parity.py "$CARGO_TARGET_DIR/debug/mlagents-run" "$MODELS/onnx"

echo "== peer TensorBoard: TensorBoard's own reader reads our event files"
"$VENV/bin/python" tests/peer/peer_tensorboard.py "$CARGO_TARGET_DIR/debug/examples/tensorboard_events"

echo "== peer golden: the golden exports pass onnx.checker and onnxruntime reproduces their training outputs"
"$VENV/bin/python" tests/peer/peer_golden.py models/golden

echo "== peer export: our ONNX exports pass onnx.checker and match onnxruntime"
"$VENV/bin/python" tests/peer/peer_export.py "$CARGO_TARGET_DIR/debug/examples/export_random" "$CARGO_TARGET_DIR/debug/mlagents-run"

echo "== PPO on tch (the train feature; libtorch from PyPI's torch==2.13.0, installed on first use)"
TORCH_VENV=$(scripts/torch-venv.sh)
LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo test --features train --test train_ppo --test train_golden --quiet 2>&1 | grep -v '^\[INFO\]'
