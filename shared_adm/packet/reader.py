"""Bounds-checked cursor over a UserMessage Packet: every short read becomes a PacketError (MS-MQMQ 2.2.20)."""
from __future__ import annotations

import struct
import uuid

from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import pad4


class Reader:
    """Reads fields of one header between ``pos`` and ``end``; ``header`` names it in errors."""

    __slots__ = ("view", "pos", "end", "header", "scope")

    def __init__(self, view: memoryview, pos: int, end: int, header: str, scope: str = "packet") -> None:
        self.view = view
        self.pos = pos
        self.end = end
        self.header = header
        self.scope = scope          # what ``end`` is the end of, for error messages

    def error(self, field: str, reason: str, offset: int | None = None) -> PacketError:
        """A PacketError for ``field`` of the current header at ``offset`` (default: the cursor)."""
        return PacketError(self.header, field, self.pos if offset is None else offset, reason)

    def need(self, n: int, field: str) -> None:
        """Fail unless n more bytes remain before the end of the packet."""
        if n > self.end - self.pos:
            raise self.error(field, f"truncated: needs {n} bytes, {max(self.end - self.pos, 0)} left in {self.scope}")

    def unpack(self, st: struct.Struct, field: str) -> tuple:
        """Unpack a fixed-size structure and advance."""
        self.need(st.size, field)
        values = st.unpack_from(self.view, self.pos)
        self.pos += st.size
        return values

    def take(self, n: int, field: str) -> memoryview:
        """Return the next n bytes (a view, no copy) and advance."""
        self.need(n, field)
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def guid(self, field: str) -> uuid.UUID:
        """A GUID in MS-DTYP 2.3.4.2 packet form."""
        return uuid.UUID(bytes_le=bytes(self.take(16, field)))

    def skip_padding(self, base: int, field: str) -> None:
        """Skip the pad bytes that bring the cursor to a 4-byte boundary relative to ``base``."""
        n = pad4(self.pos - base)
        if n:
            self.need(n, field + " padding")
            self.pos += n

    def wstring(self, n_bytes: int, field: str) -> str:
        """A NUL-terminated UTF-16LE string occupying exactly n_bytes (NUL included)."""
        start = self.pos
        if n_bytes < 2 or n_bytes & 1:
            raise self.error(field, f"length {n_bytes} bytes is not a whole NUL-terminated UTF-16 string")
        raw = bytes(self.take(n_bytes, field))
        return decode_wstring(raw, self.header, field, start)

    def wstring_until_nul(self, field: str) -> str:
        """A NUL-terminated UTF-16LE string whose length is found by its terminator."""
        start = self.pos
        raw = bytes(self.view[start:self.end])
        nul = find_wchar_nul(raw, 0)
        if nul < 0:
            raise self.error(field, f"no terminating NUL before the end of the {self.scope}", start)
        self.pos = start + nul + 2
        return decode_wstring(raw[:nul + 2], self.header, field, start)


def find_wchar_nul(raw: bytes, start: int) -> int:
    """Offset of the first NUL WCHAR at an even distance from ``start``, or -1."""
    j = start
    while True:
        j = raw.find(b"\x00\x00", j)
        if j < 0 or (j - start) % 2 == 0:
            return j
        j += 1


def decode_wstring(raw: bytes, header: str, field: str, offset: int) -> str:
    """Decode NUL-terminated UTF-16LE; an embedded NUL or a missing terminator is an error (2.2.19.3 ABNF)."""
    if raw[-2:] != b"\x00\x00":
        raise PacketError(header, field, offset, "string is not NUL-terminated")
    text = raw[:-2].decode("utf-16-le", "surrogatepass")
    if "\x00" in text:
        raise PacketError(header, field, offset, "embedded NUL character inside the string")
    return text


def encode_wstring(text: str, header: str, field: str) -> bytes:
    """Encode text as NUL-terminated UTF-16LE; an embedded NUL is refused."""
    if "\x00" in text:
        raise PacketError(header, field, None, "embedded NUL character inside the string")
    return text.encode("utf-16-le", "surrogatepass") + b"\x00\x00"
