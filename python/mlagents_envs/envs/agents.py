"""What the wrappers share about Unity's agents: naming them by slot, and their rewards."""

from typing import Callable, Dict, Iterable, Tuple

from mlagents_envs.base_env import BaseEnv


def slot_agents(env: BaseEnv, behaviors: Iterable[str], name: Callable[[str, int], str]) -> Dict[Tuple[str, int], str]:
    """Names the agents asking for a decision now: the k-th agent of a behavior is
    ``name(behavior, k)``. Returns (behavior, Unity agent id) -> name, in that order."""
    return {
        (behavior, int(agent_id)): name(behavior, slot)
        for behavior in behaviors
        for slot, agent_id in enumerate(env.get_steps(behavior)[0].agent_id)
    }


def reward_of(batch, row: int, add_group_reward: bool) -> float:
    """Row ``row``'s reward of a DecisionSteps or TerminalSteps, with its group reward added
    when asked."""
    return float(batch.reward[row] + (batch.group_reward[row] if add_group_reward else 0.0))
