"""A handler that returns an asyncio.Future: answered from its done-callback, no task (C706 12.6.4.6, 12.6.4.8)."""
import asyncio
import logging
import struct

import pytest

from qm2qm.rpc import testing as t
from qm2qm.rpc.interface import Interface, Operation, RpcFault
from qm2qm.rpc.server import RpcServer
from tests.rpc.conftest import FAULT, RESPONSE, RawClient, cancel_pdu, orphaned_pdu, request_pdu, until

NCA_S_FAULT_CANCEL = 0x1C00000D
NCA_S_FAULT_UNSPEC = 0x1C000012
OP_FUTURE, OP_ECHO, OP_TASK = 0, 1, 2


class Pending:
    """The interface: OP_FUTURE returns a Future the test completes (by call id), OP_ECHO answers inline."""

    def __init__(self) -> None:
        self.futures: dict[int, asyncio.Future] = {}
        self.answer_now: list[bool] = []
        self.before_first_step = None
        self.coroutines: list = []
        ops = {OP_FUTURE: self.future, OP_ECHO: self.echo, OP_TASK: self.task}
        self.interface = Interface(uuid=t.PROBE_UUID, version=t.PROBE_VERSION, name="pending",
                                   operations={n: Operation(n, f.__name__, f) for n, f in ops.items()})

    def future(self, ctx, stub: bytes):
        future = asyncio.get_running_loop().create_future()
        self.futures[ctx.call_id] = future
        return future

    def echo(self, ctx, stub: bytes) -> bytes:
        self.answer_now.append(ctx.answer_now)
        return stub

    def task(self, ctx, stub: bytes):
        if self.before_first_step is not None:      # runs after the call's task is made, before its first step
            asyncio.get_running_loop().call_soon(self.before_first_step)
        self.coroutines.append(self._answer_later(stub))
        return self.coroutines[-1]

    async def _answer_later(self, stub: bytes) -> bytes:
        return stub


@pytest.fixture
def pending() -> Pending:
    return Pending()


@pytest.fixture
async def served(pending):
    server = RpcServer([pending.interface], idle_timeout_s=None)
    await server.start()
    client = await RawClient.connect(server.port)
    await client.bind()
    yield server, client
    if not client.writer.is_closing():
        await client.close()
    await server.close()


def _in_flight(server) -> int:
    return sum(len(c.calls) for c in server.connections.values())


async def test_a_future_is_answered_when_it_completes(served, pending):
    server, client = served
    client.send(request_pdu(3, OP_FUTURE, b""))
    await until(lambda: 3 in pending.futures)
    assert _in_flight(server) == 1 and not server.calls_to_start     # no task: nothing waits for a first step
    pending.futures[3].set_result(b"answer")
    reply = await client.recv()
    assert (reply.ptype, reply.call_id, reply.stub) == (RESPONSE, 3, b"answer")
    assert _in_flight(server) == 0


async def test_later_calls_are_answered_inline_meanwhile_and_in_completion_order(served, pending):
    server, client = served
    client.send(request_pdu(1, OP_FUTURE, b"") + request_pdu(2, OP_FUTURE, b""))
    await until(lambda: len(pending.futures) == 2)
    assert (await client.call(OP_ECHO, b"now", call_id=3)).stub == b"now"
    assert pending.answer_now == [True]             # the pending Futures hold nothing back
    pending.futures[2].set_result(b"two")
    pending.futures[1].set_result(b"one")
    replies = [await client.recv(), await client.recv()]
    assert [(r.call_id, r.stub) for r in replies] == [(2, b"two"), (1, b"one")]


async def test_co_cancel_before_completion_answers_fault_cancel(served, pending):
    server, client = served
    client.send(request_pdu(5, OP_FUTURE, b""))
    await until(lambda: 5 in pending.futures)
    client.send(cancel_pdu(5))
    reply = await client.recv()
    assert (reply.ptype, reply.call_id, reply.status) == (FAULT, 5, NCA_S_FAULT_CANCEL)
    assert pending.futures[5].cancelled() and _in_flight(server) == 0
    assert (await client.call(OP_ECHO, b"after", call_id=6)).stub == b"after"


async def test_co_cancel_after_the_answer_is_ignored(served, pending):
    server, client = served
    client.send(request_pdu(5, OP_FUTURE, b""))
    await until(lambda: 5 in pending.futures)
    pending.futures[5].set_result(b"done")
    assert (await client.recv()).stub == b"done"
    client.send(cancel_pdu(5))
    assert (await client.call(OP_ECHO, b"next", call_id=6)).stub == b"next"


async def test_orphaned_future_is_cancelled_without_a_reply(served, pending):
    server, client = served
    client.send(request_pdu(7, OP_FUTURE, b""))
    await until(lambda: 7 in pending.futures)
    client.send(orphaned_pdu(7))
    await until(lambda: pending.futures[7].cancelled())
    reply = await client.call(OP_ECHO, b"next", call_id=8)      # the very next PDU is this call's answer
    assert reply.call_id == 8 and reply.stub == b"next"


async def test_connection_lost_before_completion_cancels_it_and_sends_nothing(served, pending):
    server, client = served
    client.send(request_pdu(9, OP_FUTURE, b""))
    await until(lambda: 9 in pending.futures)
    await client.close(reset=True)
    await until(lambda: pending.futures[9].cancelled() and not server.connections)


async def test_a_fault_or_an_error_of_the_future_is_a_fault_pdu(served, pending, caplog):
    server, client = served
    client.send(request_pdu(11, OP_FUTURE, b"") + request_pdu(12, OP_FUTURE, b""))
    await until(lambda: len(pending.futures) == 2)
    pending.futures[11].set_exception(RpcFault(0xC00E0003))
    reply = await client.recv()
    assert (reply.ptype, reply.call_id, reply.status) == (FAULT, 11, 0xC00E0003)
    with caplog.at_level(logging.ERROR, logger="qm2qm.rpc"):
        pending.futures[12].set_exception(ZeroDivisionError())
        reply = await client.recv()
    assert (reply.ptype, reply.call_id, reply.status) == (FAULT, 12, NCA_S_FAULT_UNSPEC)
    assert any(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in caplog.records)


async def test_a_non_bytes_result_is_a_fault(served, pending):
    server, client = served
    client.send(request_pdu(13, OP_FUTURE, b""))
    await until(lambda: 13 in pending.futures)
    pending.futures[13].set_result(struct.pack("<I", 1).decode())
    reply = await client.recv()
    assert (reply.ptype, reply.status) == (FAULT, NCA_S_FAULT_UNSPEC)


async def test_server_close_faults_a_pending_future_with_fault_cancel(pending):
    server = RpcServer([pending.interface], idle_timeout_s=None)
    await server.start()
    client = await RawClient.connect(server.port)
    await client.bind()
    client.send(request_pdu(15, OP_FUTURE, b""))
    await until(lambda: 15 in pending.futures)
    await server.close()
    reply = await client.recv()
    assert (reply.call_id, reply.status) == (15, NCA_S_FAULT_CANCEL)
    assert await client.recv() is None and pending.futures[15].cancelled()


async def test_a_coroutine_still_runs_as_a_task(served, pending):
    server, client = served
    assert (await client.call(OP_TASK, b"t", call_id=17)).stub == b"t"


class _CountedSet(set):
    """calls_to_start, counting how often it is walked."""
    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


async def test_calls_waiting_for_their_first_step_are_not_walked_on_each_call(served, pending):
    # 64 pipelined task calls arrive in one read: each call checks whether earlier tasks have started yet, which
    # must not walk every one of them (64 connections x 64 such calls took 14.7 s when it did)
    server, client = served
    server.calls_to_start = _CountedSet()
    client.send(b"".join(request_pdu(100 + i, OP_TASK, b"x") for i in range(64)))
    replies = [await client.recv() for _ in range(64)]
    assert sorted(r.call_id for r in replies) == list(range(100, 164))
    assert _CountedSet.walks == 0
    await until(lambda: not server.calls_to_start)


async def test_a_task_cancelled_before_its_first_step_holds_no_later_call_back(served, pending):
    server, client = served
    cancelled = []

    def cancel_unstarted() -> None:         # as the loop's shutdown does: the task's body never runs
        for call in server.calls_to_start:
            cancelled.append(call.task.cancel())

    pending.before_first_step = cancel_unstarted
    client.send(request_pdu(20, OP_TASK, b"t"))
    await until(lambda: cancelled)
    pending.before_first_step = None
    assert cancelled == [True]
    await until(lambda: not server.calls_to_start)
    pending.coroutines[-1].close()          # never awaited: its task never ran
    assert (await client.call(OP_ECHO, b"now", call_id=21)).stub == b"now"
    assert pending.answer_now == [True]
