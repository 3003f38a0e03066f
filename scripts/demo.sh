#!/usr/bin/env bash
# The main job, as far as it is built: start a stand-in scene, drive it with the Rust
# environment API (random policy), then play Unity-trained policies on the stand-ins with our
# tract runner, in both formats. Training (mlagents-learn) and export (mlagents-export) are
# not built yet; this script will grow into "train briefly, export, run the export".
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlagents-rs-target}
SCENE=${1:-3DBall}
cargo build --release --quiet --bin mlagents-sim
"$CARGO_TARGET_DIR/release/mlagents-sim" --scene list
cargo run --release --quiet --example random_agent -- "sim:$SCENE" 2000
MODELS=${MLAGENTS_MODELS:-../shared/models}
cargo build --release --quiet --bin mlagents-run
for model in nn/Basic.nn:Basic nn/3DBall.nn:3DBall onnx/3DBall.onnx:3DBall; do
  echo "== ${model%%:*} on sim:${model##*:}"
  "$CARGO_TARGET_DIR/release/mlagents-run" "$MODELS/${model%%:*}" --env "sim:${model##*:}" --episodes 20 --deterministic
done
