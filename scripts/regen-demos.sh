#!/usr/bin/env bash
# Regenerates the demonstration fixtures in models/demos/ (the only command that writes them;
# tests read them): for each stand-in scene, a PPO policy trained by our mlagents-learn
# (models/demos/config.yaml, 3000 steps, seed 1337), exported, then played deterministically
# by mlagents-run against the same scene and recorded with --record-demo (20 episodes).
# SparseSwitch's policy is trained with PPO + curiosity (tests/fixtures/config/SparseSwitch.yaml
# with 120k steps and seed 1). The release build trains them (the same numbers, faster).
# The policy's ONNX is kept beside its demonstration; SHA256SUMS lists every file.
# Needs the `train` feature (scripts/torch-venv.sh installs libtorch).
# Usage: scripts/regen-demos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
TORCH_VENV=$(scripts/torch-venv.sh)
LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo build --release --quiet --features train --bins
BIN="$CARGO_TARGET_DIR/release"
dir=models/demos
for scene in Simple1DDiscrete Simple1DContinuous SparseSwitch; do
  work=$(mktemp -d)
  case $scene in
    SparseSwitch)
      config=$work/config.yaml behavior=SparseSwitch
      sed 's/max_steps: 100000/max_steps: 120000/' tests/fixtures/config/SparseSwitch.yaml > "$config"
      echo "env_settings: {seed: 1}" >> "$config" ;;
    *) config=$dir/config.yaml behavior=1D ;;
  esac
  MLAGENTS_SIM="$BIN/mlagents-sim" "$BIN/mlagents-learn" "$config" --run-id "$scene" --env "sim:$scene" \
    --results-dir "$work" > "$work/learn.log" 2>&1
  "$BIN/mlagents-export" "$scene" --results-dir "$work" > "$work/export.log"
  cp "$work/$scene/$behavior.onnx" "$dir/$scene.onnx"
  "$BIN/mlagents-run" play "$dir/$scene.onnx" --env "sim:$scene" --deterministic --episodes 20 \
    --record-demo "$dir/$scene.demo" > "$work/play.log"
  echo "$scene: $(tail -1 "$work/play.log")"
  rm -rf "$work"
done
(cd "$dir" && ls *.onnx *.demo | sort | xargs sha256sum > SHA256SUMS)
