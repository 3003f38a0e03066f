"""Writes tests/fixtures/encoders/reference.json from ML-Agents 0.28's own visual encoders.

Run with the trainer's venv (`../shared/tools/peer-setup.sh VENV`, not `--envs-only`):

    VENV/bin/python tests/peer/encoder_reference.py tests/fixtures/encoders/reference.json

For each case: the encoder's state_dict (names, shapes), its parameter count and output
shape, and, for the small cases, its output on a fixed image with weights set by a formula
the Rust tests reproduce (`fill` below); 0.28's "too small" error for each type; and the
goal-conditioned body (`ConditionalEncoder` with its hypernetwork layer) likewise.
"""
import json
import math
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mlagents.trainers.exception import UnityTrainerException  # noqa: E402
from mlagents.trainers.settings import EncoderType  # noqa: E402
from mlagents.trainers.torch.conditioning import ConditionalEncoder  # noqa: E402
from mlagents.trainers.torch.utils import ModelUtils  # noqa: E402

TYPES = ["simple", "nature_cnn", "resnet", "match3", "fully_connected"]

# The sizes of the shipped configs' image observations (reward-signals.md §8.2, §9), with the
# behaviors' hidden_units: shapes and parameter counts only.
SHIPPED = [
    ("simple", 84, 84, 3, 128),  # VisualFoodCollector-style camera
    ("simple", 64, 84, 3, 128),  # GridWorld camera
    ("nature_cnn", 84, 84, 12, 128),  # Visual3DBall, 4 stacked frames
    ("nature_cnn", 40, 40, 5, 128),  # grid sensor
    ("resnet", 84, 84, 3, 256),
    ("resnet", 64, 84, 3, 128),
    ("match3", 9, 8, 6, 4),  # Match3 board (hidden 4 in ppo/Match3.yaml)
    ("match3", 5, 5, 5, 16),  # test_visual_advanced_ppo
    ("fully_connected", 40, 40, 5, 128),
]

# Small cases whose outputs are recorded.
FORWARD = [
    ("simple", 20, 21, 2, 8),
    ("nature_cnn", 36, 37, 1, 8),
    ("resnet", 15, 17, 2, 8),
    ("match3", 6, 5, 3, 8),
    ("fully_connected", 4, 3, 2, 8),
]


def fill(name, shape):
    """Deterministic weights: value i of tensor `name` is
    (((i * 7919 + s * 104729) % 2001) - 1000) / 1000 / sqrt(fan_in), s = sum of the name's bytes,
    fan_in = product of shape[1:] (1 for a bias)."""
    s = sum(name.encode())
    n = int(np.prod(shape))
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    i = np.arange(n, dtype=np.int64)
    v = (((i * 7919 + s * 104729) % 2001) - 1000) / 1000.0 / math.sqrt(fan_in)
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


def image(rows, h, w, c):
    """Row r, value k (HWC order): ((k * 37 + r * 11) % 101) / 100."""
    k = np.arange(h * w * c, dtype=np.int64)
    return np.stack([((k * 37 + r * 11) % 101) / 100.0 for r in range(rows)]).astype(np.float32).reshape(rows, h, w, c)


def build(kind, h, w, c, hidden):
    cls = ModelUtils.get_encoder_for_type(EncoderType(kind))
    return cls(h, w, c, hidden)


def case(kind, h, w, c, hidden, forward):
    torch.manual_seed(0)
    encoder = build(kind, h, w, c, hidden)
    state = encoder.state_dict()
    entry = {
        "type": kind,
        "shape": [h, w, c],
        "hidden_units": hidden,
        "weights": [[name, list(t.shape)] for name, t in state.items()],
        "parameters": sum(p.numel() for p in encoder.parameters()),
    }
    x = image(2, h, w, c)
    if forward:
        with torch.no_grad():
            for name, t in state.items():
                t.copy_(fill(name, list(t.shape)))
            y = encoder(torch.from_numpy(x))
        entry["output"] = y.numpy().astype(float).tolist()
    else:
        with torch.no_grad():
            y = encoder(torch.from_numpy(x[:1]))
    entry["output_shape"] = list(y.shape)
    return entry


# ConditionalEncoder cases (goal_conditioning_type: hyper): input width (the goal's columns last),
# goal width, hidden units, layers.
CONDITIONAL = [(6, 2, 8, 2), (5, 3, 4, 1), (7, 1, 6, 3)]


def conditional(input_size, goal_size, hidden, layers):
    """The body as NetworkBody builds it (one conditional layer, the last), its state_dict, and
    its output for rows x (formula as `image`, flat) whose last goal_size columns are the goal."""
    torch.manual_seed(0)
    body = ConditionalEncoder(input_size, goal_size, hidden, layers, 1)
    state = body.state_dict()
    x = torch.from_numpy(image(3, 1, 1, input_size).reshape(3, input_size) * 2 - 1)
    with torch.no_grad():
        for name, t in state.items():
            t.copy_(fill(name, list(t.shape)))
        y = body(x, x[:, input_size - goal_size:])
    return {
        "input": input_size,
        "goal": goal_size,
        "hidden_units": hidden,
        "num_layers": layers,
        "weights": [[name, list(t.shape)] for name, t in state.items()],
        "parameters": sum(p.numel() for p in body.parameters()),
        "output": y.numpy().astype(float).tolist(),
    }


def too_small(kind):
    minimum = ModelUtils.MIN_RESOLUTION_FOR_ENCODER[EncoderType(kind)]
    try:
        ModelUtils._check_resolution_for_encoder(minimum - 1, minimum, EncoderType(kind))
    except UnityTrainerException as e:
        return {"type": kind, "min": minimum, "error": str(e)}
    return {"type": kind, "min": minimum, "error": None}


def main():
    out = {
        "made_by": "tests/peer/encoder_reference.py with mlagents 0.28.0 and torch " + torch.__version__.split("+")[0],
        "cases": [case(*c, forward=False) for c in SHIPPED] + [case(*c, forward=True) for c in FORWARD],
        "minimums": [too_small(kind) for kind in TYPES],
        "conditional": [conditional(*c) for c in CONDITIONAL],
    }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
