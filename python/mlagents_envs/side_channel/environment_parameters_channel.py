"""The environment parameters channel: floats and samplers Unity's
``Academy.Instance.EnvironmentParameters`` reads."""

import uuid
from typing import List, Tuple

from mlagents_envs.exception import UnityCommunicationException
from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage
from mlagents_envs.side_channel.side_channel import SideChannel


class EnvironmentParametersChannel(SideChannel):
    """Sends parameters to Unity. Unity sends nothing back."""

    class EnvironmentDataTypes:
        FLOAT = 0
        SAMPLER = 1

    class SamplerTypes:
        UNIFORM = 0
        GAUSSIAN = 1
        MULTIRANGEUNIFORM = 2

    def __init__(self) -> None:
        super().__init__(uuid.UUID("534c891e-810f-11ea-a9d0-822485860400"))

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise UnityCommunicationException(
            "The EnvironmentParametersChannel received a message from Unity, this should not have happened."
        )

    def set_float_parameter(self, key: str, value: float) -> None:
        """``key`` reads ``value``."""
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_int32(self.EnvironmentDataTypes.FLOAT)
        msg.write_float32(value)
        super().queue_message_to_send(msg)

    def _sampler(self, key: str, seed: int, kind: int) -> OutgoingMessage:
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_int32(self.EnvironmentDataTypes.SAMPLER)
        msg.write_int32(seed)
        msg.write_int32(kind)
        return msg

    def set_uniform_sampler_parameters(self, key: str, min_value: float, max_value: float, seed: int) -> None:
        """``key`` draws uniformly from [min_value, max_value) at each episode."""
        msg = self._sampler(key, seed, self.SamplerTypes.UNIFORM)
        msg.write_float32(min_value)
        msg.write_float32(max_value)
        super().queue_message_to_send(msg)

    def set_gaussian_sampler_parameters(self, key: str, mean: float, st_dev: float, seed: int) -> None:
        """``key`` draws from a normal distribution at each episode."""
        msg = self._sampler(key, seed, self.SamplerTypes.GAUSSIAN)
        msg.write_float32(mean)
        msg.write_float32(st_dev)
        super().queue_message_to_send(msg)

    def set_multirangeuniform_sampler_parameters(self, key: str, intervals: List[Tuple[float, float]], seed: int) -> None:
        """``key`` draws uniformly from the union of ``intervals`` at each episode."""
        msg = self._sampler(key, seed, self.SamplerTypes.MULTIRANGEUNIFORM)
        msg.write_float32_list([bound for interval in intervals for bound in interval])
        super().queue_message_to_send(msg)
