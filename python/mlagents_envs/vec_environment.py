"""``VecUnityEnvironment``: several Unity players stepped in one call (not in 0.28).

Each player is an ordinary :class:`~mlagents_envs.environment.UnityEnvironment` (its own
port, seed ``seed + index``, side channels); ``step()`` hands every player its actions and
side-channel messages, then waits for all of them in one call into the Rust client with the
GIL released, so the players simulate side by side.
"""

import threading
from typing import Callable, List, Optional, Sequence, Tuple

from mlagents_envs import _native
from mlagents_envs.base_env import ActionTuple, BehaviorMapping, DecisionSteps, TerminalSteps
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.side_channel.side_channel import SideChannel


class VecUnityEnvironment:
    """``num_envs`` players of ``file_name`` (a build, or ``"sim:SCENE"``). ``envs[i]`` is
    player i; ``side_channels_for(i)`` gives its side channels. With ``base_port=0`` (the
    default) every player gets a free port."""

    def __init__(
        self,
        file_name: str,
        num_envs: int,
        base_port: int = 0,
        seed: int = 0,
        no_graphics: bool = True,
        timeout_wait: int = 60,
        additional_args: Optional[List[str]] = None,
        side_channels_for: Optional[Callable[[int], List[SideChannel]]] = None,
        log_folder: Optional[str] = None,
        num_areas: int = 1,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        started: List[Optional[UnityEnvironment]] = [None] * num_envs
        errors: List[BaseException] = []

        def start(index: int) -> None:
            try:
                started[index] = UnityEnvironment(
                    file_name,
                    worker_id=0 if base_port == 0 else index,
                    base_port=base_port,
                    seed=seed + index,
                    no_graphics=no_graphics,
                    timeout_wait=timeout_wait,
                    additional_args=additional_args,
                    side_channels=side_channels_for(index) if side_channels_for else None,
                    log_folder=log_folder,
                    num_areas=num_areas,
                )
            except BaseException as error:  # noqa: BLE001 - raised below, after every start ended
                errors.append(error)

        # The players start side by side (each constructor waits for its handshake without
        # the GIL).
        threads = [threading.Thread(target=start, args=(i,)) for i in range(num_envs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            for env in started:
                if env is not None:
                    env.close()
            raise errors[0]
        self.envs: List[UnityEnvironment] = started  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.envs)

    def _exchange(self, envs: List[UnityEnvironment], reset: bool) -> None:
        outgoing = [env._outgoing_side_channels() for env in envs]
        if not reset:
            for env in envs:
                env._send_actions()
        incoming = envs[0]._call(_native.step_all, [env._native for env in envs], outgoing, reset)
        for env, received in zip(envs, incoming):
            env._after_exchange(received)

    def reset(self) -> None:
        """Resets every player, side by side."""
        self._exchange(self.envs, reset=True)

    def step(self, indices: Optional[Sequence[int]] = None) -> None:
        """Sends every player (or the players ``indices``) its actions and waits for all of them
        (the first call resets)."""
        envs = self.envs if indices is None else [self.envs[i] for i in indices]
        if envs:
            self._exchange(envs, reset=any(env._is_first_message for env in envs))

    @property
    def behavior_specs(self) -> BehaviorMapping:
        """The behaviors of player 0 (every player runs the same build)."""
        return self.envs[0].behavior_specs

    def get_steps(self, behavior_name: str) -> List[Tuple[DecisionSteps, TerminalSteps]]:
        """Each player's decision and terminal steps of ``behavior_name``."""
        return [env.get_steps(behavior_name) for env in self.envs]

    def set_actions(self, behavior_name: str, actions: List[ActionTuple]) -> None:
        """Sets each player's actions of ``behavior_name`` (one ActionTuple per player)."""
        if len(actions) != len(self.envs):
            raise ValueError(f"{len(actions)} action batches for {len(self.envs)} environments")
        for env, action in zip(self.envs, actions):
            env.set_actions(behavior_name, action)

    def close(self) -> None:
        """Closes every player."""
        for env in self.envs:
            env.close()
