# Sourced by the scripts in this folder (not run on its own): where the build goes, where the
# shared material lives, and clear errors when something the scripts need is missing.

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlagents-rs-target}

# The project's shared folder (specs, Unity-trained models, the peer set-up script) is checked
# out beside the repository as ../shared; MLAGENTS_SHARED points elsewhere.
SHARED_DIR=${MLAGENTS_SHARED:-../shared}

# The shared target folder keeps every test, bench and example binary cargo ever linked: about
# 500 MB each (the dependencies' debug info), one more set for each checkout path and each
# change, enough to fill a disk within a day of CI runs. Drops those not linked for six hours
# (cargo links again what it still needs; the libraries they are made from stay).
prune_stale_binaries() {
  local dir
  for dir in "$CARGO_TARGET_DIR"/{debug,release}/{deps,examples}; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 -type f -perm -u+x ! -name '*.so' ! -name '*.rlib' ! -name '*.rmeta' -mmin +360 -delete 2>/dev/null || true
  done
}

require_cargo() {
  command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
}

# Prints the path of a file under the shared folder, or stops naming what is missing and how
# to provide it.
shared_file() {
  local path="$SHARED_DIR/$1"
  if [ ! -e "$path" ]; then
    echo "missing: $path (the project's shared folder is expected beside the checkout as ../shared;" \
      "check it out there or set MLAGENTS_SHARED to its path)" >&2
    exit 1
  fi
  echo "$path"
}

# The Unity-trained models used by the tests and the demo (MLAGENTS_MODELS overrides).
models_dir() {
  local dir=${MLAGENTS_MODELS:-$SHARED_DIR/models}
  if [ ! -d "$dir/onnx" ] || [ ! -d "$dir/nn" ]; then
    echo "missing: the Unity-trained models in $dir (check out beside ../shared, set MLAGENTS_SHARED," \
      "or set MLAGENTS_MODELS to a folder holding onnx/ and nn/)" >&2
    exit 1
  fi
  (cd "$dir" && pwd)
}

# For the side-by-side scripts: with THREADED=true (or false) in the environment, sets every
# behavior's `threaded` in a configuration file (after its max_steps line), for both trainers.
apply_threaded() {
  local file=$1
  [ -n "${THREADED:-}" ] || return 0
  case $THREADED in true|false) ;; *) echo "THREADED must be true or false" >&2; exit 2 ;; esac
  sed -i -E "/^    threaded:/d; s/^(    max_steps:.*)$/\1\n    threaded: $THREADED/" "$file"
}

# For the side-by-side scripts: the torch venv with the real mlagents-learn 0.28 added (set
# as TORCH_VENV) and our release binaries built with the train feature.
setup_real_trainer() {
  require_cargo
  local setup
  setup=$(shared_file tools/peer-setup.sh)
  TORCH_VENV=$(scripts/torch-venv.sh)
  bash "$setup" "$TORCH_VENV" >&2   # adds the real trainer to the torch venv
  LIBTORCH_USE_PYTORCH=1 PATH="$TORCH_VENV/bin:$PATH" cargo build --release --quiet --features train --bins
}
