#!/usr/bin/env bash
# Recurrent training benchmark: our mlagents-learn and the real mlagents-learn 0.28 (Python,
# torch 2.13) on the memory scene (sim:Memory1DDiscrete, the goal shown for 3 steps only) with
# upstream test_recurrent_ppo's configuration (memory 16, sequence 64, lr 1e-3, batch 64,
# buffer 128), the same seed, one after the other in the same run. Reports steps per second
# and their ratio, and the first summary step at which each reaches a mean reward above 0.9.
# Usage: [THREADED=true|false] scripts/bench-recurrent.sh [MAX_STEPS] [SEED] [SCENE]   (default 6000, 1337, Memory1DDiscrete)
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_STEPS=${1:-6000}
SEED=${2:-1337}
SCENE=${3:-Memory1DDiscrete}
source scripts/lib.sh
setup_real_trainer
BIN="$CARGO_TARGET_DIR/release"
OUT=$(mktemp -d)
cat > "$OUT/recurrent.yaml" <<YAML
behaviors:
  1D:
    trainer_type: ppo
    hyperparameters: {batch_size: 64, buffer_size: 128, learning_rate: 1.0e-3, learning_rate_schedule: constant,
                      beta: 5.0e-3, beta_schedule: linear, epsilon: 0.2, epsilon_schedule: linear, lambd: 0.95, num_epoch: 3}
    network_settings: {hidden_units: 32, num_layers: 1, memory: {memory_size: 16, sequence_length: 64}}
    reward_signals: {extrinsic: {gamma: 0.99, strength: 1.0}}
    max_steps: $MAX_STEPS
    time_horizon: 64
    summary_freq: 250
YAML
apply_threaded "$OUT/recurrent.yaml"
"$BIN/mlagents-learn" "$OUT/recurrent.yaml" --run-id ours --env "sim:$SCENE" --seed "$SEED" --results-dir "$OUT" --force > "$OUT/ours.log" 2>&1
# (--env-args takes every argument after it: it comes last.)
"$TORCH_VENV/bin/mlagents-learn" "$OUT/recurrent.yaml" --run-id python --env "$BIN/mlagents-sim" --no-graphics --seed "$SEED" \
  --results-dir "$OUT" --base-port 6705 --force --env-args --scene "$SCENE" > "$OUT/python.log" 2>&1
"$TORCH_VENV/bin/python" - "$OUT" <<'PY'
import re, sys
out = sys.argv[1]
rates = {}
for name in ("ours", "python"):
    summaries = []
    for line in open(f"{out}/{name}.log", errors="replace"):
        m = re.search(r"Step: (\d+)\. Time Elapsed: ([\d.]+) s\. Mean Reward: ([-\d.]*\d)", line)
        if m:
            summaries.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    steps, elapsed = summaries[-1][0], summaries[-1][1]
    rates[name] = steps / elapsed
    solved = next(((s, t) for s, t, r in summaries if r > 0.9), None)
    print(f"{name:7s} {rates[name]:7.0f} steps/s ({steps} steps in {elapsed:.1f} s); first summary above 0.9: "
          f"{'step %d at %.1f s' % solved if solved else 'none'}; last mean reward {summaries[-1][2]:.3f}")
print(f"ratio (ours / python): {rates['ours'] / rates['python']:.1f}x steps per second")
PY
