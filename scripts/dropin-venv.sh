#!/usr/bin/env bash
# Builds our mlagents_envs drop-in (python/: the Python package and its Rust extension
# mlagents_envs._native, with maturin, in the shared target folder) and installs it into its
# own venv, created on first use with numpy and maturin from PyPI (and gymnasium, PettingZoo
# and ray[rllib] for the wrappers' tests, about 400 MB). Prints the venv's path.
# Usage: scripts/dropin-venv.sh [--release]   (default: the dev profile the tests build)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
VENV=${MLAGENTS_DROPIN_VENV:-$HOME/.cache/mlagents-dropin-venv}
PYTHON=${PYTHON:-python3}
# gymnasium, PettingZoo and ray[rllib] 2.60 (numpy 2, protobuf 7) for the wrappers' tests.
if [ ! -x "$VENV/bin/maturin" ] || ! "$VENV/bin/python" -c 'import numpy, gymnasium, pettingzoo, ray.rllib' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2" "numpy>=1.23" "gymnasium==1.2.2" "pettingzoo==1.27.0" "ray[rllib]==2.60.0" >&2
fi
PROFILE=(--profile dev)
[ "${1:-}" = "--release" ] && PROFILE=(--release)
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT
"$VENV/bin/maturin" build -q "${PROFILE[@]}" -m python/Cargo.toml -i "$VENV/bin/python" --out "$WHEELS" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEELS"/*.whl >&2
echo "$VENV"
