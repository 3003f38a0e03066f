"""gymnasium spaces for a behavior's observations and actions, and actions back to
``ActionTuple`` (shared by the gymnasium and PettingZoo wrappers)."""

from typing import Any

import numpy as np
from gymnasium import spaces

from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec


def observation_space(spec: BehaviorSpec) -> spaces.Space:
    """One float32 Box per observation; a Tuple of them when there are several."""
    boxes = [spaces.Box(-np.inf, np.inf, shape=tuple(o.shape), dtype=np.float32) for o in spec.observation_specs]
    return boxes[0] if len(boxes) == 1 else spaces.Tuple(boxes)


def action_space(spec: ActionSpec) -> spaces.Space:
    """Box(-1, 1) for continuous actions, Discrete for one branch, MultiDiscrete for several,
    a Tuple (continuous, discrete) for both."""
    continuous = spaces.Box(-1.0, 1.0, shape=(spec.continuous_size,), dtype=np.float32)
    if spec.discrete_size == 1:
        discrete: spaces.Space = spaces.Discrete(spec.discrete_branches[0])
    else:
        discrete = spaces.MultiDiscrete(list(spec.discrete_branches))
    if spec.is_continuous():
        return continuous
    if spec.is_discrete():
        return discrete
    return spaces.Tuple((continuous, discrete))


def observation_of(obs: list, row: int) -> Any:
    """One agent's observation as ``observation_space`` holds it."""
    values = [batch[row] for batch in obs]
    return values[0] if len(values) == 1 else tuple(values)


def action_tuple(spec: ActionSpec, actions: list) -> ActionTuple:
    """An ActionTuple for a batch of agents, from one action of ``action_space(spec)`` each."""
    n = len(actions)
    continuous = np.zeros((n, spec.continuous_size), dtype=np.float32)
    discrete = np.zeros((n, spec.discrete_size), dtype=np.int32)
    for row, action in enumerate(actions):
        if spec.is_continuous():
            continuous[row] = action
        elif spec.is_discrete():
            discrete[row] = np.reshape(action, (spec.discrete_size,))
        else:
            continuous[row], discrete[row] = action[0], np.reshape(action[1], (spec.discrete_size,))
    return ActionTuple(continuous=continuous, discrete=discrete)


def zeros_like(space: spaces.Space) -> Any:
    """A value of ``space`` with every number 0 (the action of an agent nobody acted for, or
    the observation of one Unity did not report)."""
    sample = space.sample()
    if isinstance(sample, tuple):
        return tuple(part * 0 for part in sample)
    return sample * 0
