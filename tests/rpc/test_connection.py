"""Connection: bind/alter_context negotiation, calls, fragmentation, cancel/orphan (MS-RPCE 3.3.1.5; C706 12.6)."""
from __future__ import annotations

import struct
import uuid

import pytest
from impacket.dcerpc.v5 import rpcrt, transport
from impacket.uuid import uuidtup_to_bin

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.connection import Connection
from qm2qm.rpc.events import (
    BindRequest, CallOrphaned, CallRequest, CancelRequest, ConnectionTerminated, ContextItem,
)
from qm2qm.rpc.interface import NDR20, NDR64, Interface, Operation
from qm2qm.rpc.limits import Limits

IF_UUID = uuid.UUID("1088a980-eae5-11d0-8d9b-00a02453c337")
IFACE = (IF_UUID, 1, 0)
OTHER = (uuid.UUID("12345678-1234-abcd-ef00-0123456789ab"), 1, 0)
NDR = (NDR20[0], 2, 0)
N64 = (NDR64[0], 1, 0)
BTFN3 = (uuid.UUID("6cb71c2c-9812-4540-0300-000000000000"), 1, 0)
BOGUS_SYNTAX = (uuid.UUID("00000000-1111-2222-3333-444444444444"), 1, 0)


def make_interface(syntax_id=IFACE, opnums=11, transfer_syntaxes=(NDR20, NDR64)) -> Interface:
    ops = {n: Operation(n, f"op{n}", lambda ctx, stub: stub) for n in range(opnums)}
    return Interface(syntax_id[0], (syntax_id[1], syntax_id[2]), "test", ops,
                     transfer_syntaxes=transfer_syntaxes)


def new_connection(**kwargs) -> Connection:
    iface = make_interface()
    return Connection({IFACE: iface}, **kwargs)


def split_pdus(data: bytes) -> list[bytes]:
    pdus, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<H", data, pos + 8)
        pdus.append(data[pos:pos + length])
        pos += length
    return pdus


def bind(conn: Connection, items=None, *, group=0x1234, call_id=1, **kwargs) -> rpcrt.MSRPCBindAck:
    """Send a bind, accept it, return the parsed bind_ack."""
    items = items or (ContextItem(0, IFACE, (NDR,)),)
    events = conn.receive_data(P.build_bind(call_id, items, **kwargs))
    assert len(events) == 1 and isinstance(events[0], BindRequest), events
    conn.accept_bind(events[0], group, "2105")
    return rpcrt.MSRPCBindAck(conn.data_to_send())


def results(ack: rpcrt.MSRPCBindAck) -> list[tuple[int, int, bytes]]:
    return [(i["Result"], i["Reason"], i["TransferSyntax"]) for i in ack.getCtxItems()]


def fault_of(raw: bytes) -> tuple[int, int, int, int]:
    """(call_id, status, flags, p_cont_id) of a fault PDU."""
    resp = rpcrt.MSRPCRespHeader(raw)
    assert resp["type"] == rpcrt.MSRPC_FAULT, resp["type"]
    return resp["call_id"], struct.unpack_from("<I", raw, 24)[0], resp["flags"], resp["ctx_id"]


# --- bind ---------------------------------------------------------------------------------------------------

def test_bind_accepts_ndr_and_reports_group_and_port():
    conn = new_connection()
    ack = bind(conn, group=0xCAFE)
    assert ack["type"] == rpcrt.MSRPC_BINDACK and ack["call_id"] == 1
    assert ack["assoc_group"] == 0xCAFE and ack["SecondaryAddr"] == "2105"
    assert results(ack) == [(0, 0, P.encode_syntax(NDR))]
    assert conn.assoc_group_id == 0xCAFE
    assert conn.context_ids()[0][1] is False


def test_windows_64bit_bind_prefers_ndr64_and_answers_btfn():
    conn = new_connection()
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (N64,)), ContextItem(2, IFACE, (BTFN3,)))
    ack = bind(conn, items)
    assert results(ack) == [(2, 2, bytes(20)), (0, 0, P.encode_syntax(N64)), (3, F.BTFN_SECURITY_CONTEXT_MULTIPLEXING | F.BTFN_KEEP_CONNECTION_ON_ORPHAN,
                                                                              bytes(20))]
    assert conn.bind_time_features == F.BTFN_SECURITY_CONTEXT_MULTIPLEXING | F.BTFN_KEEP_CONNECTION_ON_ORPHAN
    assert list(conn.context_ids()) == [1]
    events = conn.receive_data(P.build_request(2, 1, 4, b"x"))
    assert events[0].ndr64 is True and events[0].context_id == 1


def test_ndr_preferred_when_configured():
    conn = new_connection(prefer_ndr64=False)
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (N64,)))
    assert results(bind(conn, items)) == [(0, 0, P.encode_syntax(NDR)), (2, 2, bytes(20))]


def test_item_with_both_syntaxes_gets_ndr64():
    conn = new_connection()
    assert results(bind(conn, (ContextItem(5, IFACE, (NDR, N64)),))) == [(0, 0, P.encode_syntax(N64))]


def test_interface_without_ndr64_gets_ndr():
    iface = make_interface(transfer_syntaxes=(NDR20,))
    conn = Connection({IFACE: iface})
    items = (ContextItem(0, IFACE, (N64,)), ContextItem(1, IFACE, (NDR,)))
    assert results(bind(conn, items)) == [(2, 2, bytes(20)), (0, 0, P.encode_syntax(NDR))]


def test_unknown_interface_and_unsupported_syntax_are_rejected_per_item():
    conn = new_connection()
    items = (ContextItem(0, OTHER, (NDR,)), ContextItem(1, IFACE, (BOGUS_SYNTAX,)), ContextItem(2, IFACE, (NDR,)))
    assert results(bind(conn, items)) == [(2, 1, bytes(20)), (2, 2, bytes(20)), (0, 0, P.encode_syntax(NDR))]


def test_bind_with_all_items_rejected_still_gets_bind_ack_and_connection_stays():
    conn = new_connection()
    ack = bind(conn, (ContextItem(0, OTHER, (NDR,)),))
    assert ack["type"] == rpcrt.MSRPC_BINDACK and results(ack) == [(2, 1, bytes(20))]
    assert not conn.closed
    conn.receive_data(P.build_request(2, 0, 0, b""))
    assert fault_of(conn.data_to_send())[1] == F.NCA_S_UNK_IF


def test_only_one_new_context_per_bind():
    other = make_interface(OTHER)
    conn = Connection({IFACE: make_interface(), OTHER: other})
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, OTHER, (NDR,)))
    assert results(bind(conn, items)) == [(0, 0, P.encode_syntax(NDR)), (2, 2, bytes(20))]


def test_client_minor_version_lower_than_ours_is_accepted_higher_is_not():
    iface = make_interface((IF_UUID, 1, 2))
    conn = Connection({(IF_UUID, 1, 2): iface})
    assert results(bind(conn, (ContextItem(0, (IF_UUID, 1, 1), (NDR,)),)))[0][0] == 0
    conn = Connection({(IF_UUID, 1, 2): iface})
    assert results(bind(conn, (ContextItem(0, (IF_UUID, 1, 3), (NDR,)),)))[0][:2] == (2, 1)
    conn = Connection({(IF_UUID, 1, 2): iface})
    assert results(bind(conn, (ContextItem(0, (IF_UUID, 2, 0), (NDR,)),)))[0][:2] == (2, 1)


def test_callable_registry():
    iface = make_interface()
    seen = []

    def lookup(syntax_id):
        seen.append(syntax_id)
        return iface if syntax_id == IFACE else None

    conn = Connection(lookup)
    assert results(bind(conn, (ContextItem(0, OTHER, (NDR,)), ContextItem(1, IFACE, (NDR,)))))[1][0] == 0
    assert seen == [OTHER, IFACE]


@pytest.mark.parametrize("xmit, recv, expected", [
    (5840, 5840, 5840), (4280, 5840, 4280), (65535, 65535, 5840), (1024, 1024, 2048), (4283, 9000, 4280)])
def test_fragment_size_negotiation(xmit, recv, expected):
    conn = new_connection()
    ack = bind(conn, max_xmit_frag=xmit, max_recv_frag=recv)
    assert (ack["max_tfrag"], ack["max_rfrag"]) == (expected, expected)
    assert conn.max_xmit_frag == expected


@pytest.mark.parametrize("conc_mpx, offered, echoed", [(False, True, False), (True, True, True), (True, False, False)])
def test_conc_mpx_is_echoed_only_when_enabled_and_offered(conc_mpx, offered, echoed):
    conn = new_connection(conc_mpx=conc_mpx)
    flags = F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | (F.PFC_CONC_MPX if offered else 0)
    ack = bind(conn, flags=flags)
    assert bool(ack["flags"] & F.PFC_CONC_MPX) == echoed
    assert ack["flags"] & 3 == 3


def test_reject_bind_sends_nak_and_closes():
    conn = new_connection()
    (request,) = conn.receive_data(P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),), assoc_group_id=0xDEAD))
    assert request.assoc_group_id == 0xDEAD
    conn.reject_bind(request, F.BIND_NAK_REASON_NOT_SPECIFIED)
    nak = rpcrt.MSRPCBindNak(rpcrt.MSRPCHeader(conn.data_to_send())["pduData"])
    assert nak["RejectedReason"] == 0
    assert conn.closed and conn.receive_data(b"anything") == []


# --- alter_context ------------------------------------------------------------------------------------------

def test_alter_context_adds_a_context_with_empty_secondary_address():
    other = make_interface(OTHER)
    conn = Connection({IFACE: make_interface(), OTHER: other})
    bind(conn, group=77)
    (request,) = conn.receive_data(P.build_bind(2, (ContextItem(1, OTHER, (N64,)),), alter_context=True))
    assert request.is_alter_context
    conn.accept_bind(request, 999, "ignored")
    raw = conn.data_to_send()
    assert raw[2] == F.PTYPE_ALTER_CONTEXT_RESP and raw[24:26] == b"\x00\x00"
    ack = rpcrt.MSRPCBindAck(raw)
    assert ack["assoc_group"] == 77 and results(ack) == [(0, 0, P.encode_syntax(N64))]
    assert conn.context_ids() == {0: (conn.context_ids()[0][0], False), 1: (other, True)}


def test_alter_context_same_context_again_is_accepted():
    conn = new_connection()
    bind(conn)
    (request,) = conn.receive_data(P.build_bind(2, (ContextItem(0, IFACE, (NDR,)),), alter_context=True))
    conn.accept_bind(request, 0, "")
    assert results(rpcrt.MSRPCBindAck(conn.data_to_send())) == [(0, 0, P.encode_syntax(NDR))]


@pytest.mark.parametrize("item", [ContextItem(0, OTHER, (NDR,)), ContextItem(0, IFACE, (N64,))],
                         ids=["other-interface", "other-transfer-syntax"])
def test_alter_context_reusing_a_context_id_differently_is_a_protocol_error(item):
    other = make_interface(OTHER)
    conn = Connection({IFACE: make_interface(), OTHER: other})
    bind(conn)
    events = conn.receive_data(P.build_bind(2, (item,), alter_context=True))
    assert isinstance(events[-1], ConnectionTerminated) and conn.closed
    assert fault_of(conn.data_to_send())[:2] == (2, F.NCA_S_PROTO_ERROR)


def test_btfn_item_in_alter_context_is_an_ordinary_rejected_item():
    conn = new_connection()
    bind(conn)
    items = (ContextItem(3, IFACE, (BTFN3,)), ContextItem(4, OTHER, (BTFN3,)))
    (request,) = conn.receive_data(P.build_bind(2, items, alter_context=True))
    conn.accept_bind(request, 0, "")
    assert results(rpcrt.MSRPCBindAck(conn.data_to_send())) == [(2, 2, bytes(20)), (2, 1, bytes(20))]
    assert conn.bind_time_features is None


def test_btfn_is_recognized_by_the_first_transfer_syntax_of_an_item():
    conn = new_connection()
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (BTFN3, NDR)))
    assert results(bind(conn, items))[1] == (3, F.BTFN_SECURITY_CONTEXT_MULTIPLEXING | F.BTFN_KEEP_CONNECTION_ON_ORPHAN, bytes(20))


def test_reject_alter_context_sends_fault_and_closes():
    conn = new_connection()
    bind(conn)
    (request,) = conn.receive_data(P.build_bind(2, (ContextItem(1, IFACE, (NDR,)),), alter_context=True))
    conn.reject_bind(request, 0)
    assert fault_of(conn.data_to_send())[:2] == (2, F.NCA_S_PROTO_ERROR)
    assert conn.closed


def test_request_pipelined_behind_bind_sees_the_new_context():
    conn = new_connection()
    data = P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),)) + P.build_request(2, 0, 3, b"pipelined")
    bind_request, call = conn.receive_data(data)
    conn.accept_bind(bind_request, 5, "2105")
    conn.send_response(call.call_id, b"ok")
    ack, response = split_pdus(conn.data_to_send())
    assert ack[2] == F.PTYPE_BIND_ACK and rpcrt.MSRPCRespHeader(response)["pduData"] == b"ok"


def _types_and_calls(data: bytes) -> list[tuple[int, int]]:
    return [(pdu[2], struct.unpack_from("<I", pdu, 12)[0]) for pdu in split_pdus(data)]


@pytest.mark.parametrize("ending", [False, True], ids=["fault", "fault that ends the connection"])
def test_a_fault_found_while_parsing_waits_for_the_bind_ack_of_the_bind_before_it(ending):
    """Replies in the order of the peer's PDUs (MS-RPCE 3.3.1.5.8): a request behind the bind in the same read that
    is faulted as it is parsed (an opnum out of range; a client-sent shutdown, which also ends the connection) is
    answered after the bind_ack the runtime queues when it handles the BindRequest."""
    conn = new_connection()
    second = P.pack_header(F.PTYPE_SHUTDOWN, F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG, P.HEADER_SIZE, 2) if ending \
        else P.build_request(2, 0, 99, b"")
    events = conn.receive_data(P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),)) + second)
    assert isinstance(events[0], BindRequest) and conn.data_to_send() == b""
    assert (type(events[-1]) is ConnectionTerminated) == ending
    conn.accept_bind(events[0], 5, "2105")
    assert _types_and_calls(conn.data_to_send()) == [(F.PTYPE_BIND_ACK, 1), (F.PTYPE_FAULT, 2)]
    assert conn.closed == ending


def test_pipelined_alter_contexts_are_answered_in_order_with_the_faults_between_them():
    conn = new_connection()
    bind(conn)
    data = (P.build_bind(2, (ContextItem(1, IFACE, (NDR,)),), alter_context=True) + P.build_request(3, 0, 99, b"")
            + P.build_bind(4, (ContextItem(2, IFACE, (NDR,)),), alter_context=True) + P.build_request(5, 7, 0, b""))
    first, second = conn.receive_data(data)
    assert conn.data_to_send() == b""
    conn.accept_bind(first, 5, "")
    assert _types_and_calls(conn.data_to_send()) == [(F.PTYPE_ALTER_CONTEXT_RESP, 2), (F.PTYPE_FAULT, 3)]
    conn.reject_bind(second, 0)
    assert _types_and_calls(conn.data_to_send()) == [(F.PTYPE_FAULT, 4)] and conn.closed


def test_an_alter_context_under_the_call_id_of_a_pending_bind_is_a_protocol_error_after_the_bind_ack():
    """Found by fuzzing: a second pending bind under one call_id overwrote the first's entry, whose slot was then
    never filled, so nothing on the connection was ever sent again (and what was queued behind grew unbounded)."""
    conn = new_connection()
    data = P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),)) + \
        P.build_bind(1, (ContextItem(1, IFACE, (NDR,)),), alter_context=True) + P.build_request(2, 0, 0, b"x")
    events = conn.receive_data(data)
    assert [type(e) for e in events] == [BindRequest, ConnectionTerminated]
    conn.accept_bind(events[0], 5, "2105")
    assert _types_and_calls(conn.data_to_send()) == [(F.PTYPE_BIND_ACK, 1), (F.PTYPE_FAULT, 1)] and conn.closed


def test_a_refused_bind_ends_the_connection_and_a_bind_pipelined_behind_it_is_never_answered():
    conn = new_connection()
    data = P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),)) + \
        P.build_bind(2, (ContextItem(1, IFACE, (NDR,)),), alter_context=True)
    first, second = conn.receive_data(data)
    conn.reject_bind(first, F.BIND_NAK_REASON_NOT_SPECIFIED)
    conn.reject_bind(second, F.BIND_NAK_REASON_NOT_SPECIFIED)      # the runtime handles the next event: no-op
    conn.accept_bind(second, 5, "")
    assert _types_and_calls(conn.data_to_send()) == [(F.PTYPE_BIND_NAK, 1)] and conn.closed


# --- requests and responses -------------------------------------------------------------------------------

def test_request_event_fields_with_object_uuid():
    conn = new_connection()
    bind(conn)
    obj = uuid.uuid4()
    (call,) = conn.receive_data(P.build_request(9, 0, 10, b"stub", object_uuid=obj))
    assert isinstance(call, CallRequest)
    assert (call.call_id, call.context_id, call.opnum, call.object_uuid, call.stub) == (9, 0, 10, obj, b"stub")
    assert call.interface.uuid == IF_UUID and call.ndr64 is False


def test_request_byte_by_byte():
    conn = new_connection()
    bind(conn)
    events = []
    for byte in P.build_request(3, 0, 1, b"0123456789"):
        events += conn.receive_data(bytes([byte]))
    assert [type(e) for e in events] == [CallRequest] and events[0].stub == b"0123456789"


def test_fragmented_request_is_reassembled():
    conn = new_connection()
    bind(conn)
    stub = bytes(range(256)) * 100
    events = []
    for frag in P.fragment_request(4, 0, 2, stub, 2048):
        events += conn.receive_data(frag)
    assert len(events) == 1 and events[0].stub == stub and events[0].opnum == 2


def test_response_carries_call_id_and_context_and_is_fragmented_to_max_xmit_frag():
    conn = new_connection()
    bind(conn, max_xmit_frag=4280, max_recv_frag=4280)
    conn.receive_data(P.build_request(21, 0, 1, b""))
    stub = bytes(4325376)
    conn.send_response(21, stub)
    pdus = split_pdus(conn.data_to_send())
    assert all(len(p) <= 4280 for p in pdus)
    assert len(pdus) == -(-len(stub) // P.response_chunk_size(4280))
    assert b"".join(p[24:] for p in pdus) == stub
    assert {struct.unpack_from("<I", p, 12)[0] for p in pdus} == {21}
    first, last = rpcrt.MSRPCRespHeader(pdus[0]), rpcrt.MSRPCRespHeader(pdus[-1])
    assert (first["call_id"], first["alloc_hint"], first["flags"]) == (21, len(stub), F.PFC_FIRST_FRAG)
    assert (last["alloc_hint"], last["flags"]) == (len(last["pduData"]), F.PFC_LAST_FRAG)


def test_several_calls_in_flight_are_independent():
    conn = new_connection()
    bind(conn)
    events = conn.receive_data(P.build_request(1, 0, 1, b"a") + P.build_request(2, 0, 2, b"b")
                               + P.build_request(3, 0, 3, b"c"))
    assert [e.call_id for e in events] == [1, 2, 3] and conn.calls_in_flight() == 3
    conn.send_response(3, b"C")
    conn.send_fault(1, 0x80070005)
    conn.send_response(2, b"B")
    pdus = split_pdus(conn.data_to_send())
    assert [p[2] for p in pdus] == [F.PTYPE_RESPONSE, F.PTYPE_FAULT, F.PTYPE_RESPONSE]
    assert [struct.unpack_from("<I", p, 12)[0] for p in pdus] == [3, 1, 2]
    assert conn.calls_in_flight() == 0


def test_response_for_unknown_or_answered_call_is_dropped():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(1, 0, 1, b""))
    conn.send_response(1, b"x")
    conn.data_to_send()
    conn.send_response(1, b"again")
    conn.send_response(42, b"never asked")
    conn.send_fault(42, 5)
    assert conn.data_to_send() == b""


def test_maybe_call_is_dispatched_but_never_answered():
    conn = new_connection()
    bind(conn)
    (call,) = conn.receive_data(P.build_request(1, 0, 1, b"m", flags=F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG
                                                | F.PFC_MAYBE))
    conn.send_response(call.call_id, b"r")
    assert conn.data_to_send() == b""


def test_send_fault_flags_and_forbidden_status_is_replaced():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(1, 0, 1, b"") + P.build_request(2, 0, 1, b""))
    conn.send_fault(1, F.RPC_X_BAD_STUB_DATA, did_not_execute=True)
    conn.send_fault(2, 0xC0000005)
    first, second = split_pdus(conn.data_to_send())
    assert fault_of(first) == (1, F.RPC_X_BAD_STUB_DATA, 0x23, 0)
    assert fault_of(second) == (2, F.NCA_S_FAULT_UNSPEC, 0x03, 0)


# --- cancel / orphaned ----------------------------------------------------------------------------------------

def test_co_cancel_gives_cancel_request_and_cancel_fault_counts_it():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(5, 0, 1, b""))
    events = conn.receive_data(P.build_header_only(F.PTYPE_CO_CANCEL, 5))
    assert events == [CancelRequest(5)]
    assert conn.receive_data(P.build_header_only(F.PTYPE_CO_CANCEL, 77)) == []     # unknown call: ignored
    conn.send_fault(5, F.NCA_S_FAULT_CANCEL)
    raw = conn.data_to_send()
    assert fault_of(raw)[1] == F.NCA_S_FAULT_CANCEL and raw[22] == 1               # cancel_count


def test_a_cancel_counts_for_its_call_only():
    # plain calls on one context share one record in the core (_PresentationContext.plain_call): a co_cancel of
    # one must not show in another's cancel fault
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(5, 0, 1, b"") + P.build_request(6, 0, 1, b""))
    conn.receive_data(P.build_header_only(F.PTYPE_CO_CANCEL, 5) + P.build_header_only(F.PTYPE_CO_CANCEL, 5))
    conn.send_fault(6, F.NCA_S_FAULT_CANCEL)
    conn.send_fault(5, F.NCA_S_FAULT_CANCEL)
    six, five = split_pdus(conn.data_to_send())
    assert (fault_of(six)[0], six[22]) == (6, 0) and (fault_of(five)[0], five[22]) == (5, 2)
    conn.receive_data(P.build_request(7, 0, 1, b""))
    conn.send_fault(7, F.NCA_S_FAULT_CANCEL)
    assert conn.data_to_send()[22] == 0                 # a later call starts uncancelled


def test_orphaned_call_response_is_dropped_and_connection_kept():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(6, 0, 1, b""))
    assert conn.receive_data(P.build_header_only(F.PTYPE_ORPHANED, 6)) == [CallOrphaned(6)]
    conn.send_response(6, b"late")
    assert conn.data_to_send() == b"" and not conn.closed
    assert isinstance(conn.receive_data(P.build_request(7, 0, 1, b""))[0], CallRequest)


def test_orphaned_during_reassembly_is_ignored_and_the_last_fragment_still_answered():
    """C706 12.6.4.8 as Windows reads it (Samba raw_protocol test_orphaned_*): a call whose first fragment
    arrived is not abandoned by an orphaned PDU; its last fragment completes it."""
    conn = new_connection()
    bind(conn)
    frags = P.fragment_request(8, 0, 1, bytes(9000), 2048)
    assert conn.receive_data(frags[0]) == []
    assert conn.receive_data(P.build_header_only(F.PTYPE_ORPHANED, 8)) == []
    [call] = conn.receive_data(b"".join(frags[1:]))
    assert (call.call_id, len(call.stub)) == (8, 9000) and not conn.closed
    conn.send_response(8, b"done")
    assert conn.data_to_send()[2] == F.PTYPE_RESPONSE


def test_server_may_send_shutdown():
    conn = new_connection()
    bind(conn)
    conn.send_shutdown()
    raw = conn.data_to_send()
    assert (raw[2], len(raw), raw[3]) == (F.PTYPE_SHUTDOWN, 16, F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG)
    assert not conn.closed


def test_eof_terminates():
    conn = new_connection()
    bind(conn)
    conn.receive_data(P.build_request(1, 0, 1, b"")[:10])
    (event,) = conn.receive_data(b"")
    assert isinstance(event, ConnectionTerminated) and "10 bytes" in event.reason and conn.closed


# --- limits -------------------------------------------------------------------------------------------------

def test_calls_in_flight_limit_answers_server_too_busy_and_keeps_connection():
    conn = new_connection(limits=Limits(max_calls_in_flight=2))
    bind(conn)
    events = conn.receive_data(b"".join(P.build_request(i, 0, 1, b"") for i in (1, 2, 3)))
    assert [e.call_id for e in events] == [1, 2]
    assert fault_of(conn.data_to_send()) == (3, F.NCA_S_SERVER_TOO_BUSY, 0x23, 0)
    conn.send_response(1, b"")
    assert conn.receive_data(P.build_request(4, 0, 1, b""))[0].call_id == 4


def test_request_size_limit_faults_access_denied_and_closes():
    conn = new_connection(limits=Limits(max_request_size=10000))
    bind(conn)
    frags = P.fragment_request(1, 0, 1, bytes(12000), 2048)
    frags[0] = frags[0][:16] + struct.pack("<I", 0) + frags[0][20:]           # alloc_hint 0: no early warning
    events = []
    for frag in frags:
        events += conn.receive_data(frag)
    assert isinstance(events[-1], ConnectionTerminated)
    assert fault_of(conn.data_to_send())[:2] == (1, F.RPC_S_ACCESS_DENIED)


def test_fragment_count_limit():
    conn = new_connection(limits=Limits(max_request_fragments=3))
    bind(conn)
    events = []
    for index in range(5):
        flags = F.PFC_FIRST_FRAG if index == 0 else 0
        events += conn.receive_data(P.build_request(1, 0, 1, b"", flags=flags, alloc_hint=0))
    assert isinstance(events[-1], ConnectionTerminated)
    assert fault_of(conn.data_to_send())[:2] == (1, F.RPC_S_ACCESS_DENIED)


def test_presentation_context_limit_rejects_item_with_local_limit_exceeded():
    conn = new_connection(limits=Limits(max_presentation_contexts=1))
    bind(conn)
    (request,) = conn.receive_data(P.build_bind(2, (ContextItem(1, IFACE, (NDR,)),), alter_context=True))
    conn.accept_bind(request, 0, "")
    assert results(rpcrt.MSRPCBindAck(conn.data_to_send())) == [(2, F.LOCAL_LIMIT_EXCEEDED, bytes(20))]


# --- interop with impacket's own client (DCERPC_v5) over an in-memory transport -------------------------------

class LoopbackTransport(transport.DCERPCTransport):
    """impacket transport that feeds our Connection and echoes each call's stub reversed."""

    def __init__(self, conn: Connection, response_size: int | None = None) -> None:
        super().__init__("127.0.0.1", 2105)
        self.conn = conn
        self.inbox = bytearray()
        self.calls: list[CallRequest] = []
        self.response_size = response_size

    def connect(self):
        return 1

    def disconnect(self):
        return 1

    def send(self, data, forceWriteAndx=0, forceRecv=0):
        for event in self.conn.receive_data(data):
            if isinstance(event, BindRequest):
                self.conn.accept_bind(event, 0x4242, "2105")
            elif isinstance(event, CallRequest):
                self.calls.append(event)
                size = self.response_size
                answer = event.stub[::-1] if size is None else bytes(range(256)) * (size // 256)
                self.conn.send_response(event.call_id, answer)
        self.inbox += self.conn.data_to_send()

    def recv(self, forceRecv=0, count=0):
        n = min(count or len(self.inbox), len(self.inbox))
        out = bytes(self.inbox[:n])
        del self.inbox[:n]
        return out


@pytest.mark.parametrize("syntax", [("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0"),
                                    ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")])
def test_impacket_client_binds_and_calls(syntax):
    conn = new_connection()
    loop = LoopbackTransport(conn)
    dce = loop.get_dce_rpc()
    dce.connect()
    dce.bind(uuidtup_to_bin((str(IF_UUID), "1.0")), transfer_syntax=syntax)
    dce.call(7, b"hello world")
    assert dce.recv() == b"dlrow olleh"
    assert loop.calls[0].ndr64 == (syntax[1] == "1.0")


def test_impacket_client_fragmented_request_and_4_3_mb_response():
    conn = new_connection()
    loop = LoopbackTransport(conn, response_size=4325376)
    dce = loop.get_dce_rpc()
    dce.set_max_fragment_size(1000)
    dce.connect()
    dce.bind(uuidtup_to_bin((str(IF_UUID), "1.0")))
    dce.call(1, bytes(50000))
    answer = dce.recv()
    assert len(answer) == 4325376 and answer[:3] == b"\x00\x01\x02"
    assert loop.calls[0].stub == bytes(50000)


def test_impacket_client_request_of_6_mib_is_reassembled_though_every_fragment_repeats_the_total_as_alloc_hint():
    conn = new_connection()
    loop = LoopbackTransport(conn)
    dce = loop.get_dce_rpc()
    dce.connect()
    dce.bind(uuidtup_to_bin((str(IF_UUID), "1.0")))
    stub = bytes(range(256)) * (6 * 4096)           # 6 MiB: impacket's alloc_hint 6 MiB + held > 8 MiB midway
    dce.call(7, stub)
    assert dce.recv() == stub[::-1]
    assert loop.calls[0].stub == stub


def test_impacket_client_alter_ctx_to_second_interface():
    other = make_interface(OTHER)
    conn = Connection({IFACE: make_interface(), OTHER: other})
    loop = LoopbackTransport(conn)
    dce = loop.get_dce_rpc()
    dce.connect()
    dce.bind(uuidtup_to_bin((str(IF_UUID), "1.0")))
    dce2 = dce.alter_ctx(uuidtup_to_bin((str(OTHER[0]), "1.0")))
    dce2.call(0, b"ab")
    assert dce2.recv() == b"ba"
    assert loop.calls[0].interface is other


def test_impacket_client_with_authentication_gets_bind_nak_8():
    conn = new_connection()
    loop = LoopbackTransport(conn)
    loop.set_credentials("user", "password", "DOMAIN")
    dce = loop.get_dce_rpc()
    dce.set_auth_level(rpcrt.RPC_C_AUTHN_LEVEL_PKT_PRIVACY)
    dce.connect()
    with pytest.raises(rpcrt.DCERPCException, match="code: 0x8 - Authentication type not recognized"):
        dce.bind(uuidtup_to_bin((str(IF_UUID), "1.0")))
    assert conn.closed
