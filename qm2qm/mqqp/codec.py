"""Hand-written NDR 2.0 / NDR64 stub codec for qm2qm opnums 0-10 (MS-MQQP 2.2, 3.1.4, 6; MS-RPCE 2.2.5, 3.1.1.5.3).

Byte-equal to the impacket declarations of ``qm2qm.mqqp.idl`` (except referent-id values and pad contents:
we write Windows-style referent ids 0x00020000, 0x00020004, ... and zero pads). Decoding applies the
strict data consistency checks of MS-RPCE 3.1.1.5.3 at target level 6.0 (MS-MQQP 3.1.4 <9>) and raises
``RpcFault``: RPC_S_INVALID_BOUND (0x6C6) for a [range] violation, RPC_X_BAD_STUB_DATA (0x6F7) for every
other malformed or inconsistent stub (truncation, trailing bytes, conformance/variance/offset disagreeing
with dwSize, a NULL lpBuffer with a non-zero dwSize, an eAckNack outside REMOTEREADACK). Alignment gap
contents are ignored on receipt (MS-RPCE 3.1.1.5.3.2.2.6). Context handles are carried as their 20 wire bytes.

Encoding raises ``EncodeError`` (a ValueError) for values that cannot be represented; with ``strict=True``
(the default) also for values a strict peer would reject, so the server never emits them. ``strict=False``
writes what it is given (for test tools that want to send a bad stub on purpose).
"""
from __future__ import annotations

import struct
import uuid
from typing import Any, Callable

from qm2qm.mqqp.constants import (MAX_REMOTEREAD_BUFFER, NCA_S_OP_RNG_ERROR, OPNUM_NAMES, RANGE_dwAck,
                                  RANGE_dwMQS, RANGE_dwPortType, REFERENT_ID_BASE, REFERENT_ID_STEP,
                                  REMOTEREADACK, RPC_S_INVALID_BOUND, RPC_X_BAD_STUB_DATA)
from qm2qm.mqqp.codec_types import (  # noqa: F401  (re-exported: codec.X is the public name)
    CONTEXT_HANDLE_SIZE, NULL_CONTEXT_HANDLE, REQUEST_TYPES, RESPONSE_TYPES,
    REMOTEREADDESC, REMOTEREADDESC2, RemoteQMStartReceiveRequest, RemoteQMStartReceiveResponse,
    RemoteQMEndReceiveRequest, RemoteQMEndReceiveResponse, RemoteQMOpenQueueRequest, RemoteQMOpenQueueResponse,
    RemoteQMCloseQueueRequest, RemoteQMCloseQueueResponse, RemoteQMCloseCursorRequest,
    RemoteQMCloseCursorResponse, RemoteQMCancelReceiveRequest, RemoteQMCancelReceiveResponse,
    RemoteQMPurgeQueueRequest, RemoteQMPurgeQueueResponse, RemoteQMGetQMQMServerPortRequest,
    RemoteQMGetQMQMServerPortResponse, RemoteQmGetVersionRequest, RemoteQmGetVersionResponse,
    RemoteQMStartReceive2Request, RemoteQMStartReceive2Response, RemoteQMStartReceiveByLookupIdRequest,
    RemoteQMStartReceiveByLookupIdResponse,
)
from qm2qm.rpc.interface import RpcFault


class EncodeError(ValueError):
    """A value given to an encoder cannot be marshalled (or, strict, would be rejected by a strict peer)."""


# ----------------------------------------------------------------------------------------------------------
# Faults
# ----------------------------------------------------------------------------------------------------------

def _bad(what: str) -> RpcFault:
    return RpcFault(RPC_X_BAD_STUB_DATA, f"bad stub data: {what}")


def _bound(what: str) -> RpcFault:
    return RpcFault(RPC_S_INVALID_BOUND, f"invalid bound: {what}")


def _truncated(where: str, pos: int, need: int, have: int) -> RpcFault:
    return _bad(f"{where}: stub truncated at offset {pos} (need {need} bytes, {max(have - pos, 0)} left)")


def _check_end(stub: Any, pos: int, where: str) -> None:
    if pos != len(stub):
        raise _bad(f"{where}: {len(stub) - pos} trailing bytes after the last parameter (offset {pos})")


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
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_ZEROS = bytes(8)
_ACKS = tuple(REMOTEREADACK)


def _read_rrd(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC, int, int]:
    """Unmarshal the REMOTEREADDESC scalars at pos; returns (desc without buffer, lpBuffer referent id, end)."""
    if ndr64:
        pos = (pos + 7) & ~7
        layout = _RRD64
    else:
        pos = (pos + 3) & ~3
        layout = _RRD
    end = pos + layout.size
    if end > len(stub):
        raise _truncated(where + " REMOTEREADDESC", pos, layout.size, len(stub))
    (hRemoteQueue, hCursor, ulAction, ulTimeout, dwSize, dwQueue, dwRequestID, Reserved, dwArriveTime,
     eAckNack, ref) = layout.unpack_from(stub, pos)
    if dwSize > MAX_REMOTEREAD_BUFFER:
        raise _bound(f"{where} REMOTEREADDESC.dwSize {dwSize} outside range(0, {MAX_REMOTEREAD_BUFFER})")
    if not 0 <= eAckNack <= 2:
        raise _bad(f"{where} REMOTEREADDESC.eAckNack {eAckNack} is not a REMOTEREADACK value")
    if ref == 0 and dwSize != 0:
        raise _bad(f"{where} REMOTEREADDESC.lpBuffer is NULL but dwSize is {dwSize} (MS-RPCE 3.1.1.5.3.3.1.2)")
    desc = REMOTEREADDESC(hRemoteQueue, hCursor, ulAction, ulTimeout, dwSize, dwQueue, dwRequestID, Reserved,
                          dwArriveTime, _ACKS[eAckNack], None)
    return desc, ref, end


def _read_buffer(stub: Any, pos: int, ndr64: bool, desc: REMOTEREADDESC, where: str) -> int:
    """Unmarshal the deferred conformant varying lpBuffer into desc; returns the end offset."""
    if ndr64:
        pos = (pos + 7) & ~7
        layout = _CV64
    else:
        pos = (pos + 3) & ~3
        layout = _CV
    if pos + layout.size > len(stub):
        raise _truncated(where + " lpBuffer counts", pos, layout.size, len(stub))
    max_count, offset, actual = layout.unpack_from(stub, pos)
    size = desc.dwSize
    if max_count != size:
        raise _bad(f"{where} lpBuffer maximum count {max_count} != dwSize {size}")
    if offset != 0:
        raise _bad(f"{where} lpBuffer offset {offset} != 0")
    if actual != size:
        raise _bad(f"{where} lpBuffer actual count {actual} != dwSize {size}")
    pos += layout.size
    end = pos + size
    if end > len(stub):
        raise _truncated(where + " lpBuffer", pos, size, len(stub))
    data = stub[pos:end]
    desc.lpBuffer = data if type(data) is bytes else bytes(data)
    return end


def _read_rrd_full(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC, int]:
    desc, ref, pos = _read_rrd(stub, pos, ndr64, where)
    if ref:
        pos = _read_buffer(stub, pos, ndr64, desc, where)
    return desc, pos


def _read_rrd2(stub: Any, pos: int, ndr64: bool, where: str) -> tuple[REMOTEREADDESC2, int]:
    pos = (pos + 7) & ~7
    layout = _RRD2_64 if ndr64 else _RRD2
    if pos + 16 > len(stub):
        raise _truncated(where + " REMOTEREADDESC2", pos, 16, len(stub))
    ref, seq = layout.unpack_from(stub, pos)
    pos += 16
    desc = None
    if ref:
        desc, pos = _read_rrd_full(stub, pos, ndr64, where)
    return REMOTEREADDESC2(desc, seq), pos


def _read_ctx(stub: Any, where: str) -> bytes:
    if len(stub) < CONTEXT_HANDLE_SIZE:
        raise _truncated(where + " context handle", 0, CONTEXT_HANDLE_SIZE, len(stub))
    return bytes(stub[:CONTEXT_HANDLE_SIZE])


def _u32(value: Any, name: str) -> int:
    if not isinstance(value, int):
        raise EncodeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= 0xFFFFFFFF:
        raise EncodeError(f"{name} {value} does not fit a DWORD")
    return value


def _hresult(value: Any, name: str = "ErrorCode") -> int:
    if isinstance(value, int) and -0x80000000 <= value < 0:
        return value + 0x100000000
    return _u32(value, name)


def _ctx(value: Any, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) != CONTEXT_HANDLE_SIZE:
        raise EncodeError(f"{name} must be the {CONTEXT_HANDLE_SIZE} wire bytes of a context handle")
    return bytes(value)


def _put_rrd(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool, ref: int, strict: bool,
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
        parts.append(_ZEROS[:gap])
    try:
        parts.append((_RRD64 if ndr64 else _RRD).pack(
            d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, d.dwSize, d.dwQueue, d.dwRequestID,
            d.Reserved, d.dwArriveTime, d.eAckNack, this_ref))
    except struct.error as exc:
        raise EncodeError(f"{name}: {exc}") from None
    return pos + gap + (48 if ndr64 else 44), ref


def _put_buffer(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool) -> int:
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
        parts.append(_ZEROS[:gap])
    parts.append(hdr)
    parts.append(buf)
    return pos + gap + len(hdr) + n


def _put_rrd_full(parts: list, pos: int, d: REMOTEREADDESC, ndr64: bool, ref: int, strict: bool,
                  name: str) -> tuple[int, int]:
    pos, ref = _put_rrd(parts, pos, d, ndr64, ref, strict, name)
    return _put_buffer(parts, pos, d, ndr64), ref


def _put_rrd2(parts: list, pos: int, d2: REMOTEREADDESC2, ndr64: bool, ref: int, strict: bool,
              name: str) -> tuple[int, int]:
    if not isinstance(d2, REMOTEREADDESC2):
        raise EncodeError(f"{name} must be a REMOTEREADDESC2, not {type(d2).__name__}")
    gap = -pos & 7
    if gap:
        parts.append(_ZEROS[:gap])
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
        pos, ref = _put_rrd_full(parts, pos, desc, ndr64, ref, strict, name + ".pRemoteReadDesc")
    return pos, ref


def _put_tail_u32(parts: list, pos: int, value: int) -> None:
    gap = -pos & 3
    if gap:
        parts.append(_ZEROS[:gap])
    parts.append(_U32.pack(value))


# ----------------------------------------------------------------------------------------------------------
# Fixed-layout messages: every field is a u32, a 20-byte context handle, a GUID or small ints, laid out
# without gaps and identically in NDR and NDR64 (all 4-aligned from offset 0, no pointers, no enums).
# ----------------------------------------------------------------------------------------------------------

# field kinds of the fixed-layout messages; any other field is a u32 (DWORD)
_KINDS = {"pphContext": "ctx", "phContext": "ctx", "pLicGuid": "guid", "ErrorCode": "hr",
          "pMajor": "u8", "pMinor": "u8", "pBuildNumber": "u16"}


class _Fixed:
    """Codec of a gap-free fixed-size parameter list (same bytes in NDR and NDR64)."""

    __slots__ = ("cls", "layout", "fields", "ranges", "where", "kinds")

    def __init__(self, cls: type, fmt: str, fields: tuple[str, ...], where: str,
                 ranges: dict[str, tuple[int, int]] | None = None) -> None:
        self.cls = cls
        self.layout = struct.Struct(fmt)
        self.fields = fields
        self.ranges = ranges or {}
        self.where = where
        self.kinds = tuple(_KINDS.get(f, "u32") for f in fields)

    def decode(self, stub: Any, ndr64: bool) -> Any:
        layout = self.layout
        if len(stub) < layout.size:
            raise _truncated(self.where, 0, layout.size, len(stub))
        _check_end(stub, layout.size, self.where)
        values = layout.unpack_from(stub, 0)
        if self.ranges:
            for name, value in zip(self.fields, values):
                bounds = self.ranges.get(name)
                if bounds is not None and not bounds[0] <= value <= bounds[1]:
                    raise _bound(f"{self.where} {name} {value} outside range({bounds[0]}, {bounds[1]})")
        if "guid" in self.kinds:
            values = tuple(uuid.UUID(bytes_le=v) if k == "guid" else v for k, v in zip(self.kinds, values))
        return self.cls(*values)

    def encode(self, obj: Any, ndr64: bool, strict: bool) -> bytes:
        if type(obj) is not self.cls:
            raise EncodeError(f"{self.where} needs a {self.cls.__name__}, not {type(obj).__name__}")
        values = []
        for name, kind in zip(self.fields, self.kinds):
            value = getattr(obj, name)
            if kind == "ctx":
                value = _ctx(value, name)
            elif kind == "guid":
                if not isinstance(value, uuid.UUID):
                    raise EncodeError(f"{name} must be a uuid.UUID, not {type(value).__name__}")
                value = value.bytes_le
            elif kind == "hr":
                value = _hresult(value)
            elif kind == "u32":
                value = _u32(value, name)
                bounds = self.ranges.get(name)
                if strict and bounds is not None and not bounds[0] <= value <= bounds[1]:
                    raise EncodeError(f"{name} {value} outside range({bounds[0]}, {bounds[1]})")
            else:
                limit = 0xFF if kind == "u8" else 0xFFFF
                if not isinstance(value, int) or not 0 <= value <= limit:
                    raise EncodeError(f"{name} {value!r} does not fit its {kind}")
            values.append(value)
        return self.layout.pack(*values)


def _fixed(opnum: int, direction: str, cls: type, fmt: str, fields: tuple[str, ...],
           ranges: dict[str, tuple[int, int]] | None = None) -> _Fixed:
    return _Fixed(cls, fmt, fields, f"{OPNUM_NAMES[opnum]} {direction}", ranges)


_FIXED_REQUESTS: dict[int, _Fixed] = {
    1: _fixed(1, "request", RemoteQMEndReceiveRequest, "<20sI", ("pphContext", "dwAck"), {"dwAck": RANGE_dwAck}),
    2: _fixed(2, "request", RemoteQMOpenQueueRequest, "<16s4I",
              ("pLicGuid", "dwMQS", "hQueue", "pQueue", "dwpContext"), {"dwMQS": RANGE_dwMQS}),
    3: _fixed(3, "request", RemoteQMCloseQueueRequest, "<20s", ("pphContext",)),
    4: _fixed(4, "request", RemoteQMCloseCursorRequest, "<2I", ("hQueue", "hCursor")),
    5: _fixed(5, "request", RemoteQMCancelReceiveRequest, "<3I", ("hQueue", "pQueue", "dwRequestID")),
    6: _fixed(6, "request", RemoteQMPurgeQueueRequest, "<I", ("hQueue",)),
    7: _fixed(7, "request", RemoteQMGetQMQMServerPortRequest, "<I", ("dwPortType",),
              {"dwPortType": RANGE_dwPortType}),
    8: _fixed(8, "request", RemoteQmGetVersionRequest, "<", ()),
}
_FIXED_RESPONSES: dict[int, _Fixed] = {
    1: _fixed(1, "response", RemoteQMEndReceiveResponse, "<20sI", ("pphContext", "ErrorCode")),
    2: _fixed(2, "response", RemoteQMOpenQueueResponse, "<20sI", ("phContext", "ErrorCode")),
    3: _fixed(3, "response", RemoteQMCloseQueueResponse, "<20sI", ("pphContext", "ErrorCode")),
    4: _fixed(4, "response", RemoteQMCloseCursorResponse, "<I", ("ErrorCode",)),
    5: _fixed(5, "response", RemoteQMCancelReceiveResponse, "<I", ("ErrorCode",)),
    6: _fixed(6, "response", RemoteQMPurgeQueueResponse, "<I", ("ErrorCode",)),
    7: _fixed(7, "response", RemoteQMGetQMQMServerPortResponse, "<I", ("ReturnValue",)),
    8: _fixed(8, "response", RemoteQmGetVersionResponse, "<BBH", ("pMajor", "pMinor", "pBuildNumber")),
}


# ----------------------------------------------------------------------------------------------------------
# Receive family (opnums 0, 9, 10)
# ----------------------------------------------------------------------------------------------------------

def _dec_req_0(stub: Any, ndr64: bool) -> RemoteQMStartReceiveRequest:
    where = "RemoteQMStartReceive request"
    desc, pos = _read_rrd_full(stub, 0, ndr64, where)
    _check_end(stub, pos, where)
    return RemoteQMStartReceiveRequest(desc)


def _dec_req_9(stub: Any, ndr64: bool) -> RemoteQMStartReceive2Request:
    where = "RemoteQMStartReceive2 request"
    desc2, pos = _read_rrd2(stub, 0, ndr64, where)
    _check_end(stub, pos, where)
    return RemoteQMStartReceive2Request(desc2)


def _dec_req_10(stub: Any, ndr64: bool) -> RemoteQMStartReceiveByLookupIdRequest:
    where = "RemoteQMStartReceiveByLookupId request"
    if len(stub) < 8:
        raise _truncated(where + " LookupId", 0, 8, len(stub))
    lookup_id = _U64.unpack_from(stub, 0)[0]
    desc2, pos = _read_rrd2(stub, 8, ndr64, where)
    _check_end(stub, pos, where)
    return RemoteQMStartReceiveByLookupIdRequest(lookup_id, desc2)


def _read_tail_u32(stub: Any, pos: int, where: str) -> int:
    pos = (pos + 3) & ~3
    if pos + 4 > len(stub):
        raise _truncated(where + " return value", pos, 4, len(stub))
    _check_end(stub, pos + 4, where)
    return _U32.unpack_from(stub, pos)[0]


def _dec_resp_0(stub: Any, ndr64: bool) -> RemoteQMStartReceiveResponse:
    where = "RemoteQMStartReceive response"
    ctx = _read_ctx(stub, where)
    desc, pos = _read_rrd_full(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceiveResponse(ctx, desc, _read_tail_u32(stub, pos, where))


def _dec_resp_9(stub: Any, ndr64: bool) -> RemoteQMStartReceive2Response:
    where = "RemoteQMStartReceive2 response"
    ctx = _read_ctx(stub, where)
    desc2, pos = _read_rrd2(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceive2Response(ctx, desc2, _read_tail_u32(stub, pos, where))


def _dec_resp_10(stub: Any, ndr64: bool) -> RemoteQMStartReceiveByLookupIdResponse:
    where = "RemoteQMStartReceiveByLookupId response"
    ctx = _read_ctx(stub, where)
    desc2, pos = _read_rrd2(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceiveByLookupIdResponse(ctx, desc2, _read_tail_u32(stub, pos, where))


def _enc_req_0(obj: RemoteQMStartReceiveRequest, ndr64: bool, strict: bool) -> bytes:
    parts: list = []
    _put_rrd_full(parts, 0, obj.lpRemoteReadDesc, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc")
    return b"".join(parts)


def _enc_req_9(obj: RemoteQMStartReceive2Request, ndr64: bool, strict: bool) -> bytes:
    parts: list = []
    _put_rrd2(parts, 0, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc2")
    return b"".join(parts)


def _enc_req_10(obj: RemoteQMStartReceiveByLookupIdRequest, ndr64: bool, strict: bool) -> bytes:
    try:
        parts: list = [_U64.pack(obj.LookupId)]
    except struct.error as exc:
        raise EncodeError(f"LookupId: {exc}") from None
    _put_rrd2(parts, 8, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc2")
    return b"".join(parts)


def _enc_resp_0(obj: RemoteQMStartReceiveResponse, ndr64: bool, strict: bool) -> bytes:
    parts: list = [_ctx(obj.pphContext, "pphContext")]
    pos, _ = _put_rrd_full(parts, CONTEXT_HANDLE_SIZE, obj.lpRemoteReadDesc, ndr64, REFERENT_ID_BASE, strict,
                           "lpRemoteReadDesc")
    _put_tail_u32(parts, pos, _hresult(obj.ErrorCode))
    return b"".join(parts)


def _enc_resp_2x(obj: Any, ndr64: bool, strict: bool) -> bytes:
    parts: list = [_ctx(obj.pphContext, "pphContext")]
    pos, _ = _put_rrd2(parts, CONTEXT_HANDLE_SIZE, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict,
                       "lpRemoteReadDesc2")
    _put_tail_u32(parts, pos, _hresult(obj.ErrorCode))
    return b"".join(parts)


def _typed(opnum: int, cls: type, fn: Callable) -> Callable:
    def encode(obj: Any, ndr64: bool, strict: bool) -> bytes:
        if type(obj) is not cls:
            raise EncodeError(f"{OPNUM_NAMES[opnum]} needs a {cls.__name__}, not {type(obj).__name__}")
        return fn(obj, ndr64, strict)
    return encode


_REQUEST_DECODERS: list[Callable] = [
    _dec_req_0, *(f.decode for f in (_FIXED_REQUESTS[n] for n in range(1, 9))), _dec_req_9, _dec_req_10]
_RESPONSE_DECODERS: list[Callable] = [
    _dec_resp_0, *(f.decode for f in (_FIXED_RESPONSES[n] for n in range(1, 9))), _dec_resp_9, _dec_resp_10]
_REQUEST_ENCODERS: list[Callable] = [
    _typed(0, RemoteQMStartReceiveRequest, _enc_req_0),
    *(f.encode for f in (_FIXED_REQUESTS[n] for n in range(1, 9))),
    _typed(9, RemoteQMStartReceive2Request, _enc_req_9),
    _typed(10, RemoteQMStartReceiveByLookupIdRequest, _enc_req_10)]
_RESPONSE_ENCODERS: list[Callable] = [
    _typed(0, RemoteQMStartReceiveResponse, _enc_resp_0),
    *(f.encode for f in (_FIXED_RESPONSES[n] for n in range(1, 9))),
    _typed(9, RemoteQMStartReceive2Response, _enc_resp_2x),
    _typed(10, RemoteQMStartReceiveByLookupIdResponse, _enc_resp_2x)]


# ----------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------

def _op_range(opnum: int) -> RpcFault:
    return RpcFault(NCA_S_OP_RNG_ERROR, f"qm2qm has no opnum {opnum!r} (0..10)")


def decode_request(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """Unmarshal the [in] parameters of a qm2qm call (MS-MQQP 3.1.4.x) with strict checks; raises RpcFault."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise _op_range(opnum)
    try:
        return _REQUEST_DECODERS[opnum](stub, ndr64)
    except struct.error as exc:  # defensive: every read is length-checked first
        raise _bad(f"{OPNUM_NAMES[opnum]} request: {exc}") from None


def decode_response(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """Unmarshal the [out] parameters and return value of a qm2qm call with strict checks; raises RpcFault."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise _op_range(opnum)
    try:
        return _RESPONSE_DECODERS[opnum](stub, ndr64)
    except struct.error as exc:
        raise _bad(f"{OPNUM_NAMES[opnum]} response: {exc}") from None


def encode_request(opnum: int, request: Any, ndr64: bool, *, strict: bool = True) -> bytes:
    """Marshal a request dataclass of REQUEST_TYPES[opnum] into stub bytes; raises EncodeError."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise EncodeError(f"qm2qm has no opnum {opnum!r} (0..10)")
    try:
        return _REQUEST_ENCODERS[opnum](request, ndr64, strict)
    except (TypeError, AttributeError, struct.error) as exc:
        raise EncodeError(f"{OPNUM_NAMES[opnum]} request: {exc}") from None


def encode_response(opnum: int, response: Any, ndr64: bool, *, strict: bool = True) -> bytes:
    """Marshal a response dataclass of RESPONSE_TYPES[opnum] into stub bytes; raises EncodeError."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise EncodeError(f"qm2qm has no opnum {opnum!r} (0..10)")
    try:
        return _RESPONSE_ENCODERS[opnum](response, ndr64, strict)
    except (TypeError, AttributeError, struct.error) as exc:
        raise EncodeError(f"{OPNUM_NAMES[opnum]} response: {exc}") from None
