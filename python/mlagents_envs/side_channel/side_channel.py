"""The base class of side channels: one GUID, messages out and in."""

import uuid
from abc import ABC, abstractmethod
from typing import List

from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage


class SideChannel(ABC):
    """Subclass it with the GUID Unity's side of the channel uses. Queued messages leave with
    the next ``reset``/``step``; Unity's arrive through :meth:`on_message_received`.

    ``message_queue`` is public: the manager reads and empties it, as in 0.28.
    """

    def __init__(self, channel_id: uuid.UUID):
        self._channel_id: uuid.UUID = channel_id
        self.message_queue: List[bytearray] = []

    def queue_message_to_send(self, msg: OutgoingMessage) -> None:
        """Queues ``msg`` for the next exchange."""
        self.message_queue.append(msg.buffer)

    @abstractmethod
    def on_message_received(self, msg: IncomingMessage) -> None:
        """Called for each message Unity sent on this channel."""

    @property
    def channel_id(self) -> uuid.UUID:
        """The channel's GUID."""
        return self._channel_id
