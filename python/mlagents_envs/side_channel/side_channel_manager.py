"""Framing of side-channel messages: each is [16-byte GUID (bytes_le)][int32 length][payload]."""

import logging
import struct
import uuid
from typing import Dict, List, Optional

from mlagents_envs.exception import UnityEnvironmentException
from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.side_channel import SideChannel

logger = logging.getLogger("mlagents_envs")

_HEADER = 16 + 4


class SideChannelManager:
    """Routes Unity's side-channel messages to the registered channels and frames theirs.
    A channel Unity writes to that nobody registered is warned about once."""

    def __init__(self, side_channels: Optional[List[SideChannel]]):
        self._side_channels_dict = self._get_side_channels_dict(side_channels)
        self._warned_unknown: set = set()

    def process_side_channel_message(self, data: bytes) -> None:
        """Delivers every message in ``data``; unknown channels are logged and skipped."""
        offset = 0
        while offset < len(data):
            if len(data) - offset < _HEADER:
                raise UnityEnvironmentException(
                    "There was a problem reading a message in a SideChannel. Please make sure the version of "
                    "MLAgents in Unity is compatible with the Python version."
                )
            channel_id = uuid.UUID(bytes_le=bytes(data[offset : offset + 16]))
            (length,) = struct.unpack_from("<i", data, offset + 16)
            offset += _HEADER
            if length < 0 or offset + length > len(data):
                raise UnityEnvironmentException(
                    "The message received by the side channel {} was unexpectedly short. Make sure your Unity "
                    "Environment sending side channel data properly.".format(channel_id)
                )
            payload = bytes(data[offset : offset + length])
            offset += length
            channel = self._side_channels_dict.get(channel_id)
            if channel is None:
                # Once per channel (0.28 warns at every message: Unity's stats every step).
                if channel_id not in self._warned_unknown:
                    self._warned_unknown.add(channel_id)
                    logger.warning(f"Unknown side channel data received. Channel type: {channel_id}.")
            else:
                channel.on_message_received(IncomingMessage(payload))

    def generate_side_channel_messages(self) -> bytearray:
        """Frames and takes every message the channels queued."""
        result = bytearray()
        for channel_id, channel in self._side_channels_dict.items():
            for message in channel.message_queue:
                result += channel_id.bytes_le
                result += struct.pack("<i", len(message))
                result += message
            channel.message_queue = []
        return result

    @staticmethod
    def _get_side_channels_dict(side_channels: Optional[List[SideChannel]]) -> Dict[uuid.UUID, SideChannel]:
        channels: Dict[uuid.UUID, SideChannel] = {}
        for channel in side_channels or []:
            if channel.channel_id in channels:
                raise UnityEnvironmentException(
                    f"There cannot be two side channels with the same channel id {channel.channel_id}."
                )
            channels[channel.channel_id] = channel
        return channels
