"""Server dispatch over real TCP: sync/async handlers, faults, concurrency, cancel, orphaned (C706 12.6.4)."""
import logging
import struct

from qm2qm.rpc import testing as t
from qm2qm.rpc.interface import Interface, Operation
from tests.rpc.conftest import (BIND_ACK, DID_NOT_EXECUTE, FAULT, RESPONSE, RawClient, cancel_pdu,
                                orphaned_pdu, request_pdu)

NCA_S_FAULT_CANCEL = 0x1C00000D
NCA_S_FAULT_UNSPEC = 0x1C000012
NCA_S_OP_RNG_ERROR = 0x1C010002


async def test_sync_echo_returns_the_stub_with_the_call_id(bound):
    reply = await bound.call(t.OP_ECHO, b"hello world!", call_id=41)
    assert reply.ptype == RESPONSE and reply.stub == b"hello world!"


async def test_async_echo_runs_as_a_task_and_answers(bound):
    reply = await bound.call(t.OP_ASYNC_ECHO, b"\x01\x02\x03\x04", call_id=5)
    assert reply.stub == b"\x01\x02\x03\x04"


async def test_rpc_fault_from_a_handler_becomes_a_fault_pdu_with_its_status(bound):
    reply = await bound.call(t.OP_FAULT, struct.pack("<I", 0xC00E0003), call_id=9)
    assert reply.ptype == FAULT and reply.status == 0xC00E0003
    assert not reply.flags & DID_NOT_EXECUTE


async def test_forbidden_fault_status_is_replaced_by_fault_unspec(bound):
    reply = await bound.call(t.OP_FAULT, struct.pack("<I", 0xC0000005))
    assert reply.status == NCA_S_FAULT_UNSPEC


async def test_crashing_handlers_are_logged_and_faulted_and_the_connection_survives(bound, caplog):
    with caplog.at_level(logging.ERROR, logger="qm2qm.rpc"):
        sync = await bound.call(t.OP_CRASH, b"x", call_id=1)
        async_ = await bound.call(t.OP_ASYNC_CRASH, b"x", call_id=2)
    assert sync.status == NCA_S_FAULT_UNSPEC and async_.status == NCA_S_FAULT_UNSPEC
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert {r.exc_info[0] for r in tracebacks} == {ZeroDivisionError, KeyError}
    assert {r.call_id for r in tracebacks} == {1, 2}
    assert (await bound.call(t.OP_ECHO, b"still here", call_id=3)).stub == b"still here"


async def test_unknown_opnum_is_op_rng_error_did_not_execute(bound):
    reply = await bound.call(200, b"", call_id=3)
    assert reply.status == NCA_S_OP_RNG_ERROR and reply.flags & DID_NOT_EXECUTE


async def test_handler_returning_a_non_bytes_value_is_a_fault_not_a_crash(make_server, probe):
    iface = Interface(probe.interface.uuid, probe.interface.version, "bad",
                      {0: Operation(0, "bad", lambda ctx, stub: 42)})
    server = await make_server()
    server.registry.clear()
    server.register(iface)
    client = await RawClient.connect(server.port)
    assert (await client.bind()).ptype == BIND_ACK
    assert (await client.call(0, b"")).status == NCA_S_FAULT_UNSPEC
    await client.close()


async def test_pipelined_async_calls_get_their_own_call_ids(bound):
    for call_id in range(1, 21):
        bound.send(request_pdu(call_id, t.OP_ASYNC_ECHO, struct.pack("<I", call_id * 3)))
    replies = [await bound.recv() for _ in range(20)]
    assert sorted(r.call_id for r in replies) == list(range(1, 21))
    assert all(r.stub == struct.pack("<I", r.call_id * 3) for r in replies)


async def test_a_blocked_call_does_not_stop_later_calls_on_the_same_connection(bound, probe):
    bound.send(request_pdu(1, t.OP_BLOCK, b"slow"))
    await probe.wait_for(lambda p: p.blocked == 1)
    reply = await bound.call(t.OP_ECHO, b"fast", call_id=2)
    assert reply.stub == b"fast"
    probe.release()
    late = await bound.recv()
    assert late.call_id == 1 and late.stub == b"slow"


async def test_a_blocked_call_does_not_stop_other_connections(bound, connect, probe):
    bound.send(request_pdu(1, t.OP_BLOCK, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    others = [await connect() for _ in range(3)]
    for n, other in enumerate(others):
        assert (await other.bind()).ptype == BIND_ACK
        assert (await other.call(t.OP_ECHO, b"o%d" % n)).stub == b"o%d" % n


async def test_co_cancel_cancels_the_task_and_answers_fault_cancel(bound, probe):
    bound.send(request_pdu(11, t.OP_BLOCK, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    bound.send(cancel_pdu(11))
    reply = await bound.recv()
    assert reply.call_id == 11 and reply.ptype == FAULT and reply.status == NCA_S_FAULT_CANCEL
    assert probe.cancelled == 1
    assert (await bound.call(t.OP_ECHO, b"after", call_id=12)).stub == b"after"


async def test_co_cancel_in_the_same_segment_as_its_request_still_answers_fault_cancel(bound, probe, server):
    bound.send(request_pdu(13, t.OP_BLOCK, b"") + cancel_pdu(13))     # the task is cancelled before it first runs
    reply = await bound.recv()
    assert reply.call_id == 13 and reply.ptype == FAULT and reply.status == NCA_S_FAULT_CANCEL
    assert probe.blocked == 0                                           # the handler never ran
    assert all(not c.calls for c in server.connections.values())        # and nothing was left in flight
    assert (await bound.call(t.OP_ECHO, b"after", call_id=14)).stub == b"after"


async def test_co_cancel_for_an_unknown_or_finished_call_is_ignored(bound):
    assert (await bound.call(t.OP_ECHO, b"a", call_id=1)).stub == b"a"
    bound.send(cancel_pdu(1))
    bound.send(cancel_pdu(999))
    assert (await bound.call(t.OP_ECHO, b"b", call_id=2)).stub == b"b"


async def test_orphaned_call_is_abandoned_without_a_reply(bound, probe):
    bound.send(request_pdu(21, t.OP_BLOCK, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    bound.send(orphaned_pdu(21))
    await probe.wait_for(lambda p: p.cancelled == 1)
    reply = await bound.call(t.OP_ECHO, b"next", call_id=22)     # the very next PDU is this call's answer
    assert reply.stub == b"next"


async def test_close_faults_pending_calls_with_fault_cancel(make_server, probe):
    server = await make_server()
    client = await RawClient.connect(server.port)
    await client.bind()
    client.send(request_pdu(5, t.OP_BLOCK, b""))
    await probe.wait_for(lambda p: p.blocked == 1)
    await server.close()
    reply = await client.recv()
    assert reply.call_id == 5 and reply.status == NCA_S_FAULT_CANCEL
    assert await client.recv() is None
    assert server.connections == {}


async def test_close_lets_calls_finish_within_the_grace_period(make_server, probe):
    server = await make_server()
    client = await RawClient.connect(server.port)
    await client.bind()
    client.send(request_pdu(5, t.OP_BLOCK, b"done"))
    await probe.wait_for(lambda p: p.blocked == 1)
    probe.release()
    await server.close(grace_s=30)
    reply = await client.recv()
    assert reply.call_id == 5 and reply.stub == b"done"


async def test_register_adds_an_interface_for_later_binds(server, connect):
    from qm2qm.rpc.testing import Probe
    import uuid
    other = Probe()
    other.interface.uuid = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
    client = await connect()
    ack = await client.bind(iface=other.interface.uuid)
    assert ack.results()[0][0] != 0                         # not served yet: context rejected
    server.register(other.interface)
    late = await connect()
    ack = await late.bind(iface=other.interface.uuid)
    assert ack.results()[0][0] == 0
    assert (await late.call(t.OP_ECHO, b"x")).stub == b"x"


async def test_structured_log_fields(bound, caplog, server):
    with caplog.at_level(logging.DEBUG, logger="qm2qm.rpc"):
        wire = (await bound.call(t.OP_OPEN_A, b"lbl", call_id=3)).stub
        await bound.call(t.OP_CLOSE, wire, call_id=4)
    events = [(r.handle_event, r.call_id, r.assoc_group, r.handle) for r in caplog.records
              if hasattr(r, "handle_event")]
    assert events == [("created", 3, bound.assoc_group, wire[4:].hex()),
                      ("closed", 4, bound.assoc_group, wire[4:].hex())]
    assert all(r.conn_id >= 1 and r.peer.startswith("127.0.0.1:") for r in caplog.records
               if hasattr(r, "conn_id") and r.conn_id)


async def test_registering_a_different_interface_under_the_same_id_is_refused(server, probe):
    import pytest
    from qm2qm.rpc.testing import Probe
    server.register(probe.interface)                        # the same object again: harmless
    with pytest.raises(ValueError):
        server.register(Probe().interface)


async def test_async_with_starts_and_closes(probe):
    from qm2qm.rpc.server import RpcServer
    async with RpcServer([probe.interface], idle_timeout_s=None) as server:
        assert server.port != 0
        client = await RawClient.connect(server.port)
        await client.bind()
        assert (await client.call(t.OP_ECHO, b"ctx")).stub == b"ctx"
    assert await client.recv() is None
