"""Waiting readers (MS-MQDMPR 3.1.7.3.1–3.1.7.3.7, 3.1.6.3, 3.1.7.1.17) and the schedulers (3.1.2)."""
from __future__ import annotations

import asyncio

import pytest

from shared_adm import status as st
from shared_adm.clock import INFINITE, AsyncioScheduler, ManualScheduler
from shared_adm.descriptor import PendingRead
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager

from .conftest import QNAME, put


def test_manual_scheduler_fires_in_due_order_and_cancel_works():
    sched = ManualScheduler()
    fired = []
    sched.call_later(20, lambda: fired.append("b"))
    sched.call_later(10, lambda: fired.append("a"))
    handle = sched.call_later(15, lambda: fired.append("x"))
    handle.cancel()
    sched.advance(9)
    assert fired == [] and sched.now_ms() == 9
    sched.advance(11)
    assert fired == ["a", "b"] and sched.pending() == 0
    assert sched.wall_time() == pytest.approx(1_700_000_000.02)


def test_manual_scheduler_runs_timers_set_by_callbacks():
    sched = ManualScheduler()
    fired = []
    sched.call_later(5, lambda: sched.call_later(5, lambda: fired.append(sched.now_ms())))
    sched.advance(10)
    assert fired == [10]


def test_wait_times_out_with_io_timeout(qm, queue, desc, sched):
    pending = qm.dequeue_message(desc, 500, tag=1)
    assert isinstance(pending, PendingRead) and pending.tag == 1 and not pending.done()
    with pytest.raises(asyncio.InvalidStateError):
        pending.result()
    sched.advance(499)
    assert not pending.done()
    sched.advance(1)
    assert pending.result().status == st.MQ_ERROR_IO_TIMEOUT
    assert not desc.waiting_message_read_operation_collection


def test_infinite_wait_never_fires(qm, queue, desc, sched):
    pending = qm.dequeue_message(desc, INFINITE)
    sched.advance(10 ** 12)
    assert not pending.done() and sched.pending() == 0
    put(qm, queue, "m")
    assert pending.result().message.body == b"m"


def test_satisfied_wait_cancels_its_timer(qm, queue, desc, sched):
    pending = qm.dequeue_message(desc, 500)
    put(qm, queue, "m")
    assert pending.result().ok and sched.pending() == 0


def test_done_callbacks_run_once(qm, queue, desc, sched):
    pending = qm.peek_message(desc, 100)
    calls = []
    pending.add_done_callback(lambda p: calls.append(p.result().status))
    sched.advance(100)
    put(qm, queue, "m")
    pending.add_done_callback(lambda p: calls.append("late"))
    assert calls == [st.MQ_ERROR_IO_TIMEOUT, "late"]


def test_cancel_waiting_message_read_request_statuses(qm, queue, desc):
    pending = qm.dequeue_message(desc, 1000, tag="r1")
    assert qm.cancel_waiting_message_read_request(desc, "r2", st.MQ_ERROR_OPERATION_CANCELLED) == st.STATUS_NOT_FOUND
    assert qm.cancel_waiting_message_read_request(desc, None, st.MQ_ERROR_OPERATION_CANCELLED) == st.STATUS_NOT_FOUND
    assert qm.cancel_waiting_message_read_request("junk", "r1", 0) == st.STATUS_NOT_FOUND
    assert qm.cancel_waiting_message_read_request(desc, "r1", -1) == st.MQ_ERROR_INVALID_PARAMETER
    assert qm.cancel_waiting_message_read_request(desc, "r1", "x") == st.MQ_ERROR_INVALID_PARAMETER
    assert not pending.done()
    assert qm.cancel_waiting_message_read_request(desc, "r1", st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert pending.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    assert qm.cancel_waiting_message_read_request(desc, "r1", st.MQ_ERROR_OPERATION_CANCELLED) == st.STATUS_NOT_FOUND
    put(qm, queue, "m")
    assert queue.message_position_list.head.state is PositionState.AVAILABLE


def test_cancel_by_tag_ends_the_first_wait_with_that_tag_and_leaves_no_index_behind(qm, queue, desc, sched):
    # several waits may share a Tag (MS-MQQP adds entries without checking): the earliest ends first; equal Tags
    # that cannot be dict keys are told apart by ==; waits that end any way leave nothing in the Tag index
    first, second, other = (qm.dequeue_message(desc, 1000, tag=7), qm.dequeue_message(desc, 1000, tag=7),
                            qm.dequeue_message(desc, 1000, tag=8))
    listed, listed_too = qm.peek_message(desc, 1000, tag=["a"]), qm.peek_message(desc, 1000, tag=["b"])
    assert qm.cancel_waiting_message_read_request(desc, 7, st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert first.done() and not second.done() and not other.done()
    assert qm.cancel_waiting_message_read_request(desc, ["b"], st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert listed_too.done() and not listed.done()
    assert qm.cancel_waiting_message_read_request(desc, ["c"], 0) == st.STATUS_NOT_FOUND
    put(qm, queue, "m")                     # the earliest receive left takes it, ahead of the later peek
    assert second.result().ok and not other.done() and not listed.done()
    sched.advance(1000)                     # the rest time out
    assert other.result().status == listed.result().status == st.MQ_ERROR_IO_TIMEOUT
    assert not desc.waiting_message_read_operation_collection and desc.waiting_by_tag == {}


def test_pending_read_cancel_method(qm, queue, desc):
    pending = qm.dequeue_message(desc, 1000)
    assert pending.cancel() is True and pending.cancel() is False
    assert pending.result().status == st.MQ_ERROR_OPERATION_CANCELLED


def test_fifo_among_destructive_readers(qm, queue, desc):
    readers = [qm.dequeue_message(desc, 1000, tag=i) for i in range(3)]
    put(qm, queue, "a", "b", "c")
    assert [r.result().message.body for r in readers] == [b"a", b"b", b"c"]


def test_peekers_all_see_the_message_before_the_receiver(qm, queue, desc):
    peekers = [qm.peek_message(desc, 1000) for _ in range(3)]
    receiver = qm.dequeue_message(desc, 1000)
    late_peeker = qm.peek_message(desc, 1000)
    put(qm, queue, "m")
    assert all(p.result().message.body == b"m" for p in peekers)
    assert receiver.result().ok and not late_peeker.done()


async def test_asyncio_await_resolves_on_enqueue():
    qm = QueueManager(scheduler=AsyncioScheduler(asyncio.get_running_loop()))
    qm.initialize()
    _, queue = qm.create_queue(r".\private$\q")
    _, desc = qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    pending = qm.dequeue_message_begin(desc, INFINITE, tag=1)
    asyncio.get_running_loop().call_soon(qm.enqueue_message, queue, Message(body=b"hi"))
    result = await pending
    assert result.message.body == b"hi" and result.position.state is PositionState.LOCKED
    assert await pending is result
    await qm.durable()


async def test_asyncio_timer_expires():
    qm = QueueManager(scheduler=AsyncioScheduler())
    qm.initialize()
    qm.create_queue(r".\private$\q")
    _, desc = qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    result = await qm.peek_message(desc, 5)
    assert result.status == st.MQ_ERROR_IO_TIMEOUT


async def test_cancelled_awaiter_cancels_the_read_and_releases_a_taken_message():
    qm = QueueManager(scheduler=AsyncioScheduler())
    qm.initialize()
    _, queue = qm.create_queue(r".\private$\q")
    _, desc = qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    pending = qm.dequeue_message_begin(desc, INFINITE, tag=1)
    task = asyncio.ensure_future(pending.wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pending.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    assert not desc.waiting_message_read_operation_collection
    # resolved, then the awaiter is cancelled before it resumes: the Locked message is NACKed
    pending = qm.dequeue_message_begin(desc, INFINITE, tag=2)
    task = asyncio.ensure_future(pending.wait())
    await asyncio.sleep(0)
    qm.enqueue_message(queue, Message(body=b"m"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pending.result().ok
    assert queue.message_position_list.head.state is PositionState.AVAILABLE
    assert desc.locked_positions == {}
