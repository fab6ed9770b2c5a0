"""Operational limits: max connections, idle timeout, bad input never hurts other connections."""
import asyncio
import logging
import struct

from hypothesis import HealthCheck, given, settings, strategies as st

from qm2qm.rpc import testing as t
from qm2qm.rpc.testing import Probe
from tests.rpc.conftest import (BIND_ACK, BIND_NAK, FAULT, RawClient, bind_pdu, cancel_pdu, header, request_pdu,
                                server_side, until)

NCA_S_FAULT_CANCEL = 0x1C00000D
# Long enough that a loaded machine still binds in time, short enough to keep the tests fast.
IDLE_S = 0.3


async def test_accepted_connections_get_tcp_keepalives_as_windows_sets_them(make_server):
    """MS-RPCE 3.3.3.2.1 <117>: keep-alives after the configured silence, then one probe a second, so a peer that
    vanishes without FIN or RST is noticed and its handles run down."""
    import socket
    for keepalive, expected in ((30, (1, 30, 1, 10)), (0, (0,))):
        server = await make_server(keepalive_s=keepalive)
        client = await RawClient.connect(server.port)
        assert (await client.bind()).ptype == BIND_ACK
        sock = server_side(server, client).transport.get_extra_info("socket")
        got = [sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0]
        if keepalive:
            got += [sock.getsockopt(socket.IPPROTO_TCP, option)
                    for option in (socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT)]
        assert tuple(got) == expected
        await client.close()


async def test_connections_beyond_max_are_closed_at_once_and_logged(make_server, caplog):
    server = await make_server(max_connections=2)
    a, b = await RawClient.connect(server.port), await RawClient.connect(server.port)
    assert (await a.bind()).ptype == BIND_ACK and (await b.bind()).ptype == BIND_ACK
    with caplog.at_level(logging.WARNING, logger="qm2qm.rpc"):
        c = await RawClient.connect(server.port)
        c.send(bind_pdu())
        assert await c.recv() is None
    assert any("max_connections" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="qm2qm.rpc"):
        for _ in range(20):                         # a flood: counted, logged once a second
            refused = await RawClient.connect(server.port)
            assert await refused.recv() is None
    assert server.connection_slots.refusals.count == 21
    assert len([r for r in caplog.records if "max_connections" in r.getMessage()]) <= 2
    rc = server_side(server, a)
    await a.close()
    await rc.finished
    d = await RawClient.connect(server.port)
    assert (await d.bind()).ptype == BIND_ACK
    assert (await d.call(t.OP_ECHO, b"in")).stub == b"in"
    for client in (b, d):
        await client.close()


async def test_idle_connections_are_closed_silent_or_half_sent(make_server, probe, caplog):
    caplog.set_level(logging.INFO, logger="qm2qm.rpc")
    server = await make_server(idle_timeout_s=IDLE_S)
    silent = await RawClient.connect(server.port)
    half_header = await RawClient.connect(server.port)
    half_header.send(bind_pdu()[:10])
    half_pdu = await RawClient.connect(server.port)
    await half_pdu.bind()
    wire = (await half_pdu.call(t.OP_OPEN_A, b"idle")).stub
    half_pdu.send(request_pdu(2, t.OP_ECHO, b"x" * 100)[:60])
    for client in (silent, half_header, half_pdu):
        assert await client.recv() is None
    await server_side_finished(server)
    assert probe.rundowns == [("probe_a", b"idle")]
    assert sum("idle for" in r.getMessage() for r in caplog.records) == 3
    assert len(wire) == 20


async def server_side_finished(server):
    for rc in list(server.connections.values()):
        await rc.finished
    while server._background:
        await asyncio.gather(*list(server._background))


async def test_bound_quiet_connections_stay_unless_bound_idle_timeout_is_set(make_server, probe):
    server = await make_server(idle_timeout_s=IDLE_S)
    quiet = await RawClient.connect(server.port)
    await quiet.bind()
    wire = (await quiet.call(t.OP_OPEN_A, b"held")).stub
    silent = await RawClient.connect(server.port)
    assert await silent.recv() is None         # an idle period has passed since quiet's last PDU...
    assert (await quiet.call(t.OP_USE_A, wire)).stub == b"held"    # ...and quiet is still served
    strict = await make_server(idle_timeout_s=None, bound_idle_timeout_s=IDLE_S)
    bound = await RawClient.connect(strict.port)
    await bound.bind()
    await bound.call(t.OP_OPEN_A, b"dropped")
    assert await bound.recv() is None
    await probe.wait_for(lambda p: ("probe_a", b"dropped") in p.rundowns)
    await quiet.close()


async def test_a_call_in_flight_keeps_its_connection_from_idling_out(make_server, probe):
    server = await make_server(idle_timeout_s=IDLE_S, bound_idle_timeout_s=IDLE_S)
    busy = await RawClient.connect(server.port)
    await busy.bind()
    busy.send(request_pdu(1, t.OP_BLOCK, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    # A connection opened after the call started idles out: at least one idle period has passed since.
    idle = await RawClient.connect(server.port)
    assert await idle.recv() is None
    busy.send(cancel_pdu(1))
    reply = await busy.recv()
    assert reply.call_id == 1 and reply.status == NCA_S_FAULT_CANCEL
    await busy.close()


async def test_garbage_closes_only_that_connection(server, bound):
    bad = await RawClient.connect(server.port)
    bad.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    while await bad.recv() is not None:        # the core decides how it answers; it must end the connection
        pass
    assert (await bound.call(t.OP_ECHO, b"ok")).stub == b"ok"


async def test_request_before_bind_and_oversized_fragment_are_refused(server, bound):
    early = await RawClient.connect(server.port)
    early.send(request_pdu(1, t.OP_ECHO, b"x"))
    while (reply := await early.recv()) is not None:        # the core's answer (fault or bind_nak), then EOF
        assert reply.ptype in (FAULT, BIND_NAK)
    huge = await RawClient.connect(server.port)
    await huge.bind()
    huge.send(header(0, 3, 0xFFFF, 2) + b"\0" * (0xFFFF - 16))
    while (pdu := await huge.recv()) is not None:
        assert pdu.ptype == FAULT
    assert (await bound.call(t.OP_ECHO, b"ok")).stub == b"ok"


async def test_auth_bind_does_not_hang(server, bound):
    client = await RawClient.connect(server.port)
    pdu = bytearray(bind_pdu())
    auth = struct.pack("<BBBBI", 10, 6, 0, 0, 79231) + b"NTLMSSP\0" + b"\x01\0\0\0" + b"\0" * 20
    pdu += auth
    struct.pack_into("<HH", pdu, 8, len(pdu), len(auth) - 8)
    client.send(bytes(pdu))
    reply = await client.recv()
    assert reply is None or reply.ptype in (13, 12)     # bind_nak (or an ack without auth), never silence
    assert (await bound.call(t.OP_ECHO, b"ok")).stub == b"ok"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from([b"", bind_pdu()]), junk=st.binary(min_size=1, max_size=300))
async def test_random_bytes_never_hurt_the_server(make_server, junk, prefix):
    server = await make_server(idle_timeout_s=IDLE_S)
    victim = await RawClient.connect(server.port)
    victim.send(prefix + junk)
    healthy = await RawClient.connect(server.port)
    assert (await healthy.bind()).ptype == BIND_ACK
    assert (await healthy.call(t.OP_ECHO, junk)).stub == junk
    await healthy.close()
    await server.close()                       # whatever state the victim left, close() tears it all down
    assert server.connections == {} and len(server.groups) == 0
    while await victim.recv() is not None:
        pass


async def test_many_connections_in_parallel(server):
    async def one(n):
        client = await RawClient.connect(server.port)
        await client.bind()
        for k in range(5):
            stub = struct.pack("<II", n, k)
            assert (await client.call(t.OP_ASYNC_ECHO if k % 2 else t.OP_ECHO, stub, call_id=k + 1)).stub == stub
        await client.close()
    await asyncio.gather(*(one(n) for n in range(40)))


def test_probe_is_usable_without_a_loop():
    assert Probe().interface.operations[t.OP_ECHO].handler(None, b"z") == b"z"


async def test_a_defect_in_the_protocol_core_costs_only_its_connection(server, bound, monkeypatch, caplog):
    victim = await RawClient.connect(server.port)
    await victim.bind()
    rc = server_side(server, victim)

    def broken(data):
        raise RuntimeError("core defect")
    monkeypatch.setattr(rc.conn, "receive_data", broken)
    monkeypatch.setattr(rc.conn, "receive_plain_request", broken)     # the core's other input (one whole request)
    victim.send(request_pdu(2, t.OP_ECHO, b"x"))
    assert await victim.recv() is None
    await rc.finished
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
    assert (await bound.call(t.OP_ECHO, b"ok")).stub == b"ok"


async def test_a_peer_that_does_not_read_its_replies_stops_being_read(server, bound):
    rc = server_side(server, bound)
    stub = b"\xab" * 4000
    sent = 0
    while rc.transport.is_reading():
        for _ in range(50):
            sent += 1
            bound.send(request_pdu(sent, t.OP_ECHO, stub))
        await asyncio.sleep(0.001)
    received = 0
    while received < sent:                      # reading the replies lets the server read again
        reply = await bound.recv()
        assert reply.call_id == received + 1 and reply.stub == stub
        received += 1
    await until(lambda: rc.transport.is_reading())


async def test_context_handles_beyond_the_association_s_most_fault_remote_no_memory_logged_once(
        make_server, probe, caplog):
    server = await make_server(max_context_handles=2)
    a = await RawClient.connect(server.port)
    await a.bind()
    first = (await a.call(t.OP_OPEN_A, b"one")).stub
    await a.call(t.OP_OPEN_A, b"two")
    with caplog.at_level(logging.WARNING, logger="qm2qm.rpc"):
        for _ in range(3):
            refused = await a.call(t.OP_OPEN_A, b"three")
            assert refused.status == 0x1C00001B
    assert sum("no new probe_a handle" in r.getMessage() for r in caplog.records) == 1
    other = await RawClient.connect(server.port)                  # another association has its own room
    await other.bind()
    assert len((await other.call(t.OP_OPEN_A, b"elsewhere")).stub) == 20
    assert (await a.call(t.OP_CLOSE, first)).stub == bytes(20)     # a closed handle makes room again
    assert (await a.call(t.OP_USE_A, (await a.call(t.OP_OPEN_A, b"four")).stub)).stub == b"four"
    for client in (a, other):
        await client.close()
    await server_side_finished(server)
    assert sorted(label for _, label in probe.rundowns) == [b"elsewhere", b"four", b"two"]


async def _bound(server) -> RawClient:
    client = await RawClient.connect(server.port)
    await client.bind()
    return client


def _pipelined(opnum: int, count: int, size: int, first_call_id: int = 100) -> bytes:
    """``count`` requests in one write, each asking ``opnum`` (OP_REPEAT / OP_ASYNC_REPEAT) for ``size`` bytes."""
    return b"".join(request_pdu(first_call_id + i, opnum, struct.pack("<I", size)) for i in range(count))


async def _still_serves_others(server) -> None:
    other = await _bound(server)
    assert (await other.call(t.OP_ECHO, b"fine")).stub == b"fine"
    await other.close()


async def _answers(client: RawClient, count: int) -> dict[int, bytes]:
    """call_id → whole answer stub of the next ``count`` calls (their fragments joined)."""
    answers: dict[int, bytes] = {}
    while len(answers) < count:
        stub = b""
        while True:
            pdu = await client.recv()
            assert pdu is not None, "connection closed"
            stub += pdu.stub
            if pdu.flags & 0x02:                # PFC_LAST_FRAG
                break
        answers[pdu.call_id] = stub
    return answers


async def test_pipelined_calls_wait_while_their_answers_are_backlogged_and_run_once_the_peer_reads(make_server):
    from qm2qm.rpc.server import MAX_OUTPUT_BACKLOG
    server = await make_server()
    client = await _bound(server)
    size = 1024 * 1024
    calls = 32                                   # one read asks for 32 MiB of answers
    client.send(_pipelined(t.OP_REPEAT, calls, size))
    rc = server_side(server, client)
    await until(lambda: rc._deferred is not None and rc._writing_paused)
    # the peer reads nothing: a few answers are out, the rest of the read waits undispatched
    answered = server.statistics.calls_in
    assert answered < 8 and len(rc._deferred) == calls - answered
    assert rc.transport.get_write_buffer_size() <= MAX_OUTPUT_BACKLOG + 2 * size
    answers = await _answers(client, calls)
    assert sorted(answers) == [100 + i for i in range(calls)]
    assert all(stub == bytes(size) for stub in answers.values())
    assert rc._deferred is None and server.statistics.calls_in == calls
    assert (await client.call(t.OP_ECHO, b"after")).stub == b"after"      # reading resumed
    await client.close()


async def test_a_cancel_behind_backlogged_calls_still_reaches_its_call_in_order(make_server):
    server = await make_server()
    client = await RawClient.connect(server.port)
    await client.bind()
    big = struct.pack("<I", 16 * 1024 * 1024)     # more than the loopback socket buffers take: writing pauses
    client.send(request_pdu(1, t.OP_REPEAT, big) + request_pdu(2, t.OP_REPEAT, big)
                + request_pdu(3, t.OP_BLOCK, b"b") + cancel_pdu(3))
    rc = server_side(server, client)
    await until(lambda: rc._deferred is not None and rc._writing_paused)    # 2, 3 and the cancel wait behind 1
    assert [type(e).__name__ for e in rc._deferred] == ["CallRequest", "CallRequest", "CancelRequest"]
    answers = await _answers(client, 2)
    assert sorted(answers) == [1, 2]
    reply = await client.recv()
    assert (reply.call_id, reply.status) == (3, NCA_S_FAULT_CANCEL)   # the cancel came after its call, as sent
    await client.close()


async def test_a_connection_reset_with_backlogged_calls_dispatches_none_of_them(make_server):
    server = await make_server()
    client = await _bound(server)
    client.send(_pipelined(t.OP_REPEAT, 16, 1 << 20))
    rc = server_side(server, client)
    await until(lambda: rc._deferred is not None and rc._writing_paused)
    answered = server.statistics.calls_in
    await client.close(reset=True)
    await rc.finished
    assert rc._deferred is None and server.statistics.calls_in == answered < 16
    await _still_serves_others(server)


async def test_a_peer_that_leaves_too_many_answers_unread_is_closed_and_its_handles_run_down(make_server, probe,
                                                                                              monkeypatch, caplog):
    from qm2qm.rpc import server as server_module
    monkeypatch.setattr(server_module, "MAX_UNREAD_ANSWERS", 8 * 1024 * 1024)
    server = await make_server()
    client = await _bound(server)
    handle = (await client.call(t.OP_OPEN_A, b"held")).stub
    # calls already running still answer while the peer reads nothing: 32 answers of 1 MiB that come a turn later
    with caplog.at_level(logging.WARNING, logger="qm2qm.rpc"):
        client.send(_pipelined(t.OP_ASYNC_REPEAT, 32, 1 << 20))
        rc = server_side(server, client)
        await rc.finished
    assert any("answers unread" in r.getMessage() for r in caplog.records)
    await probe.wait_for(lambda p: ("probe_a", b"held") in p.rundowns)
    assert len(handle) == 20
    await _still_serves_others(server)
    await client.close()


async def test_a_peer_reading_slowly_keeps_its_connection_while_its_unread_answers_stay_under_the_bound(make_server):
    server = await make_server()
    client = await _bound(server)
    client.send(_pipelined(t.OP_ASYNC_REPEAT, 32, 1 << 20))
    rc = server_side(server, client)
    await until(lambda: rc._writing_paused)
    answers = await _answers(client, 32)                 # 32 MiB under the 64 MiB bound: every answer comes
    assert sorted(answers) == [100 + i for i in range(32)] and not rc._lost
    await client.close()


def test_a_peer_is_named_by_one_address_whichever_socket_family_took_it():
    """An IPv4 client seen by a dual-stack listener (::ffff:a.b.c.d) is the same host as over an IPv4 socket: the
    association group's host check and the descriptor's opener host compare it (rpc/server.py _host_of)."""
    from qm2qm.rpc.server import _host_of
    assert _host_of("::ffff:192.0.2.7") == "192.0.2.7" == _host_of("192.0.2.7")
    assert _host_of("2001:db8::7") == "2001:db8::7" and _host_of("fe80::1%eth0") == "fe80::1%eth0"
    assert _host_of("not an address") == "not an address"
