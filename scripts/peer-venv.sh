#!/usr/bin/env bash
# Prints the path of the Python peer venv (mlagents-envs 0.28.0, onnxruntime, onnx,
# tensorboard), installing it first when missing, with the project's shared peer-setup script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
VENV=${MLAGENTS_PEER_VENV:-$HOME/.cache/mlagents-envs-venv}
SETUP=$(shared_file tools/peer-setup.sh)
bash "$SETUP" --envs-only "$VENV" >&2
echo "$VENV"
