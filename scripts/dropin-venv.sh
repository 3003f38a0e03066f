#!/usr/bin/env bash
# Builds our mlagents_envs drop-in (python/: the Python package and its Rust extension
# mlagents_envs._native, with maturin, in the shared target folder) and installs it into its
# own venv, created on first use with numpy and maturin from PyPI (and gymnasium, PettingZoo
# and ray[rllib] for the wrappers' tests, about 400 MB). Prints the venv's path.
# --with-torch TORCH_VENV lends it the torch of our torch venv (scripts/torch-venv.sh; a .pth
# file appends that venv's site-packages, so this venv's own packages come first) for RLlib's
# PPO, instead of a second 5 GB torch, and installs stable-baselines3 2.9.2 beside it.
# --oldest-numpy builds for a venv of its own (the main one's path + "-numpy1") holding only
# numpy 1.23.5, the oldest the drop-in supports.
# --deps-only installs the venv's packages but builds nothing (scripts/test.sh downloads them
# while cargo builds).
# Usage: scripts/dropin-venv.sh [--release] [--with-torch TORCH_VENV] [--oldest-numpy] [--deps-only]
#   (default: the dev profile)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
VENV=${MLAGENTS_DROPIN_VENV:-$HOME/.cache/mlagents-dropin-venv}
PYTHON=${PYTHON:-python3}
PROFILE=(--profile dev)
TORCH_VENV=""
OLDEST_NUMPY=false
DEPS_ONLY=false
while [ $# -gt 0 ]; do
  case $1 in
    --release) PROFILE=(--release); shift ;;
    --with-torch)
      [ -x "${2:-}/bin/python" ] || { echo "--with-torch needs a venv (got '${2:-}')" >&2; exit 2; }
      TORCH_VENV=$2; shift 2 ;;
    --oldest-numpy) OLDEST_NUMPY=true; shift ;;
    --deps-only) DEPS_ONLY=true; shift ;;
    *) echo "unknown argument '$1' (usage: scripts/dropin-venv.sh [--release] [--with-torch TORCH_VENV] [--oldest-numpy] [--deps-only])" >&2; exit 2 ;;
  esac
done
if $OLDEST_NUMPY; then
  # The oldest numpy the drop-in supports, alone: a venv of its own beside the main one.
  VENV="$VENV-numpy1"
  if ! "$VENV/bin/python" -c 'import numpy, sys; sys.exit(numpy.__version__ != "1.23.5")' 2>/dev/null; then
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2" "numpy==1.23.5" >&2
  fi
# gymnasium, PettingZoo and ray[rllib] 2.60 (numpy 2, protobuf 7) for the wrappers' tests.
elif [ ! -x "$VENV/bin/maturin" ] || ! "$VENV/bin/python" -c 'import numpy, gymnasium, pettingzoo, ray.rllib' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2" "numpy>=1.23" "gymnasium==1.2.2" "pettingzoo==1.27.0" "ray[rllib]==2.60.0" >&2
fi
if [ -n "$TORCH_VENV" ]; then
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$TORCH_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz-torch-venv.pth"
  # SB3 for its tests; --no-deps: its torch is the lent one, the rest is here already.
  "$VENV/bin/python" -c 'import stable_baselines3' 2>/dev/null \
    || "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "stable-baselines3==2.9.2" >&2
fi
if $DEPS_ONLY; then
  echo "$VENV"
  exit 0
fi
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT
"$VENV/bin/maturin" build -q "${PROFILE[@]}" -m python/Cargo.toml -i "$VENV/bin/python" --out "$WHEELS" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEELS"/*.whl >&2
echo "$VENV"
