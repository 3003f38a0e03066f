#!/usr/bin/env bash
# Curriculum side by side: our mlagents-learn and the real mlagents-learn 0.28 (Python, torch
# 2.13) on the Corridor stand-in with tests/fixtures/config/Corridor_curriculum.yaml and the
# same seed, one after the other (release builds; the CI runs the same check on debug builds):
# each one's lesson sequence, the summary step at which it entered each lesson, and its final
# mean reward.
# Usage: scripts/curriculum-side-by-side.sh [SEED] [MAX_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${1:-5}
MAX_STEPS=${2:-40000}
source scripts/lib.sh
setup_real_trainer
BIN="$CARGO_TARGET_DIR/release"
"$TORCH_VENV/bin/python" tests/peer/peer_curriculum.py "$BIN/mlagents-learn" "$BIN/mlagents-sim" \
  tests/fixtures/config/Corridor_curriculum.yaml "$SEED" "$MAX_STEPS"
