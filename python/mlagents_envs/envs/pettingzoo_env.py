"""PettingZoo 1.27 wrappers over a Unity scene: the k-th agent of a behavior asking for a
decision after ``reset()`` is the PettingZoo agent ``"{behavior}?agent={k}"`` (PettingZoo needs
its agents named before play, and some scenes give their agents new Unity ids every episode;
the Unity id is in each agent's info as ``"agent_id"``).

A PettingZoo episode runs until every agent present at ``reset()`` has ended its Unity
episode once: an agent whose Unity episode ends is reported terminated (or truncated when
Unity interrupted it) and leaves ``agents``; Unity restarts it at once, and it plays on with
zero actions, unseen, until the next ``reset()``. ``parallel_env`` gives the parallel API,
``aec_env`` the agent-by-agent one (PettingZoo's own conversion).
"""

import functools
from typing import Any, Dict, List, Optional, Tuple

from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from mlagents_envs.base_env import BaseEnv
from mlagents_envs.envs.agents import reward_of, slot_agents
from mlagents_envs.envs.spaces import action_space, action_tuple, observation_of, observation_space, zeros_like


def agent_name(behavior: str, slot: int) -> str:
    """The PettingZoo name of the ``slot``-th agent of ``behavior``."""
    return f"{behavior}?agent={slot}"


def behavior_of(agent: str) -> str:
    """The behavior a PettingZoo name belongs to."""
    return agent.rsplit("?agent=", 1)[0]


class UnityParallelEnv(ParallelEnv):
    """The parallel PettingZoo API over ``unity_env`` (reset on construction).
    ``add_group_reward`` adds each step's group reward to the agents' rewards."""

    metadata = {"render_modes": [], "name": "unity_parallel_v0", "is_parallelizable": True}

    def __init__(self, unity_env: BaseEnv, add_group_reward: bool = False):
        self._env = unity_env
        self._add_group_reward = add_group_reward
        self._env.reset()
        self._specs = dict(self._env.behavior_specs)
        # (behavior, Unity agent id) -> PettingZoo name, for this episode.
        self._names: Dict[Tuple[str, int], str] = {}
        self.possible_agents: List[str] = self._name_agents()
        self.agents: List[str] = []

    def _name_agents(self) -> List[str]:
        """Names the agents asking for a decision now, slot by slot per behavior."""
        self._names = slot_agents(self._env, self._specs, agent_name)
        return list(self._names.values())

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str):
        return observation_space(self._specs[behavior_of(agent)])

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str):
        return action_space(self._specs[behavior_of(agent)].action_spec)

    def reset(self, seed: Optional[int] = None, options: Optional[Dict] = None) -> Tuple[Dict[str, Any], Dict[str, Dict]]:
        """Resets Unity; the agents are those asking for a decision now (beyond the slots named
        at the first reset, more agents of a behavior play with zero actions)."""
        if seed is not None:
            for agent in self.possible_agents:
                self.action_space(agent).seed(seed)
        self._env.reset()
        self.agents = [a for a in self._name_agents() if a in self.possible_agents]
        observations, infos = {}, {}
        for behavior in self._specs:
            decisions = self._env.get_steps(behavior)[0]
            for row, agent_id in enumerate(decisions.agent_id):
                name = self._names.get((behavior, int(agent_id)))
                if name in self.agents:
                    observations[name], infos[name] = observation_of(decisions.obs, row), {"agent_id": int(agent_id)}
        return observations, infos

    def step(self, actions: Dict[str, Any]):
        """Acts for the live agents (zeros for the others) and steps Unity once."""
        for behavior, spec in self._specs.items():
            decisions = self._env.get_steps(behavior)[0]
            if len(decisions) == 0:
                continue
            space = action_space(spec.action_spec)
            batch = []
            for agent_id in decisions.agent_id:
                name = self._names.get((behavior, int(agent_id)))
                batch.append(actions[name] if name in actions and name in self.agents else zeros_like(space))
            self._env.set_actions(behavior, action_tuple(spec.action_spec, batch))
        self._env.step()
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for behavior in self._specs:
            decisions, terminals = self._env.get_steps(behavior)
            for row, agent_id in enumerate(decisions.agent_id):
                name = self._names.get((behavior, int(agent_id)))
                if name in self.agents:
                    observations[name], rewards[name] = observation_of(decisions.obs, row), reward_of(decisions, row, self._add_group_reward)
                    terminations[name] = truncations[name] = False
                    infos[name] = {"agent_id": int(agent_id)}
            # A terminal row wins over the new episode's decision row of the same agent.
            for row, agent_id in enumerate(terminals.agent_id):
                name = self._names.get((behavior, int(agent_id)))
                if name in self.agents:
                    interrupted = bool(terminals.interrupted[row])
                    observations[name], rewards[name] = observation_of(terminals.obs, row), reward_of(terminals, row, self._add_group_reward)
                    terminations[name], truncations[name] = not interrupted, interrupted
                    infos[name] = {"agent_id": int(agent_id), "interrupted": interrupted}
        # An agent Unity did not report this step (it acts at a slower decision period) waits
        # with its last observation unreported; PettingZoo needs an entry for every live agent.
        for name in self.agents:
            if name not in observations:
                observations[name] = zeros_like(self.observation_space(name))
                rewards[name], terminations[name], truncations[name], infos[name] = 0.0, False, False, {"no_decision": True}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def close(self) -> None:
        """Closes Unity."""
        self._env.close()


def parallel_env(unity_env: BaseEnv, add_group_reward: bool = False) -> UnityParallelEnv:
    """The parallel PettingZoo API over ``unity_env``."""
    return UnityParallelEnv(unity_env, add_group_reward)


def aec_env(unity_env: BaseEnv, add_group_reward: bool = False):
    """The agent-by-agent PettingZoo API over ``unity_env`` (PettingZoo's conversion of the
    parallel one: Unity steps once every live agent has acted)."""
    return parallel_to_aec(UnityParallelEnv(unity_env, add_group_reward))
