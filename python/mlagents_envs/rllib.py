"""A Unity scene as an RLlib ``MultiAgentEnv`` for RLlib's new API stack (ray 2.54+, which no
longer ships ``Unity3DEnv``).

- Agent ids are ``"{behavior}#{unity agent id}.{k}"``, ``k`` counting the Unity episodes of that
  agent in this RLlib episode: RLlib refuses data for an agent id whose episode has ended, and
  Unity restarts agents under the same id. Map them to policies with
  ``policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id.split("#")[0]``
  (:func:`policy_of`).
- Spaces come from the behavior specs (see ``mlagents_envs.envs.spaces``), looked up by the id's
  behavior; ``possible_agents`` holds one template id per behavior (``"{behavior}#0.0"``).
- A Unity terminal row gives the agent's final observation and reward, ``terminated`` when the
  agent ended its episode, ``truncated`` when Unity interrupted it (max step), and the Unity
  episode's return in its info (``"episode_return"``); a decision row of the same Unity agent
  opens its next id.
- The RLlib episode ends (``"__all__"`` truncated, every live agent given its observation and
  reward) after ``horizon`` environment steps, if set.
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
from mlagents_envs.envs.spaces import action_space, action_tuple, observation_of, observation_space, zeros_like


def policy_of(agent_id: str, *args, **kwargs) -> str:
    """The behavior (use it as the policy id) of an agent id; a ``policy_mapping_fn``."""
    return agent_id.split("#")[0]


class _ByBehavior(dict):
    """Spaces keyed by template id, found for any agent id of the same behavior."""

    def __missing__(self, agent_id: str):
        return dict.__getitem__(self, f"{policy_of(agent_id)}#0.0")

    def get(self, agent_id, default=None):
        try:
            return self[agent_id]
        except KeyError:
            return default


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
        templates = [f"{behavior}#0.0" for behavior in self._specs]
        self.observation_spaces = _ByBehavior({t: observation_space(self._specs[policy_of(t)]) for t in templates})
        self.action_spaces = _ByBehavior({t: action_space(self._specs[policy_of(t)].action_spec) for t in templates})
        self.possible_agents = templates
        self.agents = []
        self._episodes: Dict[Tuple[str, int], int] = {}
        self._returns: Dict[str, float] = {}
        self._last: Dict[str, Any] = {}
        self._steps = 0

    def _id(self, behavior: str, agent_id: int) -> str:
        return f"{behavior}#{agent_id}.{self._episodes.get((behavior, agent_id), 0)}"

    def _reward(self, batch, row: int) -> float:
        return float(batch.reward[row] + (batch.group_reward[row] if self._add_group_reward else 0.0))

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Resets Unity (the seed was given to the player at launch)."""
        self._env.reset()
        self._episodes, self._returns, self._last, self._steps = {}, {}, {}, 0
        observations = {}
        for behavior in self._specs:
            decisions = self._env.get_steps(behavior)[0]
            for row, agent_id in enumerate(decisions.agent_id):
                aid = self._id(behavior, int(agent_id))
                observations[aid] = self._last[aid] = observation_of(decisions.obs, row)
                self._returns[aid] = 0.0
        self.agents = list(observations)
        return observations, {aid: {} for aid in observations}

    def step(self, action_dict: Dict[str, Any]):
        """Acts for the agents in ``action_dict`` (zeros for agents Unity asks that have none)
        and steps Unity once."""
        for behavior, spec in self._specs.items():
            decisions = self._env.get_steps(behavior)[0]
            if len(decisions) == 0:
                continue
            space = self.action_spaces[f"{behavior}#0.0"]
            batch = [action_dict.get(self._id(behavior, int(a)), zeros_like(space)) for a in decisions.agent_id]
            self._env.set_actions(behavior, action_tuple(spec.action_spec, batch))
        self._env.step()
        self._steps += 1
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for behavior in self._specs:
            decisions, terminals = self._env.get_steps(behavior)
            for row, agent_id in enumerate(terminals.agent_id):
                aid = self._id(behavior, int(agent_id))
                interrupted = bool(terminals.interrupted[row])
                observations[aid], rewards[aid] = observation_of(terminals.obs, row), self._reward(terminals, row)
                terminateds[aid], truncateds[aid] = not interrupted, interrupted
                infos[aid] = {"episode_return": self._returns.pop(aid, 0.0) + rewards[aid], "interrupted": interrupted}
                self._last.pop(aid, None)
                self._episodes[(behavior, int(agent_id))] = self._episodes.get((behavior, int(agent_id)), 0) + 1
            for row, agent_id in enumerate(decisions.agent_id):
                aid = self._id(behavior, int(agent_id))
                observations[aid], rewards[aid] = observation_of(decisions.obs, row), self._reward(decisions, row)
                self._returns[aid] = self._returns.get(aid, 0.0) + rewards[aid]
                self._last[aid] = observations[aid]
                infos[aid] = {}
        all_done = self._horizon is not None and self._steps >= self._horizon
        if all_done:
            # Every live agent ends with the RLlib episode: its last observation and reward.
            for aid, last in self._last.items():
                if aid not in observations:
                    observations[aid], rewards[aid], infos[aid] = last, 0.0, {}
                truncateds[aid], terminateds[aid] = True, False
                infos[aid] = {"episode_return": self._returns.get(aid, 0.0), "interrupted": True}
        terminateds["__all__"], truncateds["__all__"] = False, all_done
        self.agents = [aid for aid in observations]
        return observations, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        """Closes the player."""
        self._env.close()

