"""The training analytics channel: tells Unity which trainer drives it (no protobuf needed)."""

import sys
import uuid

import mlagents_envs
from mlagents_envs.exception import UnityCommunicationException
from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage
from mlagents_envs.side_channel.side_channel import SideChannel

_TYPE_URL = "type.googleapis.com/communicator_objects.TrainingEnvironmentInitialized"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


class DefaultTrainingAnalyticsSideChannel(SideChannel):
    """Sends one ``TrainingEnvironmentInitialized`` (packed in a protobuf ``Any``) after the
    handshake, as mlagents_envs 0.28 does; Unity sends nothing back."""

    CHANNEL_ID = uuid.UUID("b664a4a9-d86f-5a5f-95cb-e8353a7e8356")

    def __init__(self) -> None:
        super().__init__(DefaultTrainingAnalyticsSideChannel.CHANNEL_ID)

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise UnityCommunicationException(
            "The DefaultTrainingAnalyticsSideChannel received a message from Unity, this should not have happened."
        )

    def environment_initialized(self) -> None:
        """Queues the message (the fields 1-5 of TrainingEnvironmentInitialized)."""
        version = sys.version_info
        fields = [
            "Custom",
            mlagents_envs.__version__,
            f"{version[0]}.{version[1]}.{version[2]}",
            "Unknown",
            "Unknown",
        ]
        initialized = b"".join(_length_delimited(number, text.encode()) for number, text in enumerate(fields, start=1))
        packed = _length_delimited(1, _TYPE_URL.encode()) + _length_delimited(2, initialized)
        msg = OutgoingMessage()
        msg.set_raw_bytes(bytearray(packed))
        super().queue_message_to_send(msg)
