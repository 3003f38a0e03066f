"""Writes tests/fixtures/attention/reference.json from ML-Agents 0.28's own observation encoder
with entity (variable-length) observations: `ObservationEncoder`, its `EntityEmbedding`
processors, `x_self_encoder` and the shared `ResidualSelfAttention` (poca.md §4).

Run with the trainer's venv (`../shared/tools/peer-setup.sh VENV`, not `--envs-only`):

    VENV/bin/python tests/peer/attention_reference.py tests/fixtures/attention/reference.json

For each case (a list of observations, vectors and entity buffers): the encoder's state_dict
(names, shapes) and output width, its zero-entity masks and its output on three rows, with
weights set by the formula of `tests/peer/encoder_reference.py` (`fill`) and inputs set by
`observation` below, which the Rust tests reproduce: row 0 has every entity real, row 1 an
entity too small to count (Σx² < 0.01) then one real entity, row 2 none.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mlagents.trainers.settings import EncoderType  # noqa: E402
from mlagents.trainers.torch.attention import get_zero_entities_mask  # noqa: E402
from mlagents.trainers.torch.networks import ObservationEncoder  # noqa: E402
from mlagents_envs.base_env import DimensionProperty, ObservationSpec, ObservationType  # noqa: E402

from encoder_reference import fill  # noqa: E402

# Each case: observation shapes; rank 2 = an entity buffer [max entities, entity size].
CASES = [
    [(3,), (6, 5)],
    [(4, 5), (3, 2)],
    [(2,), (1,), (5, 3)],
]
ROWS = 3


def spec(shape):
    if len(shape) == 2:
        properties = (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE)
    else:
        properties = (DimensionProperty.NONE,)
    return ObservationSpec(shape, properties, ObservationType.DEFAULT, "obs")


def observation(index, shape, row):
    """Vectors: value k of row r = ((37k + 11r + 5i) mod 101) / 50 - 1 for observation i.
    Entity buffers: the same formula over the flat buffer, then row 0 keeps every entity, row 1
    turns entity 0 into 0.02s (masked by 0.28's Σx² < 0.01 rule) and keeps entity 1 only, row 2
    keeps none (all zeros)."""
    size = int(np.prod(shape))
    k = np.arange(size)
    values = (((k * 37 + row * 11 + index * 5) % 101) / 50.0 - 1.0).astype(np.float32)
    if len(shape) == 2:
        entities = values.reshape(shape)
        if row == 1:
            kept = np.zeros_like(entities)
            kept[0, :] = 0.02
            if shape[0] > 1:
                kept[1, :] = entities[1, :]
            entities = kept
        elif row == 2:
            entities = np.zeros_like(entities)
        values = entities.reshape(-1)
    return values.tolist()


def case(shapes):
    encoder = ObservationEncoder([spec(s) for s in shapes], 16, EncoderType.SIMPLE, False)
    state = encoder.state_dict()
    with torch.no_grad():
        for name, tensor in state.items():
            tensor.copy_(torch.tensor(fill(name, list(tensor.shape)), dtype=torch.float32).reshape(tensor.shape))
    inputs = [
        torch.tensor([observation(i, s, r) for r in range(ROWS)], dtype=torch.float32).reshape((ROWS,) + tuple(s))
        for i, s in enumerate(shapes)
    ]
    with torch.no_grad():
        output = encoder(inputs)
        masks = get_zero_entities_mask([x for x in inputs if x.dim() == 3])
    return {
        "shapes": [list(s) for s in shapes],
        "weights": [[name, list(t.shape)] for name, t in state.items()],
        "output_width": encoder.total_enc_size,
        "masks": [m.tolist() for m in masks],
        "output": output.tolist(),
    }


def main():
    out = {"cases": [case(c) for c in CASES]}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
