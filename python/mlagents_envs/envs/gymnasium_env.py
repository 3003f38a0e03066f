"""A single-agent gymnasium environment over a Unity scene with one behavior and one agent:
0.28's ``gym_unity`` wrapper (``UnityToGymWrapper``: its options ``uint8_visual``,
``flatten_branched``, ``allow_multiple_obs`` and ``action_space_seed``, its observation
layout and its ``UnityGymException``) with gymnasium's API: ``reset(seed, options)`` returns
``(observation, info)`` and ``step`` returns ``terminated``/``truncated`` from Unity's
``interrupted``. Beyond ``gym_unity``: hybrid actions (a ``Tuple(Box, Discrete or
MultiDiscrete)``), and a scene whose agent does not ask for a decision at every step."""

import itertools
from typing import Any, Dict, List, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import error, spaces

from mlagents_envs.base_env import ActionTuple, BaseEnv
from mlagents_envs.envs.agents import reward_of
from mlagents_envs.envs.spaces import action_space, action_tuple


class UnityGymException(error.Error):
    """An error of the gym wrapper (as ``gym_unity.envs.UnityGymException``)."""


class ActionFlattener:
    """Every combination of the branches of a multi-branch discrete action as one number
    (``flatten_branched``): action k is the k-th of ``itertools.product`` over the branches."""

    def __init__(self, branches: Tuple[int, ...]):
        self.action_lookup = {k: list(combination) for k, combination in enumerate(itertools.product(*[range(b) for b in branches]))}
        self.action_space = spaces.Discrete(len(self.action_lookup))

    def lookup_action(self, action: int) -> List[int]:
        """The branches' actions of flattened action ``action``."""
        return self.action_lookup[int(action)]


class UnityToGymnasiumEnv(gymnasium.Env):
    """Wraps ``unity_env`` (reset on construction).

    - ``uint8_visual``: images as uint8 0-255 (``Box(0, 255)``) instead of float32 0-1.
    - ``flatten_branched``: several discrete branches as one ``Discrete`` (see
      :class:`ActionFlattener`) instead of ``MultiDiscrete``.
    - ``allow_multiple_obs``: the observation is a list, every image then the vector
      observations concatenated (a ``Tuple`` space); otherwise the first image when there is
      one, else the vector observations concatenated (a ``Box``).
    - ``action_space_seed``: seeds the action space's sampling.
    - ``add_group_reward``: adds each step's group reward to the reward.

    The info of each step holds ``"step"`` (Unity's DecisionStep or TerminalStep)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        unity_env: BaseEnv,
        uint8_visual: bool = False,
        flatten_branched: bool = False,
        allow_multiple_obs: bool = False,
        action_space_seed: Optional[int] = None,
        add_group_reward: bool = False,
    ):
        self._env = unity_env
        self._uint8_visual = uint8_visual
        self._allow_multiple_obs = allow_multiple_obs
        self._add_group_reward = add_group_reward
        self._env.reset()
        if len(self._env.behavior_specs) != 1:
            raise UnityGymException(
                "There can only be one behavior in a UnityEnvironment if it is wrapped in a gym; "
                f"found {list(self._env.behavior_specs)}"
            )
        self.name = next(iter(self._env.behavior_specs))
        self.behavior_spec = self._env.behavior_specs[self.name]
        self._visual = [i for i, o in enumerate(self.behavior_spec.observation_specs) if len(o.shape) == 3]
        self._vector = [i for i, o in enumerate(self.behavior_spec.observation_specs) if len(o.shape) == 1]
        if not self._visual and not self._vector:
            raise UnityGymException("the behavior has neither image nor vector observations")
        self._single_decision()
        action_spec = self.behavior_spec.action_spec
        self._flattener: Optional[ActionFlattener] = None
        if flatten_branched and action_spec.is_discrete() and action_spec.discrete_size > 1:
            self._flattener = ActionFlattener(tuple(action_spec.discrete_branches))
            self.action_space = self._flattener.action_space
        else:
            self.action_space = action_space(action_spec)
        if action_space_seed is not None:
            self.action_space.seed(action_space_seed)
        self.observation_space = self._observation_space()
        self._agent: Optional[int] = None

    def _image_space(self, index: int) -> spaces.Box:
        shape = tuple(self.behavior_spec.observation_specs[index].shape)
        if self._uint8_visual:
            return spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)

    def _vector_space(self) -> spaces.Box:
        size = sum(int(self.behavior_spec.observation_specs[i].shape[0]) for i in self._vector)
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)

    def _observation_space(self) -> spaces.Space:
        if self._allow_multiple_obs and self._visual:
            boxes = [self._image_space(i) for i in self._visual]
            return spaces.Tuple(boxes + ([self._vector_space()] if self._vector else []))
        if self._visual:
            return self._image_space(self._visual[0])
        return self._vector_space()

    def _observation(self, obs: List[np.ndarray], row: int) -> Any:
        images = [obs[i][row] for i in self._visual]
        if self._uint8_visual:
            images = [(255.0 * image).astype(np.uint8) for image in images]
        vector = np.concatenate([obs[i][row] for i in self._vector]).astype(np.float32) if self._vector else None
        if self._allow_multiple_obs and images:
            return images + ([vector] if vector is not None else [])
        return images[0] if images else vector

    def _single_decision(self):
        decisions, _ = self._env.get_steps(self.name)
        if len(decisions) > 1:
            raise UnityGymException(
                f"There can only be one Agent in the environment but {len(decisions)} were detected."
            )
        return decisions

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        """Resets Unity (the seed was given to Unity at launch; ``seed`` seeds the action space)."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        self._env.reset()
        decisions = self._single_decision()
        while len(decisions) == 0:
            self._env.step()
            decisions = self._single_decision()
        self._agent = int(decisions.agent_id[0])
        return self._observation(decisions.obs, 0), {"step": decisions[self._agent]}

    def _action_tuple(self, action) -> ActionTuple:
        if self._flattener is not None:
            return ActionTuple(discrete=np.array([self._flattener.lookup_action(action)], dtype=np.int32))
        return action_tuple(self.behavior_spec.action_spec, [action])

    def step(self, action) -> Tuple[Any, float, bool, bool, Dict]:
        """Acts, then steps Unity until the agent asks again or its episode ends (rewards of
        the steps between add up)."""
        self._env.set_actions(self.name, self._action_tuple(action))
        reward = 0.0
        while True:
            self._env.step()
            decisions, terminals = self._env.get_steps(self.name)
            if len(terminals) > 0:
                reward += reward_of(terminals, 0, self._add_group_reward)
                interrupted = bool(terminals.interrupted[0])
                step = terminals[int(terminals.agent_id[0])]
                return self._observation(terminals.obs, 0), reward, not interrupted, interrupted, {"step": step}
            decisions = self._single_decision()
            if len(decisions) == 1:
                reward += reward_of(decisions, 0, self._add_group_reward)
                return self._observation(decisions.obs, 0), reward, False, False, {"step": decisions[int(decisions.agent_id[0])]}

    def close(self) -> None:
        """Closes Unity."""
        self._env.close()
