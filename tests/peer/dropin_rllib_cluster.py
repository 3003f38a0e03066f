"""RLlib 2.60 PPO across a Ray cluster of two nodes on this machine, through the drop-in
(`python/examples/rllib_ppo.py`):

- `ray start --head` and a second `ray start --address` (one CPU each, token authentication),
  each node with `mlagents-sim` in `MLAGENTS_SIM`; the example runs against the cluster with two env runners,
  which land on different nodes, each driving its own `mlagents-sim --scene 3DBall`;
- after the second iteration one of the players is killed (SIGKILL): its runner replaces it
  (RLlib's `restart_failed_sub_environments`) and training goes on;
- the mean return of the Unity episodes of the last two iterations is at least 3x the first's;
- no `mlagents-sim` survives the example's shutdown (nor `ray stop`, which ends this machine's
  Ray processes: run it where no other Ray cluster of yours runs).

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_rllib_cluster.py [ITERATIONS]
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from report import check, finish

ITERATIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
EXAMPLE = Path(__file__).resolve().parents[2] / "python" / "examples" / "rllib_ppo.py"
BIN = Path(sys.executable).parent
SIM = os.environ["MLAGENTS_SIM"]
# Ray 2.60 clusters authenticate with a token (`ray start --head` turns it on): every node and
# the driver read it from the same file here; on a real cluster it is copied to each node.
TOKEN = Path(tempfile.mkdtemp(prefix="ray-token-")) / "auth_token"
TOKEN.write_text(secrets.token_hex(32))
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", MLAGENTS_SIM=SIM, RAY_AUTH_MODE="token",
           RAY_AUTH_TOKEN_PATH=str(TOKEN))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sims() -> list:
    """Pids of the running mlagents-sim players started from SIM."""
    found = subprocess.run(["pgrep", "-f", f"^{SIM} "], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


def ray(*args: str) -> None:
    """Runs the ray CLI of this venv; a failure raises with its output."""
    done = subprocess.run([str(BIN / "ray"), *args], env=ENV, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} exited with {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")


port = free_port()
lines, killed = [], None
try:
    ray("start", "--head", "--port", str(port), "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats")
    ray("start", "--address", f"127.0.0.1:{port}", "--num-cpus=1", "--disable-usage-stats")
    # stderr to a file: a pipe nobody reads while stdout is read could fill and stall the run.
    stderr_file = tempfile.TemporaryFile(mode="w+")
    run = subprocess.Popen(
        [sys.executable, "-W", "ignore", str(EXAMPLE), "--address", f"127.0.0.1:{port}", "--env-runners", "2",
         "--iterations", str(ITERATIONS), "--file-name", "sim:3DBall", "--seed", "1"],
        env=ENV, stdout=subprocess.PIPE, stderr=stderr_file, text=True, start_new_session=True,
    )
    for line in run.stdout:
        if not line.startswith("{"):
            continue
        lines.append(json.loads(line))
        print(line.strip(), flush=True)
        if lines[-1].get("iteration") == 2 and killed is None:
            players = sims()
            if players:
                killed = players[0]
                os.kill(killed, signal.SIGKILL)
    run.wait(timeout=120)
    stderr_file.seek(0)
    stderr = stderr_file.read()
    check(run.returncode == 0, f"the example exits with 0 (got {run.returncode})" + ("" if run.returncode == 0 else f": {stderr[-3000:]}"))
    # The example's own shutdown (algorithm.stop()) closes every player, before Ray stops.
    for _ in range(20):
        if not sims():
            break
        time.sleep(0.5)
    check(not sims(), f"the example's shutdown leaves no mlagents-sim ({len(sims())} left before `ray stop`)")

    iterations = [line for line in lines if "iteration" in line]
    runners = [line["env_runners"] for line in lines if "env_runners" in line]
    nodes = {runner["node"] for runner in runners[0]} if runners else set()
    seeds = [seed for runner in runners[0] for seed in runner["player_seeds"]] if runners else []
    check(len(runners) == 2 and len(runners[0]) == 2 and len(nodes) == 2 and len(set(seeds)) == 2,
          f"two env runners on two Ray nodes ({len(nodes)} nodes; player seeds {seeds}; peak memory per runner "
          f"{[runner['max_rss_mb'] for runner in runners[-1]] if runners else '?'} MB)")
    check(killed is not None and iterations and iterations[-1]["players_replaced"] > 0
          and len(iterations) == ITERATIONS,
          f"player {killed} killed after iteration 2 was replaced ({iterations[-1]['players_replaced'] if iterations else '?'} "
          f"env step failures) and training went on to iteration {len(iterations)}")
    first = iterations[0]["unity_return_mean"] if iterations else None
    last = [line["unity_return_mean"] for line in iterations[-2:] if line["unity_return_mean"] is not None]
    ratio = (sum(last) / len(last)) / first if first and last else 0.0
    check(ratio >= 3.0, f"mean Unity episode return {first:.3f} in iteration 1, {sum(last) / max(1, len(last)):.3f} in the "
          f"last two: {ratio:.1f}x (at least 3x)")
except Exception as error:  # noqa: BLE001 - reported as the failure
    traceback.print_exc()
    check(False, f"the cluster run: {type(error).__name__}: {error}")
finally:
    subprocess.run([str(BIN / "ray"), "stop", "--force"], env=ENV, capture_output=True, timeout=180)
    time.sleep(1)
    left = sims()
    check(not left, f"no mlagents-sim survives the run and `ray stop` ({len(left)} left)")
    for pid in left:
        os.kill(pid, signal.SIGKILL)

finish()
