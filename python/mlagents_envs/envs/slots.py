"""Every agent of one behavior over several Unity players as a fixed row ("slot") of a vector
environment, with same-step autoreset: the shared core of the SB3 ``VecEnv``
(:mod:`mlagents_envs.envs.sb3_vec_env`) and the gymnasium ``VectorEnv``
(:mod:`mlagents_envs.envs.gymnasium_vector_env`).

Slots are the (player, agent) pairs asking for a decision after a reset, player by player.
One :meth:`AgentSlots.step` acts for every slot and steps the players (in one call into Rust,
:class:`~mlagents_envs.vec_environment.VecUnityEnvironment`; again only those with a slot still
waiting) until every slot has a new decision. An agent whose Unity episode ends on the way (a terminal row, often between two
decision steps) marks its slot done, with its terminal observation as the final observation
and its terminal reward; the agent's next episode (under its id or a new one Unity gives) then
fills the slot, and its first decision is the slot's next observation, as SB3's and
gymnasium's same-step autoreset expect.

For scenes with a fixed population of agents that decide at the same steps (3DBall, Walker,
Crawler, ...). An agent that asks for a decision again while another slot still waits for one
repeats its last action (its rewards add up); an agent beyond the slots, or a slot left without
a decision for ``max_unity_steps`` Unity steps, is an error.
"""

from typing import Dict, List, Optional, Tuple, Union

import numpy as np
from gymnasium import spaces

from mlagents_envs.base_env import ActionTuple, BehaviorSpec
from mlagents_envs.exception import UnityEnvironmentException
from mlagents_envs.vec_environment import VecUnityEnvironment

Observation = Union[np.ndarray, Dict[str, np.ndarray]]


def slot_observation_space(spec: BehaviorSpec) -> spaces.Space:
    """One agent's observation: a float32 Box, or a Dict ``obs_0``, ``obs_1``, ... of them when
    the behavior has several observations (SB3 takes Dict, not Tuple)."""
    boxes = [spaces.Box(-np.inf, np.inf, shape=tuple(o.shape), dtype=np.float32) for o in spec.observation_specs]
    return boxes[0] if len(boxes) == 1 else spaces.Dict({f"obs_{i}": box for i, box in enumerate(boxes)})


def slot_action_space(spec: BehaviorSpec) -> spaces.Space:
    """One agent's action: Box(-1, 1) for continuous actions, Discrete for one branch,
    MultiDiscrete for several; hybrid actions are refused (SB3 has no Tuple action space)."""
    action_spec = spec.action_spec
    if action_spec.is_continuous():
        return spaces.Box(-1.0, 1.0, shape=(action_spec.continuous_size,), dtype=np.float32)
    if action_spec.is_discrete():
        branches = list(action_spec.discrete_branches)
        return spaces.Discrete(branches[0]) if len(branches) == 1 else spaces.MultiDiscrete(branches)
    raise UnityEnvironmentException(
        "the vector envs take continuous or discrete actions, not both (hybrid actions: use the "
        "PettingZoo or RLlib wrappers)"
    )


class AgentSlots:
    """The agents of ``behavior_name`` (the only behavior when None) over ``players`` as slots.
    ``add_group_reward`` adds group rewards to the agents' rewards."""

    def __init__(
        self,
        players: VecUnityEnvironment,
        behavior_name: Optional[str] = None,
        add_group_reward: bool = True,
        max_unity_steps: int = 1000,
    ):
        self.players = players
        players.reset()
        specs = players.behavior_specs
        if behavior_name is None:
            if len(specs) != 1:
                raise UnityEnvironmentException(
                    f"the scene has behaviors {sorted(specs)}: name the one for the vector env (behavior_name)"
                )
            behavior_name = next(iter(specs))
        if behavior_name not in specs:
            raise UnityEnvironmentException(f"no behavior {behavior_name!r} in the scene (it has {sorted(specs)})")
        self.behavior_name = behavior_name
        self.spec = specs[behavior_name]
        self.observation_space = slot_observation_space(self.spec)
        self.action_space = slot_action_space(self.spec)
        self._add_group_reward = add_group_reward
        self._max_unity_steps = max_unity_steps
        self._slots_of: List[Dict[int, int]] = []
        self._assign_slots()
        self.num_slots = sum(len(slots) for slots in self._slots_of)
        if self.num_slots == 0:
            raise UnityEnvironmentException(f"no agent of {behavior_name!r} asks for a decision after a reset")
        self._observations = [
            np.zeros((self.num_slots, *o.shape), dtype=np.float32) for o in self.spec.observation_specs
        ]
        self._actions = np.zeros((self.num_slots, *self._action_shape()), dtype=self._action_dtype())
        self._fresh = True

    @classmethod
    def launch(
        cls,
        file_name: str,
        num_players: int = 1,
        seed: int = 0,
        behavior_name: Optional[str] = None,
        no_graphics: bool = True,
        timeout_wait: int = 60,
        additional_args: Optional[List[str]] = None,
        add_group_reward: bool = True,
    ) -> "AgentSlots":
        """Starts ``num_players`` players of ``file_name`` (a build or ``"sim:SCENE"``, free
        ports, seeds ``seed + i``) and makes slots of their agents; the players are closed when
        that fails."""
        players = VecUnityEnvironment(
            file_name, num_players, seed=seed, no_graphics=no_graphics, timeout_wait=timeout_wait,
            additional_args=additional_args,
        )
        try:
            return cls(players, behavior_name, add_group_reward)
        except BaseException:
            players.close()
            raise

    def _action_shape(self) -> Tuple[int, ...]:
        action_spec = self.spec.action_spec
        return (action_spec.continuous_size,) if action_spec.is_continuous() else (action_spec.discrete_size,)

    def _action_dtype(self) -> type:
        return np.float32 if self.spec.action_spec.is_continuous() else np.int32

    def _assign_slots(self) -> None:
        """Slots of the agents asking for a decision now, player by player: each player keeps
        its range of slots; ``_slots_of[player]`` maps its agents to theirs."""
        self._slots_of, self._slot_ranges, first = [], [], 0
        for decisions, _ in self.players.get_steps(self.behavior_name):
            self._slots_of.append({int(agent): first + row for row, agent in enumerate(decisions.agent_id)})
            self._slot_ranges.append(range(first, first + len(decisions)))
            first += len(decisions)

    def _observation(self) -> Observation:
        """A copy of every slot's latest observation."""
        if len(self._observations) == 1:
            return self._observations[0].copy()
        return {f"obs_{i}": batch.copy() for i, batch in enumerate(self._observations)}

    def _slot_observation(self, obs: List[np.ndarray], row: int) -> Observation:
        if len(obs) == 1:
            return obs[0][row].copy()
        return {f"obs_{i}": batch[row].copy() for i, batch in enumerate(obs)}

    def reset(self) -> Observation:
        """Resets every player (not on the first call: the constructor just did); the slots are
        assigned again (the population must not change)."""
        if not self._fresh:
            self.players.reset()
        self._fresh = False
        ranges = self._slot_ranges
        self._assign_slots()
        if self._slot_ranges != ranges:
            raise UnityEnvironmentException(
                f"{[len(r) for r in self._slot_ranges]} agents per player ask for a decision after a reset, "
                f"not {[len(r) for r in ranges]}: the vector envs need a fixed population"
            )
        for player, (decisions, _) in enumerate(self.players.get_steps(self.behavior_name)):
            self._store(player, decisions, np.arange(len(decisions)))
        return self._observation()

    def _store(self, player: int, decisions, rows: np.ndarray) -> None:
        slots = [self._slots_of[player][int(decisions.agent_id[row])] for row in rows]
        for batch, obs in zip(self._observations, decisions.obs):
            batch[slots] = obs[rows]

    def step(
        self, actions: np.ndarray
    ) -> Tuple[Observation, np.ndarray, np.ndarray, np.ndarray, Dict[int, Observation]]:
        """Acts ``actions`` (one row per slot) and steps until every slot has a decision.
        Returns the observations, rewards, terminated and truncated flags per slot, and the final
        observation of each slot whose agent's episode ended."""
        self._actions[:] = np.reshape(actions, self._actions.shape)
        rewards = np.zeros(self.num_slots, dtype=np.float32)
        terminated = np.zeros(self.num_slots, dtype=bool)
        truncated = np.zeros(self.num_slots, dtype=bool)
        final: Dict[int, Observation] = {}
        waiting = np.ones(self.num_slots, dtype=bool)
        stepping = list(range(len(self.players)))
        for _ in range(self._max_unity_steps):
            self._set_actions(stepping)
            self.players.step(stepping)
            for player in stepping:
                decisions, terminals = self.players.envs[player].get_steps(self.behavior_name)
                self._read_terminals(player, terminals, rewards, terminated, truncated, final, waiting)
                self._read_decisions(player, decisions, rewards, terminated | truncated, waiting)
            if not waiting.any():
                return self._observation(), rewards, terminated, truncated, final
            # Only the players with a slot still waiting step again: the others' agents have
            # their decisions (stepping them would repeat their actions).
            stepping = [p for p, slots in enumerate(self._slot_ranges) if waiting[slots.start:slots.stop].any()]
        stuck = [int(slot) for slot in np.flatnonzero(waiting)]
        raise UnityEnvironmentException(
            f"slots {stuck[:8]} got no decision in {self._max_unity_steps} Unity steps: the vector envs "
            "need a fixed population of agents"
        )

    def _set_actions(self, players: List[int]) -> None:
        """Every agent of ``players`` asking for a decision gets its slot's action."""
        for player in players:
            env = self.players.envs[player]
            decisions, _ = env.get_steps(self.behavior_name)
            action = self._actions[[self._slots_of[player][int(agent)] for agent in decisions.agent_id]]
            if self.spec.action_spec.is_continuous():
                env.set_actions(self.behavior_name, ActionTuple(continuous=action))
            else:
                env.set_actions(self.behavior_name, ActionTuple(discrete=action))

    def _reward(self, batch, row: int) -> float:
        return float(batch.reward[row] + (batch.group_reward[row] if self._add_group_reward else 0.0))

    def _read_terminals(self, player, terminals, rewards, terminated, truncated, final, waiting) -> None:
        """A terminal row ends its slot's episode: the slot is left free for the agent's next
        one, and waits for that one's first decision. (An episode that ends before its first
        decision, in the same step, leaves nothing in the slot.)"""
        slots = self._slots_of[player]
        for row, agent in enumerate(terminals.agent_id):
            slot = slots.pop(int(agent), None)
            if slot is None:
                continue
            waiting[slot] = True
            if terminated[slot] or truncated[slot]:
                continue
            rewards[slot] += self._reward(terminals, row)
            interrupted = bool(terminals.interrupted[row])
            terminated[slot], truncated[slot] = not interrupted, interrupted
            final[slot] = self._slot_observation(terminals.obs, row)

    def _read_decisions(self, player, decisions, rewards, ended, waiting) -> None:
        """A decision row gives its slot its next observation; an agent new to the player takes
        a slot its previous agent left."""
        slots = self._slots_of[player]
        rows = []
        for row, agent in enumerate(decisions.agent_id):
            agent = int(agent)
            if agent not in slots:
                free = sorted(set(self._slot_ranges[player]) - set(slots.values()))
                if not free:
                    raise UnityEnvironmentException(
                        f"agent {agent} of player {player} has no slot: the vector envs need a fixed population"
                    )
                slots[agent] = free[0]
            slot = slots[agent]
            # The first reward of an agent's next episode is not part of the ended one.
            if not ended[slot]:
                rewards[slot] += self._reward(decisions, row)
            waiting[slot] = False
            rows.append(row)
        if rows:
            self._store(player, decisions, np.asarray(rows))

    def close(self) -> None:
        """Closes every player."""
        self.players.close()
