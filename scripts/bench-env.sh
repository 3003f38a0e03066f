#!/usr/bin/env bash
# Environment steps per second on one stand-in scene: our Rust `env` client, our Python
# drop-in for `mlagents_envs` (python/, release build) and the real Python `mlagents_envs`
# 0.28 client, in the same run, against the same release `mlagents-sim`.
# Usage: scripts/bench-env.sh [SCENE] [STEPS]     (default 3DBall 3000)
set -euo pipefail
cd "$(dirname "$0")/.."
SCENE=${1:-3DBall}
STEPS=${2:-3000}
source scripts/lib.sh
VENV=$(scripts/peer-venv.sh)
DROPIN=$(scripts/dropin-venv.sh --release)
cargo build --release --bin mlagents-sim -q
cargo bench --bench env_steps --no-run -q
SIM="$CARGO_TARGET_DIR/release/mlagents-sim"
export MLAGENTS_SIM="$SIM"
echo "machine: $(nproc) cores; scene $SCENE; $STEPS steps each; sim $SIM"
for round in 1 2; do
  RUST=$(cargo bench -q --bench env_steps -- "$SCENE" "$STEPS" | tail -1)
  PY=$("$VENV/bin/python" benches/env_steps_python.py "$SIM" "$SCENE" "$STEPS" 2>/dev/null | tail -1)
  DROP=$("$DROPIN/bin/python" benches/env_steps_python.py "$SIM" "$SCENE" "$STEPS" 2>/dev/null | tail -1)
  echo "round $round"
  echo "  $RUST"
  echo "  $DROP"
  echo "  $PY"
  python3 - "$RUST" "$DROP" "$PY" <<'PY'
import json, sys
r, d, p = (json.loads(a) for a in sys.argv[1:4])
print(f"  ratio (Rust client / mlagents_envs 0.28): {r['steps_per_second'] / p['steps_per_second']:.2f}x")
print(f"  ratio (drop-in / mlagents_envs 0.28): {d['steps_per_second'] / p['steps_per_second']:.2f}x")
PY
done
