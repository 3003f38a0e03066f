"""A channel of raw bytes both ways."""

import uuid
from typing import List

from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage
from mlagents_envs.side_channel.side_channel import SideChannel


class RawBytesChannel(SideChannel):
    """Keeps what Unity sent until read; sends bytes as given."""

    def __init__(self, channel_id: uuid.UUID):
        self._received_messages: List[bytes] = []
        super().__init__(channel_id)

    def on_message_received(self, msg: IncomingMessage) -> None:
        self._received_messages.append(msg.get_raw_bytes())

    def get_and_clear_received_messages(self) -> List[bytes]:
        """The messages received since the last call."""
        received = self._received_messages
        self._received_messages = []
        return received

    def send_raw_data(self, data: bytearray) -> None:
        """Queues ``data`` as one message."""
        msg = OutgoingMessage()
        msg.set_raw_bytes(data)
        super().queue_message_to_send(msg)
