"""The two-way key/float channel."""

import uuid
from typing import Dict, List, Optional

from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage
from mlagents_envs.side_channel.side_channel import SideChannel


class FloatPropertiesChannel(SideChannel):
    """Floats by key, set from either side."""

    def __init__(self, channel_id: Optional[uuid.UUID] = None) -> None:
        self._float_properties: Dict[str, float] = {}
        super().__init__(channel_id or uuid.UUID("60ccf7d0-4f7e-11ea-b238-784f4387d1f7"))

    def on_message_received(self, msg: IncomingMessage) -> None:
        key = msg.read_string()
        self._float_properties[key] = msg.read_float32()

    def set_property(self, key: str, value: float) -> None:
        """Sets ``key`` here and in Unity."""
        self._float_properties[key] = value
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_float32(value)
        super().queue_message_to_send(msg)

    def get_property(self, key: str) -> Optional[float]:
        """The last value of ``key`` from either side, or None."""
        return self._float_properties.get(key)

    def list_properties(self) -> List[str]:
        """The keys set so far."""
        return list(self._float_properties.keys())

    def get_property_dict_copy(self) -> Dict[str, float]:
        """A copy of every key and value."""
        return dict(self._float_properties)
