"""Sans-IO server side of one ncacn_ip_tcp connection: bytes → events, answers → bytes (C706 12.6; MS-RPCE 3.3.3).

Usage (the transport): feed every read to ``receive_data`` (``b""`` on EOF), handle the returned events in order,
write ``data_to_send()`` after each batch. A ``BindRequest`` must be answered (``accept_bind``/``reject_bind``)
before the events after it in the same list are handled; once ``closed`` is true, stop handling events, write
``data_to_send()`` and close the socket. The context items of a bind/alter_context are negotiated when the PDU
is parsed, so requests pipelined behind it in the same read already see the new presentation contexts.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Union

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.events import (
    BindRequest, CallOrphaned, CallRequest, CancelRequest, ConnectionTerminated, ContextItem, SyntaxId,
)
from qm2qm.rpc.auth.security import AuthError, SecurityContext, SecurityProvider
from qm2qm.rpc.auth.verifier import append_protected_response, unprotect_fragment
from qm2qm.rpc.budget import ReassemblyBudget
from qm2qm.rpc.interface import ANONYMOUS, NDR64, RPC_C_AUTHN_LEVEL_NONE, Interface
from qm2qm.rpc.limits import DEFAULT_LIMITS, MAX_BIND_FRAG, OLD_CALL_WINDOW, Limits

Event = Union[BindRequest, CallRequest, CancelRequest, CallOrphaned, ConnectionTerminated]
Registry = Union[Mapping[SyntaxId, Interface], Callable[[SyntaxId], "Interface | None"]]

_HEADER_UNPACK = P.HEADER.unpack_from
_REQUEST_UNPACK = P.REQUEST_FIELDS.unpack_from
_FIRST_LAST = F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG
_new_tuple = tuple.__new__      # CallRequest(...) without the named tuple's Python-level __new__ (same tuple)
# Several security contexts per connection (auth_context_id) and keep-connection-on-orphan (MS-RPCE 3.3.1.5.3)
_SUPPORTED_BTFN = F.BTFN_SECURITY_CONTEXT_MULTIPLEXING | F.BTFN_KEEP_CONNECTION_ON_ORPHAN
_AWAIT_BIND, _BOUND, _CLOSED = 0, 1, 2


@dataclass(slots=True)
class _PresentationContext:
    """A row of the Table of Presentation Contexts (MS-RPCE 3.3.3.1.1)."""
    abstract_syntax: SyntaxId
    transfer_syntax: SyntaxId
    interface: Interface
    ndr64: bool


@dataclass(slots=True)
class _Call:
    """A dispatched call the transport has not answered yet (MS-RPCE 3.3.3.1.5, STATE_DISPATCHED)."""
    context_id: int
    maybe: bool
    cancel_count: int = 0
    security: SecurityContext | None = None
    signed: bool = False                # the response carries a verifier (the request did, level ≥ 3)


@dataclass(slots=True)
class _Reassembly:
    """A request whose first fragment arrived and last has not (C706 12.6.3.7; MS-RPCE 3.3.3.1.5 STATE_RECEIVE_PDU)."""
    call_id: int
    context_id: int
    opnum: int
    object_uuid: uuid.UUID | None
    context: _PresentationContext
    maybe: bool
    stub: bytearray
    fragments: int
    security: SecurityContext | None = None
    signed: bool = False


@dataclass(slots=True)
class _PendingBind:
    """A bind/alter_context whose per-item results are computed and which awaits accept_bind/reject_bind."""
    request: BindRequest
    results: list[tuple[int, int, SyntaxId | None]]
    flags: int = _FIRST_LAST
    auth: tuple[int, int, int, bytes] | None = None
    reply: bytes | None = None          # its bind_ack / bind_nak / fault, once the runtime decided


class _Terminate(Exception):
    """Internal: queue ``reply`` (if any) and end the connection with ConnectionTerminated(reason)."""

    def __init__(self, reason: str, reply: bytes = b"") -> None:
        super().__init__(reason)
        self.reason = reason
        self.reply = reply


class Connection:
    """Server-side DCE/RPC connection state machine (MS-RPCE 3.3.3 state diagram; C706 12.6.4)."""

    def __init__(self, registry: Registry, *, limits: Limits = DEFAULT_LIMITS, prefer_ndr64: bool = True,
                 conc_mpx: bool = True, security: SecurityProvider | None = None,
                 budget: ReassemblyBudget | None = None) -> None:
        """``registry``: mapping (uuid, major, minor) → Interface, or a callable taking that tuple and returning an
        Interface or None. ``prefer_ndr64``: the server's Preferred Transfer Syntax (MS-RPCE 3.3.3.1.3).
        ``conc_mpx``: echo PFC_CONC_MPX when the client offers it (MS-RPCE 3.3.1.5.8, C706 12.6.3.1; Windows and
        Samba do). Calls in flight are independent either way: the core never serializes them.
        ``security``: the security provider for authenticated binds; None refuses them (bind_nak 8).
        ``budget``: the allowance for unfinished fragmented requests this connection shares with others (None:
        only the per-connection ``limits``)."""
        self._conc_mpx = conc_mpx
        self._security = security if security is not None and security.policy.accepts_authentication else None
        self._auth: dict[int, SecurityContext] = {}          # auth_context_id → security context (3.3.1.5.2)
        self._default_auth: SecurityContext | None = None    # the bind's context: requests without a verifier
        self._auth_invalid = False                           # an rpc_auth3 named no pending context
        self._header_sign = False                            # Supports Header Signing Flag (3.3.1.5.2.2)
        self._ack_flags = _FIRST_LAST
        self._registry = registry
        self._limits = limits
        self._prefer_ndr64 = prefer_ndr64
        self._state = _AWAIT_BIND
        self._buf = bytearray()
        self._out = bytearray()
        # the same bytearray, for the runtime: non-empty while take_output() has something (read it, never write it)
        self.pending_output = self._out
        self._pdus = 0                               # PDUs in _out (the rpc_mgmt_inq_stats pkts_out count)
        self._contexts: dict[int, _PresentationContext] = {}
        self._calls: dict[int, _Call] = {}
        self._reassembly: _Reassembly | None = None
        self._budget = budget
        self._discard_call_id: int | None = None     # tail fragments of a call we already faulted (3.3.3.5.6)
        self._current_call_id = 0                    # Current call_id (MS-RPCE 3.3.3.1.1)
        self._pending_binds: dict[int, _PendingBind] = {}
        # While a bind / alter_context awaits the runtime's answer, what parsing queues after it waits behind it, so
        # the peer reads replies in the order of its PDUs: pending binds (slots) and PDUs, oldest first.
        self._held: list[_PendingBind | bytes] = []
        self._assoc_group_id: int | None = None
        self._max_xmit_frag = limits.min_frag
        # Incoming fragments are checked against the transport limit, not the negotiated size (Samba does the same).
        self._max_recv_frag = limits.max_frag
        self._features: int | None = None

    # --- public state -------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True after ConnectionTerminated: nothing more is parsed or sent except what data_to_send() still holds."""
        return self._state == _CLOSED

    @property
    def assoc_group_id(self) -> int | None:
        """The association group given to accept_bind for this connection's bind (MS-RPCE 3.3.1.5.7)."""
        return self._assoc_group_id

    @property
    def max_xmit_frag(self) -> int:
        """Negotiated fragment size for PDUs we send (C706 12.6.3.1; Samba dcesrv_bind)."""
        return self._max_xmit_frag

    @property
    def bind_time_features(self) -> int | None:
        """The BindTimeFeatureNegotiationResponseBitmask we sent, None if the client did not ask (MS-RPCE 3.3.1.5.3)."""
        return self._features

    def context_ids(self) -> dict[int, tuple[Interface, bool]]:
        """Accepted presentation contexts: p_cont_id → (interface, ndr64)."""
        return {cid: (c.interface, c.ndr64) for cid, c in self._contexts.items()}

    # --- input ------------------------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Consume bytes read from the peer (``b""`` = EOF) and return the events they complete, in order."""
        if self._state == _CLOSED:
            return []
        events: list[Event] = []
        if not data:
            reason = "peer closed the connection"
            if self._buf:
                reason += f" inside a PDU ({len(self._buf)} bytes of an incomplete PDU dropped)"
            self._close()
            events.append(ConnectionTerminated(reason))
            return events
        buf = self._buf
        if buf:
            buf += data
        else:
            buf = data          # nothing held back: parse the read itself (its slices are the stubs, one copy)
        pos = 0
        end = len(buf)
        try:
            while end - pos >= P.HEADER_SIZE:
                vers, minor, ptype, flags, drep0, drep1, frag_length, auth_length, call_id = _HEADER_UNPACK(buf, pos)
                if ptype == 0 and vers == 5 and minor == 0 and drep0 == 0x10 and drep1 == 0 \
                        and auth_length == 0 and self._state == _BOUND:
                    if frag_length > self._max_recv_frag or frag_length < P.REQUEST_HEADER_SIZE:
                        self._bad_request_length(frag_length, call_id)
                    if end - pos < frag_length:
                        break
                    if flags == _FIRST_LAST and not self._auth and not self._auth_invalid:
                        self._on_plain_request(buf, pos, frag_length, call_id, events)
                    else:
                        self._on_request(buf, pos, flags, frag_length, call_id, events)
                    pos += frag_length
                    continue
                frag_length = self._check_header(buf, pos, vers, minor, ptype, flags, drep0, drep1, frag_length,
                                                 auth_length, call_id)
                if end - pos < frag_length:
                    break
                self._dispatch(buf, pos, ptype, flags, frag_length, auth_length, call_id, events)
                pos += frag_length
                if self._state == _CLOSED:
                    break
        except _Terminate as stop:
            if stop.reply:
                self._queue(stop.reply)
            self._close()
            events.append(ConnectionTerminated(stop.reason))
            return events
        if buf is not self._buf:            # the read itself (or a buffer _close replaced): keep what is left
            if pos < len(buf) and self._state != _CLOSED:
                self._buf = bytearray(buf[pos:])
        elif pos:
            del buf[:pos]
        return events

    def _check_header(self, buf: bytearray, pos: int, vers: int, minor: int, ptype: int, flags: int, drep0: int,
                      drep1: int, frag_length: int, auth_length: int, call_id: int) -> int:
        """Validate the common header (C706 12.6.3.1; MS-RPCE 3.3.1.5.1); returns frag_length or raises _Terminate."""
        # Before the bind every PDU is answered as a bind would be (Samba passes the first PDU to dcesrv_bind).
        first = self._state == _AWAIT_BIND
        if vers != P.RPC_VERS or minor != P.RPC_VERS_MINOR:
            # MS-RPCE 3.3.1.5.1 recognizes 5.0 only (Samba dcerpc_verify_ncacn_packet_header likewise).
            why = f"unsupported protocol version {vers}.{minor}"
            if ptype == F.PTYPE_BIND or (first and vers == P.RPC_VERS):
                raise _Terminate(why, P.build_bind_nak(call_id, F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED))
            if vers == P.RPC_VERS:
                raise _Terminate(why, P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
            raise _Terminate(why)
        if drep0 != 0x10 or drep1 != 0:
            # Big-endian / EBCDIC / non-IEEE data representations are not supported (impacket and Windows send 0x10).
            why = f"unsupported packed_drep {drep0:#04x} {drep1:#04x} (only little-endian ASCII IEEE)"
            if not drep0 & 0xF0:
                call_id = int.from_bytes(call_id.to_bytes(4, "little"), "big")   # answer with the peer's call_id
            raise _Terminate(why, self._protocol_error_reply(call_id))
        if frag_length < P.HEADER_SIZE:
            raise _Terminate(f"frag_length {frag_length} shorter than the 16-byte header")
        # bind and alter_context may use all of frag_length's 16 bits (Samba); other PDUs the transport limit.
        limit = MAX_BIND_FRAG if first or ptype in (F.PTYPE_BIND, F.PTYPE_ALTER_CONTEXT) else self._max_recv_frag
        if frag_length > limit:
            raise _Terminate(f"frag_length {frag_length} exceeds {limit}", P.build_fault(call_id, F.NCA_S_PROTO_ERROR))
        if auth_length and auth_length + P.SEC_TRAILER_SIZE + P.HEADER_SIZE > frag_length:
            raise _Terminate(f"auth_length {auth_length} does not fit in frag_length {frag_length}",
                             self._protocol_error_reply(call_id))
        return frag_length

    def _protocol_error_reply(self, call_id: int) -> bytes:
        """bind_nak 4 while no bind was accepted, else fault nca_s_proto_error (MS-RPCE 2.2.2.5, 3.3.3.5.7)."""
        if self._state == _AWAIT_BIND:
            return P.build_bind_nak(call_id, F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)
        return P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True)

    def _bad_request_length(self, frag_length: int, call_id: int) -> None:
        if frag_length < P.HEADER_SIZE:
            raise _Terminate(f"frag_length {frag_length} shorter than the 16-byte header")
        if frag_length > self._max_recv_frag:
            # Samba checks the transport's fixed limit, not the negotiated size, and omits DID_NOT_EXECUTE.
            raise _Terminate(f"request frag_length {frag_length} exceeds {self._max_recv_frag}",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR))
        raise _Terminate(f"request frag_length {frag_length} shorter than its 24-byte header",
                         P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))

    def _dispatch(self, buf: bytearray, pos: int, ptype: int, flags: int, frag_length: int, auth_length: int,
                  call_id: int, events: list[Event]) -> None:
        """Route one complete PDU by PTYPE and connection state (MS-RPCE 3.3.3 state machine)."""
        if ptype == F.PTYPE_BIND:
            self._on_bind(bytes(buf[pos:pos + frag_length]), False, frag_length, auth_length, call_id, events)
            return
        if self._state == _AWAIT_BIND:
            # Samba hands the first PDU to its bind handler whatever its type; the header check fails → nak 4.
            raise _Terminate(f"PDU type {ptype} before bind",
                             P.build_bind_nak(call_id, F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED))
        if ptype == F.PTYPE_REQUEST:
            if frag_length < P.REQUEST_HEADER_SIZE:
                self._bad_request_length(frag_length, call_id)
            if auth_length:
                self._on_auth_request(buf, pos, flags, frag_length, auth_length, call_id, events)
            else:
                self._on_request(buf, pos, flags, frag_length, call_id, events)
        elif ptype == F.PTYPE_AUTH3 and auth_length and self._security is not None:
            self._on_auth3(bytes(buf[pos:pos + frag_length]), frag_length, auth_length, call_id)
        elif ptype == F.PTYPE_ALTER_CONTEXT:
            self._on_bind(bytes(buf[pos:pos + frag_length]), True, frag_length, auth_length, call_id, events)
        elif ptype == F.PTYPE_CO_CANCEL:
            call = self._calls.get(call_id)
            if call is not None:
                call.cancel_count += 1
                events.append(CancelRequest(call_id))
        elif ptype == F.PTYPE_ORPHANED:
            self._on_orphaned(call_id, events)
        else:
            # shutdown is server → client only; bind_ack, response, fault, auth3 without auth, RTS and
            # connectionless types are all protocol errors from a client (MS-RPCE 3.3.3.5.7).
            raise _Terminate(f"unexpected PDU type {ptype} from client",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))

    # --- bind / alter_context -------------------------------------------------------------------------------

    def _on_bind(self, pdu: bytes, alter: bool, frag_length: int, auth_length: int, call_id: int,
                 events: list[Event]) -> None:
        """rpc_bind / rpc_alter_context (C706 12.6.4.3; MS-RPCE 3.3.1.5.3, 3.3.1.5.6; 3.3.1.5.2 security legs)."""
        def refuse(why: str, reason: int) -> _Terminate:
            if alter:
                return _Terminate(f"alter_context refused: {why}",
                                  P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
            return _Terminate(f"bind refused: {why}", P.build_bind_nak(call_id, reason))

        if not alter and self._state != _AWAIT_BIND:
            raise refuse("second bind on the connection", F.BIND_NAK_REASON_NOT_SPECIFIED)
        if call_id in self._pending_binds:
            # its answer would have no slot of its own (_held): the one pending would never be answered
            raise refuse(f"call_id {call_id} of a bind still awaiting its answer", F.BIND_NAK_REASON_NOT_SPECIFIED)
        trailer = None
        body_end = frag_length
        if auth_length:
            trailer = P.parse_sec_trailer(pdu, frag_length, auth_length)
            if trailer.auth_pad_length > frag_length - auth_length - P.SEC_TRAILER_SIZE - P.REQUEST_HEADER_SIZE:
                # Windows measures auth_pad_length from offset 24 even here (Samba raw_protocol *_auth_pad_*)
                raise refuse(f"auth_pad_length {trailer.auth_pad_length} does not fit",
                             F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)
            if not (alter and trailer.auth_context_id in self._auth):
                self._check_bind_auth(trailer, alter, call_id, refuse)
            elif trailer.auth_type == 0:
                # before the items are looked at (Samba raw_protocol test_spnego_change_auth_type3)
                raise _Terminate("alter_context with auth_type none on a security context",
                                 P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, did_not_execute=True))
            body_end = frag_length - auth_length - P.SEC_TRAILER_SIZE
        try:
            body = P.parse_bind_body(pdu, body_end)
        except P.PduError as exc:
            raise refuse(str(exc), F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED) from None
        if not body.items:
            # Windows answers an empty p_cont_list with bind_nak "not specified" (Samba raw_protocol, C706 12.6.4.3)
            raise refuse("no presentation context items", F.BIND_NAK_REASON_NOT_SPECIFIED)
        if any(not item.transfer_syntaxes for item in body.items):
            raise refuse("a context item has no transfer syntax", F.BIND_NAK_REASON_NOT_SPECIFIED)
        if not alter and sum(1 for item in body.items if _btfn_bits(item) is not None) > 1:
            # Windows naks a bind with two BTFN items, reason 0 (Samba raw_protocol test_no_auth_bind_time_twice)
            raise refuse("more than one bind time feature negotiation item", F.BIND_NAK_REASON_NOT_SPECIFIED)
        results = self._negotiate(body.items, alter, refuse)
        client_flags = pdu[3]
        ack_flags = _FIRST_LAST | (client_flags & F.PFC_SUPPORT_HEADER_SIGN)
        if client_flags & F.PFC_SUPPORT_HEADER_SIGN:
            self._negotiate_header_signing()
        if not alter:
            if self._conc_mpx and client_flags & F.PFC_CONC_MPX:
                self._ack_flags = _FIRST_LAST | F.PFC_CONC_MPX
            ack_flags |= self._ack_flags
            n = max(self._limits.min_frag, min(body.max_xmit_frag, body.max_recv_frag))
            n = min(n, self._limits.max_frag)
            self._max_xmit_frag = n - n % 8
        auth = None
        if trailer is not None:
            token = pdu[frag_length - auth_length:frag_length]
            auth = self._security_leg(trailer, token, alter, call_id, refuse)
        self._state = _BOUND
        request = BindRequest(call_id=call_id, is_alter_context=alter, max_xmit_frag=body.max_xmit_frag,
                              max_recv_frag=body.max_recv_frag, assoc_group_id=body.assoc_group_id,
                              items=body.items, auth_type=None if trailer is None else trailer.auth_type,
                              auth_level=None if trailer is None else trailer.auth_level)
        pending = self._pending_binds[call_id] = _PendingBind(request, results, ack_flags, auth)
        self._held.append(pending)
        events.append(request)

    def _check_bind_auth(self, trailer: P.SecTrailer, alter: bool, call_id: int, refuse) -> None:
        """Refuse an auth_type or auth_level we cannot negotiate (MS-RPCE 3.3.3.5.3; Samba dcesrv_auth_bind:
        an invalid level → reason 0, a valid level with an unknown type → reason 8)."""
        if self._security is None or not self._security.supports(trailer.auth_type):
            if alter:
                raise _Terminate(f"alter_context asks for authentication type {trailer.auth_type}",
                                 P.build_fault(call_id, F.RPC_S_UNKNOWN_AUTHN_SERVICE, did_not_execute=True))
            if F.RPC_C_AUTHN_LEVEL_CONNECT <= trailer.auth_level <= F.RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
                raise refuse(f"authentication type {trailer.auth_type} level {trailer.auth_level} not supported",
                             F.BIND_NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)
        if not F.RPC_C_AUTHN_LEVEL_CONNECT <= trailer.auth_level <= F.RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
            raise refuse(f"invalid authentication level {trailer.auth_level}", F.BIND_NAK_REASON_NOT_SPECIFIED)
        if trailer.auth_level == F.RPC_C_AUTHN_LEVEL_CALL:
            # Windows naks level call with "invalid checksum" (Samba raw_protocol test_spnego_call_bind); its own
            # clients upgrade call to packet (MS-RPCE 2.2.1.1.8), so only a hand-made bind asks for it.
            raise refuse("authentication level call is not negotiated", F.BIND_NAK_INVALID_CHECKSUM)

    def _negotiate_header_signing(self) -> None:
        """MS-RPCE 3.3.1.5.2.2: header signing is agreed per connection, by any bind or alter_context asking for it
        (the server supports it), and from then on protects the PDUs of every security context of the connection,
        those established before included (Samba raw_protocol test_spnego_multiple_auth_hdr_signing; Samba's
        dcesrv_auth_negotiate_hdr_signing does the same)."""
        self._header_sign = True
        for security in self._auth.values():
            security.header_sign = True

    def _security_leg(self, trailer: P.SecTrailer, token: bytes, alter: bool, call_id: int, refuse) -> tuple[int, int, int, bytes]:
        """Start or continue the security context named by auth_context_id; returns the bind_ack / alter_context_resp
        verifier (MS-RPCE 3.3.1.5.2, 3.3.1.5.4 security context multiplexing)."""
        security = self._auth.get(trailer.auth_context_id)
        if security is not None:
            # Samba raw_protocol test_spnego_change_auth_*: auth_type none → access denied, another type → sec
            # pkg error, another level or a finished context → access denied; all did-not-execute, disconnect.
            if security.auth_type != trailer.auth_type:
                raise _Terminate(f"alter_context changes auth_type of context {trailer.auth_context_id} from "
                                 f"{security.auth_type} to {trailer.auth_type}",
                                 P.build_fault(call_id, F.NCA_S_FAULT_SEC_PKG_ERROR, did_not_execute=True))
            if security.complete or security.failed or security.auth_level != trailer.auth_level:
                raise _Terminate(f"alter_context on security context {trailer.auth_context_id} refused",
                                 P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, did_not_execute=True))
        else:
            if len(self._auth) >= self._limits.max_security_contexts:
                raise _Terminate(f"more than {self._limits.max_security_contexts} security contexts",
                                 P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
            if not self._security.has_room():
                raise refuse(f"{self._security.max_contexts} security contexts are alive over every connection",
                             F.BIND_NAK_TEMPORARY_CONGESTION)
            try:
                security = self._security.new_context(trailer.auth_type, trailer.auth_level,
                                                      trailer.auth_context_id, self._header_sign)
            except AuthError as exc:    # the acceptor cannot start (an unusable keytab): a failed leg
                raise self._leg_failed(exc, alter, call_id, refuse) from None
            self._auth[trailer.auth_context_id] = security
            if not alter:
                # requests without a verifier run under the bind's context; contexts added by alter_context
                # only serve requests that name them (Samba raw_protocol test_spnego_multiple_auth_hdr_signing)
                self._default_auth = security
        try:
            out = security.step(token)
        except AuthError as exc:
            raise self._leg_failed(exc, alter, call_id, refuse) from None
        return (trailer.auth_type, trailer.auth_level, trailer.auth_context_id, out)

    @staticmethod
    def _leg_failed(exc: AuthError, alter: bool, call_id: int, refuse) -> "_Terminate":
        """A failed security leg: bind_nak 0, or in alter_context fault 0x721 (did not execute), closing."""
        if alter:
            return _Terminate(f"alter_context security leg failed: {exc}",
                              P.build_fault(call_id, F.NCA_S_FAULT_SEC_PKG_ERROR, did_not_execute=True))
        return refuse(f"security leg failed: {exc}", F.BIND_NAK_REASON_NOT_SPECIFIED)

    def _on_auth3(self, pdu: bytes, frag_length: int, auth_length: int, call_id: int) -> None:
        """rpc_auth3: the third leg, never answered (MS-RPCE 2.2.2.10, 3.3.1.5.2). A leg for no pending context
        makes every later request fail (Samba dcesrv_auth3 marks the connection's auth invalid)."""
        try:
            trailer = P.parse_sec_trailer(pdu, frag_length, auth_length)
            if trailer.auth_pad_length > frag_length - auth_length - P.SEC_TRAILER_SIZE - P.HEADER_SIZE - 4:
                raise P.PduError(f"auth_pad_length {trailer.auth_pad_length} does not fit")
        except P.PduError as exc:
            # Windows answers an undecodable auth3 with nca_s_fault_remote_no_memory (Samba dcesrv_auth_auth3)
            raise _Terminate(f"rpc_auth3: {exc}", P.build_fault(call_id, F.NCA_S_FAULT_REMOTE_NO_MEMORY,
                                                                did_not_execute=True)) from None
        security = self._auth.get(trailer.auth_context_id)
        if security is not None and security.complete:
            # a third leg for an established context (Samba raw_protocol test_spnego_connect_reauth_auth3)
            raise _Terminate(f"rpc_auth3 for established security context {trailer.auth_context_id}",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
        if security is None or security.failed or security.auth_type != trailer.auth_type \
                or security.auth_level != trailer.auth_level:
            self._auth_invalid = True
            return
        try:
            out = security.step(pdu[frag_length - auth_length:frag_length])
        except AuthError:
            return                          # the context stays failed: its first request is refused
        if out or not security.complete:
            security.failed = True          # a three-leg exchange must end with rpc_auth3

    def _negotiate(self, items: tuple[ContextItem, ...], alter: bool, refuse) -> list[tuple[int, int, SyntaxId | None]]:
        """Per-item results in item order; accepts at most one presentation context per PDU (MS-RPCE 3.3.1.5.6)."""
        results: list[tuple[int, int, SyntaxId | None]] = []
        candidates: list[tuple[int, _PresentationContext]] = []
        for index, item in enumerate(items):
            bits = None if alter else _btfn_bits(item)     # alter_context items are negotiated like any other
            if bits is not None:
                self._features = bits & _SUPPORTED_BTFN
                results.append((F.RESULT_NEGOTIATE_ACK, self._features, None))
                continue
            existing = self._contexts.get(item.context_id)
            if existing is not None and existing.abstract_syntax != item.abstract_syntax:
                raise refuse(f"p_cont_id {item.context_id} already names another abstract syntax",
                             F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)
            interface = self._lookup(item.abstract_syntax)
            if interface is None:
                results.append((F.RESULT_PROVIDER_REJECTION, F.ABSTRACT_SYNTAX_NOT_SUPPORTED, None))
                continue
            syntax = self._choose_transfer_syntax(item.transfer_syntaxes, interface)
            if syntax is None:
                results.append((F.RESULT_PROVIDER_REJECTION, F.PROPOSED_TRANSFER_SYNTAXES_NOT_SUPPORTED, None))
                continue
            if existing is not None and existing.transfer_syntax != syntax:
                raise refuse(f"p_cont_id {item.context_id} already negotiated another transfer syntax",
                             F.BIND_NAK_PROTOCOL_VERSION_NOT_SUPPORTED)
            ndr64 = (syntax[0], syntax[1]) == NDR64
            candidates.append((index, _PresentationContext(item.abstract_syntax, syntax, interface, ndr64)))
            results.append((F.RESULT_PROVIDER_REJECTION, F.PROPOSED_TRANSFER_SYNTAXES_NOT_SUPPORTED, None))
        if candidates:
            winner = next((c for c in candidates if c[1].ndr64 == self._prefer_ndr64), candidates[0])
            index, context = winner
            context_id = items[index].context_id
            if context_id not in self._contexts and len(self._contexts) >= self._limits.max_presentation_contexts:
                results[index] = (F.RESULT_PROVIDER_REJECTION, F.LOCAL_LIMIT_EXCEEDED, None)
            else:
                self._contexts[context_id] = context
                results[index] = (F.RESULT_ACCEPTANCE, 0, context.transfer_syntax)
        return results

    def _lookup(self, abstract: SyntaxId) -> Interface | None:
        """Interface for (uuid, major, minor): same UUID and major, client minor ≤ ours (C706 12.6.3.1 / 2.7)."""
        registry = self._registry
        if not isinstance(registry, Mapping):
            return registry(abstract)
        found = registry.get(abstract)
        if found is not None:
            return found
        if_uuid, major, minor = abstract
        best = None
        for (k_uuid, k_major, k_minor), interface in registry.items():
            if k_uuid == if_uuid and k_major == major and k_minor >= minor:
                if best is None or k_minor > best[0]:
                    best = (k_minor, interface)
        return None if best is None else best[1]

    def _choose_transfer_syntax(self, offered: tuple[SyntaxId, ...], interface: Interface) -> SyntaxId | None:
        """The preferred syntax if offered and supported, else the first supported one offered (MS-RPCE 3.3.1.5.6)."""
        supported = interface.transfer_syntaxes
        usable = [s for s in offered if s[2] == 0 and (s[0], s[1]) in supported]
        if not usable:
            return None
        for syntax in usable:
            if ((syntax[0], syntax[1]) == NDR64) == self._prefer_ndr64:
                return syntax
        return usable[0]

    def accept_bind(self, request: BindRequest, assoc_group_id: int, secondary_address: str) -> None:
        """Queue the bind_ack (secondary address = our port) or alter_context_resp (empty address) (C706 12.6.4.4)."""
        pending = self._pending_binds.pop(request.call_id, None)
        if pending is None:
            return
        # Answered even when a later PDU of the same read ended the connection: the peer reads this bind's
        # bind_ack before that PDU's fault.
        if request.is_alter_context:
            assoc_group_id = self._assoc_group_id or 0
            secondary_address = ""
        else:
            self._assoc_group_id = assoc_group_id
        self._answer_bind(pending, P.build_bind_ack(
            request.call_id, alter_context=request.is_alter_context, max_xmit_frag=self._max_xmit_frag,
            max_recv_frag=self._max_xmit_frag, assoc_group_id=assoc_group_id, secondary_address=secondary_address,
            results=pending.results, flags=pending.flags, auth=pending.auth))

    def reject_bind(self, request: BindRequest, reason: int) -> None:
        """Queue a bind_nak with ``reason`` (alter_context: fault nca_s_proto_error) and close (C706 12.6.4.5)."""
        pending = self._pending_binds.pop(request.call_id, None)
        if pending is None:
            return
        held = self._held                   # nothing goes out after the refusal that ends the connection
        at = next((i for i, item in enumerate(held) if item is pending), len(held))
        for later in held[at + 1:]:
            if type(later) is not bytes:    # a bind behind it is never answered
                self._pending_binds.pop(later.request.call_id, None)
        del held[at + 1:]
        if request.is_alter_context:
            self._answer_bind(pending, P.build_fault(request.call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
        else:
            self._answer_bind(pending, P.build_bind_nak(request.call_id, reason))
        self._close()

    def _answer_bind(self, pending: _PendingBind, reply: bytes) -> None:
        """Fill a pending bind's slot and send what is held up to the next bind still pending."""
        pending.reply = reply
        held = self._held
        while held:
            item = held[0]
            pdu = item if type(item) is bytes else item.reply
            if pdu is None:
                break
            del held[0]
            self._out += pdu
            self._pdus += 1

    # --- requests -----------------------------------------------------------------------------------------------

    def _on_auth_request(self, buf: bytearray, pos: int, flags: int, frag_length: int, auth_length: int,
                         call_id: int, events: list[Event]) -> None:
        """A request fragment with a sec_trailer: find its security context, verify / unseal it (MS-RPCE 2.2.2.11,
        3.3.1.5.2.2); nothing of a fragment that fails reaches a handler, and the connection is closed."""
        context_id = _REQUEST_UNPACK(buf, pos + 16)[1]
        stray = None
        if self._ack_flags & F.PFC_CONC_MPX and not flags & F.PFC_FIRST_FRAG and self._reassembly is None:
            # multiplexed: a stray later fragment is judged like a new call first (Samba raw_protocol
            # test_ntlmssp_auth_MPX_middle_*): unknown p_cont_id, then its security context, then the sequence
            try:
                self._check_sequence(flags, call_id, context_id)
            except _Terminate as exc:
                stray = exc
            if stray is not None and context_id not in self._contexts:
                self._queue(P.build_fault(call_id, F.NCA_S_UNK_IF, did_not_execute=True))
                return
        elif self._check_sequence(flags, call_id, context_id):
            self._on_next_fragment(b"", flags, call_id, 0, None, events)     # a tail we drop silently
            return

        def deny(why: str, status: int = F.RPC_S_ACCESS_DENIED) -> _Terminate:
            return _Terminate(f"call {call_id}: {why}", P.build_fault(call_id, status, context_id=context_id))

        pdu = bytes(buf[pos:pos + frag_length])
        trailer = P.parse_sec_trailer(pdu, frag_length, auth_length)
        call = self._reassembly
        if call is not None and call.call_id == call_id:
            # A later fragment is verified with its call's security context; the trailer's type, level and
            # context id, like p_cont_id and opnum, are not looked at (Samba raw_protocol *_first1_lastSame111).
            security = call.security
            if security is None or not call.signed:
                raise _Terminate(f"call {call_id}: verifier on a fragment of an unverified call",
                                 P.build_fault(call_id, F.NCA_S_PROTO_ERROR, context_id=call.context_id))
            context_id = call.context_id
        else:
            if trailer.auth_type == 0:
                raise deny("auth_type none in a request's sec_trailer")
            security = self._auth.get(trailer.auth_context_id)
            if security is None or self._auth_invalid:
                raise deny(f"no security context {trailer.auth_context_id} on this connection")
            if not security.complete and not security.failed:
                raise _Terminate(f"call {call_id}: security context {trailer.auth_context_id} is still being "
                                 "established", _unfinished_fault(call_id))
            if security.failed:
                raise deny(f"security context {trailer.auth_context_id} failed")
            if trailer.auth_type != security.auth_type or trailer.auth_level != security.auth_level:
                raise deny(f"sec_trailer type {trailer.auth_type} level {trailer.auth_level} does not match "
                           f"security context {trailer.auth_context_id}")
        body_start = P.REQUEST_HEADER_SIZE + (16 if flags & F.PFC_OBJECT_UUID else 0)
        try:
            stub = unprotect_fragment(pdu, body_start, frag_length, auth_length, trailer, security)
        except P.PduError as exc:
            raise _Terminate(f"call {call_id}: {exc}", P.build_fault(call_id, F.NCA_S_PROTO_ERROR,
                                                                     context_id=context_id)) from None
        except AuthError as exc:
            raise deny(str(exc), F.NCA_S_FAULT_SEC_PKG_ERROR) from None
        if call is not None and call.call_id == call_id and flags & F.PFC_FIRST_FRAG:
            raise _Terminate(f"call {call_id}: a second first fragment",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, context_id=context_id))
        if stray is not None:
            raise stray
        self._on_request(buf, pos, flags, frag_length, call_id, events, stub, security)

    def _on_request(self, buf: bytearray, pos: int, flags: int, frag_length: int, call_id: int,
                    events: list[Event], stub: bytes | None = None, security: SecurityContext | None = None) -> None:
        """rpc_request fragment (C706 12.6.4.9; MS-RPCE 3.3.3.5.2–3.3.3.5.8); ``stub`` is the verified plain stub
        of an authenticated fragment (None: the bytes after the header)."""
        if security is None and (self._auth or self._auth_invalid):
            if self._check_sequence(flags, call_id, _REQUEST_UNPACK(buf, pos + 16)[1]):
                self._on_next_fragment(b"", flags, call_id, 0, None, events)
                return
            call = self._reassembly
            if call is not None and call.call_id == call_id and call.signed:
                raise _Terminate(f"call {call_id}: fragment without the verifier its first fragment had",
                                 P.build_fault(call_id, F.NCA_S_PROTO_ERROR, context_id=call.context_id))
            security = self._unverified_context(buf, pos, call_id)
        alloc_hint, context_id, opnum = _REQUEST_UNPACK(buf, pos + 16)
        stub_start = pos + P.REQUEST_HEADER_SIZE
        object_uuid = None
        if flags & F.PFC_OBJECT_UUID:
            if frag_length < P.REQUEST_HEADER_SIZE + 16:
                raise _Terminate("request with PFC_OBJECT_UUID too short for the object UUID",
                                 P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
            object_uuid = uuid.UUID(bytes_le=bytes(buf[stub_start:stub_start + 16]))
            stub_start += 16
        stub_given = stub is not None
        if stub is None:
            stub = bytes(buf[stub_start:pos + frag_length])
        if not flags & F.PFC_FIRST_FRAG:
            self._on_next_fragment(stub, flags, call_id, alloc_hint, security, events)
            return
        call = self._reassembly
        if call is not None:
            self._check_sequence(flags, call_id)        # another call's first fragment: a protocol error
            # The same call's first fragment again (MS-RPCE 3.3.3.5.2, 3.3.3.5.7): replacing the call would run it
            # twice, or keep its bytes out of the shared allowance for good.
            raise _Terminate(f"call {call_id}: a second first fragment",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, context_id=call.context_id))
        if flags & F.PFC_PENDING_CANCEL:
            raise _Terminate(f"call {call_id}: PFC_PENDING_CANCEL on the first fragment",
                             P.build_fault(call_id, F.RPC_S_NO_CALL_ACTIVE, did_not_execute=True))
        if call_id in self._calls:
            raise _Terminate(f"call_id {call_id} reused while that call is outstanding",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True))
        if call_id > self._current_call_id:
            self._current_call_id = call_id
        last = flags & F.PFC_LAST_FRAG
        context = self._contexts.get(context_id)
        status = 0
        if context is None:
            status, context_id = F.NCA_S_UNK_IF, 0
        elif opnum not in context.interface.operations:
            status = F.NCA_S_OP_RNG_ERROR
        elif len(self._calls) >= self._limits.max_calls_in_flight:
            status = F.NCA_S_SERVER_TOO_BUSY
        if status:
            self._queue(P.build_fault(call_id, status, context_id=context_id, did_not_execute=True))
            self._discard_call_id = None if last else call_id
            return
        if not last and alloc_hint > self._limits.max_request_size:
            raise _Terminate(f"call {call_id}: alloc_hint {alloc_hint} exceeds {self._limits.max_request_size}",
                             P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, context_id=context_id))
        maybe = bool(flags & F.PFC_MAYBE)
        if last:
            if security is None:                    # the common, unauthenticated case
                self._calls[call_id] = _Call(context_id, maybe)
                events.append(CallRequest(call_id, context_id, opnum, object_uuid, stub, context.interface,
                                          context.ndr64))
                return
            signed = stub_given and security.verifies_requests
            self._calls[call_id] = _Call(context_id, maybe, 0, security, signed)
            events.append(_call_request(call_id, context_id, opnum, object_uuid, stub, context, security))
            return
        if self._budget is not None and not self._budget.take(len(stub)):
            self._refuse_for_budget(call_id, context_id, last)
            return
        self._reassembly = _Reassembly(call_id, context_id, opnum, object_uuid, context, maybe,
                                       bytearray(stub), 1, security, stub_given)

    def receive_plain_request(self, data: bytes) -> CallRequest | None:
        """receive_data for a read that is exactly one whole request PDU of the common kind (_plain_call) on a
        connection holding no partial PDU: its CallRequest, or None — having consumed nothing — for anything else,
        which the caller then feeds to receive_data."""
        if self._state != _BOUND or self._buf or self._auth or self._auth_invalid or len(data) < P.HEADER_SIZE:
            return None
        vers, minor, ptype, flags, drep0, drep1, frag_length, auth_length, call_id = _HEADER_UNPACK(data, 0)
        if ptype or vers != 5 or minor or drep0 != 0x10 or drep1 or auth_length or flags != _FIRST_LAST \
                or frag_length != len(data) or frag_length > self._max_recv_frag \
                or frag_length < P.REQUEST_HEADER_SIZE:
            return None
        return self._plain_call(data, 0, frag_length, call_id)

    def _on_plain_request(self, buf: bytearray, pos: int, frag_length: int, call_id: int,
                          events: list[Event]) -> None:
        """The common request (_plain_call), else _on_request."""
        request = self._plain_call(buf, pos, frag_length, call_id)
        if request is None:
            self._on_request(buf, pos, _FIRST_LAST, frag_length, call_id, events)
        else:
            events.append(request)

    def _plain_call(self, buf: bytes | bytearray, pos: int, frag_length: int, call_id: int) -> CallRequest | None:
        """The common request, checked and dispatched as _on_request would: a whole call in one fragment (flags
        PFC_FIRST_FRAG | PFC_LAST_FRAG only) on a connection without security contexts, no call being reassembled,
        a new call_id, a known p_cont_id and opnum, room for one more call. None (nothing changed) otherwise."""
        alloc_hint, context_id, opnum = _REQUEST_UNPACK(buf, pos + 16)
        context = self._contexts.get(context_id)
        calls = self._calls
        if context is None or opnum not in context.interface.operations or call_id in calls \
                or self._reassembly is not None or len(calls) >= self._limits.max_calls_in_flight:
            return None
        if call_id > self._current_call_id:
            self._current_call_id = call_id
        calls[call_id] = _Call(context_id, False)
        return _new_tuple(CallRequest, (call_id, context_id, opnum, None,
                                        bytes(buf[pos + P.REQUEST_HEADER_SIZE:pos + frag_length]),
                                        context.interface, context.ndr64, ANONYMOUS, RPC_C_AUTHN_LEVEL_NONE))

    def _check_sequence(self, flags: int, call_id: int, context_id: int = 0) -> bool:
        """Fragment-sequence errors, found before any security check (Samba raw_protocol *_multi_auth_*: the
        auth values of an out-of-sequence fragment are never looked at). True: a tail fragment to drop silently."""
        call = self._reassembly
        if call is not None and call.call_id == call_id:
            return False
        if flags & F.PFC_FIRST_FRAG:
            if call is not None:
                # With PFC_CONC_MPX the new call gets the fault (context 0); without it the unfinished one.
                faulted, context = (call_id, 0) if self._ack_flags & F.PFC_CONC_MPX else (call.call_id,
                                                                                         call.context_id)
                raise _Terminate(f"first fragment of call {call_id} while call {call.call_id} is still being "
                                 "reassembled", P.build_fault(faulted, F.NCA_S_PROTO_ERROR, context_id=context))
            return False
        if call is None:
            if call_id == self._discard_call_id or \
                    self._current_call_id - OLD_CALL_WINDOW < call_id <= self._current_call_id:
                return True
            mpx = self._ack_flags & F.PFC_CONC_MPX
            raise _Terminate(f"fragment of call {call_id} that is not being reassembled",
                             P.build_fault(call_id, F.NCA_S_PROTO_ERROR, context_id=context_id if mpx else 0))
        faulted, context = (call_id, 0) if self._ack_flags & F.PFC_CONC_MPX else (call.call_id, call.context_id)
        raise _Terminate(f"fragment of call {call_id} while call {call.call_id} is being reassembled",
                         P.build_fault(faulted, F.NCA_S_PROTO_ERROR, context_id=context))

    def _unverified_context(self, buf: bytearray, pos: int, call_id: int) -> SecurityContext | None:
        """The security context of a request without a verifier on a connection with security contexts: the bind's,
        allowed at levels connect and packet only (MS-RPCE 3.3.1.5.2.2: nothing of the PDU is protected there);
        None (unauthenticated) when the bind itself was not authenticated."""
        security = self._default_auth
        if security is None and not self._auth_invalid:
            return None
        if security is not None and not security.complete and not security.failed and not self._auth_invalid:
            raise _Terminate(f"call {call_id}: request before the bind's security context is established",
                             _unfinished_fault(call_id))
        context_id = _REQUEST_UNPACK(buf, pos + 16)[1]
        if security is None or self._auth_invalid or not security.complete or security.failed \
                or security.protects_pdus:
            why = "no established security context" if security is None or not security.complete \
                else f"level {security.auth_level} requires a verifier"
            raise _Terminate(f"call {call_id}: request without a verifier: {why}",
                             P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, context_id=context_id))
        return security

    def _on_next_fragment(self, stub: bytes, flags: int, call_id: int, alloc_hint: int,
                          security: SecurityContext | None, events: list[Event]) -> None:
        """A request fragment without PFC_FIRST_FRAG (C706 12.6.3.7; MS-RPCE 3.3.3.5.6)."""
        last = flags & F.PFC_LAST_FRAG
        call = self._reassembly
        if call is None or call.call_id != call_id:
            if call is None and call_id == self._discard_call_id:
                if last:
                    self._discard_call_id = None
                return
            if call is None and self._current_call_id - OLD_CALL_WINDOW < call_id <= self._current_call_id:
                return
            # Without PFC_CONC_MPX the fault goes to the call being reassembled, if any (Samba, "to get the
            # call_id and context_id right"), without DID_NOT_EXECUTE.
            faulted = call_id if call is None else call.call_id
            context = 0 if call is None else call.context_id
            raise _Terminate(f"fragment of call {call_id} that is not being reassembled",
                             P.build_fault(faulted, F.NCA_S_PROTO_ERROR, context_id=context))
        # p_cont_id and opnum of later fragments are ignored: the first fragment's count (Samba does the same).
        if security is not call.security:
            raise _Terminate(f"call {call_id}: fragment under another security context",
                             P.build_fault(call_id, F.NCA_S_FAULT_SEC_PKG_ERROR, context_id=call.context_id))
        call.fragments += 1
        # alloc_hint bounds the whole request, not what is left of it: impacket repeats the first fragment's total
        # in every fragment, and Samba (dcesrv_process_ncacn_packet) checks max(held + fragment, alloc_hint).
        if alloc_hint > self._limits.max_request_size:
            raise _Terminate(f"call {call_id}: alloc_hint {alloc_hint} exceeds {self._limits.max_request_size}",
                             P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, context_id=call.context_id))
        if len(call.stub) + len(stub) > self._limits.max_request_size:
            raise _Terminate(f"call {call_id}: request exceeds {self._limits.max_request_size} bytes",
                             P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, context_id=call.context_id))
        if call.fragments > self._limits.max_request_fragments:
            raise _Terminate(f"call {call_id}: more than {self._limits.max_request_fragments} fragments",
                             P.build_fault(call_id, F.RPC_S_ACCESS_DENIED, context_id=call.context_id))
        if self._budget is not None and not self._budget.take(len(stub)):
            self._drop_reassembly()
            self._refuse_for_budget(call_id, call.context_id, last)
            return
        call.stub += stub
        if not last:
            return
        self._drop_reassembly()
        self._calls[call_id] = _Call(call.context_id, call.maybe, security=security,
                                     signed=security is not None and security.verifies_requests and call.signed)
        events.append(_call_request(call_id, call.context_id, call.opnum, call.object_uuid, bytes(call.stub),
                                    call.context, security))

    def _refuse_for_budget(self, call_id: int, context_id: int, last: int) -> None:
        """The shared allowance is spent: fault this call as one the server has no room for (did not execute) and
        drop its later fragments (MS-RPCE 3.3.3.5.6); the connection and its other calls go on."""
        self._queue(P.build_fault(call_id, F.NCA_S_SERVER_TOO_BUSY, context_id=context_id, did_not_execute=True))
        self._discard_call_id = None if last else call_id

    def _drop_reassembly(self) -> None:
        """Forget the call being reassembled and give its bytes back to the shared allowance."""
        call = self._reassembly
        if call is not None and self._budget is not None:
            self._budget.give(len(call.stub))
        self._reassembly = None

    def _on_orphaned(self, call_id: int, events: list[Event]) -> None:
        """orphaned PDU (C706 12.6.4.8; MS-RPCE 3.3.1.5.10): abandon a dispatched call, never answer it. One for a
        call still being reassembled is ignored: its last fragment is answered (Windows, Samba raw_protocol)."""
        if self._reassembly is not None and self._reassembly.call_id == call_id:
            return
        if self._calls.pop(call_id, None) is not None:
            events.append(CallOrphaned(call_id))

    # --- output -------------------------------------------------------------------------------------------------

    def send_response(self, call_id: int, stub: bytes) -> None:
        """Queue the response fragments of a dispatched call; dropped if the call is unknown, orphaned or maybe."""
        call = self._calls.pop(call_id, None)
        if call is None or call.maybe or self._state == _CLOSED:
            return
        security = call.security
        if security is not None and (call.signed or security.protects_pdus):
            self._pdus += append_protected_response(self._out, call_id, call.context_id, stub, self._max_xmit_frag,
                                                    security)
            return
        self._pdus += P.append_response(self._out, call_id, call.context_id, stub, self._max_xmit_frag)

    def response_pdu(self, call_id: int, stub: bytes) -> bytes | None:
        """send_response for the common answer — a call without a security context whose stub fits one fragment,
        with nothing queued before it — handed back as the PDU to write instead of queued; None (nothing changed)
        for anything else, which send_response then queues."""
        call = self._calls.get(call_id)
        if call is None or call.security is not None or call.maybe or self._out or self._state == _CLOSED:
            return None
        total = len(stub)
        if total > P.response_chunk_size(self._max_xmit_frag):
            return None
        del self._calls[call_id]
        return P.one_fragment_response_header(call_id, call.context_id, total) + stub

    def send_fault(self, call_id: int, status: int, *, did_not_execute: bool = False) -> None:
        """Queue a fault for a dispatched call (C706 12.6.4.7); statuses forbidden by MS-RPCE 3.3.3.5.1 → unspec."""
        call = self._calls.pop(call_id, None)
        if call is None or call.maybe or self._state == _CLOSED:
            return
        if status in F.FORBIDDEN_FAULT_STATUSES:
            status = F.NCA_S_FAULT_UNSPEC
        cancels = call.cancel_count if status == F.NCA_S_FAULT_CANCEL else 0
        self._queue(P.build_fault(call_id, status, context_id=call.context_id, cancel_count=cancels,
                                  did_not_execute=did_not_execute))

    def send_shutdown(self) -> None:
        """Queue a shutdown PDU asking the client to close the connection (MS-RPCE 3.3.3.4.2; C706 12.6.4.11)."""
        if self._state != _CLOSED:
            self._queue(P.build_header_only(F.PTYPE_SHUTDOWN, 0))

    def data_to_send(self) -> bytes:
        """Everything queued for the peer since the last call."""
        return self.take_output()[0]

    def take_output(self) -> tuple[bytes, int]:
        """data_to_send() and the number of PDUs in it."""
        if not self._out:
            return b"", 0
        out = bytes(self._out)
        pdus = self._pdus
        self._out.clear()
        self._pdus = 0
        return out, pdus

    def _queue(self, pdu: bytes) -> None:
        """Queue one PDU for the peer (behind the answer of a bind still pending, if any)."""
        if self._held:
            self._held.append(pdu)
            return
        self._out += pdu
        self._pdus += 1

    def calls_in_flight(self) -> int:
        """Dispatched calls not answered yet."""
        return len(self._calls)

    def close(self) -> None:
        """The transport is gone (reset, aborted, or closed after ConnectionTerminated): drop what is held."""
        self._held.clear()
        self._pending_binds.clear()
        self._close()

    def _close(self) -> None:
        self._state = _CLOSED
        self._buf = bytearray()
        self._drop_reassembly()
        if self._auth:
            self._security.release(len(self._auth))
            self._auth = {}
        self._calls.clear()


def _unfinished_fault(call_id: int) -> bytes:
    """A request on a security context whose legs are not done: nca_s_proto_error, did not execute, p_cont_id 0
    (Samba raw_protocol test_spnego_unfinished_request; Samba's dcesrv allow_request)."""
    return P.build_fault(call_id, F.NCA_S_PROTO_ERROR, did_not_execute=True)


def _call_request(call_id: int, context_id: int, opnum: int, object_uuid: uuid.UUID | None, stub: bytes,
                  context: _PresentationContext, security: SecurityContext | None) -> CallRequest:
    """The CallRequest event, with the caller's identity and level when the call is authenticated."""
    if security is None:
        return CallRequest(call_id, context_id, opnum, object_uuid, stub, context.interface, context.ndr64)
    return CallRequest(call_id, context_id, opnum, object_uuid, stub, context.interface, context.ndr64,
                       security.principal, security.auth_level)


def _btfn_bits(item: ContextItem) -> int | None:
    """Bitmask of a bind time feature negotiation item: first transfer syntax 6CB71C2C-9812-4540-… v1.0 (MS-RPCE
    3.3.1.5.3; Samba looks at the first transfer syntax only)."""
    if not item.transfer_syntaxes:
        return None
    syntax = item.transfer_syntaxes[0]
    if syntax[1] != 1 or syntax[2] != 0:
        return None
    return F.btfn_bitmask(syntax[0])
