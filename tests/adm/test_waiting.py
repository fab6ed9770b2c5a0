"""Waiting readers (MS-MQDMPR 3.1.7.3.1–3.1.7.3.7, 3.1.6.3, 3.1.7.1.17) and the schedulers (3.1.2)."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings, strategies as hs

from shared_adm import status as st
from shared_adm.clock import INFINITE, AsyncioScheduler, ManualScheduler
from shared_adm.compact import unpack
from shared_adm.cursor import Cursor
from shared_adm.descriptor import PendingRead
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

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


# ---------------------------------------------------------------- Queue.waiting_read_keys (3.1.7.2.2's reader loop)
class _AlwaysMaybe(list):
    """A waiting_read_keys that never lets _offer skip its reader loop (the loop as 3.1.7.2.2 words it)."""
    def add(self, key):
        self.append(key)

    def __getitem__(self, index):
        return -2


class _EveryDescriptor(dict):
    """A waiting_descriptors that hands _offer every open descriptor of the queue, in collection order."""
    def __init__(self, queue):
        super().__init__()
        self._queue = queue

    def values(self):
        return list(self._queue.open_queue_descriptor_collection)


_wait_step = hs.one_of(
    hs.tuples(hs.just("put"), hs.integers(0, 7)),
    hs.tuples(hs.just("wait"), hs.sampled_from([0, 500, INFINITE])),
    hs.tuples(hs.just("cursor"), hs.integers(0, 3), hs.sampled_from(["peek", "peek_next", "receive"]),
              hs.sampled_from([0, 500, INFINITE])),
    hs.tuples(hs.just("begin"), hs.integers(0, 1)),
    hs.tuples(hs.just("end"), hs.integers(0, 15), hs.booleans()),
    hs.tuples(hs.just("close_cursor"), hs.integers(0, 3)),
    hs.tuples(hs.just("cancel"), hs.integers(0, 15)),
    hs.tuples(hs.just("advance"), hs.sampled_from([1, 499, 500])),
)


def _waiting_run(steps, index: bool):
    qm = QueueManager(store=MemoryStore(), scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    queue = qm.create_queue(r".\private$\q")[1]
    if not index:
        queue.waiting_read_keys = _AlwaysMaybe()
        queue.waiting_descriptors = _EveryDescriptor(queue)
    descs = [qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)[1] for _ in range(2)]
    cursors = [qm.open_cursor(descs[i % 2]) for i in range(4)]
    reads, locks, trace = [], [], []

    def seen(result):
        if isinstance(result, PendingRead):
            reads.append(result)
            return "waiting"
        if result.two_phase:
            locks.append((result.position, descs[0]))
        return result.status, result.packed and unpack(result.packed).body

    for step in steps:
        kind = step[0]
        if kind == "put":
            trace.append(qm.enqueue_message(queue, Message(body=b"m%d" % len(trace), priority=step[1])))
        elif kind == "wait":
            trace.append(seen(qm.dequeue_message_begin(descs[0], step[1], tag=len(trace))))
        elif kind == "cursor":
            cursor, action, timeout = cursors[step[1]], step[2], step[3]
            desc = cursor.open_queue_descriptor_reference
            read = {"peek": qm.peek_message, "peek_next": qm.peek_next_message,
                    "receive": qm.dequeue_message}[action]
            trace.append(seen(read(desc, timeout, cursor=cursor, tag=len(trace))))
        elif kind == "begin":
            trace.append(seen(qm.dequeue_message_begin(descs[step[1]], 0)))
        elif kind == "end" and locks:
            position, desc = locks.pop(step[1] % len(locks))
            trace.append(qm.dequeue_message_end(desc, position, step[2]))
        elif kind == "close_cursor":
            trace.append(qm.close_cursor(cursors[step[1]]) if cursors[step[1]].handle in qm._cursors else None)
        elif kind == "cancel":
            trace.append(qm.cancel_waiting_message_read_request(descs[0], step[1], st.MQ_ERROR_OPERATION_CANCELLED))
        elif kind == "advance":
            qm.scheduler.advance(step[1])
        if index:
            readers = [r for d in descs for r in d.waiting_message_read_operation_collection]
            assert list(queue.waiting_read_keys) == sorted(r.accept_key for r in readers)
            assert all(r.queue is queue for r in readers)
            assert list(queue.waiting_descriptors.values()) == [
                d for d in queue.open_queue_descriptor_collection if d.waiting_message_read_operation_collection]
            for cursor in cursors:          # Close Cursor stops the one wait it records, not a scan for it
                assert [r for r in readers if r.cursor_reference is cursor] == \
                    ([cursor.waiting_read] if cursor.waiting_read is not None else [])
    outcomes = [(r.done(), r.done() and (r.result().status, r.result().packed and unpack(r.result().packed).body))
                for r in reads]
    return trace, outcomes, [(p.lookup_identifier, p.state) for p in queue.message_position_list]


@settings(max_examples=300, deadline=None)
@given(hs.lists(_wait_step, max_size=30))
def test_offer_skips_only_readers_that_cannot_take_the_position(steps):
    """The index lets Message Position Available skip its reader loop when no reader can take the position, and visit
    only the descriptors with waits; every read ends, waits or is skipped exactly as with the loop run over every
    reader of every descriptor. Each cursor records its wait."""
    assert _waiting_run(steps, index=True) == _waiting_run(steps, index=False)


def test_a_nack_behind_parked_cursor_peeks_visits_none_of_them(qm, queue, monkeypatch):
    """Cursor waits past a message made available again are not asked to take it (what let a caller with 8,192
    parked cursor peeks make every NACK cost 11.6 ms)."""
    desc = qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)[1]
    put(qm, queue, "a", "b")
    parked = []
    for _ in range(3):
        cursor = qm.open_cursor(desc)
        assert qm.peek_message(desc, 0, cursor=cursor).status == st.MQ_OK
        assert qm.peek_next_message(desc, 0, cursor=cursor).status == st.MQ_OK         # at "b"
        parked.append(qm.peek_next_message(desc, INFINITE, cursor=cursor))
    locked = qm.dequeue_message_begin(desc, 0)
    asked = []
    monkeypatch.setattr(Cursor, "accepts", lambda self, position: asked.append(self) or True)
    assert qm.dequeue_message_end(desc, locked.position, False) == st.MQ_OK
    assert asked == [] and not any(read.done() for read in parked)
    put(qm, queue, "c")                                     # past every cursor: each is asked, each peeks it
    assert len(asked) == 3 and all(read.result().status == st.MQ_OK for read in parked)
