"""TensorBoard reads our event files: scalars and a histogram written by
examples/tensorboard_events.rs come back through TensorBoard's own EventAccumulator.
Usage: python peer_tensorboard.py PATH/TO/tensorboard_events"""
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL", message)


with tempfile.TemporaryDirectory() as folder:
    subprocess.run([sys.argv[1], folder], check=True, capture_output=True)
    acc = EventAccumulator(folder, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    check("Environment/Cumulative Reward" in tags["scalars"], f"scalar tags {tags['scalars']}")
    rewards = [(e.step, round(e.value, 4)) for e in acc.Scalars("Environment/Cumulative Reward")]
    check(rewards == [(12000, 1.5), (24000, 3.0), (36000, 4.5), (48000, 6.0), (60000, 7.5)], f"rewards {rewards}")
    lr = acc.Scalars("Policy/Learning Rate")
    check(len(lr) == 5 and abs(lr[0].value - 3.0e-4) < 1e-9, f"learning rate {lr}")
    check("Simple/Return Histogram" in tags["histograms"], f"histogram tags {tags['histograms']}")
    if "Simple/Return Histogram" in tags["histograms"]:
        h = acc.Histograms("Simple/Return Histogram")[0].histogram_value
        check((h.min, h.max, h.num, h.sum) == (1.0, 10.0, 5.0, 18.0), f"histogram {h}")
print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
