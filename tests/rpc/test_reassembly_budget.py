"""The process-wide allowance for unfinished fragmented requests (qm2qm/rpc/budget.py; C706 12.6.3.7, MS-RPCE
3.3.3.5.4): a fragment past it is faulted nca_s_server_too_busy, did not execute, and the connection goes on."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc import testing as t
from qm2qm.rpc.budget import ReassemblyBudget
from qm2qm.rpc.events import CallRequest, ConnectionTerminated
from tests.rpc.conftest import RawClient, server_side, until
from tests.rpc.test_connection import bind, fault_of, new_connection, split_pdus

CHUNK = P.response_chunk_size(2048)             # stub bytes in one 2048-byte request fragment
DID_NOT_EXECUTE_FIRST_LAST = F.PFC_FIRST_FRAG | F.PFC_LAST_FRAG | F.PFC_DID_NOT_EXECUTE


def frags(call_id: int, size: int, opnum: int = 1) -> list[bytes]:
    """A request of ``size`` stub bytes in 2048-byte fragments (CHUNK stub bytes each)."""
    return P.fragment_request(call_id, 0, opnum, b"A" * size, 2048)


def held_by(*conns) -> int:
    return sum(len(c._reassembly.stub) for c in conns if c._reassembly is not None)


def test_a_first_fragment_past_the_allowance_is_faulted_server_too_busy_and_its_tail_dropped():
    budget = ReassemblyBudget(5000)
    a, b = new_connection(budget=budget), new_connection(budget=budget)
    bind(a), bind(b)
    first = frags(1, 10000)
    for frag in first[:2]:
        assert a.receive_data(frag) == []
    assert budget.held == 2 * CHUNK
    refused = frags(7, 10000)
    assert b.receive_data(refused[0]) == []
    assert fault_of(b.data_to_send()) == (7, F.NCA_S_SERVER_TOO_BUSY, DID_NOT_EXECUTE_FIRST_LAST, 0)
    assert budget.held == 2 * CHUNK and budget.refused == 1
    for frag in refused[1:]:
        assert b.receive_data(frag) == []       # the rest of the refused call: dropped silently (3.3.3.5.6)
    assert b.data_to_send() == b""
    (call,) = b.receive_data(P.build_request(8, 0, 1, b"small"))
    assert isinstance(call, CallRequest) and call.stub == b"small"     # whole calls are never refused


def test_a_later_fragment_past_the_allowance_faults_the_call_and_gives_its_bytes_back():
    budget = ReassemblyBudget(7000)
    a, b = new_connection(budget=budget), new_connection(budget=budget)
    bind(a), bind(b)
    a.receive_data(frags(1, 10000)[0])
    call = frags(2, 10000)
    for frag in call[:2]:
        assert b.receive_data(frag) == []
    assert budget.held == 3 * CHUNK == held_by(a, b)
    assert b.receive_data(call[2]) == []        # 3 x CHUNK of b + CHUNK of a > 7000
    assert fault_of(b.data_to_send()) == (2, F.NCA_S_SERVER_TOO_BUSY, DID_NOT_EXECUTE_FIRST_LAST, 0)
    assert budget.held == CHUNK == held_by(a, b)
    for frag in call[3:]:
        assert b.receive_data(frag) == []
    assert b.data_to_send() == b""
    retry = frags(3, 3000)
    events = [e for frag in retry for e in b.receive_data(frag)]
    assert [e.stub for e in events] == [b"A" * 3000]
    assert budget.held == CHUNK


def test_a_completed_call_gives_back_what_it_held():
    budget = ReassemblyBudget(8192)
    conn = new_connection(budget=budget)
    bind(conn)
    for round_ in range(5):                      # each call alone fits; their sum would not
        events = [e for frag in frags(round_ + 1, 8000) for e in conn.receive_data(frag)]
        assert len(events) == 1 and len(events[0].stub) == 8000
        assert budget.held == 0
    assert budget.refused == 0


@pytest.mark.parametrize("end", ["eof", "close", "protocol error", "first fragment again"])
def test_a_connection_that_ends_mid_request_gives_its_bytes_back(end):
    budget = ReassemblyBudget(1 << 20)
    conn = new_connection(budget=budget)
    bind(conn)
    for frag in frags(1, 10000)[:3]:
        conn.receive_data(frag)
    assert budget.held == 3 * CHUNK
    if end == "eof":
        assert isinstance(conn.receive_data(b"")[-1], ConnectionTerminated)
    elif end == "close":
        conn.close()
    elif end == "protocol error":               # the first fragment of another call while this one is unfinished
        assert isinstance(conn.receive_data(frags(2, 10000)[0])[-1], ConnectionTerminated)
    else:                                       # the same call's first fragment again (it once replaced the call)
        assert isinstance(conn.receive_data(frags(1, 10000)[0])[-1], ConnectionTerminated)
    assert budget.held == 0
    conn.close()                                # idempotent: nothing is given back twice
    assert budget.held == 0


# One step: (connection, action) with action "next" (the next fragment of its current call, a new call when none),
# "close" (the transport goes; a new connection takes its place), "small" (a whole one-fragment call) or "again"
# (the current call's first fragment sent again: a protocol error that ends the connection).
steps = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["next", "next", "next", "close", "small", "again"])),
                 max_size=120)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(0, 12000), sizes=st.lists(st.integers(CHUNK + 1, 9000), min_size=1, max_size=8),
       script=steps)
def test_the_allowance_always_equals_what_unfinished_calls_hold_and_returns_to_zero(capacity, sizes, script):
    budget = ReassemblyBudget(capacity)
    conns = [new_connection(budget=budget) for _ in range(4)]
    for conn in conns:
        bind(conn)
    pending: list[list[bytes]] = [[] for _ in conns]
    call_ids = [10] * len(conns)
    delivered = 0
    for index, (which, action) in enumerate(script):
        conn = conns[which]
        if action == "again" and pending[which]:
            reassembling = conn._reassembly is not None     # else its first fragment was refused: a new call
            events = conn.receive_data(frags(call_ids[which], sizes[index % len(sizes)])[0])
            assert isinstance(events[-1], ConnectionTerminated) if reassembling else not conn.closed
            action = "close" if conn.closed else "sent"
        if action == "close":
            conn.close()
            conns[which] = new_connection(budget=budget)
            bind(conns[which])
            pending[which] = []
            continue
        if action == "small" and not pending[which]:
            call_ids[which] += 1
            events = conn.receive_data(P.build_request(call_ids[which], 0, 1, b"x"))
            assert [type(e) for e in events] == [CallRequest]
            conn.send_response(call_ids[which], b"")
        elif action == "next":
            if not pending[which]:
                call_ids[which] += 1
                pending[which] = frags(call_ids[which], sizes[index % len(sizes)])
            events = conn.receive_data(pending[which].pop(0))
            for event in events:
                assert isinstance(event, CallRequest)
                delivered += 1
                conn.send_response(event.call_id, b"")
        for pdu in split_pdus(conn.data_to_send()):
            if pdu[2] == F.PTYPE_FAULT:
                assert fault_of(pdu)[1] in (F.NCA_S_SERVER_TOO_BUSY, F.NCA_S_PROTO_ERROR)
        assert budget.held == held_by(*conns) <= capacity
    for conn in conns:
        conn.close()
    assert budget.held == 0


async def test_the_server_gives_back_a_reset_connections_bytes_and_serves_the_next_big_call(make_server):
    budget = ReassemblyBudget(12000)
    server = await make_server(reassembly_budget=budget)
    holder = await RawClient.connect(server.port)
    await holder.bind()
    for frag in frags(1, 20000, t.OP_ECHO)[:5]:
        holder.send(frag)
    await until(lambda: budget.held == 5 * CHUNK)
    other = await RawClient.connect(server.port)
    await other.bind()
    for frag in frags(1, 20000, t.OP_ECHO):
        other.send(frag)
    reply = await other.recv()
    assert (reply.call_id, reply.status) == (1, F.NCA_S_SERVER_TOO_BUSY)
    assert (await other.call(t.OP_ECHO, b"still served")).stub == b"still served"
    rc = server_side(server, holder)
    await holder.close(reset=True)
    await rc.finished
    assert budget.held == 0
    big = bytes(range(256)) * 40                  # 10,240 bytes: fits now that the holder is gone
    for frag in P.fragment_request(3, 0, t.OP_ECHO, big, 2048):
        other.send(frag)
    answer = b""
    while True:                                  # the echo comes back in fragments too
        pdu = await other.recv()
        answer += pdu.stub
        if pdu.flags & F.PFC_LAST_FRAG:
            break
    assert answer == big
    await other.close()
