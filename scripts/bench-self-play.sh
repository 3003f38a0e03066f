#!/usr/bin/env bash
# Self-play benchmark: our mlagents-learn and the real mlagents-learn 0.28 (Python, torch 2.13)
# on the Pong stand-in with tests/fixtures/config/Pong.yaml, the same seed, one after the other
# in the same run. Reports steps per second and their ratio, the ELO at each summary side by
# side, and for each checkpoint how its export does head to head (our mlagents-run --opponent)
# against the run's first checkpoint: the wall time to the first checkpoint that wins most
# decisive games.
# Usage: [THREADED=true|false] scripts/bench-self-play.sh [MAX_STEPS] [SEED]   (default 60000, 1)
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_STEPS=${1:-60000}
SEED=${2:-1}
source scripts/lib.sh
setup_real_trainer
BIN="$CARGO_TARGET_DIR/release"
OUT=$(mktemp -d)
sed -E "s/^( *max_steps:).*/\1 $MAX_STEPS/" tests/fixtures/config/Pong.yaml > "$OUT/Pong.yaml"
apply_threaded "$OUT/Pong.yaml"
start=$(date +%s.%N)
"$BIN/mlagents-learn" "$OUT/Pong.yaml" --run-id ours --env sim:Pong --seed "$SEED" --results-dir "$OUT" --force > "$OUT/ours.log" 2>&1
echo "ours: $(echo "$(date +%s.%N) - $start" | bc) s" > "$OUT/walls"
start=$(date +%s.%N)
# (--env-args takes every argument after it: it comes last.)
"$TORCH_VENV/bin/mlagents-learn" "$OUT/Pong.yaml" --run-id python --env "$BIN/mlagents-sim" --no-graphics --seed "$SEED" \
  --results-dir "$OUT" --base-port 6705 --force --env-args --scene Pong > "$OUT/python.log" 2>&1
echo "python: $(echo "$(date +%s.%N) - $start" | bc) s" >> "$OUT/walls"
"$TORCH_VENV/bin/python" - "$OUT" "$BIN/mlagents-run" <<'PY'
import glob, json, re, subprocess, sys
out, runner = sys.argv[1], sys.argv[2]
rows = {}
for name in ("ours", "python"):
    log = open(f"{out}/{name}.log", errors="replace").read()
    summaries = []
    for line in log.splitlines():
        if (m := re.search(r"Step: (\d+)\. Time Elapsed: ([\d.]+) s\.", line)):
            elo = re.search(r"ELO: ([\d.]+)\.", line)
            summaries.append((int(m.group(1)), float(m.group(2)), elo.group(1) if elo else None))
    steps, elapsed = summaries[-1][0], summaries[-1][1]
    onnx = sorted(glob.glob(f"{out}/{name}/Pong/Pong-*.onnx"), key=lambda p: int(re.search(r"-(\d+)\.onnx$", p).group(1)))
    first, results = onnx[0], []
    for model in onnx[1:]:
        report = json.loads(subprocess.run([runner, model, "--env", "sim:Pong", "--opponent", first, "--episodes", "40",
                                            "--deterministic", "--json"], capture_output=True, text=True, check=True).stdout)
        team = report["teams"]["0"]
        step = int(re.search(r"-(\d+)\.onnx$", model).group(1))
        time = next((t for s, t, _ in summaries if s >= step), elapsed)
        results.append((step, time, team["wins"], team["losses"]))
    rows[name] = (steps, elapsed, summaries, results)
    winning = next(((s, t) for s, t, w, l in results if w > l), None)
    print(f"{name:7s} {steps / elapsed:7.0f} steps/s ({steps} steps in {elapsed:.1f} s); first checkpoint beating the first one: "
          f"{'step %d at %.1f s' % winning if winning else 'none'}")
    print("        vs first checkpoint: " + ", ".join(f"{s}: {w}-{l}" for s, _, w, l in results))
ours, python = rows["ours"], rows["python"]
print(f"ratio (ours / python): {(ours[0] / ours[1]) / (python[0] / python[1]):.1f}x steps per second")
print("ELO by summary step (ours | python):")
for (s, _, e), (s2, _, e2) in zip(ours[2], python[2]):
    print(f"  {s:7d}  {e or '-':>10s} | {e2 or '-':>10s}")
PY
cat "$OUT/walls"
