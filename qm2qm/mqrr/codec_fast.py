"""The read path's stubs without impacket's per-byte marshalling: R_StartReceive / R_EndReceive requests and the
R_StartReceive(-Transactional) response (MS-MQRR 6; C706 14, MS-RPCE 2.2.5 NDR64), proven equal to idl.py by
tests/mqrr/test_codec.py. Pointers get the referent ids Windows writes (0x00020000, +4 in marshalling order)."""
from __future__ import annotations

import struct
from typing import Any

REFERENT_ID_BASE = 0x00020000
REFERENT_ID_STEP = 4

# R_StartReceive request: phContext(20) pad(4) LookupId(8) hCursor ulAction ulTimeout dwRequestId dwMaxBodySize
# dwMaxCompoundMessageSize — the same 56 bytes in NDR and NDR64 (the context handle is 4-aligned in both)
_START_RECEIVE = struct.Struct("<20s4xQ6I")
# R_EndReceive request: phContext(20) dwAck dwRequestId
_END_RECEIVE = struct.Struct("<20s2I")
# R_StartReceive response with one section (a whole packet, the common answer): pdwArriveTime pad pSequenceId
# pdwNumberOfSections, the array's referent and conformance, its SectionBuffer and the deferred conformance of its
# bytes (the general layout below, its pads folded in); then the bytes, their pad to 4 and ErrorCode
_ONE_SECTION = (struct.Struct("<I4xQIIIH2xIIII"), struct.Struct("<I4xQI4xQQIII4xQQ"))
_STATUS = struct.Struct("<I")
_ZEROS = bytes(3)
_START_FIELDS = ("phContext", "LookupId", "hCursor", "ulAction", "ulTimeout", "dwRequestId", "dwMaxBodySize",
                 "dwMaxCompoundMessageSize")


def decode_start_receive(stub: bytes) -> dict[str, Any] | None:
    """The fields of an R_StartReceive request stub, or None when it is not exactly that layout."""
    if len(stub) != _START_RECEIVE.size:
        return None
    return dict(zip(_START_FIELDS, _START_RECEIVE.unpack(stub)))


def decode_end_receive(stub: bytes) -> dict[str, Any] | None:
    """The fields of an R_EndReceive / R_EndTransactionalReceive request stub, or None."""
    if len(stub) != _END_RECEIVE.size:
        return None
    handle, ack, request_id = _END_RECEIVE.unpack(stub)
    return {"phContext": handle, "dwAck": ack, "dwRequestId": request_id}


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
