"""Writing a side-channel message (little-endian, as Unity reads it)."""

import logging
import struct
from typing import List

logger = logging.getLogger("mlagents_envs")


class OutgoingMessage:
    """A message for Unity; ``buffer`` holds what was written so far."""

    def __init__(self):
        self.buffer = bytearray()

    def write_bool(self, b: bool) -> None:
        """A bool (one byte)."""
        self.buffer += struct.pack("<?", b)

    def write_int32(self, i: int) -> None:
        """A 32-bit integer."""
        self.buffer += struct.pack("<i", i)

    def write_float32(self, f: float) -> None:
        """A 32-bit float."""
        self.buffer += struct.pack("<f", f)

    def write_float32_list(self, float_list: List[float]) -> None:
        """A count (int32) then the floats."""
        self.write_int32(len(float_list))
        for value in float_list:
            self.write_float32(value)

    def write_string(self, s: str) -> None:
        """A length (int32) then the ASCII bytes."""
        encoded = s.encode("ascii")
        self.write_int32(len(encoded))
        self.buffer += encoded

    def set_raw_bytes(self, buffer: bytearray) -> None:
        """Replaces the message with ``buffer``."""
        if self.buffer:
            logger.warning("Called set_raw_bytes but the message already has been written to. This will overwrite data.")
        self.buffer = bytearray(buffer)
