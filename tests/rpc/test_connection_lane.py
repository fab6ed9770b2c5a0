"""The common-request lane of Connection (one fragment, no security context) gives the events and bytes of the
general request path, and take_output() counts the PDUs it hands out (C706 12.6.4.9; MS-RPCE 3.3.3.5)."""
from __future__ import annotations

import struct
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.connection import Connection
from qm2qm.rpc.events import BindRequest, CallRequest, ContextItem
from qm2qm.rpc.limits import Limits
from tests.rpc.test_connection import IFACE, NDR, make_interface, split_pdus

FLAGS = st.sampled_from([F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG, F.PFC_FIRST_FRAG, F.PFC_LAST_FRAG, 0,
                         F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | F.PFC_MAYBE,
                         F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | F.PFC_PENDING_CANCEL,
                         F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | F.PFC_OBJECT_UUID])


@st.composite
def request(draw) -> bytes:
    flags = draw(FLAGS)
    stub = draw(st.binary(max_size=24))
    header = struct.pack("<IHH", len(stub), draw(st.integers(0, 2)), draw(st.integers(0, 12)))
    if flags & F.PFC_OBJECT_UUID:
        stub = uuid.uuid4().bytes_le + stub
    body = header + stub
    return P.pack_header(F.PTYPE_REQUEST, flags, 16 + len(body), draw(st.integers(1, 6))) + body


INTERFACE = make_interface(opnums=11)


def bound(plain: bool) -> Connection:
    conn = Connection({IFACE: INTERFACE}, limits=Limits(max_calls_in_flight=3))
    if not plain:
        conn._on_plain_request = lambda buf, pos, frag_length, call_id, events: conn._on_request(
            buf, pos, F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG, frag_length, call_id, events)
    [bind] = conn.receive_data(P.build_bind(1, (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (NDR,)))))
    assert isinstance(bind, BindRequest)
    conn.accept_bind(bind, 0x1234, "2105")
    conn.take_output()
    return conn


def run(conn: Connection, pdus: list[bytes], answers: list[bool]) -> list:
    """Feed the PDUs (answering some calls between reads, as a transport would); every event and output."""
    trace = []
    for pdu, answer in zip(pdus, answers):
        events = conn.receive_data(pdu)
        trace.append([tuple(e) if isinstance(e, CallRequest) else e for e in events])
        for event in events:
            if answer and isinstance(event, CallRequest):
                conn.send_response(event.call_id, event.stub * 3)
        pending = bool(conn.pending_output)             # what the runtime reads to skip an empty flush
        out, count = conn.take_output()
        assert pending == bool(out) and not conn.pending_output
        assert count == len(split_pdus(out))
        trace.append((out, conn.closed, conn.calls_in_flight()))
    return trace


@settings(max_examples=300, deadline=None)
@given(pdus=st.lists(request(), min_size=1, max_size=12), data=st.data())
def test_the_lane_gives_what_the_general_request_path_gives(pdus, data):
    answers = data.draw(st.lists(st.booleans(), min_size=len(pdus), max_size=len(pdus)))
    assert run(bound(True), pdus, answers) == run(bound(False), pdus, answers)


@st.composite
def read(draw) -> bytes:
    """What one transport read may hold: a request PDU, two, part of one, or one with a foreign data representation."""
    pdu = draw(request())
    shape = draw(st.sampled_from(["whole", "whole", "two", "cut", "big-endian"]))
    if shape == "two":
        return pdu + draw(request())
    if shape == "cut":
        return pdu[:draw(st.integers(1, len(pdu) - 1))]
    if shape == "big-endian":
        return pdu[:4] + b"\x00" + pdu[5:]
    return pdu


def run_as_the_runtime(conn: Connection, reads: list[bytes], answers: list[bool]) -> list:
    """run(), but each read tried first as one whole plain request (receive_plain_request), as RpcConnection does."""
    plain = conn.receive_plain_request
    conn.receive_data = lambda data, general=conn.receive_data: [r] if (r := plain(data)) is not None \
        else general(data)
    return run(conn, reads, answers)


@settings(max_examples=300, deadline=None)
@given(reads=st.lists(read(), min_size=1, max_size=12), data=st.data())
def test_a_read_taken_as_one_plain_request_gives_what_receive_data_gives(reads, data):
    answers = data.draw(st.lists(st.booleans(), min_size=len(reads), max_size=len(reads)))
    assert run_as_the_runtime(bound(True), reads, answers) == run(bound(True), reads, answers)


def test_receive_plain_request_takes_only_a_whole_plain_request_and_consumes_nothing_else():
    conn = bound(True)
    pdu = P.build_request(5, 0, 9, b"abc")
    assert conn.receive_plain_request(pdu[:-1]) is None                 # part of a PDU
    assert conn.receive_plain_request(pdu + pdu) is None                # more than one
    assert conn.calls_in_flight() == 0 and conn.take_output() == (b"", 0)
    assert tuple(conn.receive_plain_request(pdu))[:5] == (5, 0, 9, None, b"abc")
    assert conn.receive_plain_request(pdu) is None                      # call_id in flight: the general path
    assert conn.calls_in_flight() == 1
    fresh = Connection({IFACE: INTERFACE})
    assert fresh.receive_plain_request(pdu) is None                     # not bound yet


def test_the_common_request_takes_the_lane():
    conn = bound(True)
    taken = []
    general = conn._on_request
    conn._on_request = lambda *args: taken.append(args) or general(*args)
    [call] = conn.receive_data(P.build_request(5, 0, 9, b"abc"))
    assert taken == [] and tuple(call)[:5] == (5, 0, 9, None, b"abc")
    conn.receive_data(P.build_request(5, 0, 9, b"abc"))         # call_id reused: the general path answers
    assert len(taken) == 1 and conn.closed


def test_take_output_counts_every_fragment_of_a_response():
    conn = bound(True)
    [call] = conn.receive_data(P.build_request(2, 0, 1, b""))
    conn.send_response(call.call_id, bytes(3 * conn.max_xmit_frag))
    out, count = conn.take_output()
    assert count == len(split_pdus(out)) >= 4
    assert conn.take_output() == (b"", 0)


@settings(max_examples=150, deadline=None)
@given(frag=st.integers(1024, 5840), near=st.integers(-40, 40), context_id=st.integers(0, 0))
def test_a_one_fragment_response_is_what_append_response_builds(frag, near, context_id):
    conn = Connection({IFACE: INTERFACE})
    [bind] = conn.receive_data(P.build_bind(1, (ContextItem(context_id, IFACE, (NDR,)),), max_xmit_frag=frag,
                                            max_recv_frag=frag))
    conn.accept_bind(bind, 0x1234, "2105")
    conn.take_output()
    size = max(0, P.response_chunk_size(conn.max_xmit_frag) + near)
    [call] = conn.receive_data(P.build_request(7, context_id, 1, b""))
    conn.send_response(call.call_id, bytes(range(256)) * (size // 256) + bytes(size % 256))
    expected = bytearray()
    count = P.append_response(expected, 7, context_id, bytes(range(256)) * (size // 256) + bytes(size % 256),
                              conn.max_xmit_frag)
    assert conn.take_output() == (bytes(expected), count)


@settings(max_examples=200, deadline=None)
@given(frag=st.integers(1024, 5840), near=st.integers(-40, 40), context_id=st.integers(0, 255),
       queued=st.booleans(), maybe=st.booleans(), answered=st.booleans())
def test_response_pdu_is_the_pdu_send_response_queues_or_none_having_changed_nothing(
        frag, near, context_id, queued, maybe, answered):
    def connection() -> Connection:
        conn = Connection({IFACE: INTERFACE})
        [bind] = conn.receive_data(P.build_bind(1, (ContextItem(context_id, IFACE, (NDR,)),), max_xmit_frag=frag,
                                                max_recv_frag=frag))
        conn.accept_bind(bind, 0x1234, "2105")
        conn.take_output()
        flags = F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | (F.PFC_MAYBE if maybe else 0)
        body = struct.pack("<IHH", 0, context_id, 1)
        conn.receive_data(P.pack_header(F.PTYPE_REQUEST, flags, 16 + len(body), 7) + body)
        if queued:                      # a fault for another call waits in the output already
            conn.receive_data(P.build_request(8, context_id, 1, b""))
            conn.send_fault(8, F.NCA_S_FAULT_UNSPEC)
        if answered:                    # the call was answered once already: unknown now
            conn.send_response(7, b"")
        return conn

    stub = bytes(range(256)) * 40
    stub = stub[:max(0, P.response_chunk_size(frag - frag % 8) + near)]
    fast, slow = connection(), connection()
    pdu = fast.response_pdu(7, stub)
    slow.send_response(7, stub)
    expected = slow.take_output()
    if pdu is None:
        fast.send_response(7, stub)
        assert fast.take_output() == expected
    else:
        assert not (queued or maybe or answered)
        assert (pdu, 1) == expected and fast.take_output() == (b"", 0)
    assert fast.calls_in_flight() == slow.calls_in_flight()


@settings(max_examples=200, deadline=None)
@given(pdus=st.lists(request(), min_size=1, max_size=8), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_a_stream_cut_anywhere_gives_what_whole_reads_give(pdus, cuts):
    """Reads parsed in place (nothing held back) and reads joined to a held-back partial PDU agree."""
    stream = b"".join(pdus)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    pieces = [stream[a:b] for a, b in zip(points, points[1:])]

    def feed(chunks):
        conn = bound(True)
        events = [tuple(e) if isinstance(e, CallRequest) else e for chunk in chunks for e in conn.receive_data(chunk)]
        return events, conn.take_output(), conn.closed

    assert feed(pieces) == feed([stream])
