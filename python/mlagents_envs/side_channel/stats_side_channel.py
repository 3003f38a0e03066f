"""The stats channel: values Unity's ``StatsRecorder`` sends, with their aggregation."""

import uuid
from collections import defaultdict
from enum import Enum
from typing import DefaultDict, List, Tuple

from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.side_channel import SideChannel


class StatsAggregationMethod(Enum):
    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


StatList = List[Tuple[float, StatsAggregationMethod]]
EnvironmentStats = DefaultDict[str, StatList]


class StatsSideChannel(SideChannel):
    """Collects Unity's stats until :meth:`get_and_reset_stats`."""

    def __init__(self) -> None:
        super().__init__(uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520"))
        self.stats: EnvironmentStats = defaultdict(list)

    def on_message_received(self, msg: IncomingMessage) -> None:
        key = msg.read_string()
        value = msg.read_float32()
        method = StatsAggregationMethod(msg.read_int32())
        self.stats[key].append((value, method))

    def get_and_reset_stats(self) -> EnvironmentStats:
        """The stats received since the last call."""
        stats = self.stats
        self.stats = defaultdict(list)
        return stats
