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
from typing import Any, Callable

from qm2qm.mqqp import codec_lane
from qm2qm.mqqp.codec_fixed import FIXED_REQUESTS, FIXED_RESPONSES
from qm2qm.mqqp.codec_ndr import (U32, U64, EncodeError, bad, check_end, ctx_bytes, hresult, put_rrd2,
                                  put_rrd_full, put_tail_u32, read_ctx, read_rrd2, read_rrd_full, truncated)
from qm2qm.mqqp.codec_types import (
    CONTEXT_HANDLE_SIZE, NULL_CONTEXT_HANDLE, REMOTEREADDESC, REMOTEREADDESC2, REQUEST_TYPES, RESPONSE_TYPES,
    RemoteQMCancelReceiveRequest, RemoteQMCancelReceiveResponse, RemoteQMCloseCursorRequest,
    RemoteQMCloseCursorResponse, RemoteQMCloseQueueRequest, RemoteQMCloseQueueResponse, RemoteQMEndReceiveRequest,
    RemoteQMEndReceiveResponse, RemoteQMGetQMQMServerPortRequest, RemoteQMGetQMQMServerPortResponse,
    RemoteQmGetVersionRequest, RemoteQmGetVersionResponse, RemoteQMOpenQueueRequest, RemoteQMOpenQueueResponse,
    RemoteQMPurgeQueueRequest, RemoteQMPurgeQueueResponse, RemoteQMStartReceive2Request,
    RemoteQMStartReceive2Response, RemoteQMStartReceiveByLookupIdRequest, RemoteQMStartReceiveByLookupIdResponse,
    RemoteQMStartReceiveRequest, RemoteQMStartReceiveResponse)
from qm2qm.mqqp.constants import NCA_S_OP_RNG_ERROR, OPNUM_NAMES, REFERENT_ID_BASE
from qm2qm.rpc.interface import RpcFault

# codec.X is the public name of every type the codec reads and writes
__all__ = [
    "decode_request", "decode_response", "encode_request", "encode_response", "EncodeError",
    "CONTEXT_HANDLE_SIZE", "NULL_CONTEXT_HANDLE", "REMOTEREADDESC", "REMOTEREADDESC2", "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "RemoteQMStartReceiveRequest", "RemoteQMStartReceiveResponse",
    "RemoteQMEndReceiveRequest", "RemoteQMEndReceiveResponse",
    "RemoteQMOpenQueueRequest", "RemoteQMOpenQueueResponse",
    "RemoteQMCloseQueueRequest", "RemoteQMCloseQueueResponse",
    "RemoteQMCloseCursorRequest", "RemoteQMCloseCursorResponse",
    "RemoteQMCancelReceiveRequest", "RemoteQMCancelReceiveResponse",
    "RemoteQMPurgeQueueRequest", "RemoteQMPurgeQueueResponse",
    "RemoteQMGetQMQMServerPortRequest", "RemoteQMGetQMQMServerPortResponse",
    "RemoteQmGetVersionRequest", "RemoteQmGetVersionResponse",
    "RemoteQMStartReceive2Request", "RemoteQMStartReceive2Response",
    "RemoteQMStartReceiveByLookupIdRequest", "RemoteQMStartReceiveByLookupIdResponse",
]


# ----------------------------------------------------------------------------------------------------------
# Receive family (opnums 0, 9, 10)
# ----------------------------------------------------------------------------------------------------------

def _dec_req_0(stub: Any, ndr64: bool) -> RemoteQMStartReceiveRequest:
    where = "RemoteQMStartReceive request"
    desc, pos = read_rrd_full(stub, 0, ndr64, where)
    check_end(stub, pos, where)
    return RemoteQMStartReceiveRequest(desc)


def _dec_req_9(stub: Any, ndr64: bool) -> RemoteQMStartReceive2Request:
    where = "RemoteQMStartReceive2 request"
    desc2, pos = read_rrd2(stub, 0, ndr64, where)
    check_end(stub, pos, where)
    return RemoteQMStartReceive2Request(desc2)


def _dec_req_10(stub: Any, ndr64: bool) -> RemoteQMStartReceiveByLookupIdRequest:
    where = "RemoteQMStartReceiveByLookupId request"
    if len(stub) < 8:
        raise truncated(where + " LookupId", 0, 8, len(stub))
    lookup_id = U64.unpack_from(stub, 0)[0]
    desc2, pos = read_rrd2(stub, 8, ndr64, where)
    check_end(stub, pos, where)
    return RemoteQMStartReceiveByLookupIdRequest(lookup_id, desc2)


def _read_tail_u32(stub: Any, pos: int, where: str) -> int:
    pos = (pos + 3) & ~3
    if pos + 4 > len(stub):
        raise truncated(where + " return value", pos, 4, len(stub))
    check_end(stub, pos + 4, where)
    return U32.unpack_from(stub, pos)[0]


def _dec_resp_0(stub: Any, ndr64: bool) -> RemoteQMStartReceiveResponse:
    where = "RemoteQMStartReceive response"
    ctx = read_ctx(stub, where)
    desc, pos = read_rrd_full(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceiveResponse(ctx, desc, _read_tail_u32(stub, pos, where))


def _dec_resp_9(stub: Any, ndr64: bool) -> RemoteQMStartReceive2Response:
    where = "RemoteQMStartReceive2 response"
    ctx = read_ctx(stub, where)
    desc2, pos = read_rrd2(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceive2Response(ctx, desc2, _read_tail_u32(stub, pos, where))


def _dec_resp_10(stub: Any, ndr64: bool) -> RemoteQMStartReceiveByLookupIdResponse:
    where = "RemoteQMStartReceiveByLookupId response"
    ctx = read_ctx(stub, where)
    desc2, pos = read_rrd2(stub, CONTEXT_HANDLE_SIZE, ndr64, where)
    return RemoteQMStartReceiveByLookupIdResponse(ctx, desc2, _read_tail_u32(stub, pos, where))


def _enc_req_0(obj: RemoteQMStartReceiveRequest, ndr64: bool, strict: bool) -> bytes:
    parts: list = []
    put_rrd_full(parts, 0, obj.lpRemoteReadDesc, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc")
    return b"".join(parts)


def _enc_req_9(obj: RemoteQMStartReceive2Request, ndr64: bool, strict: bool) -> bytes:
    parts: list = []
    put_rrd2(parts, 0, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc2")
    return b"".join(parts)


def _enc_req_10(obj: RemoteQMStartReceiveByLookupIdRequest, ndr64: bool, strict: bool) -> bytes:
    try:
        parts: list = [U64.pack(obj.LookupId)]
    except struct.error as exc:
        raise EncodeError(f"LookupId: {exc}") from None
    put_rrd2(parts, 8, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict, "lpRemoteReadDesc2")
    return b"".join(parts)


def _enc_resp_0(obj: RemoteQMStartReceiveResponse, ndr64: bool, strict: bool) -> bytes:
    parts: list = [ctx_bytes(obj.pphContext, "pphContext")]
    pos, _ = put_rrd_full(parts, CONTEXT_HANDLE_SIZE, obj.lpRemoteReadDesc, ndr64, REFERENT_ID_BASE, strict,
                           "lpRemoteReadDesc")
    put_tail_u32(parts, pos, hresult(obj.ErrorCode))
    return b"".join(parts)


def _enc_resp_2x(obj: Any, ndr64: bool, strict: bool) -> bytes:
    parts: list = [ctx_bytes(obj.pphContext, "pphContext")]
    pos, _ = put_rrd2(parts, CONTEXT_HANDLE_SIZE, obj.lpRemoteReadDesc2, ndr64, REFERENT_ID_BASE, strict,
                       "lpRemoteReadDesc2")
    put_tail_u32(parts, pos, hresult(obj.ErrorCode))
    return b"".join(parts)


def _typed(opnum: int, cls: type, fn: Callable) -> Callable:
    def encode(obj: Any, ndr64: bool, strict: bool) -> bytes:
        if type(obj) is not cls:
            raise EncodeError(f"{OPNUM_NAMES[opnum]} needs a {cls.__name__}, not {type(obj).__name__}")
        return fn(obj, ndr64, strict)
    return encode


_REQUEST_DECODERS: list[Callable] = [
    _dec_req_0, *(f.decode for f in (FIXED_REQUESTS[n] for n in range(1, 9))), _dec_req_9, _dec_req_10]
_RESPONSE_DECODERS: list[Callable] = [
    _dec_resp_0, *(f.decode for f in (FIXED_RESPONSES[n] for n in range(1, 9))), _dec_resp_9, _dec_resp_10]
_REQUEST_ENCODERS: list[Callable] = [
    _typed(0, RemoteQMStartReceiveRequest, _enc_req_0),
    *(f.encode for f in (FIXED_REQUESTS[n] for n in range(1, 9))),
    _typed(9, RemoteQMStartReceive2Request, _enc_req_9),
    _typed(10, RemoteQMStartReceiveByLookupIdRequest, _enc_req_10)]
_RESPONSE_ENCODERS: list[Callable] = [
    _typed(0, RemoteQMStartReceiveResponse, _enc_resp_0),
    *(f.encode for f in (FIXED_RESPONSES[n] for n in range(1, 9))),
    _typed(9, RemoteQMStartReceive2Response, _enc_resp_2x),
    _typed(10, RemoteQMStartReceiveByLookupIdResponse, _enc_resp_2x)]


# The one-struct layouts of the common read shapes (codec_lane.py): None sends the call to the general path.
_REQUEST_LANES: list[Callable | None] = [codec_lane.decode_request_0, *[None] * 8, codec_lane.decode_request_9,
                                         codec_lane.decode_request_10]
_RESPONSE_LANES: dict[int, tuple[type, Callable]] = {
    0: (RemoteQMStartReceiveResponse, codec_lane.encode_response_0),
    9: (RemoteQMStartReceive2Response, codec_lane.encode_response_2x),
    10: (RemoteQMStartReceiveByLookupIdResponse, codec_lane.encode_response_2x)}


# ----------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------

def _op_range(opnum: int) -> RpcFault:
    return RpcFault(NCA_S_OP_RNG_ERROR, f"qm2qm has no opnum {opnum!r} (0..10)")


def decode_request(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """Unmarshal the [in] parameters of a qm2qm call (MS-MQQP 3.1.4.x) with strict checks; raises RpcFault."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise _op_range(opnum)
    lane = _REQUEST_LANES[opnum]
    if lane is not None:
        request = lane(stub, ndr64)
        if request is not None:
            return request
    try:
        return _REQUEST_DECODERS[opnum](stub, ndr64)
    except struct.error as exc:  # defensive: every read is length-checked first
        raise bad(f"{OPNUM_NAMES[opnum]} request: {exc}") from None


def decode_response(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """Unmarshal the [out] parameters and return value of a qm2qm call with strict checks; raises RpcFault."""
    if type(opnum) is not int or not 0 <= opnum <= 10:
        raise _op_range(opnum)
    try:
        return _RESPONSE_DECODERS[opnum](stub, ndr64)
    except struct.error as exc:
        raise bad(f"{OPNUM_NAMES[opnum]} response: {exc}") from None


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
    lane = _RESPONSE_LANES.get(opnum)
    if lane is not None and strict and type(response) is lane[0]:
        try:
            stub = lane[1](response, ndr64)
        except (TypeError, AttributeError):     # a value of an unexpected type: the general path names it
            stub = None
        if stub is not None:
            return stub
    try:
        return _RESPONSE_ENCODERS[opnum](response, ndr64, strict)
    except (TypeError, AttributeError, struct.error) as exc:
        raise EncodeError(f"{OPNUM_NAMES[opnum]} response: {exc}") from None
