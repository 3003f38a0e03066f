#!/usr/bin/env bash
# The main job, as far as it is built: start a stand-in scene, drive it with the Rust
# environment API (random policy), print episode statistics and throughput.
# Training (mlagents-learn), export (mlagents-export) and the tract runner (mlagents-run) are
# not built yet; this script will grow into "train briefly, export, run the export".
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlagents-rs-target}
SCENE=${1:-3DBall}
cargo build --release --quiet --bin mlagents-sim
"$CARGO_TARGET_DIR/release/mlagents-sim" --scene list
cargo run --release --quiet --example random_agent -- "sim:$SCENE" 2000
