"""One-struct NDR / NDR64 layouts of the common shapes of the read calls (MS-MQQP 3.1.4.1, 3.1.4.10, 3.1.4.11;
2.2.2.1-2.2.2.2; MS-RPCE 2.2.5): a request whose REMOTEREADDESC(2) is present with a NULL lpBuffer, and a
response whose descriptor carries the packet or no buffer.

Each function answers None for any other shape or any value it does not check; codec.py then takes the general
path, which gives the same bytes and every error (tests/mqqp/test_codec_lane.py proves the equality). The layouts
are those of codec_ndr.py laid end to end: REMOTEREADDESC2 is 8-aligned (a 4-byte gap after a context handle),
REMOTEREADDESC 4-aligned in NDR, 8-aligned in NDR64, its deferred lpBuffer follows it.
"""
from __future__ import annotations

import struct
from typing import Any

from qm2qm.mqqp.codec_types import (REMOTEREADDESC, REMOTEREADDESC2, RemoteQMStartReceive2Request,
                                    RemoteQMStartReceiveByLookupIdRequest, RemoteQMStartReceiveRequest)
from qm2qm.mqqp.constants import MAX_REMOTEREAD_BUFFER, REFERENT_ID_BASE, REFERENT_ID_STEP, REMOTEREADACK

_ACKS = tuple(REMOTEREADACK)
_TAIL = (b"", b"\x00\x00\x00", b"\x00\x00", b"\x00")     # zeros before the 4-aligned return value: [-pos & 3]
_U32 = struct.Struct("<I")
_REF1, _REF2 = REFERENT_ID_BASE, REFERENT_ID_BASE + REFERENT_ID_STEP      # Windows-style, as codec_ndr writes

# requests: [LookupId u64] [REMOTEREADDESC2: referent, SequentialId] REMOTEREADDESC (9 u32, enum, lpBuffer referent)
_REQ_0 = (struct.Struct("<9IH2xI"), struct.Struct("<9IiQ"))
_REQ_9 = (struct.Struct("<I4xQ9IH2xI"), struct.Struct("<QQ9IiQ"))
_REQ_10 = (struct.Struct("<QI4xQ9IH2xI"), struct.Struct("<QQQ9IiQ"))

# responses: context handle, [REMOTEREADDESC2], REMOTEREADDESC, then lpBuffer's counts (max, offset, actual) and
# bytes, or (NULL lpBuffer) the return value at once
_RESP_0 = (struct.Struct("<20s9IH2xI3I"), struct.Struct("<20s4x9IiQ3Q"))
_RESP_0_EMPTY = (struct.Struct("<20s9IH2xII"), struct.Struct("<20s4x9IiQI"))
_RESP_2X = (struct.Struct("<20s4xI4xQ9IH2xI3I"), struct.Struct("<20s4xQQ9IiQ3Q"))
_RESP_2X_EMPTY = (struct.Struct("<20s4xI4xQ9IH2xII"), struct.Struct("<20s4xQQ9IiQI"))


def _desc(values: tuple, first: int) -> REMOTEREADDESC | None:
    """The REMOTEREADDESC at values[first:first + 11] when its lpBuffer is NULL and every check passes."""
    (hRemoteQueue, hCursor, ulAction, ulTimeout, dwSize, dwQueue, dwRequestID, Reserved, dwArriveTime, eAckNack,
     ref) = values[first:first + 11]
    if ref or dwSize or not 0 <= eAckNack <= 2:
        return None
    return REMOTEREADDESC(hRemoteQueue, hCursor, ulAction, ulTimeout, 0, dwQueue, dwRequestID, Reserved,
                          dwArriveTime, _ACKS[eAckNack], None)


def decode_request_0(stub: Any, ndr64: bool) -> RemoteQMStartReceiveRequest | None:
    """RemoteQMStartReceive [in] with a NULL lpBuffer, or None."""
    layout = _REQ_0[ndr64]
    if len(stub) != layout.size:
        return None
    desc = _desc(layout.unpack_from(stub), 0)
    return None if desc is None else RemoteQMStartReceiveRequest(desc)


def _with_desc(layout: struct.Struct, stub: Any, first: int) -> tuple[tuple, int, REMOTEREADDESC] | None:
    """(the values, SequentialId, the REMOTEREADDESC) of the REMOTEREADDESC2 at values[first] of a request laid out
    by ``layout``, or None."""
    if len(stub) != layout.size:
        return None
    values = layout.unpack_from(stub)
    if not values[first]:
        return None
    desc = _desc(values, first + 2)
    return None if desc is None else (values, values[first + 1], desc)


def _with_desc2(layout: struct.Struct, stub: Any, first: int) -> tuple[tuple, REMOTEREADDESC2] | None:
    """(the values, the REMOTEREADDESC2 at values[first]) of a request laid out by ``layout``, or None."""
    found = _with_desc(layout, stub, first)
    return None if found is None else (found[0], REMOTEREADDESC2(found[2], found[1]))


def decode_request_9(stub: Any, ndr64: bool) -> RemoteQMStartReceive2Request | None:
    """RemoteQMStartReceive2 [in] with a REMOTEREADDESC and a NULL lpBuffer, or None."""
    found = _with_desc2(_REQ_9[ndr64], stub, 0)
    return None if found is None else RemoteQMStartReceive2Request(found[1])


def decode_request_10(stub: Any, ndr64: bool) -> RemoteQMStartReceiveByLookupIdRequest | None:
    """RemoteQMStartReceiveByLookupId [in] with a REMOTEREADDESC and a NULL lpBuffer, or None."""
    found = _with_desc2(_REQ_10[ndr64], stub, 1)
    return None if found is None else RemoteQMStartReceiveByLookupIdRequest(found[0][0], found[1])


def _plain(d: Any) -> bool:
    """The REMOTEREADDESC checks of strict encoding (codec_ndr.put_rrd) for the shapes laid out here."""
    if type(d) is not REMOTEREADDESC or not 0 <= d.eAckNack <= 2:
        return False
    buf = d.lpBuffer
    if buf is None:
        return d.dwSize == 0
    return type(buf) is bytes and len(buf) == d.dwSize <= MAX_REMOTEREAD_BUFFER


def encode_response_0(obj: Any, ndr64: bool) -> bytes | None:
    """RemoteQMStartReceive [out] (a RemoteQMStartReceiveResponse), or None."""
    ctx, d, status = obj.pphContext, obj.lpRemoteReadDesc, obj.ErrorCode
    if type(ctx) is not bytes or len(ctx) != 20 or type(status) is not int or not _plain(d):
        return None
    buf = d.lpBuffer
    try:
        if buf is None:
            return _RESP_0_EMPTY[ndr64].pack(
                ctx, d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, 0, d.dwQueue, d.dwRequestID, d.Reserved,
                d.dwArriveTime, d.eAckNack, 0, status)
        n = len(buf)
        head = _RESP_0[ndr64].pack(
            ctx, d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, n, d.dwQueue, d.dwRequestID, d.Reserved,
            d.dwArriveTime, d.eAckNack, _REF1, n, 0, n)
        return b"".join((head, buf, _TAIL[n & 3], _U32.pack(status)))
    except struct.error:
        return None


def encode_response_2x(obj: Any, ndr64: bool) -> bytes | None:
    """RemoteQMStartReceive2 / RemoteQMStartReceiveByLookupId [out] with a REMOTEREADDESC, or None."""
    ctx, d2, status = obj.pphContext, obj.lpRemoteReadDesc2, obj.ErrorCode
    if type(ctx) is not bytes or len(ctx) != 20 or type(status) is not int or type(d2) is not REMOTEREADDESC2:
        return None
    d = d2.pRemoteReadDesc
    if not _plain(d):
        return None
    try:
        return pack_response_2x(ndr64, ctx, d2.SequentialId, d, d.lpBuffer, d.Reserved, d.dwArriveTime, status)
    except struct.error:
        return None


def read_request_2x(opnum: int, stub: Any, ndr64: bool) -> tuple[int, int, REMOTEREADDESC] | None:
    """(LookupId — 0 for opnum 9 —, SequentialId, REMOTEREADDESC) of a RemoteQMStartReceive2 (9) / ByLookupId (10)
    request as decode_request_9 / _10 read it, without the request and REMOTEREADDESC2 around them; or None."""
    found = _with_desc((_REQ_9 if opnum == 9 else _REQ_10)[ndr64], stub, 0 if opnum == 9 else 1)
    if found is None:
        return None
    values, seq, desc = found
    return (values[0] if opnum == 10 else 0), seq, desc


def pack_response_2x(ndr64: bool, handle: bytes, seq: int, d: REMOTEREADDESC, buf: bytes | None, reserved: int,
                     arrive_time: int, status: int) -> bytes:
    """RemoteQMStartReceive2 / ByLookupId [out]: the handle, a REMOTEREADDESC2 of SequentialId ``seq`` around ``d``
    with lpBuffer ``buf`` (dwSize its length), Reserved and dwArriveTime as given, and the HRESULT. Raises
    struct.error for a value out of range."""
    if buf is None:
        return _RESP_2X_EMPTY[ndr64].pack(handle, _REF1, seq, d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, 0,
                                          d.dwQueue, d.dwRequestID, reserved, arrive_time, d.eAckNack, 0, status)
    n = len(buf)
    head = _RESP_2X[ndr64].pack(handle, _REF1, seq, d.hRemoteQueue, d.hCursor, d.ulAction, d.ulTimeout, n, d.dwQueue,
                                d.dwRequestID, reserved, arrive_time, d.eAckNack, _REF2, n, 0, n)
    return b"".join((head, buf, _TAIL[n & 3], _U32.pack(status)))
