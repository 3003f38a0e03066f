"""The environment API of ``mlagents_envs`` 0.28: steps, actions, specs and :class:`BaseEnv`.

Agents that need an action are in :class:`DecisionSteps`, agents whose episode ended in
:class:`TerminalSteps` (an agent may be in both in one step: its episode ended and the next
one already asks for a decision). Each holds numpy arrays with the batch on the first axis.

Differences from 0.28, on purpose: ``group_id`` is always an int32 array (0.28 gives a Python
list when there are agents and an array when there are none).
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import Enum, IntFlag
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from mlagents_envs.exception import UnityActionException

AgentId = int
GroupId = int
BehaviorName = str


class DecisionStep(NamedTuple):
    """One agent's decision step (see :class:`DecisionSteps`)."""

    obs: List[np.ndarray]
    reward: float
    agent_id: AgentId
    action_mask: Optional[List[np.ndarray]]
    group_id: int
    group_reward: float


class _AgentBatch:
    """What DecisionSteps and TerminalSteps share: the batch's agent ids, their rows, length
    and iteration over the ids."""

    agent_id: np.ndarray
    _agent_id_to_index: Optional[Dict[AgentId, int]] = None

    @property
    def agent_id_to_index(self) -> Dict[AgentId, int]:
        """The row of each agent id in this batch."""
        if self._agent_id_to_index is None:
            self._agent_id_to_index = {int(agent_id): row for row, agent_id in enumerate(self.agent_id)}
        return self._agent_id_to_index

    def __len__(self) -> int:
        return len(self.agent_id)

    def __iter__(self) -> Iterator[AgentId]:
        yield from self.agent_id

    def _row_of(self, agent_id: AgentId, kind: str) -> int:
        if agent_id not in self.agent_id_to_index:
            raise KeyError(f"agent_id {agent_id} is not present in the {kind}")
        return self.agent_id_to_index[agent_id]


class DecisionSteps(_AgentBatch):
    """The agents of one behavior that need an action, in Unity's order.

    - ``obs``: one float32 array per observation, shape (n, *observation shape);
    - ``reward``, ``group_reward``: float32 (n,); ``agent_id``, ``group_id``: int32 (n,);
    - ``action_mask``: None, or one bool (n, branch size) array per discrete branch, True
      where the action is NOT allowed.
    """

    def __init__(self, obs, reward, agent_id, action_mask, group_id, group_reward):
        self.obs: List[np.ndarray] = obs
        self.reward: np.ndarray = reward
        self.agent_id: np.ndarray = agent_id
        self.action_mask: Optional[List[np.ndarray]] = action_mask
        self.group_id: np.ndarray = group_id
        self.group_reward: np.ndarray = group_reward
        self._agent_id_to_index = None

    def __getitem__(self, agent_id: AgentId) -> DecisionStep:
        row = self._row_of(agent_id, "DecisionSteps")
        mask = None if self.action_mask is None else [branch[row] for branch in self.action_mask]
        return DecisionStep(
            obs=[batch[row] for batch in self.obs],
            reward=self.reward[row],
            agent_id=agent_id,
            action_mask=mask,
            group_id=self.group_id[row],
            group_reward=self.group_reward[row],
        )

    @staticmethod
    def empty(spec: "BehaviorSpec") -> "DecisionSteps":
        """No agents, with the observation shapes of ``spec``."""
        return DecisionSteps(
            obs=[np.zeros((0,) + tuple(o.shape), dtype=np.float32) for o in spec.observation_specs],
            reward=np.zeros(0, dtype=np.float32),
            agent_id=np.zeros(0, dtype=np.int32),
            action_mask=None,
            group_id=np.zeros(0, dtype=np.int32),
            group_reward=np.zeros(0, dtype=np.float32),
        )


class TerminalStep(NamedTuple):
    """One agent's last step of an episode (see :class:`TerminalSteps`)."""

    obs: List[np.ndarray]
    reward: float
    interrupted: bool
    agent_id: AgentId
    group_id: int
    group_reward: float


class TerminalSteps(_AgentBatch):
    """The agents of one behavior whose episode ended at this step.

    ``interrupted`` (bool (n,)) is True where the episode was cut (max step reached), not
    ended by the agent; the other fields are as in :class:`DecisionSteps`.
    """

    def __init__(self, obs, reward, interrupted, agent_id, group_id, group_reward):
        self.obs: List[np.ndarray] = obs
        self.reward: np.ndarray = reward
        self.interrupted: np.ndarray = interrupted
        self.agent_id: np.ndarray = agent_id
        self.group_id: np.ndarray = group_id
        self.group_reward: np.ndarray = group_reward
        self._agent_id_to_index = None

    def __getitem__(self, agent_id: AgentId) -> TerminalStep:
        row = self._row_of(agent_id, "TerminalSteps")
        return TerminalStep(
            obs=[batch[row] for batch in self.obs],
            reward=self.reward[row],
            interrupted=self.interrupted[row],
            agent_id=agent_id,
            group_id=self.group_id[row],
            group_reward=self.group_reward[row],
        )

    @staticmethod
    def empty(spec: "BehaviorSpec") -> "TerminalSteps":
        """No agents, with the observation shapes of ``spec``."""
        return TerminalSteps(
            obs=[np.zeros((0,) + tuple(o.shape), dtype=np.float32) for o in spec.observation_specs],
            reward=np.zeros(0, dtype=np.float32),
            interrupted=np.zeros(0, dtype=bool),
            agent_id=np.zeros(0, dtype=np.int32),
            group_id=np.zeros(0, dtype=np.int32),
            group_reward=np.zeros(0, dtype=np.float32),
        )


class ActionTuple:
    """Actions for a batch of agents: ``continuous`` float32 (n, size) and ``discrete`` int32
    (n, branches). Setting one part alone makes the other an empty (n, 0) array."""

    def __init__(self, continuous: Optional[np.ndarray] = None, discrete: Optional[np.ndarray] = None):
        self._continuous: Optional[np.ndarray] = None
        self._discrete: Optional[np.ndarray] = None
        if continuous is not None:
            self.add_continuous(continuous)
        if discrete is not None:
            self.add_discrete(discrete)

    @property
    def discrete_dtype(self) -> np.dtype:
        """The dtype discrete actions are cast to."""
        return np.int32

    @property
    def continuous(self) -> Optional[np.ndarray]:
        return self._continuous

    @property
    def discrete(self) -> Optional[np.ndarray]:
        return self._discrete

    def add_continuous(self, continuous: np.ndarray) -> None:
        """Sets the continuous part (cast to float32)."""
        if continuous.dtype != np.float32:
            continuous = continuous.astype(np.float32, copy=False)
        self._continuous = continuous
        if self._discrete is None:
            self._discrete = np.zeros((continuous.shape[0], 0), dtype=self.discrete_dtype)

    def add_discrete(self, discrete: np.ndarray) -> None:
        """Sets the discrete part (cast to int32)."""
        if discrete.dtype != self.discrete_dtype:
            discrete = discrete.astype(self.discrete_dtype, copy=False)
        self._discrete = discrete
        if self._continuous is None:
            self._continuous = np.zeros((discrete.shape[0], 0), dtype=np.float32)


class ActionSpec(NamedTuple):
    """The actions of a behavior: ``continuous_size`` floats and one choice per discrete
    branch (``discrete_branches`` holds each branch's number of choices)."""

    continuous_size: int
    discrete_branches: Tuple[int, ...]

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, ActionSpec)
            and self.continuous_size == other.continuous_size
            and tuple(self.discrete_branches) == tuple(other.discrete_branches)
        )

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.continuous_size, tuple(self.discrete_branches)))

    def __str__(self) -> str:
        return f"Continuous: {self.continuous_size}, Discrete: {self.discrete_branches}"

    def is_discrete(self) -> bool:
        """Only discrete actions."""
        return self.discrete_size > 0 and self.continuous_size == 0

    def is_continuous(self) -> bool:
        """Only continuous actions."""
        return self.discrete_size == 0 and self.continuous_size > 0

    @property
    def discrete_size(self) -> int:
        """The number of discrete branches."""
        return len(self.discrete_branches)

    def empty_action(self, n_agents: int) -> ActionTuple:
        """Zero actions for ``n_agents`` agents."""
        return ActionTuple(
            np.zeros((n_agents, self.continuous_size), dtype=np.float32),
            np.zeros((n_agents, self.discrete_size), dtype=np.int32),
        )

    def random_action(self, n_agents: int) -> ActionTuple:
        """Uniform actions (continuous in [-1, 1]) from numpy's global generator."""
        continuous = np.random.uniform(low=-1.0, high=1.0, size=(n_agents, self.continuous_size)).astype(np.float32)
        discrete = np.zeros((n_agents, self.discrete_size), dtype=np.int32)
        for branch, size in enumerate(self.discrete_branches):
            discrete[:, branch] = np.random.randint(0, size, size=n_agents, dtype=np.int32)
        return ActionTuple(continuous, discrete)

    def _validate_action(self, actions: ActionTuple, n_agents: int, name: str) -> ActionTuple:
        """Checks the shapes for ``n_agents`` agents (UnityActionException) and the dtypes."""
        expected = (n_agents, self.continuous_size)
        if actions.continuous.shape != expected:
            raise UnityActionException(
                f"The behavior {name} needs a continuous input of dimension {expected} for "
                f"(<number of agents>, <action size>) but received input of dimension {actions.continuous.shape}"
            )
        expected = (n_agents, self.discrete_size)
        if actions.discrete.shape != expected:
            raise UnityActionException(
                f"The behavior {name} needs a discrete input of dimension {expected} for "
                f"(<number of agents>, <action size>) but received input of dimension {actions.discrete.shape}"
            )
        return actions

    @staticmethod
    def create_continuous(continuous_size: int) -> "ActionSpec":
        """Only continuous actions."""
        return ActionSpec(continuous_size, ())

    @staticmethod
    def create_discrete(discrete_branches: Tuple[int, ...]) -> "ActionSpec":
        """Only discrete actions."""
        return ActionSpec(0, tuple(discrete_branches))

    @staticmethod
    def create_hybrid(continuous_size: int, discrete_branches: Tuple[int, ...]) -> "ActionSpec":
        """Both kinds (as in mlagents_envs 1.x)."""
        return ActionSpec(continuous_size, tuple(discrete_branches))


class DimensionProperty(IntFlag):
    """What each dimension of an observation means."""

    UNSPECIFIED = 0
    NONE = 1
    TRANSLATIONAL_EQUIVARIANCE = 2
    VARIABLE_SIZE = 4


class ObservationType(Enum):
    """An ordinary observation or a goal signal."""

    DEFAULT = 0
    GOAL_SIGNAL = 1


class ObservationSpec(NamedTuple):
    """One observation of a behavior: its shape without the batch, each dimension's property,
    its type and its sensor's name."""

    shape: Tuple[int, ...]
    dimension_property: Tuple[DimensionProperty, ...]
    observation_type: ObservationType
    name: str


class BehaviorSpec(NamedTuple):
    """What a behavior's agents observe and how they act."""

    observation_specs: List[ObservationSpec]
    action_spec: ActionSpec


class BehaviorMapping(Mapping):
    """A read-only mapping from behavior names to their specs."""

    def __init__(self, specs: Dict[BehaviorName, BehaviorSpec]):
        self._dict = specs

    def __len__(self) -> int:
        return len(self._dict)

    def __getitem__(self, behavior: BehaviorName) -> BehaviorSpec:
        return self._dict[behavior]

    def __iter__(self) -> Iterator[BehaviorName]:
        yield from self._dict


class BaseEnv(ABC):
    """The environment interface: step, reset, close, specs, actions, steps."""

    @abstractmethod
    def step(self) -> None:
        """Sends the actions set and waits for the next decisions."""

    @abstractmethod
    def reset(self) -> None:
        """Starts new episodes."""

    @abstractmethod
    def close(self) -> None:
        """Ends the communication and the environment."""

    @property
    @abstractmethod
    def behavior_specs(self) -> BehaviorMapping:
        """The behaviors seen so far and their specs."""

    @abstractmethod
    def set_actions(self, behavior_name: BehaviorName, action: ActionTuple) -> None:
        """Sets the actions of every agent of the behavior that needs a decision."""

    @abstractmethod
    def set_action_for_agent(self, behavior_name: BehaviorName, agent_id: AgentId, action: ActionTuple) -> None:
        """Sets one agent's action."""

    @abstractmethod
    def get_steps(self, behavior_name: BehaviorName) -> Tuple[DecisionSteps, TerminalSteps]:
        """The decision and terminal steps of the behavior at this step."""
