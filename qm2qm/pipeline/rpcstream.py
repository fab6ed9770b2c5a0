"""Connection-oriented DCE/RPC seen from the wire (C706 12.6; MS-RPCE 2.2.2): PDU framing per direction,
bind / alter_context tracking of presentation contexts, request and response fragment reassembly."""
from __future__ import annotations

import functools
import struct
import uuid
from dataclasses import dataclass, field
from typing import Callable

from qm2qm.pipeline import schema
from qm2qm.pipeline.decode import QM2QM_UUID_STR
from qm2qm.rpc.faults import (PFC_FIRST_FRAG, PFC_LAST_FRAG, PFC_OBJECT_UUID, PTYPE_ALTER_CONTEXT,
                              PTYPE_ALTER_CONTEXT_RESP, PTYPE_BIND, PTYPE_BIND_ACK, PTYPE_BIND_NAK,
                              PTYPE_CO_CANCEL, PTYPE_FAULT, PTYPE_REQUEST, PTYPE_RESPONSE)
from qm2qm.rpc.interface import NDR20, NDR64
from qm2qm.rpc.pdu import (HEADER, HEADER_SIZE, REQUEST_FIELDS, REQUEST_HEADER_SIZE, RESPONSE_HEADER_SIZE,
                           SEC_TRAILER_SIZE, PduError, parse_bind_ack_body, parse_bind_body, parse_fault_status,
                           stub_bounds)

CLIENT_PTYPES = {0, 11, 14, 16, 18, 19}        # request, bind, alter_context, auth3, co_cancel, orphaned
SERVER_PTYPES = {2, 3, 12, 13, 15, 17}         # response, fault, bind_ack, bind_nak, alter_context_resp, shutdown
MAX_PTYPE = 20
KNOWN_INTERFACES = {
    QM2QM_UUID_STR: "qm2qm",
    "e1af8308-5d1f-11c9-91a4-08002b14a0fa": "epm",          # endpoint mapper (C706 Appendix O)
}
RPC_C_AUTHN_LEVEL_PKT_PRIVACY = 6          # MS-RPCE 2.2.1.1.8
SEALED = "stub sealed (RPC_C_AUTHN_LEVEL_PKT_PRIVACY): not decoded"
RESULT_ACCEPTANCE = 0


def syntax_name(syntax: tuple[uuid.UUID, int, int]) -> str:
    """NDR / NDR64 for the two transfer syntaxes of MS-RPCE 2.2.4.12, else 'uuid vMAJOR.MINOR'."""
    ident = (syntax[0], syntax[1])
    if ident == NDR20:
        return "NDR"
    if ident == NDR64:
        return "NDR64"
    return f"{syntax[0]} v{syntax[1]}.{syntax[2]}"


@dataclass(slots=True)
class Pdu:
    """One framed PDU, the time its last byte was captured and its offset in the direction's stream."""
    ptype: int
    flags: int
    call_id: int
    data: bytes
    time_us: int
    offset: int


class Framer:
    """Cuts one direction's byte stream into PDUs by frag_length (C706 12.6.3.1)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.offset = 0                 # stream offset of buf[0]
        self.pdus = 0
        self.error: str | None = None   # why framing stopped
        self.error_offset = 0
        self.non_rpc = False

    def feed(self, data: bytes, time_us: int, out: list[Pdu]) -> None:
        """Append stream bytes; complete PDUs go to ``out``; a bad header stops framing (``error``)."""
        if self.error is not None:
            return
        if self.buf:
            self.buf += data
            data = bytes(self.buf)
            self.buf.clear()
        # Parse in place: the common case is whole PDUs per segment, so no copy through the buffer (cProfile).
        pos = 0
        end = len(data)
        unpack = HEADER.unpack_from
        while end - pos >= HEADER_SIZE:
            vers, minor, ptype, flags, drep0, _drep1, frag_len, _auth, call_id = unpack(data, pos)
            if vers != 5 or minor > 1 or ptype > MAX_PTYPE or frag_len < HEADER_SIZE or drep0 & 0xF0 != 0x10:
                self.non_rpc = self.pdus == 0
                self.error = ("not DCE/RPC" if self.non_rpc else
                              f"bad PDU header (version {vers}.{minor}, type {ptype}, frag_length {frag_len}, "
                              f"drep 0x{drep0:02x})")
                self.error_offset = self.offset + pos
                return
            if end - pos < frag_len:
                break
            pdu = data if frag_len == end else data[pos:pos + frag_len]
            out.append(Pdu(ptype, flags, call_id, pdu, time_us, self.offset + pos))
            self.pdus += 1
            pos += frag_len
        if pos < end:
            self.buf += data[pos:] if pos else data
        self.offset += pos

    def leftover(self) -> int:
        """Bytes of an incomplete PDU at end of stream."""
        return len(self.buf)

    def incomplete(self) -> str:
        """What the leftover is: a PDU whose frag_length runs past the end of the stream (C706 12.6.3.1)."""
        if len(self.buf) < HEADER_SIZE:
            return f"{len(self.buf)} bytes of a PDU header at stream offset {self.offset} end the stream"
        frag_len = HEADER.unpack_from(self.buf)[6]
        return (f"the PDU at stream offset {self.offset} has frag_length {frag_len}, only {len(self.buf)} bytes "
                f"follow: it and the stream after it are lost")


@functools.lru_cache(maxsize=4096)
def _context_columns(ctx: tuple[tuple, tuple]) -> dict[str, str | None]:
    """The call-table columns a presentation context gives each of its calls."""
    abstract, transfer = ctx
    return {"interface_uuid": str(abstract[0]), "interface_version": f"{abstract[1]}.{abstract[2]}",
            "interface_name": KNOWN_INTERFACES.get(str(abstract[0])), "transfer_syntax": syntax_name(transfer)}


@dataclass
class _Fragments:
    call_id: int
    opnum: int = 0
    context_id: int = 0
    parts: list = field(default_factory=list)
    sealed: bool = False


def _stub(pdu: Pdu, header: int) -> tuple[bytes, bool]:
    """The stub of a request/response PDU without its auth verifier, and whether it is sealed
    (RPC_C_AUTHN_LEVEL_PKT_PRIVACY encrypts it; integrity leaves it clear), MS-RPCE 2.2.2.11."""
    start, end, trailer = stub_bounds(pdu.data, header)
    sealed = trailer is not None and trailer.auth_level >= RPC_C_AUTHN_LEVEL_PKT_PRIVACY
    return pdu.data[start:end], sealed


class Conversation:
    """One TCP connection's DCE/RPC calls; ``problem(kind, offset, message)`` reports what cannot be used."""

    def __init__(self, session_id: str, problem: Callable[[str, int | None, str], None]) -> None:
        self.session_id = session_id
        self.problem = problem
        self.client: str | None = None
        self.server: str | None = None
        self.association_group_id: int | None = None
        self.contexts: dict[int, tuple[tuple, tuple]] = {}     # p_cont_id -> (abstract syntax, transfer syntax)
        self.proposed: dict[int, tuple] = {}                    # bind call_id -> context items
        self.requests: dict[int, _Fragments] = {}
        self.responses: dict[int, _Fragments] = {}
        self.pending: dict[int, dict] = {}                      # call_id -> row awaiting its answer
        self.calls: list[dict] = []
        self.orphans: list[int] = []                            # call_ids answered with no request seen

    def pdu(self, pdu: Pdu, sender: str, receiver: str) -> None:
        """Handle one PDU sent by ``sender``."""
        if pdu.ptype in CLIENT_PTYPES and self.client is None:
            self.client, self.server = sender, receiver
        try:
            handler = _HANDLERS.get(pdu.ptype)
            if handler is not None:
                handler(self, pdu)
        except (PduError, struct.error, IndexError, ValueError) as exc:
            self.problem("bad_pdu", None, f"{self.session_id}: PDU type {pdu.ptype} call_id {pdu.call_id} at "
                                          f"stream offset {pdu.offset}: {exc}")

    def _bind(self, pdu: Pdu) -> None:
        self.proposed[pdu.call_id] = parse_bind_body(pdu.data, _frag_end(pdu)).items

    def _bind_ack(self, pdu: Pdu) -> None:
        body = parse_bind_ack_body(pdu.data, _frag_end(pdu))
        items = self.proposed.pop(pdu.call_id, ())
        if pdu.ptype == PTYPE_BIND_ACK or body.assoc_group_id:
            self.association_group_id = body.assoc_group_id
        for index, (result, _reason, syntax) in enumerate(body.results):
            if result == RESULT_ACCEPTANCE and index < len(items):
                self.contexts[items[index].context_id] = (items[index].abstract_syntax, syntax)

    def _bind_nak(self, pdu: Pdu) -> None:
        self.proposed.pop(pdu.call_id, None)

    def _request(self, pdu: Pdu) -> None:
        if pdu.flags & PFC_FIRST_FRAG or pdu.call_id not in self.requests:
            _alloc, context_id, opnum = REQUEST_FIELDS.unpack_from(pdu.data, HEADER_SIZE)
            self.requests[pdu.call_id] = _Fragments(pdu.call_id, opnum, context_id)
        frags = self.requests[pdu.call_id]
        stub, sealed = _stub(pdu, REQUEST_HEADER_SIZE + (16 if pdu.flags & PFC_OBJECT_UUID else 0))
        frags.parts.append(stub)
        frags.sealed |= sealed
        if pdu.flags & PFC_LAST_FRAG:
            del self.requests[pdu.call_id]
            self._new_call(frags, pdu.time_us)

    def _new_call(self, frags: _Fragments, time_us: int) -> None:
        row = schema.empty_call()
        stub = frags.parts[0] if len(frags.parts) == 1 else b"".join(frags.parts)
        ctx = self.contexts.get(frags.context_id)
        row.update(source="capture", session_id=self.session_id, client=self.client, server=self.server,
                   association_group_id=self.association_group_id, call_id=frags.call_id,
                   context_id=frags.context_id, request_time_us=time_us, opnum=frags.opnum, request_stub=stub,
                   request_bytes=len(stub), status_kind=schema.NO_RESPONSE)
        if ctx is not None:
            row.update(_context_columns(ctx))
        else:
            row["decode_error"] = f"presentation context {frags.context_id} was never bound in this capture"
        if frags.sealed:
            row["decode_error"] = SEALED
        self.calls.append(row)
        self.pending[frags.call_id] = row

    def _response(self, pdu: Pdu) -> None:
        if pdu.flags & PFC_FIRST_FRAG or pdu.call_id not in self.responses:
            self.responses[pdu.call_id] = _Fragments(pdu.call_id)
        frags = self.responses[pdu.call_id]
        stub, sealed = _stub(pdu, RESPONSE_HEADER_SIZE)
        frags.parts.append(stub)
        frags.sealed |= sealed
        if pdu.flags & PFC_LAST_FRAG:
            del self.responses[pdu.call_id]
            row = self.pending.pop(pdu.call_id, None)
            if row is None:
                self.orphans.append(pdu.call_id)
                return
            stub = frags.parts[0] if len(frags.parts) == 1 else b"".join(frags.parts)
            row.update(status_kind=schema.OK, response_stub=stub, response_bytes=len(stub),
                       response_time_us=pdu.time_us, latency_us=pdu.time_us - row["request_time_us"])
            if frags.sealed:
                row["decode_error"] = SEALED

    def _fault(self, pdu: Pdu) -> None:
        self.responses.pop(pdu.call_id, None)
        row = self.pending.pop(pdu.call_id, None)
        if row is None:
            return
        status = parse_fault_status(pdu.data)
        row.update(status_kind=schema.FAULT, fault_status=status, response_time_us=pdu.time_us,
                   latency_us=pdu.time_us - row["request_time_us"])

    def _cancel(self, pdu: Pdu) -> None:
        row = self.pending.get(pdu.call_id)
        if row is not None:
            row["status_kind"] = schema.CANCELLED   # replaced by the answer if one comes

    def finish(self) -> list[dict]:
        """The calls of this connection, in request order; unanswered ones keep no_response / cancelled."""
        if self.requests:
            self.problem("incomplete_call", None, f"{self.session_id}: {len(self.requests)} request(s) lack "
                                                  f"their last fragment")
        if self.orphans:
            ids = ", ".join(str(i) for i in self.orphans[:10]) + (" ..." if len(self.orphans) > 10 else "")
            self.problem("orphan_response", None, f"{self.session_id}: {len(self.orphans)} response(s) with no "
                                                  f"request in the capture (call_id {ids})")
        return self.calls


def _frag_end(pdu: Pdu) -> int:
    """Where a bind-family body ends: before the auth verifier and its sec_trailer (MS-RPCE 2.2.2.11)."""
    *_, frag_len, auth_len, _call_id = HEADER.unpack_from(pdu.data)
    return frag_len - (auth_len + SEC_TRAILER_SIZE if auth_len else 0)


_HANDLERS = {
    PTYPE_BIND: Conversation._bind, PTYPE_ALTER_CONTEXT: Conversation._bind,
    PTYPE_BIND_ACK: Conversation._bind_ack, PTYPE_ALTER_CONTEXT_RESP: Conversation._bind_ack,
    PTYPE_BIND_NAK: Conversation._bind_nak, PTYPE_REQUEST: Conversation._request,
    PTYPE_RESPONSE: Conversation._response, PTYPE_FAULT: Conversation._fault, PTYPE_CO_CANCEL: Conversation._cancel,
}
