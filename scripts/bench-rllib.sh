#!/usr/bin/env bash
# RLlib 2.60 sampling through the drop-in (mlagents_envs.rllib) on a stand-in scene with 1 and
# 2 env runners, PPO's untrained policy, and each runner's peak memory
# (benches/rllib_sampling.py; the drop-in's venv borrows the torch venv's torch).
# Usage: scripts/bench-rllib.sh [SCENE] [STEPS]     (default 3DBall 3000 env steps per runner)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
TORCH=$(scripts/torch-venv.sh)
DROPIN=$(scripts/dropin-venv.sh --release --with-torch "$TORCH")
cargo build --release --bin mlagents-sim -q
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
MLAGENTS_SIM="$CARGO_TARGET_DIR/release/mlagents-sim" RAY_USAGE_STATS_ENABLED=0 \
  "$DROPIN/bin/python" -W ignore benches/rllib_sampling.py "${1:-3DBall}" "${2:-3000}" 2>/dev/null
