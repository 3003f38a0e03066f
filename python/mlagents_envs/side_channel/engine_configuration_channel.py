"""The engine configuration channel: screen size, quality, time scale and frame rates."""

import uuid
from typing import NamedTuple, Optional

from mlagents_envs.exception import UnityCommunicationException, UnitySideChannelException
from mlagents_envs.side_channel.incoming_message import IncomingMessage
from mlagents_envs.side_channel.outgoing_message import OutgoingMessage
from mlagents_envs.side_channel.side_channel import SideChannel


class EngineConfig(NamedTuple):
    """The engine settings of a Unity player."""

    width: Optional[int]
    height: Optional[int]
    quality_level: Optional[int]
    time_scale: Optional[float]
    target_frame_rate: Optional[int]
    capture_frame_rate: Optional[int]

    @staticmethod
    def default_config() -> "EngineConfig":
        """mlagents_envs' defaults: 80 x 80, quality 1, time scale 20, unlimited frame rate,
        capture at 60."""
        return EngineConfig(80, 80, 1, 20.0, -1, 60)


class EngineConfigurationChannel(SideChannel):
    """Sends engine settings to Unity (one message per setting). Unity sends nothing back."""

    class ConfigurationType:
        SCREEN_RESOLUTION = 0
        QUALITY_LEVEL = 1
        TIME_SCALE = 2
        TARGET_FRAME_RATE = 3
        CAPTURE_FRAME_RATE = 4

    def __init__(self) -> None:
        super().__init__(uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7"))

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise UnityCommunicationException(
            "The EngineConfigurationChannel received a message from Unity, this should not have happened."
        )

    def _send(self, kind: int, *values) -> None:
        msg = OutgoingMessage()
        msg.write_int32(kind)
        for value in values:
            if isinstance(value, float):
                msg.write_float32(value)
            else:
                msg.write_int32(value)
        super().queue_message_to_send(msg)

    def set_configuration_parameters(
        self,
        width: Optional[int] = None,
        height: Optional[int] = None,
        quality_level: Optional[int] = None,
        time_scale: Optional[float] = None,
        target_frame_rate: Optional[int] = None,
        capture_frame_rate: Optional[int] = None,
    ) -> None:
        """Sends the settings given; width and height go together."""
        if (width is None) != (height is None):
            raise UnitySideChannelException("You cannot set the width/height of the screen resolution without also setting the height/width")
        kinds = EngineConfigurationChannel.ConfigurationType
        if width is not None:
            self._send(kinds.SCREEN_RESOLUTION, int(width), int(height))
        if quality_level is not None:
            self._send(kinds.QUALITY_LEVEL, int(quality_level))
        if time_scale is not None:
            self._send(kinds.TIME_SCALE, float(time_scale))
        if target_frame_rate is not None:
            self._send(kinds.TARGET_FRAME_RATE, int(target_frame_rate))
        if capture_frame_rate is not None:
            self._send(kinds.CAPTURE_FRAME_RATE, int(capture_frame_rate))

    def set_configuration(self, config: EngineConfig) -> None:
        """Sends every setting of ``config``."""
        self.set_configuration_parameters(**config._asdict())
