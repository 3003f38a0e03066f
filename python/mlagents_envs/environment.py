"""``UnityEnvironment``: one Unity player (or the Editor, or a stand-in scene) driven through
the Rust client, with 0.28's arguments, methods and exceptions.

Beyond 0.28: ``base_port=0`` picks a free port; the server listens on loopback only;
``file_name="sim:SCENE"`` starts one of mlagents-rs' stand-in scenes; ``close()`` twice is
harmless; discrete actions outside their branch are refused (0.28 passes them to Unity).
"""

import atexit
import logging
from typing import Dict, List, Optional, Tuple

import numpy as np

from mlagents_envs import _native
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    AgentId,
    BaseEnv,
    BehaviorMapping,
    BehaviorName,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)
from mlagents_envs.exception import (
    UnityActionException,
    UnityCommunicationException,
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityObservationException,
    UnityTimeOutException,
    UnityWorkerInUseException,
)
from mlagents_envs.side_channel.default_training_analytics_side_channel import DefaultTrainingAnalyticsSideChannel
from mlagents_envs.side_channel.side_channel import SideChannel
from mlagents_envs.side_channel.side_channel_manager import SideChannelManager
from mlagents_envs.timers import timed

logger = logging.getLogger("mlagents_envs")

# What each kind of the Rust client's errors raises (0.28's classes).
_ERROR_CLASSES = {
    "timeout": UnityTimeOutException,
    "environment": UnityEnvironmentException,
    "communication": UnityCommunicationException,
    "communicator_stopped": UnityCommunicatorStoppedException,
    "action": UnityActionException,
    "observation": UnityObservationException,
    "not_finite": RuntimeError,
}


def _spec_from_native(native_spec) -> BehaviorSpec:
    observations, (continuous_size, branches) = native_spec
    return BehaviorSpec(
        observation_specs=[
            ObservationSpec(
                shape=tuple(shape),
                dimension_property=tuple(DimensionProperty(p) for p in properties),
                observation_type=ObservationType(kind),
                name=name,
            )
            for shape, properties, kind, name in observations
        ],
        action_spec=ActionSpec(continuous_size, tuple(branches)),
    )


class UnityEnvironment(BaseEnv):
    """A Unity environment: a player build at ``file_name``, the Editor (``file_name=None``,
    press Play), or ``"sim:SCENE"``. It listens on ``base_port + worker_id``; the player
    connects to it."""

    # The communication API version this package speaks (0.28's).
    API_VERSION = "1.5.0"
    DEFAULT_EDITOR_PORT = 5004
    BASE_ENVIRONMENT_PORT = 5005
    PORT_COMMAND_LINE_ARG = "--mlagents-port"

    def __init__(
        self,
        file_name: Optional[str] = None,
        worker_id: int = 0,
        base_port: Optional[int] = None,
        seed: int = 0,
        no_graphics: bool = False,
        timeout_wait: int = 60,
        additional_args: Optional[List[str]] = None,
        side_channels: Optional[List[SideChannel]] = None,
        log_folder: Optional[str] = None,
        num_areas: int = 1,
    ):
        self._native: Optional[object] = None
        self._loaded = False
        self._worker_id = worker_id
        self._timeout_wait = timeout_wait
        self._process = None
        self._additional_args = list(additional_args or [])
        self._no_graphics = no_graphics
        self._log_folder = log_folder
        if base_port is None:
            base_port = self.BASE_ENVIRONMENT_PORT if file_name else self.DEFAULT_EDITOR_PORT
        self._port = base_port + worker_id if base_port else 0
        side_channels = list(side_channels or [])
        if not any(c.channel_id == DefaultTrainingAnalyticsSideChannel.CHANNEL_ID for c in side_channels):
            analytics: Optional[DefaultTrainingAnalyticsSideChannel] = DefaultTrainingAnalyticsSideChannel()
            side_channels.append(analytics)
        else:
            analytics = None
        self._side_channel_manager = SideChannelManager(side_channels)
        if file_name is None and worker_id != 0:
            raise UnityEnvironmentException(
                "If the environment name is None, the worker-id must be 0 in order to connect with the Editor."
            )
        if file_name is None:
            logger.info(f"Listening on port {self._port}. Start training by pressing the Play button in the Unity Editor.")
        self._native = self._call(
            _native.Environment,
            None if file_name is None else str(file_name),
            worker_id,
            base_port,
            seed,
            no_graphics,
            float(timeout_wait),
            self._additional_args,
            None if log_folder is None else str(log_folder),
            num_areas,
        )
        self._loaded = True
        self._port = self._native.port
        atexit.register(self._close)
        self._env_specs: Dict[str, BehaviorSpec] = {}
        self._env_actions: Dict[str, ActionTuple] = {}
        self._env_state: Dict[str, Tuple[DecisionSteps, TerminalSteps]] = {}
        self._is_first_message = True
        self.academy_capabilities = None
        if analytics is not None:
            analytics.environment_initialized()

    def _call(self, function, *args):
        """Calls the Rust client, raising 0.28's exception for each kind of error."""
        try:
            return function(*args)
        except _native.NativeError as error:
            kind, message = error.args
            if kind == "worker_in_use":
                raise UnityWorkerInUseException(self._worker_id) from error
            raise _ERROR_CLASSES.get(kind, UnityEnvironmentException)(message) from error

    def _executable_args(self) -> List[str]:
        """The player's arguments, as 0.28 builds them (and the Rust client launched it with)."""
        log_folder = None if self._log_folder is None else str(self._log_folder)
        return _native.player_arguments(self._port, self._worker_id, self._no_graphics, log_folder, self._additional_args)

    def _assert_loaded(self) -> None:
        if not self._loaded:
            raise UnityEnvironmentException("No Unity environment is loaded.")

    def _outgoing_side_channels(self) -> bytes:
        """The side channels' queued messages, framed, for the next exchange."""
        self._assert_loaded()
        return bytes(self._side_channel_manager.generate_side_channel_messages())

    def _send_actions(self) -> None:
        """Hands the actions set since the last exchange to the Rust client."""
        for name, action in self._env_actions.items():
            self._call(
                self._native.set_actions,
                name,
                np.ascontiguousarray(action.continuous, dtype=np.float32),
                np.ascontiguousarray(action.discrete, dtype=np.int32),
            )

    def _after_exchange(self, incoming: bytes) -> None:
        """Takes in new specs, forgets the last steps and actions, reads Unity's side channels."""
        if self._native.behavior_count != len(self._env_specs):
            self._env_specs = {name: _spec_from_native(spec) for name, spec in self._native.behavior_specs().items()}
        self._env_state = {}
        self._env_actions = {}
        self._is_first_message = False
        self._side_channel_manager.process_side_channel_message(incoming)

    def reset(self) -> None:
        """Starts new episodes (and sends the side channels' queued messages)."""
        self._after_exchange(self._call(self._native.reset, self._outgoing_side_channels()))

    @timed
    def step(self) -> None:
        """Sends the actions set (zeros for behaviors with none) and waits for the next
        decisions. The first call resets, as in 0.28."""
        if self._is_first_message:
            return self.reset()
        outgoing = self._outgoing_side_channels()
        self._send_actions()
        self._after_exchange(self._call(self._native.step, outgoing))

    @property
    def behavior_specs(self) -> BehaviorMapping:
        """The behaviors seen so far (a behavior appears once one of its agents has)."""
        return BehaviorMapping(self._env_specs)

    def _assert_behavior_exists(self, behavior_name: str) -> None:
        if behavior_name not in self._env_specs:
            raise UnityActionException(
                f"The group {behavior_name} does not correspond to an existing agent group in the environment"
            )

    def set_actions(self, behavior_name: BehaviorName, action: ActionTuple) -> None:
        """Sets the actions of every agent of ``behavior_name`` that needs a decision, in the
        order of its decision steps."""
        self._assert_behavior_exists(behavior_name)
        deciding = self._decision_count(behavior_name)
        if deciding == 0:
            return
        spec = self._env_specs[behavior_name]
        self._env_actions[behavior_name] = spec.action_spec._validate_action(action, deciding, behavior_name)

    def set_action_for_agent(self, behavior_name: BehaviorName, agent_id: AgentId, action: ActionTuple) -> None:
        """Sets one agent's action; the behavior's other agents keep theirs (zeros if unset)."""
        self._assert_behavior_exists(behavior_name)
        spec = self._env_specs[behavior_name]
        action = spec.action_spec._validate_action(action, 1, behavior_name)
        decisions = self.get_steps(behavior_name)[0]
        if agent_id not in decisions.agent_id_to_index:
            raise IndexError(f"agent_id {agent_id} is did not request a decision at the previous step")
        if behavior_name not in self._env_actions:
            self._env_actions[behavior_name] = spec.action_spec.empty_action(len(decisions))
        row = decisions.agent_id_to_index[agent_id]
        pending = self._env_actions[behavior_name]
        pending.continuous[row] = action.continuous[0]
        pending.discrete[row] = action.discrete[0]

    def _decision_count(self, behavior_name: str) -> int:
        return len(self.get_steps(behavior_name)[0])

    def get_steps(self, behavior_name: BehaviorName) -> Tuple[DecisionSteps, TerminalSteps]:
        """The agents of ``behavior_name`` that need a decision and those whose episode ended."""
        self._assert_behavior_exists(behavior_name)
        if behavior_name not in self._env_state:
            decision, terminal = self._call(self._native.get_steps, behavior_name)
            self._env_state[behavior_name] = (DecisionSteps(*decision), TerminalSteps(*terminal))
        return self._env_state[behavior_name]

    def close(self) -> None:
        """Closes the connection and waits for the player to exit (killing it after
        ``timeout_wait`` seconds). Closing a closed environment does nothing (0.28 raises)."""
        self._close()

    def _close(self, timeout: Optional[int] = None) -> None:
        self._loaded = False
        if self._native is not None:
            self._call(self._native.close)
