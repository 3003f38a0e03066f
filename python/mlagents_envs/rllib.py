"""A Unity scene as an RLlib ``MultiAgentEnv`` for RLlib's new API stack (ray 2.54+, which no
longer ships ``Unity3DEnv``).

RLlib's env runners know each agent id before play (``possible_agents``: their connectors keep
per-agent space structures) and refuse data for an agent whose episode has ended, while Unity
restarts agents at once, often under the same ids. So:

- Each Unity agent episode gets its own RLlib agent id from a pool per behavior,
  ``"{behavior}#{k}"`` (``ids_per_agent`` ids for each agent of the first reset); the agent is
  ``terminated`` when its Unity episode ends, or ``truncated`` when Unity interrupted it, with
  its Unity episode's return in its last info as ``"episode_return"``. Map the ids to one policy
  per behavior with ``policy_mapping_fn=policy_of`` (RLlib's module ids may not hold ``?``:
  behavior ``3DBall?team=0`` is module ``3DBall_team0``, see :func:`module_id`).
- An RLlib episode ends after ``horizon`` environment steps, or earlier once the pool is used
  up and an agent waits for an id (it acts with zero actions meanwhile), at a step where every
  agent still playing has a fresh observation: those are ``truncated`` there, and PPO
  bootstraps from it. The next ``reset()`` does not reset Unity (only the first does, or
  ``options={"reset_unity": True}``): the new RLlib episode starts where Unity is, at the
  first step where an agent asks for a decision.
- :meth:`UnityMultiAgentEnv.drain_returns` gives the returns of every Unity episode that ended,
  for metrics (RLlib's own episode returns sum RLlib episodes).
- Spaces come from the behavior specs (``mlagents_envs.envs.spaces``).
- Set ``episodes_to_numpy=False`` in ``.env_runners(...)``: RLlib 2.60 converts every
  finished episode to numpy again at each step of a sample (3.5x slower on 3DBall).
- Each env runner starts its own player on a free port (``base_port=0``), seeded with
  ``seed + worker_index``, and closes it with the env (or at interpreter exit). A runner
  killed outright leaves its player without its trainer: the stand-ins then quit.

Example::

    from ray.tune.registry import register_env
    from mlagents_envs.rllib import UnityMultiAgentEnv, module_ids, policy_of
    config = {"file_name": "sim:3DBall", "horizon": 1000}
    register_env("unity", UnityMultiAgentEnv)  # gets RLlib's EnvContext: config + worker_index
    # PPOConfig().environment("unity", env_config=config)
    #     .multi_agent(policies=module_ids(config), policy_mapping_fn=policy_of)
    #     .env_runners(episodes_to_numpy=False)
"""

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

from ray.rllib.env.multi_agent_env import MultiAgentEnv

from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.envs.agents import reward_of
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


def module_ids(config: Dict[str, Any]) -> Set[str]:
    """The module ids of the behaviors of the scene ``config`` (as for UnityMultiAgentEnv)
    names, for ``AlgorithmConfig.multi_agent(policies=...)``: starts a player to ask it."""
    env = UnityEnvironment(
        config["file_name"],
        base_port=0,
        no_graphics=True,
        timeout_wait=config.get("timeout_wait", 60),
        additional_args=config.get("additional_args"),
    )
    try:
        env.reset()
        return {module_id(behavior) for behavior in env.behavior_specs}
    finally:
        env.close()


class UnityMultiAgentEnv(MultiAgentEnv):
    """RLlib's multi-agent view of one Unity player. ``config`` (RLlib's ``EnvContext`` or a
    dict) holds ``file_name`` (a build or ``"sim:SCENE"``) and optionally ``additional_args``,
    ``base_port`` (0: a free port), ``seed``, ``no_graphics``, ``timeout_wait``, ``horizon``,
    ``ids_per_agent`` (the id pool's size per agent of the first reset, default 8),
    ``add_group_reward`` (add group rewards to the agents' rewards, as Unity3DEnv did)."""

    def __init__(self, config: Optional[Dict[str, Any]] = None):
        super().__init__()
        worker_index = int(getattr(config, "worker_index", 0) or 0)
        config = dict(config or {})
        #: The player's seed: ``seed`` + the env runner's ``worker_index``.
        self.player_seed = int(config.get("seed", 0)) + worker_index
        self._env = UnityEnvironment(
            config["file_name"],
            base_port=config.get("base_port", 0),
            seed=self.player_seed,
            no_graphics=config.get("no_graphics", True),
            timeout_wait=config.get("timeout_wait", 60),
            additional_args=config.get("additional_args"),
        )
        self._horizon: Optional[int] = config.get("horizon")
        self._add_group_reward = bool(config.get("add_group_reward", True))
        self._env.reset()
        self._unity_fresh = True
        self._specs = dict(self._env.behavior_specs)
        self._action_spaces = {b: action_space(spec.action_spec) for b, spec in self._specs.items()}
        self._zero_actions = {b: zeros_like(space) for b, space in self._action_spaces.items()}
        ids_per_agent = int(config.get("ids_per_agent", 8))
        # The id pool: behavior -> its agent ids, in the order they are handed out.
        self._pool: Dict[str, List[str]] = {
            behavior: [f"{behavior}#{k}" for k in range(ids_per_agent * max(1, len(self._env.get_steps(behavior)[0])))]
            for behavior in self._specs
        }
        self.possible_agents = [aid for ids in self._pool.values() for aid in ids]
        self.observation_spaces = {a: observation_space(self._specs[behavior_of(a)]) for a in self.possible_agents}
        self.action_spaces = {a: self._action_spaces[behavior_of(a)] for a in self.possible_agents}
        self.agents = []
        # Per RLlib episode: (behavior, Unity agent id) -> the RLlib id of its Unity episode,
        # the ids not handed out yet, the ids whose Unity episode goes on, the step count.
        self._ids: Dict[Tuple[str, int], str] = {}
        self._free: Dict[str, Deque[str]] = {}
        self._live: Set[str] = set()
        self._steps = 0
        self._last_observations: Dict[str, Any] = {}
        # Unity episode returns: running, per (behavior, Unity agent id); finished, not drained.
        self._returns: Dict[Tuple[str, int], float] = {}
        self._finished_returns: List[float] = []

    def drain_returns(self) -> List[float]:
        """The returns of the Unity episodes that ended since the last call (all of them, also
        those of agents that had no RLlib id), for metrics."""
        finished, self._finished_returns = self._finished_returns, []
        return finished

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Starts an RLlib episode where Unity is (the first call, or ``reset_unity`` in
        ``options``, resets Unity; the seed was given to the player at launch), at a step where
        some agent asks for a decision."""
        if not self._unity_fresh and (options or {}).get("reset_unity", False):
            self._env.reset()
            self._returns = {}
        self._unity_fresh = False
        # No ids to hand out while skipping to a step where an agent asks for a decision.
        self._ids, self._live, self._steps = {}, set(), 0
        self._free = {behavior: deque() for behavior in self._pool}
        while not any(len(self._env.get_steps(behavior)[0]) for behavior in self._specs):
            self._env.step()
            self._collect()
        self._free = {behavior: deque(ids) for behavior, ids in self._pool.items()}
        observations = {}
        for behavior in self._specs:
            decisions = self._env.get_steps(behavior)[0]
            for row, agent_id in enumerate(decisions.agent_id):
                aid = self._new_id(behavior, int(agent_id))
                if aid is not None:
                    observations[aid] = observation_of(decisions.obs, row)
        self.agents = list(observations)
        self._last_observations = dict(observations)
        return observations, {aid: {} for aid in observations}

    def _new_id(self, behavior: str, agent_id: int) -> Optional[str]:
        """Hands the next free id of ``behavior``'s pool to a Unity episode (None: none left,
        the agent waits with zero actions until the next RLlib episode)."""
        free = self._free[behavior]
        if not free:
            return None
        aid = self._ids[(behavior, agent_id)] = free.popleft()
        self._live.add(aid)
        return aid

    def step(self, action_dict: Dict[str, Any]):
        """Acts for the agents in ``action_dict`` (zeros for agents Unity asks that have none)
        and steps Unity once."""
        for behavior, spec in self._specs.items():
            decisions = self._env.get_steps(behavior)[0]
            if len(decisions) == 0:
                continue
            zero = self._zero_actions[behavior]
            batch = [action_dict.get(self._ids.get((behavior, int(a))), zero) for a in decisions.agent_id]
            self._env.set_actions(behavior, action_tuple(spec.action_spec, batch))
        self._env.step()
        self._steps += 1
        observations, rewards, terminateds, truncateds, infos, waiting = self._collect()
        # The episode ends after ``horizon`` steps, or once an agent waits for an id, at a
        # step where every agent whose Unity episode goes on has a fresh observation (then
        # their truncation loses nothing; scenes whose agents decide at different steps may
        # end at the horizon with an agent's previous observation and no reward).
        at_horizon = self._horizon is not None and self._steps >= self._horizon
        over = at_horizon or (waiting and self._live <= set(observations))
        if over:
            for aid in self._live:
                if aid not in observations:
                    observations[aid], rewards[aid], infos[aid] = self._last_observations[aid], 0.0, {}
                terminateds[aid], truncateds[aid] = False, True
        terminateds["__all__"], truncateds["__all__"] = False, over
        self.agents = list(observations)
        return observations, rewards, terminateds, truncateds, infos

    def _collect(self):
        """Reads what Unity reported after a step: per RLlib id its observation, reward,
        terminated, truncated and info, and whether an agent asked for a decision without an
        id to give it. Terminal rows come first (they close a Unity episode; a decision row of
        the same agent in the same step opens its next one under a new id)."""
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        waiting = False
        for behavior in self._specs:
            decisions, terminals = self._env.get_steps(behavior)
            for row, agent_id in enumerate(terminals.agent_id):
                key = (behavior, int(agent_id))
                reward = reward_of(terminals, row, self._add_group_reward)
                episode_return = self._returns.pop(key, 0.0) + reward
                self._finished_returns.append(episode_return)
                aid = self._ids.pop(key, None)
                if aid is not None:
                    self._live.discard(aid)
                    interrupted = bool(terminals.interrupted[row])
                    observations[aid], rewards[aid] = observation_of(terminals.obs, row), reward
                    terminateds[aid], truncateds[aid] = not interrupted, interrupted
                    infos[aid] = {"episode_return": episode_return, "interrupted": interrupted}
            for row, agent_id in enumerate(decisions.agent_id):
                key = (behavior, int(agent_id))
                reward = reward_of(decisions, row, self._add_group_reward)
                self._returns[key] = self._returns.get(key, 0.0) + reward
                aid = self._ids.get(key) or self._new_id(*key)
                if aid is None:
                    waiting = True
                elif aid in self._live:
                    observations[aid], rewards[aid], infos[aid] = observation_of(decisions.obs, row), reward, {}
        self._last_observations.update(observations)
        return observations, rewards, terminateds, truncateds, infos, waiting

    def close(self) -> None:
        """Closes the player."""
        self._env.close()
