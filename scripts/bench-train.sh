#!/usr/bin/env bash
# Training benchmark: our mlagents-learn and the real mlagents-learn 0.28 (Python, torch
# 2.13) on the same stand-in scene with the same configuration, one after the other in the
# same run. Reports steps/s, wall time and steps to the first summary at the target reward,
# the final summary's reward and peak memory (RSS of the trainer process tree as GNU time
# sees the top process).
# Usage: [THREADED=true|false] [SEED=N] [OURS_FLAGS=...] [GROUP=1] scripts/bench-train.sh [SCENE] [CONFIG] [TARGET] [MAX_STEPS]
#   SEED: --seed N for both trainers (default: the configuration's, random when it sets none);
#   OURS_FLAGS: more flags for ours only (e.g. --compat-0-28)
#   GROUP=1: the target is on the console's "Mean Group Reward" (POCA), not "Mean Reward"
#   (default 3DBall, its shipped config, 100, the config's max_steps)
#   Basic: scripts/bench-train.sh Basic tests/fixtures/config/Basic.yaml 0.9 100000
set -euo pipefail
cd "$(dirname "$0")/.."
SCENE=${1:-3DBall}
CONFIG=${2:-tests/fixtures/config/$SCENE.yaml}
TARGET=${3:-100}
MAX_STEPS=${4:-}
source scripts/lib.sh
setup_real_trainer
OUT=$(mktemp -d)
cp "$CONFIG" "$OUT/config.yaml"
CONFIG="$OUT/config.yaml"
if [ -n "$MAX_STEPS" ]; then
  sed -i -E "s/^( *max_steps:).*/\1 $MAX_STEPS/" "$CONFIG"
fi
apply_threaded "$CONFIG"
SIM="$CARGO_TARGET_DIR/release/mlagents-sim"
SEED_FLAGS=()
if [ -n "${SEED:-}" ]; then SEED_FLAGS=(--seed "$SEED"); fi
# shellcheck disable=SC2086  # OURS_FLAGS is a list of flags
/usr/bin/time -v "$CARGO_TARGET_DIR/release/mlagents-learn" "$CONFIG" --run-id ours --env "sim:$SCENE" \
  --results-dir "$OUT" --force "${SEED_FLAGS[@]}" ${OURS_FLAGS:-} > "$OUT/ours.log" 2> "$OUT/ours.time" || true
# (--env-args takes every argument after it: it comes last.)
/usr/bin/time -v "$TORCH_VENV/bin/mlagents-learn" "$CONFIG" --run-id python --env "$SIM" --no-graphics \
  --results-dir "$OUT" --base-port 6405 --force "${SEED_FLAGS[@]}" --env-args --scene "$SCENE" > "$OUT/python.log" 2> "$OUT/python.time" || true
python3 - "$OUT" "$TARGET" "${GROUP:-}" <<'PY'
import re, sys
out, target, group = sys.argv[1], float(sys.argv[2]), bool(sys.argv[3])
metric = r"Mean Group Reward: (-?\d+\.\d+)" if group else r"Mean Reward: (-?\d+\.\d+)"
for name in ("ours", "python"):
    lines = [l for l in open(f"{out}/{name}.log", errors="replace") if "Mean Reward" in l]
    rows = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for l in lines
            if (m := re.search(r"Step: (\d+)\. Time Elapsed: ([\d.]+) s\..*" + metric, l))]
    time = open(f"{out}/{name}.time", errors="replace").read()
    wall = re.search(r"Elapsed \(wall clock\) time.*: (.*)", time).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time).group(1)) / 1024
    first = next(((s, t) for s, t, r in rows if r >= target - 0.01), None)
    steps, elapsed, reward = rows[-1] if rows else (0, 0, float("nan"))
    print(f"{name:7s} steps/s {steps / elapsed:8.0f}  first >= {target}: "
          f"{'%d steps, %.1f s' % first if first else 'never'}  final reward {reward:.3f}  wall {wall}  peak RSS {rss:.0f} MiB")
PY
echo "logs: $OUT"
