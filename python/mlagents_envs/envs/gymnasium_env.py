"""A single-agent gymnasium environment over a Unity scene with one behavior and one agent
(what 0.28's ``gym_unity`` wrapper covers, with gymnasium's API: ``reset(seed, options)``
and ``terminated``/``truncated`` from Unity's ``interrupted``)."""

from typing import Any, Dict, Optional, Tuple

import gymnasium

from mlagents_envs.base_env import BaseEnv
from mlagents_envs.envs.agents import reward_of
from mlagents_envs.envs.spaces import action_space, action_tuple, observation_of, observation_space
from mlagents_envs.exception import UnityEnvironmentException


class UnityToGymnasiumEnv(gymnasium.Env):
    """Wraps ``unity_env`` (reset on construction). ``add_group_reward`` adds each step's
    group reward to the reward. The info of each step holds ``"step"`` (Unity's
    DecisionStep or TerminalStep)."""

    metadata = {"render_modes": []}

    def __init__(self, unity_env: BaseEnv, add_group_reward: bool = False):
        self._env = unity_env
        self._add_group_reward = add_group_reward
        self._env.reset()
        if len(self._env.behavior_specs) != 1:
            raise UnityEnvironmentException(
                f"There can only be one behavior in a UnityEnvironment wrapped by UnityToGymnasiumEnv; "
                f"found {list(self._env.behavior_specs)}"
            )
        self.name = next(iter(self._env.behavior_specs))
        self.behavior_spec = self._env.behavior_specs[self.name]
        self.observation_space = observation_space(self.behavior_spec)
        self.action_space = action_space(self.behavior_spec.action_spec)
        self._agent: Optional[int] = None

    def _single_decision(self):
        decisions, _ = self._env.get_steps(self.name)
        if len(decisions) != 1:
            raise UnityEnvironmentException(
                f"There can only be one agent in a scene wrapped by UnityToGymnasiumEnv; {len(decisions)} asked for a decision"
            )
        return decisions

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        """Resets Unity (the seed was given to Unity at launch; ``seed`` seeds the action space)."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        self._env.reset()
        decisions = self._single_decision()
        self._agent = int(decisions.agent_id[0])
        return observation_of(decisions.obs, 0), {"step": decisions[self._agent]}

    def step(self, action) -> Tuple[Any, float, bool, bool, Dict]:
        """Acts, steps Unity until the agent asks again or its episode ends."""
        self._env.set_actions(self.name, action_tuple(self.behavior_spec.action_spec, [action]))
        self._env.step()
        decisions, terminals = self._env.get_steps(self.name)
        if len(terminals) > 0:
            row = 0
            reward = reward_of(terminals, row, self._add_group_reward)
            interrupted = bool(terminals.interrupted[row])
            step = terminals[int(terminals.agent_id[row])]
            return observation_of(terminals.obs, row), reward, not interrupted, interrupted, {"step": step}
        decisions = self._single_decision()
        reward = reward_of(decisions, 0, self._add_group_reward)
        return observation_of(decisions.obs, 0), reward, False, False, {"step": decisions[int(decisions.agent_id[0])]}

    def close(self) -> None:
        """Closes Unity."""
        self._env.close()
