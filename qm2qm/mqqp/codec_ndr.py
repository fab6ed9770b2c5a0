"""NDR 2.0 / NDR64 building blocks of the qm2qm codec: REMOTEREADDESC and REMOTEREADDESC2 with their deferred
lpBuffer (MS-MQQP 2.2.2; C706 14.3.10-12; MS-RPCE 2.2.5), scalar checks, and the faults of strict unmarshalling
(MS-RPCE 3.1.1.5.3)."""
from __future__ import annotations

import struct
from typing import Any

from qm2qm.mqqp.codec_types import CONTEXT_HANDLE_SIZE, REMOTEREADDESC, REMOTEREADDESC2
from qm2qm.mqqp.constants import (MAX_REMOTEREAD_BUFFER, REFERENT_ID_STEP, REMOTEREADACK, RPC_S_INVALID_BOUND,
                                  RPC_X_BAD_STUB_DATA)
from qm2qm.rpc.interface import RpcFault


class EncodeError(ValueError):
    """A value given to an encoder cannot be marshalled (or, strict, would be rejected by a strict peer)."""


# ----------------------------------------------------------------------------------------------------------
# Faults
# ----------------------------------------------------------------------------------------------------------

def bad(what: str) -> RpcFault:
    """RPC_X_BAD_STUB_DATA: an invalid octet stream (MS-RPCE 3.1.3.5.2)."""
    return RpcFault(RPC_X_BAD_STUB_DATA, f"bad stub data: {what}")


def bound(what: str) -> RpcFault:
    """RPC_S_INVALID_BOUND: a [range] violation (MS-RPCE 2.2.4.14, 3.1.1.5.3.2.2.4)."""
    return RpcFault(RPC_S_INVALID_BOUND, f"invalid bound: {what}")


def truncated(where: str, pos: int, need: int, have: int) -> RpcFault:
    """Insufficient octet stream (MS-RPCE 3.1.1.5.3.2.2.3)."""
    return bad(f"{where}: stub truncated at offset {pos} (need {need} bytes, {max(have - pos, 0)} left)")


def check_end(stub: Any, pos: int, where: str) -> None:
    """Reject bytes left after the last parameter."""
    if pos != len(stub):
        raise bad(f"{where}: {len(stub) - pos} trailing bytes after the last parameter (offset {pos})")


# ----------------------------------------------------------------------------------------------------------
# REMOTEREADDESC / REMOTEREADDESC2 layouts
#   NDR:   9 x u32, enum u16, 2-byte gap, referent id u32           = 44 bytes, align 4
#   NDR64: 9 x u32, enum i32, referent id u64                       = 48 bytes, align 8 (MS-RPCE 2.2.5.2)
#   deferred lpBuffer: max, offset, actual (u32 / u64), then dwSize bytes
#   REMOTEREADDESC2 NDR: referent u32, 4-byte gap, u64 = 16 (align 8); NDR64: referent u64, u64 = 16 (align 8)
# ----------------------------------------------------------------------------------------------------------

_RRD = struct.Struct("<9IH2xI")
_RRD64 = struct.Struct("<9IiQ")
_CV = struct.Struct("<3I")
_CV64 = struct.Struct("<3Q")
_RRD2 = struct.Struct("<I4xQ")
_RRD2_64 = struct.Struct("<QQ")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
ZEROS = bytes(8)
_ACKS = tuple(REMOTEREADACK)


def read_rrd(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC, int, int]:
    """Unmarshal the REMOTEREADDESC scalars at pos; returns (desc without buffer, lpBuffer referent id, end)."""
    if ndr64:
        pos = (pos + 7) & ~7
        layout = _RRD64
    else:
        pos = (pos + 3) & ~3
        layout = _RRD
    end = pos + layout.size
    if end > len(stub):
        raise truncated(where + " REMOTEREADDESC", pos, layout.size, len(stub))
    (hRemoteQueue, hCursor, ulAction, ulTimeout, dwSize, dwQueue, dwRequestID, Reserved, dwArriveTime,
     eAckNack, ref) = layout.unpack_from(stub, pos)
    if dwSize > MAX_REMOTEREAD_BUFFER:
        raise bound(f"{where} REMOTEREADDESC.dwSize {dwSize} outside range(0, {MAX_REMOTEREAD_BUFFER})")
    if not 0 <= eAckNack <= 2:
        raise bad(f"{where} REMOTEREADDESC.eAckNack {eAckNack} is not a REMOTEREADACK value")
    if ref == 0 and dwSize != 0:
        raise bad(f"{where} REMOTEREADDESC.lpBuffer is NULL but dwSize is {dwSize} (MS-RPCE 3.1.1.5.3.3.1.2)")
    desc = REMOTEREADDESC(hRemoteQueue, hCursor, ulAction, ulTimeout, dwSize, dwQueue, dwRequestID, Reserved,
                          dwArriveTime, _ACKS[eAckNack], None)
    return desc, ref, end


def read_buffer(stub: Any, pos: int, ndr64: bool, desc: REMOTEREADDESC, where: str) -> int:
    """Unmarshal the deferred conformant varying lpBuffer into desc; returns the end offset."""
    if ndr64:
        pos = (pos + 7) & ~7
        layout = _CV64
    else:
        pos = (pos + 3) & ~3
        layout = _CV
    if pos + layout.size > len(stub):
        raise truncated(where + " lpBuffer counts", pos, layout.size, len(stub))
    max_count, offset, actual = layout.unpack_from(stub, pos)
    size = desc.dwSize
    if max_count != size:
        raise bad(f"{where} lpBuffer maximum count {max_count} != dwSize {size}")
    if offset != 0:
        raise bad(f"{where} lpBuffer offset {offset} != 0")
    if actual != size:
        raise bad(f"{where} lpBuffer actual count {actual} != dwSize {size}")
    pos += layout.size
    end = pos + size
    if end > len(stub):
        raise truncated(where + " lpBuffer", pos, size, len(stub))
    data = stub[pos:end]
    desc.lpBuffer = data if type(data) is bytes else bytes(data)
    return end


def read_rrd_full(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC, int]:
    """Unmarshal a REMOTEREADDESC and its deferred lpBuffer; returns (desc, end)."""
    desc, ref, pos = read_rrd(stub, pos, ndr64, where)
    if ref:
        pos = read_buffer(stub, pos, ndr64, desc, where)
    return desc, pos


def read_rrd2(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC2, int]:
    """Unmarshal a REMOTEREADDESC2 (MS-MQQP 2.2.2.2) with its nested deferred pointees; returns (desc2, end)."""
    pos = (pos + 7) & ~7
    layout = _RRD2_64 if ndr64 else _RRD2
    if pos + 16 > len(stub):
        raise truncated(where + " REMOTEREADDESC2", pos, 16, len(stub))
    ref, seq = layout.unpack_from(stub, pos)
    pos += 16
    desc = None
    if ref:
        desc, pos = read_rrd_full(stub, pos, ndr64, where)
    return REMOTEREADDESC2(desc, seq), pos


def read_ctx(stub: Any, where: str) -> bytes:
    """The 20 wire bytes of the context handle at the start of a response stub."""
    if len(stub) < CONTEXT_HANDLE_SIZE:
        raise truncated(where + " context handle", 0, CONTEXT_HANDLE_SIZE, len(stub))
    return bytes(stub[:CONTEXT_HANDLE_SIZE])


def u32(value: Any, name: str) -> int:
    """Check an int fits a DWORD."""
    if not isinstance(value, int):
        raise EncodeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= 0xFFFFFFFF:
        raise EncodeError(f"{name} {value} does not fit a DWORD")
    return value


def hresult(value: Any, name: str = "ErrorCode") -> int:
    """An HRESULT as its unsigned 32-bit wire value (negative impacket-style values accepted)."""
    if isinstance(value, int) and -0x80000000 <= value < 0:
        return value + 0x100000000
    return u32(value, name)


def ctx_bytes(value: Any, name: str) -> bytes:
    """Check a context handle is 20 bytes."""
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) != CONTEXT_HANDLE_SIZE:
        raise EncodeError(f"{name} must be the {CONTEXT_HANDLE_SIZE} wire bytes of a context handle")
    return bytes(value)


def put_rrd(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool, ref: int, strict: bool,
             name: str) -> tuple[int, int]:
    """Marshal the REMOTEREADDESC scalars at pos (with its alignment gap); returns (end, next referent id)."""
    if not isinstance(d, REMOTEREADDESC):
        raise EncodeError(f"{name} must be a REMOTEREADDESC, not {type(d).__name__}")
    buf = d.lpBuffer
    if strict:
        if not 0 <= d.dwSize <= MAX_REMOTEREAD_BUFFER:
            raise EncodeError(f"{name}.dwSize {d.dwSize} outside range(0, {MAX_REMOTEREAD_BUFFER})")
        if buf is None:
            if d.dwSize != 0:
                raise EncodeError(f"{name}.lpBuffer is None but dwSize is {d.dwSize}")
        elif len(buf) != d.dwSize:
            raise EncodeError(f"{name}.dwSize {d.dwSize} != len(lpBuffer) {len(buf)}")
        if not 0 <= d.eAckNack <= 2:
            raise EncodeError(f"{name}.eAckNack {d.eAckNack} is not a REMOTEREADACK value")
    if buf is None:
        this_ref = 0
    else:
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise EncodeError(f"{name}.lpBuffer must be bytes or None, not {type(buf).__name__}")
        this_ref = ref
        ref += REFERENT_ID_STEP
    align = 8 if ndr64 else 4
    gap = -pos & (align - 1)
    if gap:
        parts.append(ZEROS[:gap])
    try:
        parts.append((_RRD64 if ndr64 else _RRD).pack(
            d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, d.dwSize, d.dwQueue, d.dwRequestID,
            d.Reserved, d.dwArriveTime, d.eAckNack, this_ref))
    except struct.error as exc:
        raise EncodeError(f"{name}: {exc}") from None
    return pos + gap + (48 if ndr64 else 44), ref


def put_buffer(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool) -> int:
    """Marshal the deferred lpBuffer (if non-NULL); returns the end offset."""
    buf = d.lpBuffer
    if buf is None:
        return pos
    n = len(buf)
    if ndr64:
        gap = -pos & 7
        hdr = _CV64.pack(n, 0, n)
    else:
        gap = -pos & 3
        hdr = _CV.pack(n, 0, n)
    if gap:
        parts.append(ZEROS[:gap])
    parts.append(hdr)
    parts.append(buf)
    return pos + gap + len(hdr) + n


def put_rrd_full(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool, ref: int, strict: bool,
                  name: str) -> tuple[int, int]:
    """Marshal a REMOTEREADDESC and its deferred lpBuffer; returns (end, next referent id)."""
    pos, ref = put_rrd(parts, pos, d, ndr64, ref, strict, name)
    return put_buffer(parts, pos, d, ndr64), ref


def put_rrd2(parts: list, pos: int, d2: REMOTEREADDESC2, ndr64: bool, ref: int, strict: bool,
              name: str) -> tuple[int, int]:
    """Marshal a REMOTEREADDESC2 with its nested deferred pointees; returns (end, next referent id)."""
    if not isinstance(d2, REMOTEREADDESC2):
        raise EncodeError(f"{name} must be a REMOTEREADDESC2, not {type(d2).__name__}")
    gap = -pos & 7
    if gap:
        parts.append(ZEROS[:gap])
    desc = d2.pRemoteReadDesc
    this_ref = 0
    if desc is not None:
        this_ref = ref
        ref += REFERENT_ID_STEP
    try:
        parts.append((_RRD2_64 if ndr64 else _RRD2).pack(this_ref, d2.SequentialId))
    except struct.error as exc:
        raise EncodeError(f"{name}.SequentialId: {exc}") from None
    pos += gap + 16
    if desc is not None:
        pos, ref = put_rrd_full(parts, pos, desc, ndr64, ref, strict, name + ".pRemoteReadDesc")
    return pos, ref


def put_tail_u32(parts: list, pos: int, value: int) -> None:
    """Marshal the 4-aligned return value that ends a response."""
    gap = -pos & 3
    if gap:
        parts.append(ZEROS[:gap])
    parts.append(U32.pack(value))
