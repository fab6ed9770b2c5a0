"""A small strict NDR 2.0 / NDR64 reader and writer for the runtime's own stubs (C706 ch. 14; MS-RPCE 2.2.5).

Used by the management interface and the endpoint mapper. Alignment is relative to the start of the stub;
NDR64 counts and referent ids are 8 bytes (MS-RPCE 2.2.5.3.2, 2.2.5.3.3), NDR 2.0 ones 4 bytes. Every
malformation the reader meets raises RpcFault(RPC_X_BAD_STUB_DATA) (MS-RPCE 3.1.3.5.2); a [range] violation
raises RpcFault(RPC_X_INVALID_BOUND) (MS-RPCE 3.1.1.5.3.3.1.3).
"""
from __future__ import annotations

import struct
import uuid

from qm2qm.rpc.faults import RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND
from qm2qm.rpc.interface import RpcFault

CONTEXT_HANDLE_SIZE = 20
NULL_CONTEXT_HANDLE = bytes(CONTEXT_HANDLE_SIZE)

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def bad_stub(why: str) -> RpcFault:
    """The fault for stub data that cannot be unmarshalled (MS-RPCE 3.1.3.5.2)."""
    return RpcFault(RPC_X_BAD_STUB_DATA, f"bad stub data: {why}")


def check_range(name: str, value: int, low: int, high: int) -> int:
    """Enforce an IDL [range(low, high)] attribute (MS-RPCE 3.1.1.5.3.3.1.3)."""
    if not low <= value <= high:
        raise RpcFault(RPC_X_INVALID_BOUND, f"{name} = {value} is outside range({low}, {high})")
    return value


class NdrReader:
    """Sequential reader over a request stub; NDR64 when ``ndr64``."""
    __slots__ = ("data", "pos", "ndr64")

    def __init__(self, data: bytes, ndr64: bool) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.ndr64 = ndr64

    def align(self, n: int) -> None:
        pos = self.pos + (-self.pos) % n
        if pos > len(self.data):
            raise bad_stub(f"stub ends inside alignment padding at offset {self.pos}")
        self.pos = pos

    def raw(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise bad_stub(f"{n} bytes needed at offset {self.pos}, {len(self.data) - self.pos} left")
        out = bytes(self.data[self.pos:end])
        self.pos = end
        return out

    def u16(self) -> int:
        self.align(2)
        return _U16.unpack(self.raw(2))[0]

    def u32(self) -> int:
        self.align(4)
        return _U32.unpack(self.raw(4))[0]

    def u64(self) -> int:
        self.align(8)
        return _U64.unpack(self.raw(8))[0]

    def count(self) -> int:
        """A conformance or variance count: u32 in NDR, u64 in NDR64 (MS-RPCE 2.2.5.3.2)."""
        if not self.ndr64:
            return self.u32()
        value = self.u64()
        if value > 0xFFFFFFFF:
            raise bad_stub(f"NDR64 count {value} does not fit the 32-bit IDL field")
        return value

    def referent(self) -> int:
        """A [unique]/[ptr] referent id; 0 is NULL (C706 14.3.10; MS-RPCE 2.2.5.3.3)."""
        return self.u64() if self.ndr64 else self.u32()

    def uuid(self) -> uuid.UUID:
        self.align(4)
        return uuid.UUID(bytes_le=self.raw(16))

    def context_handle(self) -> bytes:
        """An ndr_context_handle: u32 attributes + 16-byte UUID, 4-aligned in both syntaxes."""
        self.align(4)
        return self.raw(CONTEXT_HANDLE_SIZE)


class NdrWriter:
    """Sequential writer of a response stub; NDR64 when ``ndr64``. Padding octets are zero."""
    __slots__ = ("buf", "ndr64", "_next_referent")

    def __init__(self, ndr64: bool) -> None:
        self.buf = bytearray()
        self.ndr64 = ndr64
        self._next_referent = 0x00020000        # the ids Windows and Samba stubs use: 0x20000 + 4*n

    def align(self, n: int) -> None:
        self.buf += bytes((-len(self.buf)) % n)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def u16(self, value: int) -> None:
        self.align(2)
        self.buf += _U16.pack(value)

    def u32(self, value: int) -> None:
        self.align(4)
        self.buf += _U32.pack(value)

    def u64(self, value: int) -> None:
        self.align(8)
        self.buf += _U64.pack(value)

    def count(self, value: int) -> None:
        if self.ndr64:
            self.u64(value)
        else:
            self.u32(value)

    def referent(self, present: bool = True) -> None:
        """A fresh non-zero referent id, or 0 (NULL) when not ``present``."""
        value = 0
        if present:
            value = self._next_referent
            self._next_referent += 4
        if self.ndr64:
            self.u64(value)
        else:
            self.u32(value)

    def uuid(self, value: uuid.UUID) -> None:
        self.align(4)
        self.buf += value.bytes_le

    def context_handle(self, wire: bytes) -> None:
        self.align(4)
        self.buf += wire

    def getvalue(self) -> bytes:
        return bytes(self.buf)
