#!/usr/bin/env bash
# Sets up and runs every test, in three phases (each may be run alone: scripts/test.sh PHASE...):
#   rust   builds every target (binaries, examples, tests, benches) and runs the Rust unit and
#          integration tests (stand-in scenes as real child processes over real sockets);
#   peer   the real Python mlagents_envs 0.28.0 client, onnxruntime, onnx and TensorBoard
#          against our binaries (venv installed into ~/.cache on first use); needs `rust` built;
#   train  PPO on tch (the `train` feature; libtorch from PyPI's torch==2.13.0, installed into
#          ~/.cache on first use), and the real mlagents-learn 0.28 (added to that venv) on a
#          curriculum beside ours; RLlib's PPO (torch lent to the drop-in's venv) on a Ray
#          cluster of two nodes and SB3's PPO through the drop-in.
# Prints the wall time of each step at the end.
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
cd "$(dirname "$0")/.."
source scripts/lib.sh
require_cargo
MODELS=$(models_dir)
export MLAGENTS_MODELS=$MODELS
BIN="$CARGO_TARGET_DIR/debug"

TIMES=()
step_started=0
step_name=""
# Starts a timed step, closing the previous one.
step() {
  end_step
  step_name=$1
  step_started=$SECONDS
  echo "== $1"
}
end_step() {
  if [ -n "$step_name" ]; then TIMES+=("$(printf '%5d s  %s' $((SECONDS - step_started)) "$step_name")"); fi
  step_name=""
}
report_times() {
  end_step
  echo "== wall time by step"
  printf '  %s\n' "${TIMES[@]}"
  echo "  total $SECONDS s"
}

# Runs a peer test: its report (stdout) is always shown; its stderr only when it fails, so a
# failure shows the traceback or the error line.
peer() {
  local log
  log=$(mktemp)
  if ! "$@" 2>"$log"; then
    echo "-- stderr of the failed peer test ($*):" >&2
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# The later phases' venvs (the peer client, the drop-in's, torch with the real trainer): on a
# new machine about 5 GB of downloads, which wait on the network, not the cores. When the rust
# phase builds first, they are installed in the background meanwhile (log: $VENV_LOG), each
# script in turn; the phases that need them wait for them (`await_venvs`), and each step still
# runs its own script, which finds its venv ready or says what failed.
VENV_JOB=""
VENV_LOG=""
prepare_venvs_in_background() {
  VENV_LOG=$(mktemp)
  (
    set -e
    scripts/peer-venv.sh
    scripts/dropin-venv.sh --deps-only
    scripts/dropin-venv.sh --oldest-numpy --deps-only
    torch_venv=$(scripts/torch-venv.sh)
    bash "$(shared_file tools/peer-setup.sh)" "$torch_venv"
    scripts/dropin-venv.sh --with-torch "$torch_venv" --deps-only
  ) >"$VENV_LOG" 2>&1 &
  VENV_JOB=$!
}
await_venvs() {
  [ -n "$VENV_JOB" ] || return 0
  step "venvs installed in the background during the build (the rest of the wait)"
  if ! wait "$VENV_JOB"; then
    echo "installing the venvs in the background failed (the steps below try again and say what fails):" >&2
    tail -n 40 "$VENV_LOG" >&2
  fi
  rm -f "$VENV_LOG"
  VENV_JOB=""
}

# With the train phase to come, its build (CPU) runs in the background during the peer tests
# (mostly waiting on child processes), once the peer phase's own builds (the drop-in wheels) are
# done: cargo builds one thing at a time in a target folder.
TRAIN_BUILD_JOB=""
TRAIN_BUILD_LOG=""
train_tests=(--test train_ppo --test train_golden --test train_bad_input --test train_curriculum --test train_self_play --test train_recurrent --test train_sac --test train_reward_signals --test train_imitation --test encoders --test attention --test train_poca --test poca_critic --test train_attention)
# Builds the train feature's binaries: mlagents-learn, the unit tests of its modules and the
# training tests, with the libtorch of the torch venv $1.
build_train() {
  LIBTORCH_USE_PYTORCH=1 PATH="$1/bin:$PATH" cargo test --features train --lib "${train_tests[@]}" --no-run --quiet 2>&1
}
start_train_build_in_background() {
  local torch_venv
  torch_venv=$(scripts/torch-venv.sh)
  TRAIN_BUILD_LOG=$(mktemp)
  build_train "$torch_venv" >"$TRAIN_BUILD_LOG" 2>&1 &
  TRAIN_BUILD_JOB=$!
}

# A background job still running when the script ends (a failed step) is stopped with it.
stop_background_jobs() {
  local job
  for job in "$VENV_JOB" "$TRAIN_BUILD_JOB"; do
    [ -n "$job" ] && kill "$job" 2>/dev/null || true
  done
}

phase_rust() {
  step "build: every binary, example, test and bench (dev profile: this crate at opt-level 1, dependencies at 2)"
  cargo build --bins --examples --quiet
  cargo test --all-targets --no-run --quiet 2>&1
  step "Rust tests"
  cargo test --all-targets --no-fail-fast --quiet 2>&1
  cargo test --doc --quiet 2>&1
}

phase_peer() {
  local peer_binaries=(mlagents-sim mlagents-run mlagents-export examples/tensorboard_events examples/export_random examples/lower_nn)
  for binary in "${peer_binaries[@]}"; do
    [ -x "$BIN/$binary" ] || { echo "missing $BIN/$binary: run the rust phase first (scripts/test.sh rust peer)" >&2; exit 1; }
  done
  # The peer tests run the rust phase's binaries from a snapshot of hard links: the train build
  # that may run meanwhile links target/debug's binaries again, with the train feature.
  local BIN="$CARGO_TARGET_DIR/peer-binaries"
  rm -rf "$BIN"
  mkdir -p "$BIN/examples"
  for binary in "${peer_binaries[@]}"; do
    cp -l "$CARGO_TARGET_DIR/debug/$binary" "$BIN/$binary" 2>/dev/null || cp "$CARGO_TARGET_DIR/debug/$binary" "$BIN/$binary"
  done
  await_venvs
  step "peer venv: mlagents_envs 0.28.0, onnxruntime, onnx, tensorboard (installed on first use)"
  local venv
  venv=$(scripts/peer-venv.sh)
  local python="$venv/bin/python"
  # The drop-in's builds first: the train build can only start in the background once they are
  # done, and the peer tests leave a core partly idle from the start.
  step "drop-in: our mlagents_envs for Python (python/, maturin + pyo3) built and installed into its own venv, and beside numpy 1.23.5"
  local dropin recordings oldest_numpy
  dropin=$(scripts/dropin-venv.sh)
  oldest_numpy=$(scripts/dropin-venv.sh --oldest-numpy)
  if [ "$train_follows" = true ]; then start_train_build_in_background; fi
  step "peer test: mlagents_envs 0.28.0 drives mlagents-sim, every scene"
  peer "$python" tests/peer/peer_envs.py "$BIN/mlagents-sim"
  step "drop-in units: side channels, steps and timers (upstream's test cases) on the drop-in and on the real client"
  peer "$dropin/bin/python" tests/peer/dropin_units.py
  peer "$python" tests/peer/dropin_units.py
  step "drop-in oracle: the drop-in and the real mlagents_envs 0.28 drive the same scenes; every field bit for bit"
  recordings=$(mktemp -d)
  peer "$python" tests/peer/dropin_oracle.py record "$BIN/mlagents-sim" "$recordings/real.npz" 6700 >/dev/null
  peer "$dropin/bin/python" tests/peer/dropin_oracle.py record "$BIN/mlagents-sim" "$recordings/ours.npz" 6720 >/dev/null
  peer "$python" tests/peer/dropin_oracle.py compare "$recordings/real.npz" "$recordings/ours.npz"
  rm -rf "$recordings"
  step "drop-in scenes: the real client's scene test above, unchanged, on the drop-in"
  peer "$dropin/bin/python" tests/peer/peer_envs.py "$BIN/mlagents-sim" 6740
  step "drop-in beside numpy 1.23.5 (alone in its venv): the real client's scene test, unchanged"
  peer "$oldest_numpy/bin/python" tests/peer/peer_envs.py "$BIN/mlagents-sim" 6800
  step "drop-in extras: free ports, sim:SCENE, the GIL released while waiting, close twice, actions out of range, the registry"
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" tests/peer/dropin_extras.py
  step "drop-in wrappers: players stepped in one call, gymnasium's check_env, PettingZoo's parallel and AEC api tests"
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" -W ignore tests/peer/dropin_wrappers.py
  step "drop-in gym cases: upstream's gym wrapper test cases (test_gym.py) on gym_unity's UnityToGymWrapper and UnityToGymnasiumEnv"
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" -W ignore tests/peer/dropin_gym_cases.py
  step "drop-in RLlib: imports beside ray 2.60 (numpy 2, protobuf 7); RLlib's env check and MultiAgentEpisode on three scenes"
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" -W ignore tests/peer/dropin_rllib.py
  step "peer fidelity: Unity-trained ONNX policies (onnxruntime) play mlagents-sim"
  peer "$python" tests/peer/peer_fidelity.py "$BIN/mlagents-sim" "$MODELS/onnx"
  step "peer ONNX parity: our tract runner against onnxruntime on every Unity-trained ONNX model"
  peer "$python" tests/peer/peer_onnx_parity.py "$BIN/mlagents-run" "$MODELS/onnx"
  step "peer recurrent nodes: ONNX LSTM/GRU/RNN with every attribute form, our runner against float64 and onnxruntime"
  peer "$python" tests/peer/peer_recurrent_nodes.py "$BIN/mlagents-run"
  step "peer shape-annotated: Unity models after onnx.shape_inference run and check as the originals"
  peer "$python" tests/peer/peer_shape_annotated.py "$BIN/mlagents-run" "$MODELS/onnx"
  step "peer recurrent .nn: Unity's recurrent .nn policies over sequences, memories carried, against onnxruntime"
  peer "$python" tests/peer/peer_nn_recurrent.py "$BIN/mlagents-run" "$BIN/examples/lower_nn" "$MODELS/nn/Hallway.nn" "$MODELS/nn/discrete1vis0vec_2_3action_recurr.nn"
  step "peer convert: every Unity .nn converted to ONNX; onnxruntime on it equals our runner on the .nn"
  peer "$python" tests/peer/peer_convert.py "$BIN/mlagents-export" "$MODELS/nn"
  step "peer TensorBoard: TensorBoard's own reader reads our event files"
  peer "$python" tests/peer/peer_tensorboard.py "$BIN/examples/tensorboard_events"
  step "peer golden: the golden exports pass onnx.checker and onnxruntime reproduces their training outputs"
  peer "$python" tests/peer/peer_golden.py models/golden
  step "peer export: our ONNX exports pass onnx.checker and match onnxruntime"
  peer "$python" tests/peer/peer_export.py "$BIN/examples/export_random" "$BIN/mlagents-run"
}

phase_train() {
  await_venvs
  step "torch venv: PyPI's torch==2.13.0 for libtorch (installed on first use)"
  local torch_venv
  torch_venv=$(scripts/torch-venv.sh)
  export LIBTORCH_USE_PYTORCH=1 PATH="$torch_venv/bin:$PATH"
  if [ -n "$TRAIN_BUILD_JOB" ]; then
    step "build: the train feature (tch), the rest of it (started in the background during the peer tests)"
    if ! wait "$TRAIN_BUILD_JOB"; then
      cat "$TRAIN_BUILD_LOG" >&2
      rm -f "$TRAIN_BUILD_LOG"
      exit 1
    fi
    rm -f "$TRAIN_BUILD_LOG"
    TRAIN_BUILD_JOB=""
  else
    step "build: the train feature (tch)"
  fi
  # Built already when it ran in the background (cargo finds it fresh).
  build_train "$torch_venv"
  step "PPO on tch: training tests (and the unit tests of the train feature's modules)"
  cargo test --features train --lib --quiet -- --test-threads 1 2>&1
  # Each training test in a process of its own (cargo-nextest), as many at a time as there are
  # cores: libtorch's random generator and thread count are per process, so tests side by side
  # in one process would draw from each other's streams and change each other's thread count,
  # and their seeds would stop deciding their results. A test and its stand-in mostly wait on
  # each other: on 2 cores, two at a time took 1101 s where one at a time took 2145 s (7
  # December). Without nextest, one test at a time in cargo's own runner (the same results).
  if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --features train "${train_tests[@]}" --no-fail-fast --hide-progress-bar --status-level fail --final-status-level slow 2>&1
  else
    echo "cargo-nextest not found: the training tests run one at a time (cargo install cargo-nextest --locked runs them side by side)"
    cargo test --features train "${train_tests[@]}" --no-fail-fast --quiet -- --test-threads 1 2>&1 | grep -v '^\[INFO\]'
  fi
  step "trainer peer: the real mlagents-learn 0.28 (added to the torch venv) beside ours on the Corridor curriculum"
  bash "$(shared_file tools/peer-setup.sh)" "$torch_venv" >/dev/null
  peer "$torch_venv/bin/python" tests/peer/peer_curriculum.py "$BIN/mlagents-learn" "$BIN/mlagents-sim" tests/fixtures/config/Corridor_curriculum.yaml
  step "demonstration peer: the real 0.28 demo loader reads what mlagents-run --record-demo writes"
  peer "$torch_venv/bin/python" tests/peer/peer_demo.py "$BIN/mlagents-run" "$MODELS"
  step "drop-in vector envs: SB3 PPO through the SB3 VecEnv (3x), other action kinds, the gymnasium VectorEnv"
  local dropin
  dropin=$(scripts/dropin-venv.sh --with-torch "$torch_venv")
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" -W ignore tests/peer/dropin_sb3.py
  step "drop-in on a Ray cluster: RLlib PPO on two nodes (ray start), a player killed mid-run, 3x the first return"
  MLAGENTS_SIM="$BIN/mlagents-sim" peer "$dropin/bin/python" -W ignore tests/peer/dropin_rllib_cluster.py
}

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(rust peer train)
trap 'stop_background_jobs; report_times' EXIT
prune_stale_binaries
train_follows=false
if [[ " ${phases[*]} " == *" train "* ]]; then train_follows=true; fi
if [ "${phases[0]}" = rust ] && [[ " ${phases[*]} " == *" peer "* || "$train_follows" = true ]]; then
  prepare_venvs_in_background
fi
for phase in "${phases[@]}"; do
  case $phase in
    rust|peer|train) "phase_$phase" ;;
    *) echo "unknown phase '$phase' (phases: rust, peer, train)" >&2; exit 2 ;;
  esac
done
