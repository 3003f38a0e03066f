#!/usr/bin/env bash
# Regenerates the golden fixtures in models/golden/<case>/ (the only command that writes
# them; tests read them and never rewrite them): for each case, a short deterministic
# training run of its config.yaml on sim:<scene> with our mlagents-learn, then
# mlagents-export (with the flags in the case's export-args file, if it has one); the final
# checkpoint and the exports are kept under run/, with a SHA256SUMS manifest. Needs the `train` feature (scripts/torch-venv.sh installs libtorch).
# Usage: scripts/regen-golden.sh [CASE...]   (default: every folder in models/golden)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
TORCH_VENV=$(scripts/torch-venv.sh)
LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo build --quiet --features train --bins
BIN="$CARGO_TARGET_DIR/debug"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=($(ls models/golden))
for case in "${cases[@]}"; do
  dir=models/golden/$case
  scene=$(cat "$dir/scene")
  work=$(mktemp -d)
  MLAGENTS_SIM="$BIN/mlagents-sim" "$BIN/mlagents-learn" "$dir/config.yaml" --run-id "$case" --env "sim:$scene" \
    --results-dir "$work" > "$work/learn.log" 2>&1
  export_args=()
  [ -f "$dir/export-args" ] && read -r -a export_args < "$dir/export-args"
  "$BIN/mlagents-export" "$case" --results-dir "$work" "${export_args[@]}" > "$work/export.log"
  rm -rf "$dir/run" && mkdir -p "$dir/run"
  for behavior_dir in "$work/$case"/*/; do
    b=$(basename "$behavior_dir")
    [ "$b" = run_logs ] && continue
    mkdir -p "$dir/run/$b"
    cp "$behavior_dir"/*.json "$behavior_dir"/*.safetensors "$dir/run/$b/"
    cp "$work/$case/$b".* "$dir/run/"
  done
  (cd "$dir" && find run -type f | sort | xargs sha256sum > SHA256SUMS)
  echo "$case: $(ls "$dir/run" | tr '\n' ' ')"
  rm -rf "$work"
done
