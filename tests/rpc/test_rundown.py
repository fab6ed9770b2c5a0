"""Association groups and context handles over the wire; rundown when a group loses its last connection
(MS-RPCE 3.3.1.4.1, 3.3.1.5.7; C706 5.1.6)."""
import asyncio

import pytest

from qm2qm.rpc import testing as t
from qm2qm.rpc.handles import NULL_HANDLE
from tests.rpc.conftest import (BIND_ACK, BIND_NAK, NDR64_SYNTAX, RESPONSE, RawClient, bind_pdu, request_pdu,
                                server_side)

CONTEXT_MISMATCH = 0x1C00001A


async def open_a(client, label: bytes, call_id: int = 1) -> bytes:
    reply = await client.call(t.OP_OPEN_A, label, call_id=call_id)
    assert reply.ptype == RESPONSE and len(reply.stub) == 20 and reply.stub != NULL_HANDLE
    return reply.stub


async def closed(server, client, *, reset: bool = False) -> None:
    """Close the client and wait until the server has finished tearing the connection down."""
    rc = server_side(server, client)
    await client.close(reset=reset)
    await rc.finished


async def test_bind_with_group_zero_creates_a_fresh_nonzero_group_per_connection(connect):
    a, b = await connect(), await connect()
    ack_a, ack_b = await a.bind(), await b.bind()
    assert ack_a.ptype == ack_b.ptype == BIND_ACK
    assert ack_a.assoc_group != 0 and ack_b.assoc_group != 0 and ack_a.assoc_group != ack_b.assoc_group


async def test_two_connections_of_one_group_share_a_handle(connect):
    a = await connect()
    await a.bind()
    wire = await open_a(a, b"shared")
    b = await connect()
    ack = await b.bind(assoc_group=a.assoc_group, syntaxes=(NDR64_SYNTAX,))
    assert ack.ptype == BIND_ACK and ack.assoc_group == a.assoc_group
    assert (await b.call(t.OP_USE_A, wire)).stub == b"shared"
    assert (await b.call(t.OP_CLOSE, wire)).stub == NULL_HANDLE
    assert (await a.call(t.OP_USE_A, wire)).status == CONTEXT_MISMATCH


async def test_a_handle_is_not_valid_in_another_group(connect):
    a, b = await connect(), await connect()
    await a.bind()
    await b.bind()
    wire = await open_a(a, b"mine")
    assert (await b.call(t.OP_USE_A, wire)).status == CONTEXT_MISMATCH
    assert (await b.call(t.OP_CLOSE, wire)).status == CONTEXT_MISMATCH
    assert (await a.call(t.OP_USE_A, wire)).stub == b"mine"


async def test_wrong_type_unknown_and_closed_handles_are_context_mismatch(bound):
    wire_a = await open_a(bound, b"a")
    wire_b = (await bound.call(t.OP_OPEN_B, b"b")).stub
    assert (await bound.call(t.OP_USE_A, wire_b)).status == CONTEXT_MISMATCH
    assert (await bound.call(t.OP_USE_B, wire_a)).status == CONTEXT_MISMATCH
    assert (await bound.call(t.OP_USE_A, bytes(4) + b"\x42" * 16)).status == CONTEXT_MISMATCH
    assert (await bound.call(t.OP_CLOSE, wire_a)).stub == NULL_HANDLE
    assert (await bound.call(t.OP_USE_A, wire_a)).status == CONTEXT_MISMATCH
    assert (await bound.call(t.OP_CLOSE, wire_a)).status == CONTEXT_MISMATCH
    assert (await bound.call(t.OP_USE_B, wire_b)).stub == b"b"


async def test_null_handle_is_handed_to_the_handler_as_none(bound):
    # The probe's handler answers a NULL [in] handle with bad stub data: the handler decides, not the runtime.
    assert (await bound.call(t.OP_USE_A, NULL_HANDLE)).status == t.RPC_X_BAD_STUB_DATA


async def test_unknown_group_id_is_bind_nak_reason_0_and_close(connect):
    client = await connect()
    client.send(bind_pdu(assoc_group=0x12345))
    nak = await client.recv()
    assert nak.ptype == BIND_NAK and nak.nak_reason == 0
    assert await client.recv() is None


async def test_dead_group_cannot_be_joined(server, connect):
    a = await connect()
    await a.bind()
    gid = a.assoc_group
    await closed(server, a)
    b = await connect()
    nak = await b.bind(assoc_group=gid)
    assert nak.ptype == BIND_NAK and nak.nak_reason == 0


@pytest.mark.parametrize("reset", [False, True], ids=["eof", "reset"])
async def test_rundown_runs_once_when_the_last_connection_of_the_group_closes(server, connect, probe, reset):
    a = await connect()
    await a.bind()
    wire = await open_a(a, b"h1")
    b = await connect()
    await b.bind(assoc_group=a.assoc_group)
    await closed(server, a, reset=reset)
    assert probe.rundowns == []
    assert (await b.call(t.OP_USE_A, wire)).stub == b"h1"     # still alive for the group's other connection
    await closed(server, b, reset=reset)
    assert probe.rundowns == [("probe_a", b"h1")]
    assert len(server.groups) == 0


async def test_rundown_order_is_creation_order_and_skips_closed_handles(server, connect, probe):
    a = await connect()
    await a.bind()
    await open_a(a, b"1")
    await a.call(t.OP_OPEN_B, b"2")
    closed_one = await open_a(a, b"3")
    await open_a(a, b"4")
    await a.call(t.OP_OPEN_B, b"5")
    await a.call(t.OP_CLOSE, closed_one)
    await closed(server, a)
    assert probe.rundowns == [("probe_a", b"1"), ("probe_b", b"2"), ("probe_a", b"4"), ("probe_b", b"5")]


async def test_in_flight_calls_are_cancelled_before_rundown(server, connect, probe):
    a = await connect()
    await a.bind()
    a.send(request_pdu(3, t.OP_BLOCK_OPEN_A, b"inflight"))
    await probe.wait_for(lambda p: p.blocked == 1)
    await closed(server, a)
    assert probe.events == ["blocked", "cancelled", "rundown probe_a inflight"]


async def test_a_failing_rundown_is_logged_and_the_rest_still_run(server, connect, probe, caplog):
    calls = []

    def bad(label):
        calls.append(label)
        raise RuntimeError("rundown failed")

    object.__setattr__(probe.type_b, "rundown", bad)
    a = await connect()
    await a.bind()
    await a.call(t.OP_OPEN_B, b"x")
    await open_a(a, b"y")
    await closed(server, a)
    assert calls == [b"x"] and probe.rundowns == [("probe_a", b"y")]
    assert any(r.exc_info and getattr(r, "handle_event", None) == "rundown" for r in caplog.records)


async def test_server_close_runs_every_group_down(make_server, probe):
    server = await make_server()
    clients = [await RawClient.connect(server.port) for _ in range(3)]
    for n, client in enumerate(clients):
        await client.bind()
        await open_a(client, b"c%d" % n)
    await server.close()
    assert sorted(probe.rundowns) == [("probe_a", b"c0"), ("probe_a", b"c1"), ("probe_a", b"c2")]
    for client in clients:
        assert await client.recv() is None


async def test_a_handler_that_ignores_cancellation_does_not_block_rundown(make_server, probe, caplog):
    server = await make_server(cancel_wait_s=0.05)
    a = await RawClient.connect(server.port)
    await a.bind()
    await open_a(a, b"kept")
    a.send(request_pdu(3, t.OP_STUBBORN, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    await closed(server, a)
    assert probe.rundowns == [("probe_a", b"kept")] and probe.cancelled == 1
    assert any("ignored cancellation" in r.getMessage() for r in caplog.records)
    probe.release()


async def test_joining_from_another_client_address_is_refused(server, connect):
    # MS-RPCE 3.3.1.5.7: on TCP the joining connection must come from the creator's IP address.
    a = await connect()
    await a.bind()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, local_addr=("127.0.0.2", 0))
    other = RawClient(reader, writer)
    nak = await other.bind(assoc_group=a.assoc_group)
    assert nak.ptype == BIND_NAK and nak.nak_reason == 0
    same = await connect()
    assert (await same.bind(assoc_group=a.assoc_group)).assoc_group == a.assoc_group
    await other.close()
