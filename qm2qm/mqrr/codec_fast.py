"""The read path's stubs without impacket's per-byte marshalling: the R_OpenQueue / R_CloseQueue, R_StartReceive /
R_StartTransactionalReceive / R_EndReceive, cursor, purge and cancel requests, the R_OpenQueue / R_CloseQueue /
R_CreateCursor responses and the R_StartReceive(-Transactional) response (MS-MQRR 6; C706 14, MS-RPCE 2.2.5
NDR64), proven equal to idl.py by tests/mqrr/test_codec.py. Pointers get the referent ids Windows writes
(0x00020000, +4 in marshalling order). A decoder answers None for a stub not laid out exactly as it expects;
impacket's decode (codec.decode) then reads it or faults it."""
from __future__ import annotations

import struct
from typing import Any

from qm2qm.mqmp.codec_fast import encode_create_remote_cursor, read_queue_format
from qm2qm.rpc.ndr_codec import CONTEXT_HANDLE_SIZE

REFERENT_ID_BASE = 0x00020000
REFERENT_ID_STEP = 4

# R_StartReceive request: phContext(20) pad(4) LookupId(8) hCursor ulAction ulTimeout dwRequestId dwMaxBodySize
# dwMaxCompoundMessageSize — the same 56 bytes in NDR and NDR64 (the context handle is 4-aligned in both)
_START_RECEIVE = struct.Struct("<20s4xQ6I")
_START_TRANSACTIONAL_RECEIVE = struct.Struct("<20s4xQ6I16s")
# R_StartReceive response with one section (a whole packet, the common answer): pdwArriveTime pad pSequenceId
# pdwNumberOfSections, the array's referent and conformance, its SectionBuffer and the deferred conformance of its
# bytes (the general layout below, its pads folded in); then the bytes, their pad to 4 and ErrorCode
_ONE_SECTION = (struct.Struct("<I4xQIIIH2xIIII"), struct.Struct("<I4xQI4xQQIII4xQQ"))
_STATUS = struct.Struct("<I")
_ZEROS = bytes(3)
_START_FIELDS = ("phContext", "LookupId", "hCursor", "ulAction", "ulTimeout", "dwRequestId", "dwMaxBodySize",
                 "dwMaxCompoundMessageSize")


# R_OpenQueue after its QUEUE_FORMAT: dwAccess dwShareMode pClientId fNonRoutingServer Major Minor BuildNumber
# fWorkgroup, 4-aligned in both syntaxes
_OPEN_QUEUE_TAIL = struct.Struct("<II16siBBHi")
_HANDLE_AND_STATUS = struct.Struct("<20sI")


def decode_open_queue(stub: bytes, ndr64: bool) -> dict[str, Any] | None:
    """dwAccess, dwShareMode and pQueueFormat -- as (m_qft, m_SuffixAndFlags, the arm's value), what
    queue_format.format_name also reads -- of an R_OpenQueue request whose QUEUE_FORMAT read_queue_format reads
    (PUBLIC, PRIVATE, DIRECT, MACHINE), or None."""
    read = read_queue_format(stub, 0, ndr64)
    if read is None:
        return None
    queue_format, end = read
    if len(stub) != end + _OPEN_QUEUE_TAIL.size:
        return None
    access, share = _OPEN_QUEUE_TAIL.unpack_from(stub, end)[:2]
    return {"pQueueFormat": queue_format, "dwAccess": access, "dwShareMode": share}


class HandleAndDwords:
    """The decoder of a request that is a 20-byte context handle and DWORDs, the same bytes in NDR and NDR64 (the
    handle is 4-aligned in both): their fields by name, or None for a stub of another length."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.layout = struct.Struct("<20s" + "I" * (len(names) - 1))

    def __call__(self, stub: bytes, ndr64: bool = False) -> dict[str, Any] | None:
        if len(stub) != self.layout.size:
            return None
        return dict(zip(self.names, self.layout.unpack(stub)))


decode_context_handle = HandleAndDwords("pphContext")                      # R_CloseQueue
decode_queue_handle = HandleAndDwords("phContext")                         # R_CreateCursor, R_PurgeQueue
decode_close_cursor = HandleAndDwords("phContext", "hCursor")
decode_cancel_receive = HandleAndDwords("phContext", "dwRequestId")
decode_end_receive = HandleAndDwords("phContext", "dwAck", "dwRequestId")  # and R_EndTransactionalReceive


def encode_handle(pphContext: bytes) -> bytes | None:
    """R_OpenQueue's response: the context handle alone (None: not 20 bytes, impacket's encode then says why)."""
    return bytes(pphContext) if len(pphContext) == CONTEXT_HANDLE_SIZE else None


def encode_dword_and_status(phCursor: int, ErrorCode: int) -> bytes:
    """R_CreateCursor's response: phCursor, then the LONG ErrorCode (given signed or unsigned) -- the layout of
    MS-MQMP's R_QMCreateRemoteCursor response, packed by its encoder."""
    return encode_create_remote_cursor(phCursor, ErrorCode)


def encode_handle_and_status(pphContext: bytes, ErrorCode: int) -> bytes | None:
    """R_CloseQueue's response: the context handle, then the LONG ErrorCode (given signed or unsigned)."""
    if len(pphContext) != CONTEXT_HANDLE_SIZE:
        return None
    return _HANDLE_AND_STATUS.pack(pphContext, ErrorCode & 0xFFFFFFFF)


def decode_start_receive(stub: bytes, ndr64: bool = False) -> dict[str, Any] | None:
    """The fields of an R_StartReceive request stub, or None when it is not exactly that layout."""
    if len(stub) != _START_RECEIVE.size:
        return None
    return dict(zip(_START_FIELDS, _START_RECEIVE.unpack(stub)))


def decode_start_transactional_receive(stub: bytes, ndr64: bool = False) -> dict[str, Any] | None:
    """R_StartTransactionalReceive: R_StartReceive's fields, then pTransactionId (a [ref] XACTUOW: its 16 bytes,
    right after them in both syntaxes), as {"rgb": bytes} the way handlers read it; or None."""
    if len(stub) != _START_TRANSACTIONAL_RECEIVE.size:
        return None
    *values, uow = _START_TRANSACTIONAL_RECEIVE.unpack(stub)
    fields = dict(zip(_START_FIELDS, values))
    fields["pTransactionId"] = {"rgb": uow}
    return fields


def _pad(out: bytearray, alignment: int) -> None:
    out += bytes(-len(out) % alignment)


def encode_receive_response(arrive_time: int, sequence_id: int, sections: list[tuple[int, int, bytes]],
                            status: int, ndr64: bool) -> bytes:
    """R_StartReceiveResponse: pdwArriveTime, pSequenceId, pdwNumberOfSections, ppPacketSections (a unique
    pointer to a conformant array of SectionBuffer, each with a unique pointer to SectionSize bytes), ErrorCode.
    ``sections`` are (SectionType, SectionSizeAlloc, bytes); an empty list is a NULL ppPacketSections."""
    if len(sections) == 1:
        kind, alloc, buffer = sections[0]
        size = len(buffer)
        return b"".join((_ONE_SECTION[ndr64].pack(arrive_time, sequence_id, 1, REFERENT_ID_BASE, 1, kind, alloc, size,
                                                  REFERENT_ID_BASE + REFERENT_ID_STEP, size),
                         buffer, _ZEROS[:-size & 3], _STATUS.pack(status & 0xFFFFFFFF)))
    out = bytearray(struct.pack("<I", arrive_time))
    _pad(out, 8)
    out += struct.pack("<QI", sequence_id, len(sections))
    pointer, count, pointer_size = ("<Q", "<Q", 8) if ndr64 else ("<I", "<I", 4)
    _pad(out, pointer_size)
    referent = REFERENT_ID_BASE
    out += struct.pack(pointer, referent if sections else 0)
    if sections:
        referent += REFERENT_ID_STEP
        _pad(out, pointer_size)
        out += struct.pack(count, len(sections))
        for kind, alloc, buffer in sections:            # SectionBuffer: enum (2 bytes in NDR, 4 in NDR64)
            _pad(out, pointer_size if ndr64 else 4)
            if ndr64:
                out += struct.pack("<III4xQ", kind, alloc, len(buffer), referent)
            else:
                out += struct.pack("<H2xIII", kind, alloc, len(buffer), referent)
            referent += REFERENT_ID_STEP
        for _, _, buffer in sections:                   # the deferred byte arrays, in order
            _pad(out, pointer_size)
            out += struct.pack(count, len(buffer))
            out += buffer
    _pad(out, 4)
    out += struct.pack("<I", status & 0xFFFFFFFF)
    return bytes(out)
