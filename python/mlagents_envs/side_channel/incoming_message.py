"""Reading a side-channel message (little-endian, as Unity writes it)."""

import struct
from typing import List, Optional


class IncomingMessage:
    """A message from Unity. Every reader returns ``default_value`` once the buffer is used up."""

    def __init__(self, buffer: bytes, offset: int = 0):
        self.buffer = buffer
        self.offset = offset

    def _at_end(self, size: int) -> bool:
        return self.offset + size > len(self.buffer)

    def _read(self, fmt: str, default_value):
        size = struct.calcsize(fmt)
        if self._at_end(size):
            return default_value
        value = struct.unpack_from(fmt, self.buffer, self.offset)[0]
        self.offset += size
        return value

    def read_bool(self, default_value: bool = False) -> bool:
        """A bool (one byte)."""
        return self._read("<?", default_value)

    def read_int32(self, default_value: int = 0) -> int:
        """A 32-bit integer."""
        return self._read("<i", default_value)

    def read_float32(self, default_value: float = 0.0) -> float:
        """A 32-bit float."""
        return self._read("<f", default_value)

    def read_float32_list(self, default_value: Optional[List[float]] = None) -> List[float]:
        """A count (int32) then that many floats."""
        if self._at_end(4):
            return [] if default_value is None else default_value
        count = self.read_int32()
        return [self.read_float32() for _ in range(count)]

    def read_string(self, default_value: str = "") -> str:
        """A length (int32) then that many ASCII bytes."""
        if self._at_end(4):
            return default_value
        length = self.read_int32()
        text = self.buffer[self.offset : self.offset + length].decode("ascii")
        self.offset += length
        return text

    def get_raw_bytes(self) -> bytes:
        """The whole message, whatever has been read."""
        return bytes(self.buffer)
