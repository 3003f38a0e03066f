#!/usr/bin/env bash
# Curriculum side by side: our mlagents-learn and the real mlagents-learn 0.28 (Python, torch
# 2.13) on the Corridor stand-in with tests/fixtures/config/Corridor_curriculum.yaml and the
# same seed, one after the other. Prints, for each, the lesson sequence with the step at
# which each lesson was entered (read from TensorBoard's Environment/Lesson Number/goal_distance
# at each summary, so to within summary_freq), and the final mean reward.
# Usage: scripts/curriculum-side-by-side.sh [SEED] [MAX_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${1:-5}
MAX_STEPS=${2:-40000}
source scripts/lib.sh
require_cargo
SETUP=$(shared_file tools/peer-setup.sh)
TORCH_VENV=$(scripts/torch-venv.sh)
bash "$SETUP" "$TORCH_VENV" >&2   # adds the real trainer to the torch venv
LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo build --release --quiet --features train --bins
OUT=$(mktemp -d)
sed -E "s/^( *max_steps:).*/\1 $MAX_STEPS/" tests/fixtures/config/Corridor_curriculum.yaml > "$OUT/config.yaml"
"$CARGO_TARGET_DIR/release/mlagents-learn" "$OUT/config.yaml" --run-id ours --env sim:Corridor --seed "$SEED" \
  --results-dir "$OUT" --force > "$OUT/ours.log" 2>&1 || { tail -20 "$OUT/ours.log"; exit 1; }
# (--env-args takes every argument after it: it comes last.)
"$TORCH_VENV/bin/mlagents-learn" "$OUT/config.yaml" --run-id python --env "$CARGO_TARGET_DIR/release/mlagents-sim" \
  --no-graphics --seed "$SEED" --results-dir "$OUT" --base-port 6505 --force --env-args --scene Corridor \
  > "$OUT/python.log" 2>&1 || { tail -20 "$OUT/python.log"; exit 1; }
"$TORCH_VENV/bin/python" - "$OUT" <<'PY'
import glob, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
out = sys.argv[1]
names = ["Near", "Middle", "Far", "Farthest"]
for run in ("ours", "python"):
    acc = EventAccumulator(glob.glob(f"{out}/{run}/Corridor")[0]); acc.Reload()
    lessons = [(e.step, int(e.value)) for e in acc.Scalars("Environment/Lesson Number/goal_distance")]
    entered, last = [], -1
    for step, lesson in lessons:
        if lesson != last:
            entered.append(f"{names[lesson]}@{step}")
            last = lesson
    reward = acc.Scalars("Environment/Cumulative Reward")[-1]
    lines = [l.split("is in lesson '")[1].split("'")[0] for l in open(f"{out}/{run}.log", errors="replace") if "is in lesson '" in l]
    print(f"{run:7s} console lessons {' > '.join(lines)}; TensorBoard (lesson@first summary step in it) {' > '.join(entered)}; "
          f"final mean reward {reward.value:.3f} at step {reward.step}")
PY
