"""A Unity scene as an RLlib ``MultiAgentEnv`` for RLlib's new API stack (ray 2.54+, which no
longer ships ``Unity3DEnv``).

RLlib's env runners know each agent id before play (``possible_agents``: their connectors keep
per-agent space structures) and refuse data for an agent whose episode has ended, while Unity
restarts agents at once, often under new ids. So:

- The k-th agent of a behavior asking for a decision when an RLlib episode starts is agent
  ``"{behavior}#{k}"``; ``possible_agents`` holds the slots of the first reset. Map them to one
  policy per behavior with ``policy_mapping_fn=policy_of`` (RLlib's module ids may not hold
  ``?``: behavior ``3DBall?team=0`` is module ``3DBall_team0``, see :func:`module_id`).
- An RLlib episode ends when any agent's Unity episode ends (that agent ``terminated``, or
  ``truncated`` when Unity interrupted it, with its Unity episode's return in its info as
  ``"episode_return"``) or after ``horizon`` environment steps: every other agent is then
  ``truncated`` with its current observation, which PPO bootstraps from. The next ``reset()``
  does not reset Unity (only the first does, or ``options={"reset_unity": True}``): the new
  RLlib episode starts where Unity is, with the agents asking for a decision then.
- Agents Unity adds in the middle of an RLlib episode act with zero actions until the next one.
- Spaces come from the behavior specs (``mlagents_envs.envs.spaces``).
- Each env runner starts its own player on a free port (``base_port=0``), seeded with
  ``seed + worker_index``, and closes it with the env (or at interpreter exit). A runner
  killed outright leaves its player without its trainer: the stand-ins then quit.

Example::

    from ray.tune.registry import register_env
    from mlagents_envs.rllib import UnityMultiAgentEnv, policy_of
    register_env("unity", lambda ctx: UnityMultiAgentEnv(ctx | {"file_name": "sim:3DBall", "horizon": 1000}))
"""

from typing import Any, Dict, Optional, Tuple

from ray.rllib.env.multi_agent_env import MultiAgentEnv

from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.envs.agents import reward_of, slot_agents
from mlagents_envs.envs.spaces import action_space, action_tuple, observation_of, observation_space, zeros_like


def behavior_of(agent_id: str) -> str:
    """The Unity behavior of an agent id."""
    return agent_id.split("#")[0]


def module_id(behavior: str) -> str:
    """The RLlib module (policy) id of a behavior: its name with ``?team=N`` as ``_teamN`` and
    any other character RLlib refuses in ids (those not allowed in file names) as ``_``."""
    name = behavior.replace("?team=", "_team")
    return "".join("_" if c in '<>:"/\\|?*' else c for c in name).rstrip(". ")


def policy_of(agent_id: str, *args, **kwargs) -> str:
    """The module id of an agent's behavior; use it as the ``policy_mapping_fn``."""
    return module_id(behavior_of(agent_id))


class UnityMultiAgentEnv(MultiAgentEnv):
    """RLlib's multi-agent view of one Unity player. ``config`` (RLlib's ``EnvContext`` or a
    dict) holds ``file_name`` (a build or ``"sim:SCENE"``) and optionally ``additional_args``,
    ``base_port`` (0: a free port), ``seed``, ``no_graphics``, ``timeout_wait``, ``horizon``,
    ``add_group_reward`` (add group rewards to the agents' rewards, as Unity3DEnv did)."""

    def __init__(self, config: Optional[Dict[str, Any]] = None):
        super().__init__()
        worker_index = int(getattr(config, "worker_index", 0) or 0)
        config = dict(config or {})
        self._env = UnityEnvironment(
            config["file_name"],
            base_port=config.get("base_port", 0),
            seed=int(config.get("seed", 0)) + worker_index,
            no_graphics=config.get("no_graphics", True),
            timeout_wait=config.get("timeout_wait", 60),
            additional_args=config.get("additional_args"),
        )
        self._horizon: Optional[int] = config.get("horizon")
        self._add_group_reward = bool(config.get("add_group_reward", True))
        self._env.reset()
        self._specs = dict(self._env.behavior_specs)
        # (behavior, Unity agent id) -> RLlib agent id, for this RLlib episode.
        self._slots: Dict[Tuple[str, int], str] = {}
        self._slot_agents()
        self.possible_agents = list(self._slots.values())
        self.observation_spaces = {a: observation_space(self._specs[behavior_of(a)]) for a in self.possible_agents}
        self.action_spaces = {a: action_space(self._specs[behavior_of(a)].action_spec) for a in self.possible_agents}
        self.agents = []
        self._returns: Dict[Tuple[str, int], float] = {}
        self._unity_fresh = True
        self._steps = 0
        self._last_observations: Dict[str, Any] = {}
        self._episode_agents: set = set()

    def _slot_agents(self) -> None:
        """Gives the agents asking for a decision now their RLlib ids, slot by slot."""
        self._slots = slot_agents(self._env, self._specs, lambda behavior, slot: f"{behavior}#{slot}")

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Starts an RLlib episode where Unity is (the first call, or ``reset_unity`` in
        ``options``, resets Unity; the seed was given to the player at launch)."""
        if not self._unity_fresh and (options or {}).get("reset_unity", False):
            self._env.reset()
            self._returns = {}
        self._unity_fresh = False
        self._slot_agents()
        self._steps = 0
        observations = {}
        for behavior in self._specs:
            decisions = self._env.get_steps(behavior)[0]
            for row, agent_id in enumerate(decisions.agent_id):
                aid = self._slots[(behavior, int(agent_id))]
                if aid in self.possible_agents:
                    observations[aid] = observation_of(decisions.obs, row)
        self.agents = list(observations)
        self._episode_agents = set(observations)
        self._last_observations = dict(observations)
        return observations, {aid: {} for aid in observations}

    def step(self, action_dict: Dict[str, Any]):
        """Acts for the agents in ``action_dict`` (zeros for agents Unity asks that have none)
        and steps Unity once."""
        for behavior, spec in self._specs.items():
            decisions = self._env.get_steps(behavior)[0]
            if len(decisions) == 0:
                continue
            space = action_space(spec.action_spec)
            batch = [action_dict.get(self._slots.get((behavior, int(a))), zeros_like(space)) for a in decisions.agent_id]
            self._env.set_actions(behavior, action_tuple(spec.action_spec, batch))
        self._env.step()
        self._steps += 1
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for behavior in self._specs:
            decisions, terminals = self._env.get_steps(behavior)
            # A terminal row comes first: it closes the Unity episode (its observation wins
            # over the new episode's decision row of the same agent in this step).
            for row, agent_id in enumerate(terminals.agent_id):
                key = (behavior, int(agent_id))
                reward = reward_of(terminals, row, self._add_group_reward)
                episode_return = self._returns.pop(key, 0.0) + reward
                aid = self._slots.get(key)
                if aid in self._episode_agents:
                    interrupted = bool(terminals.interrupted[row])
                    observations[aid], rewards[aid] = observation_of(terminals.obs, row), reward
                    terminateds[aid], truncateds[aid] = not interrupted, interrupted
                    infos[aid] = {"episode_return": episode_return, "interrupted": interrupted}
            for row, agent_id in enumerate(decisions.agent_id):
                key = (behavior, int(agent_id))
                reward = reward_of(decisions, row, self._add_group_reward)
                self._returns[key] = self._returns.get(key, 0.0) + reward
                aid = self._slots.get(key)
                if aid in self._episode_agents and aid not in terminateds:
                    observations[aid], rewards[aid], infos[aid] = observation_of(decisions.obs, row), reward, {}
        self._last_observations.update(observations)
        over = bool(terminateds) or (self._horizon is not None and self._steps >= self._horizon)
        if over:
            # Every agent of the episode ends with an observation to bootstrap from: its latest.
            for aid in self._episode_agents:
                if aid not in observations:
                    observations[aid], rewards[aid], infos[aid] = self._last_observations[aid], 0.0, {}
                if aid not in terminateds:
                    terminateds[aid], truncateds[aid] = False, True
        terminateds["__all__"], truncateds["__all__"] = False, over
        self.agents = list(observations)
        return observations, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        """Closes the player."""
        self._env.close()
