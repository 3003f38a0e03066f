"""Writes tests/fixtures/poca/critic_reference.json from ML-Agents 0.28's own POCA critic
(`TorchPOCAOptimizer.POCAValueNetwork` over `MultiAgentNetworkBody`, poca.md §2).

Run with the trainer's venv (`../shared/tools/peer-setup.sh VENV`, not `--envs-only`):

    VENV/bin/python tests/peer/poca_critic_reference.py tests/fixtures/poca/critic_reference.json

One behavior (vector observations of 3 and 2, actions: 2 continuous and discrete branches of
3 and 2), 8 hidden units in 2 layers, two reward signals. Weights follow `fill` of
`tests/peer/encoder_reference.py`; inputs follow `value` below, which the Rust test reproduces.
Three rows: row 0 with two mates, row 1 with one (slot 1 absent: NaN, as 0.28 pads), row 2
alone. Recorded: the state dict's names and shapes, a lone agent's values before any group was
seen (running maximum 1), then the group's values (critic_pass over self + mates) and
baselines (mates with their actions, self without), and the running maximum after.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from mlagents.trainers.poca.optimizer_torch import TorchPOCAOptimizer  # noqa: E402
from mlagents.trainers.settings import NetworkSettings  # noqa: E402
from mlagents.trainers.torch.agent_action import AgentAction  # noqa: E402
from mlagents_envs.base_env import ActionSpec, DimensionProperty, ObservationSpec, ObservationType  # noqa: E402

from encoder_reference import fill  # noqa: E402

SIZES = [3, 2]
CONTINUOUS = 2
BRANCHES = (3, 2)
ROWS = 3
SLOTS = 2
# Mates present per row.
PRESENT = [2, 1, 0]


def value(agent, obs, k, row):
    """Value k of observation `obs` of agent `agent` (0 = self, 1.. = mate slots) in `row`."""
    return ((k * 37 + row * 11 + obs * 5 + agent * 13) % 101) / 50.0 - 1.0


def observations(agent):
    rows = []
    for i, size in enumerate(SIZES):
        data = [[value(agent, i, k, r) for k in range(size)] for r in range(ROWS)]
        t = torch.tensor(data, dtype=torch.float32)
        if agent > 0:
            for r in range(ROWS):
                if PRESENT[r] < agent:
                    t[r] = float("nan")
        rows.append(t)
    return rows


def actions(agent):
    """Mate slot `agent`'s action in each row: continuous ((3a + r) mod 5) / 4 - 0.5 and
    ((3a + r + 1) mod 5) / 4 - 0.5, branch choices (a + r) mod 3 and (a + r) mod 2; 0 where
    the slot is absent."""
    cont, d0, d1 = [], [], []
    for r in range(ROWS):
        present = PRESENT[r] >= agent
        cont.append([((3 * agent + r + j) % 5) / 4.0 - 0.5 if present else 0.0 for j in range(CONTINUOUS)])
        d0.append((agent + r) % 3 if present else 0)
        d1.append((agent + r) % 2 if present else 0)
    return AgentAction(torch.tensor(cont), [torch.tensor(d0), torch.tensor(d1)])


def main():
    specs = [ObservationSpec((s,), (DimensionProperty.NONE,), ObservationType.DEFAULT, f"obs_{i}") for i, s in enumerate(SIZES)]
    settings = NetworkSettings(normalize=False, hidden_units=8, num_layers=2)
    critic = TorchPOCAOptimizer.POCAValueNetwork(["extrinsic", "curiosity"], specs, settings, ActionSpec(CONTINUOUS, BRANCHES))
    # The running maximum is a parameter too; it stays as constructed (1).
    state = {k: v for k, v in critic.state_dict().items() if not k.startswith("network_body.processors.")}
    with torch.no_grad():
        for name, tensor in state.items():
            if name != "network_body._current_max_agents":
                tensor.copy_(torch.tensor(fill(name, list(tensor.shape)), dtype=torch.float32).reshape(tensor.shape))
    me = observations(0)
    mates = [observations(a) for a in range(1, SLOTS + 1)]
    with torch.no_grad():
        alone, _ = critic.critic_pass([me])
        values, _ = critic.critic_pass([me] + mates)
        baselines, _ = critic.baseline(me, (mates, [actions(a) for a in range(1, SLOTS + 1)]))
    streams = ["extrinsic", "curiosity"]
    out = {
        "weights": [[name, list(t.shape)] for name, t in state.items()],
        "alone": [alone[s].tolist() for s in streams],
        "values": [values[s].tolist() for s in streams],
        "baselines": [baselines[s].tolist() for s in streams],
        "max_agents": float(critic.network_body._current_max_agents),
    }
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
