"""The real mlagents-learn 0.28 and ours, side by side, on the same curriculum: the Corridor
stand-in with tests/fixtures/config/Corridor_curriculum.yaml and the same seed. Both must take
the lessons in the same order, all the way to the last; the steps at which each entered a
lesson (TensorBoard's Environment/Lesson Number/goal_distance at each summary, so to within
summary_freq) and the final rewards are reported.
Usage: python peer_curriculum.py MLAGENTS_LEARN MLAGENTS_SIM CONFIG [SEED] [MAX_STEPS]
(the Python mlagents-learn is the one beside this interpreter)"""
import os
import re
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ours, sim, config = sys.argv[1:4]
seed = sys.argv[4] if len(sys.argv) > 4 else "5"
max_steps = sys.argv[5] if len(sys.argv) > 5 else None
python_learn = os.path.join(os.path.dirname(sys.executable), "mlagents-learn")
LESSONS = ["Near", "Middle", "Far", "Farthest"]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL", message)


def lessons_entered(run_dir):
    acc = EventAccumulator(os.path.join(run_dir, "Corridor"), size_guidance={"scalars": 0})
    acc.Reload()
    entered, last = [], -1
    for event in acc.Scalars("Environment/Lesson Number/goal_distance"):
        if int(event.value) != last:
            last = int(event.value)
            entered.append((LESSONS[last], event.step))
    reward = acc.Scalars("Environment/Cumulative Reward")[-1]
    return entered, reward.value, reward.step


with tempfile.TemporaryDirectory() as out:
    text = open(config).read()
    if max_steps:
        text = re.sub(r"(?m)^( *max_steps:).*$", rf"\g<1> {max_steps}", text)
    path = os.path.join(out, "config.yaml")
    open(path, "w").write(text)
    runs = {
        "ours": [ours, path, "--run-id", "ours", "--env", "sim:Corridor", "--base-port", "0"],
        # (--env-args takes every argument after it: it comes last.)
        "python": [python_learn, path, "--run-id", "python", "--env", sim, "--no-graphics", "--base-port", "6605",
                   "--env-args", "--scene", "Corridor"],
    }
    sequences = {}
    for name, command in runs.items():
        command[2:2] = ["--seed", seed, "--results-dir", out, "--force"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
        log = done.stdout + done.stderr
        check(done.returncode == 0, f"{name} exited {done.returncode}: {log[-2000:]}")
        if done.returncode != 0:
            continue
        console = re.findall(r"is in lesson '([^']*)'", log)
        entered, reward, step = lessons_entered(os.path.join(out, name))
        sequences[name] = console
        print(f"{name:7s} console: {' > '.join(console)}; lesson entered by summary step: "
              f"{', '.join(f'{l}@{s}' for l, s in entered)}; final mean reward {reward:.3f} at step {step}")
        check(console == LESSONS, f"{name}: lessons {console}")
        # (Two lessons passed within one summary show as one step.)
        numbers = [LESSONS.index(l) for l, _ in entered]
        check(numbers == sorted(numbers) and numbers[-1] == len(LESSONS) - 1, f"{name}: TensorBoard lessons {entered}")
    check(len(sequences) == 2 and sequences["ours"] == sequences["python"], f"lesson sequences differ: {sequences}")

if failures:
    sys.exit(f"{len(failures)} failure(s)")
print("ok: the same lesson sequence as mlagents-learn 0.28")
