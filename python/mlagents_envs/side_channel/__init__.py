"""Side channels: messages between Python and Unity beside observations and actions."""

from mlagents_envs.side_channel.incoming_message import IncomingMessage  # noqa: F401
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage  # noqa: F401
from mlagents_envs.side_channel.side_channel import SideChannel  # noqa: F401
from mlagents_envs.side_channel.default_training_analytics_side_channel import (  # noqa: F401
    DefaultTrainingAnalyticsSideChannel,
)
