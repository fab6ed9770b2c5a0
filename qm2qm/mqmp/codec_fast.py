"""The qmcomm calls of every remote-read session without impacket's per-field NDR: the R_QMOpenRemoteQueue request
and response (MS-MQMP 3.1.4.2), R_QMCloseRemoteQueueContext's (3.1.4.3), R_QMGetRTQMServerPort's (3.1.4.24) and
R_QMCreateRemoteCursor's request as Windows sends it (3.1.4.4 <29>), NDR and NDR64 (C706 14; MS-RPCE 2.2.5), in
impacket's layout byte for byte (tests/mqmp/test_codec_fast.py proves it against idl.py); and the QUEUE_FORMAT
reader MS-MQRR's R_OpenQueue shares (qm2qm.mqrr.codec_fast).

The request decoders take what a reader sends (for the open, the queue formats PUBLIC, PRIVATE, DIRECT, MACHINE)
laid out exactly as impacket reads it, and answer None for anything else — a NULL pointer, another arm, a
discriminant that differs from m_qft, an unusual string, a stub of another length — which then goes to
codec.decode_request, the one place that decides what is malformed and how it faults. So whatever they accept,
impacket reads the same."""
from __future__ import annotations

import functools
import struct

from qm2qm.mqmp import constants as c
from qm2qm.rpc.ndr_codec import CONTEXT_HANDLE_SIZE

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# the parameters after pQueueFormat: dwCallingProcessID, dwDesiredAccess, dwShareMode, pLicGuid (a [ref] GUID,
# inline), dwMQS -- 4-aligned in both syntaxes
_TAIL = struct.Struct("<III16sI")
_GUID_ARMS = (c.QUEUE_FORMAT_TYPE_PUBLIC, c.QUEUE_FORMAT_TYPE_MACHINE)
_NAME_ARMS = (c.QUEUE_FORMAT_TYPE_DIRECT, c.QUEUE_FORMAT_TYPE_SUBQUEUE)    # m_pDirectID, m_pDirectSubqueueID
# R_QMOpenRemoteQueue's response: pphContext pdwContext dwpQueue phQueue ErrorCode, the same 36 bytes in NDR and
# NDR64 (a context handle is 4-aligned in both)
_OPEN_RESPONSE = struct.Struct("<20s4I")
_DWORD_AND_STATUS = struct.Struct("<II")        # R_QMCreateRemoteCursor's response: phCursor, the HRESULT


def decode_open_remote_queue(stub: bytes, ndr64: bool) -> tuple[tuple, int, int] | None:
    """((m_qft, m_SuffixAndFlags, the arm's value), dwDesiredAccess, dwShareMode) of an R_QMOpenRemoteQueue request
    whose [unique] pQueueFormat is one read_queue_format reads; None for anything else (see the module docstring)."""
    pointer = 8 if ndr64 else 4
    if len(stub) < pointer or not (_U64 if ndr64 else _U32).unpack_from(stub, 0)[0]:
        return None
    read = read_queue_format(stub, pointer, ndr64)
    if read is None:
        return None
    queue_format, end = read
    if len(stub) != end + _TAIL.size:
        return None
    _, access, share, _, _ = _TAIL.unpack_from(stub, end)
    return queue_format, access, share


def read_queue_format(stub: bytes, at: int, ndr64: bool) -> tuple[tuple, int] | None:
    """The QUEUE_FORMAT (MS-MQMQ 2.2.7) at ``at`` (aligned: 8 in NDR64, 4 in NDR) and the deferred direct name
    behind it: ((m_qft, m_SuffixAndFlags, value), the offset after it, 4-aligned) for a PUBLIC/MACHINE GUID (16
    bytes_le), a PRIVATE OBJECTID ((Lineage, Uniquifier)) or a DIRECT or SUBQUEUE name (its text without the
    terminating NULs); None for any other arm or layout. MS-MQRR's R_OpenQueue takes the same structure by [ref],
    at offset 0."""
    size = len(stub)
    if size < at + 16:
        return None
    # m_qft, m_SuffixAndFlags, m_reserved; the union (aligned to its widest arm, a pointer) starts with its UCHAR
    # discriminant, and its arm follows at the union's alignment
    qft, flags = stub[at], stub[at + 1]
    union = at + (8 if ndr64 else 4)
    if stub[union] != qft:
        return None
    arm = union + (8 if ndr64 else 4)
    if qft in _GUID_ARMS:
        value, end = stub[arm:arm + 16], arm + 16
    elif qft == c.QUEUE_FORMAT_TYPE_PRIVATE:
        if size < arm + 20:
            return None
        value, end = (stub[arm:arm + 16], _U32.unpack_from(stub, arm + 16)[0]), arm + 20
        if ndr64:           # the structure's trailing pad to its alignment, 8 (MS-RPCE 2.2.5.3.4.1)
            end += 4
    elif qft in _NAME_ARMS:
        value, end = _direct_name(stub, arm, ndr64)
        if value is None:
            return None
    else:
        return None
    end += -end & 3
    return ((qft, flags, value), end) if end <= size else None


def _direct_name(stub: bytes, at: int, ndr64: bool) -> tuple[str | None, int]:
    """m_pDirectID: a non-NULL referent, then (deferred, right behind it) the conformant varying wchar_t string:
    max count, offset 0, actual count = max count > 0, the characters; (None, 0) for anything else."""
    if ndr64:
        counts = at + 8
        if len(stub) < counts + 24 or not _U64.unpack_from(stub, at)[0]:
            return None, 0
        maximum, offset, actual = struct.unpack_from("<3Q", stub, counts)
        chars = counts + 24
    else:
        if len(stub) < at + 16 or not _U32.unpack_from(stub, at)[0]:
            return None, 0
        maximum, offset, actual = struct.unpack_from("<3I", stub, at + 4)
        chars = at + 16
    end = chars + 2 * actual
    if offset or actual != maximum or not actual or end > len(stub):
        return None, 0
    try:
        text = stub[chars:end].decode("utf-16-le")
    except UnicodeDecodeError:      # the general path answers it (MQ_ERROR_ILLEGAL_FORMATNAME)
        return None, 0
    return text.rstrip("\x00"), end


def encode_open_remote_queue(context: bytes, handle: int, status: int) -> bytes:
    """R_QMOpenRemoteQueue's response: pphContext, then the Handle in pdwContext, dwpQueue and phQueue (<28>), and
    the HRESULT."""
    return _OPEN_RESPONSE.pack(context, handle, handle, handle, status & 0xFFFFFFFF)


def decode_context_handle(stub: bytes) -> bytes | None:
    """R_QMCloseRemoteQueueContext's request (and response): the 20-byte context handle alone; None otherwise."""
    return bytes(stub) if len(stub) == CONTEXT_HANDLE_SIZE else None


def decode_dword(stub: bytes) -> int | None:
    """R_QMGetRTQMServerPort's request: the DWORD fIP alone, 4 bytes in NDR and NDR64; None otherwise."""
    return _U32.unpack(stub)[0] if len(stub) == 4 else None


def encode_dword(value: int) -> bytes:
    """R_QMGetRTQMServerPort's response: its DWORD return value."""
    return _U32.pack(value)


@functools.cache
def _zeroed_cursor_request(ndr64: bool) -> tuple[int, int]:
    """(size, pad mask) of R_QMCreateRemoteCursor with a zeroed CACTransferBufferV1: the mask has the bits of the
    alignment gaps, which are the only bytes impacket's marshalling of that request leaves non-zero (it fills gaps,
    Windows zeroes them) besides hQueue, the last four."""
    from qm2qm.mqmp.client import create_remote_cursor_request
    stub = create_remote_cursor_request(0, ndr64).getData()
    mask = int.from_bytes(bytes(0xFF if byte else 0 for byte in stub[:-4]), "little")
    return len(stub), mask


def decode_create_remote_cursor(stub: bytes, ndr64: bool) -> int | None:
    """hQueue of an R_QMCreateRemoteCursor request whose ptb1 is the zeroed CACTransferBufferV1 Windows sends
    (<29>: every field 0, every pointer NULL; the gaps between fields may hold anything); None for any other.
    impacket takes 0.7-1.1 ms to decode that buffer, which 3.1.4.4 ignores."""
    size, pads = _zeroed_cursor_request(ndr64)
    if len(stub) != size or int.from_bytes(stub[:-4], "little") & ~pads:
        return None
    return _U32.unpack_from(stub, size - 4)[0]


def encode_create_remote_cursor(cursor: int, status: int) -> bytes:
    """R_QMCreateRemoteCursor's response: phCursor, then the HRESULT, 8 bytes in NDR and NDR64."""
    return _DWORD_AND_STATUS.pack(cursor, status & 0xFFFFFFFF)
