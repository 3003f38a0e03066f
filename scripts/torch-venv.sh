#!/usr/bin/env bash
# Prints the path of a Python venv holding PyPI's torch==2.13.0 (the libtorch tch 0.26 needs),
# installing it first when missing (about 5 GB with its CUDA wheels; CPU use only).
set -euo pipefail
VENV=${MLAGENTS_TORCH_VENV:-$HOME/.cache/mlagents-torch-venv}
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q torch==2.13.0 >&2
fi
echo "$VENV"
