"""The remote read both protocols share (qm2qm/remote_read/), below MS-MQQP and MS-MQRR: entry tables, the
inline rule, release once, cancel, release on close, answer-when-durable (MS-MQDMPR 3.1.7.1.11–17)."""
from __future__ import annotations

import asyncio

import pytest

from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, MQ_LOOKUP_RECEIVE_NEXT
from qm2qm.remote_read.core import ReadCore
from qm2qm.remote_read.durable import answer_once_durable, answer_when_durable, await_durable
from shared_adm.store.base import MemoryStore, StoreError
from qm2qm.remote_read.entries import ReadEntry, ReadEntryTable
from qm2qm.remote_read.locks import cancel, release, release_descriptor
from qm2qm.remote_read.packets import take_packet
from qm2qm.remote_read.reads import answerable_now, read_event, run_read, run_read_now
from shared_adm import status as st
from shared_adm.clock import INFINITE, ManualScheduler
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode, RemoteReadState
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager

NAME = "DIRECT=OS:qm2qm\\private$\\shared"


@pytest.fixture
def core():
    qm = QueueManager(scheduler=ManualScheduler())
    qm.initialize()
    qm.create_queue(".\\private$\\shared")
    return ReadCore(qm=qm)


def opened(core):
    status, descriptor = core.qm.open_queue(NAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE,
                                            RemoteReadState.OPENED)
    assert status == st.MQ_OK
    return descriptor


def enqueue(core, descriptor, body=b"m"):
    message = Message(body=body, destination_queue_format_name=NAME)
    assert core.qm.enqueue_message(descriptor.queue_reference, message) == st.MQ_OK
    return message


def states(descriptor):
    return [p.state for p in descriptor.queue_reference.message_position_list]


def receive(core, descriptor, request_id=1, timeout=0, read_timeout=None):
    """(entry, read, finish) of a receive with the caller's ``timeout``, its event raised with ``read_timeout``
    (the inline path tries with 0)."""
    entry = ReadEntry(descriptor.handle, request_id, timeout, MQ_ACTION_RECEIVE, descriptor=descriptor)
    event_timeout = timeout if read_timeout is None else read_timeout
    read = lambda: read_event(core.qm, descriptor, MQ_ACTION_RECEIVE, event_timeout, None, request_id)  # noqa: E731
    def finish(result):
        if result.status != st.MQ_OK:
            return result.status, None
        return take_packet(core, entry, result, receive=True)
    return entry, read, finish


def test_entry_table_keys_on_descriptor_and_request_id_and_removes_the_very_entry():
    table = ReadEntryTable()
    a, b, c = ReadEntry(1, 7), ReadEntry(1, 7), ReadEntry(2, 7)
    for e in (a, b, c):
        table.add(e)
    assert table.find(1, 7) is a and len(table) == 3 and table.has_descriptor(2)
    assert table.remove(b) and not table.remove(b) and a in table and b not in table
    assert table.for_descriptor(1) == [a]
    table.remove(a)
    table.remove(c)
    assert len(table) == 0 and not table.has_descriptor(1)


def test_entry_table_reads_one_key_in_the_order_added_and_counts_each_descriptors_receives():
    table = ReadEntryTable(count_receives=True)
    a, b, c = (ReadEntry(1, 7, action=MQ_ACTION_RECEIVE), ReadEntry(1, 8, action=MQ_ACTION_PEEK_CURRENT),
               ReadEntry(1, 7, action=MQ_LOOKUP_RECEIVE_NEXT))
    for e in (a, b, c, ReadEntry(2, 7, action=MQ_ACTION_PEEK_CURRENT)):
        table.add(e)
    table.add(a)                                            # the same entry again: still one
    assert list(table.matching(1, 7)) == [a, c] and list(table.matching(1, 9)) == [] == list(table.matching(3, 7))
    assert (table.receives_of(1), table.receives_of(2), table.receives_of(3)) == (2, 0, 0)
    assert table.remove(a) and not table.remove(a) and table.receives_of(1) == 1
    table.remove(b)
    table.remove(c)
    assert table.receives_of(1) == 0 and not table.has_descriptor(1)


def test_pending_request_table_finds_the_receive_behind_a_peek_of_the_same_request_id():
    """MS-MQRR 3.1.1.3: the PendingRequestTable holds receives only; a peek sharing the RequestId is not its entry."""
    from qm2qm.mqrr.service import PendingRequestTable

    class Core:
        pending, locked = ReadEntryTable(count_receives=True), ReadEntryTable()
    peek, receive = ReadEntry(1, 7, action=MQ_ACTION_PEEK_CURRENT), ReadEntry(1, 7, action=MQ_ACTION_RECEIVE)
    only_peek = ReadEntry(2, 7, action=MQ_ACTION_PEEK_CURRENT)
    for e in (peek, receive, only_peek):
        Core.pending.add(e)
    table = PendingRequestTable(Core)
    assert table.find(1, 7) is receive and table.find(1, 8) is None and table.find(2, 7) is None
    assert table.has_handle(1) and not table.has_handle(2) and not table.has_handle(3)
    Core.pending.remove(receive)
    Core.locked.add(locked := ReadEntry(2, 9, action=MQ_ACTION_RECEIVE))
    assert table.find(1, 7) is None and not table.has_handle(1) and table.has_handle(2) and table.find(2, 9) is locked


@pytest.mark.parametrize("timeout, cursor, inline", [
    (0, True, True), (0, False, True), (5000, False, True), (INFINITE, False, True), (5000, True, False)])
def test_answerable_now_only_when_trying_with_timeout_zero_changes_nothing(timeout, cursor, inline):
    assert answerable_now(timeout, cursor) is inline


def test_a_receive_locks_its_message_until_released_once(core):
    d = opened(core)
    enqueue(core, d)
    entry, read, finish = receive(core, d)
    status, packet = run_read_now(core, entry, read, finish)
    assert status == st.MQ_OK and b"m" in packet.buffer
    assert states(d) == [PositionState.LOCKED] and entry in core.locked and len(core.pending) == 0
    assert release(core, entry, delete=True) == st.MQ_OK
    assert release(core, entry, delete=True) == st.MQ_ERROR_INVALID_HANDLE
    assert states(d) == [] and len(core.locked) == 0


def test_run_read_now_leaves_nothing_when_the_read_would_wait(core):
    d = opened(core)
    entry, read, finish = receive(core, d, timeout=5000, read_timeout=0)
    assert run_read_now(core, entry, read, finish) is None
    assert len(core.pending) == 0 and not d.waiting_message_read_operation_collection


async def test_a_waiting_read_is_pending_until_cancelled_with_the_callers_status(core):
    d = opened(core)
    entry, read, finish = receive(core, d, request_id=4, timeout=INFINITE)
    task = asyncio.create_task(run_read(core, entry, read, finish))
    await asyncio.sleep(0)
    assert entry in core.pending and entry.waiting is not None
    assert cancel(core, entry, st.MQ_ERROR_OPERATION_CANCELLED) == st.MQ_OK
    assert (await task)[0] == st.MQ_ERROR_OPERATION_CANCELLED
    assert len(core.pending) == 0


async def test_release_descriptor_cancels_waiting_reads_and_nacks_locked_messages(core):
    d = opened(core)
    enqueue(core, d)
    locked, read, finish = receive(core, d, request_id=1)
    run_read_now(core, locked, read, finish)
    peek = ReadEntry(d.handle, 2, INFINITE, MQ_ACTION_PEEK_CURRENT, descriptor=d)
    waiting = asyncio.create_task(run_read(
        core, peek, lambda: core.qm.peek_message(d, INFINITE, tag=2),          # the one message is Locked: waits
        lambda result: result.status))
    await asyncio.sleep(0)
    release_descriptor(core, d.handle, st.MQ_ERROR_OPERATION_CANCELLED)
    assert await waiting == st.MQ_ERROR_OPERATION_CANCELLED
    assert states(d) == [PositionState.AVAILABLE] and len(core.locked) == len(core.pending) == 0


async def test_answer_when_durable_is_inline_without_a_wait_and_a_coroutine_otherwise():
    async def done_at_once():
        return None

    async def waits():
        await asyncio.sleep(0.001)

    assert answer_when_durable(None, lambda failed: b"now") == b"now"
    assert answer_when_durable(done_at_once(), lambda failed: b"now") == b"now"
    later = answer_when_durable(waits(), lambda failed: b"later")
    assert not isinstance(later, bytes) and await later == b"later"


async def test_answer_when_durable_answers_insufficient_resources_when_the_commit_fails():
    """Disk full / read-only store (StoreError) at once or after a wait: the caller is told, not MQ_OK."""
    async def fails_at_once():
        raise StoreError("disk full")

    async def fails_later():
        await asyncio.sleep(0.001)
        raise StoreError("read-only file system")

    assert answer_when_durable(fails_at_once(), lambda failed: failed) == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    later = answer_when_durable(fails_later(), lambda failed: failed)
    assert await later == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert await await_durable(fails_later(), "x") == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert await await_durable(None, "x") is None


async def test_answer_once_durable_is_inline_with_nothing_pending_else_the_stores_future(tmp_path):
    from shared_adm.clock import AsyncioScheduler
    from shared_adm.store.sqlite import SqliteStore
    qm = QueueManager(store=SqliteStore(tmp_path), scheduler=AsyncioScheduler())
    qm.initialize()
    qm.store.flush()
    assert answer_once_durable(qm, lambda failed: (b"now", failed)) == (b"now", None)
    qm.store.set_sequential_id(7)
    later = answer_once_durable(qm, lambda failed: (b"later", failed))
    assert isinstance(later, asyncio.Future) and await later == (b"later", None)
    qm.store.close()
    assert answer_once_durable(qm, lambda failed: failed) == st.MQ_ERROR_INSUFFICIENT_RESOURCES   # closed


async def test_answer_once_durable_takes_the_coroutine_path_for_a_store_without_when_durable():
    class Gated(MemoryStore):
        async def durable(self) -> None:
            await asyncio.sleep(0.001)
    qm = QueueManager(store=Gated(), scheduler=ManualScheduler())
    later = answer_once_durable(qm, lambda failed: b"later")
    assert asyncio.iscoroutine(later) and await later == b"later"


def test_a_packet_the_compact_path_cannot_make_comes_from_the_general_path_byte_for_byte(core, monkeypatch):
    from qm2qm.remote_read import packets
    from shared_adm.packet import serialize_message_to_buffer
    descriptor = opened(core)
    message = enqueue(core, descriptor, b"general")
    [position] = descriptor.queue_reference.message_position_list
    assert packets.serialize_compact(position.packed, packets.MAX_PACKET_SIZE) is not None     # the compact path
    fast_entry, read, finish = receive(core, descriptor)
    status, fast = run_read_now(core, fast_entry, read, finish)
    assert status == st.MQ_OK and fast.buffer == serialize_message_to_buffer(message)
    release(core, fast_entry, delete=False)                 # back to the queue, read again below

    def unforeseen(blob, limit):
        raise TypeError("a value the compact path did not foresee")
    monkeypatch.setattr(packets, "serialize_compact", unforeseen)
    entry, read, finish = receive(core, descriptor, request_id=2)
    status, packet = run_read_now(core, entry, read, finish)
    assert status == st.MQ_OK and packet.buffer == fast.buffer
    assert (packet.size, packet.arrival_time, packet.lookup_identifier) == (
        fast.size, fast.arrival_time, fast.lookup_identifier)


def test_a_message_no_packet_can_carry_is_named_with_its_queue_and_once_moved_aside_the_queue_reads_on(core, caplog):
    d = opened(core)
    bad = Message(body=b"bad", label="L" * 5000, destination_queue_format_name=NAME)    # over 250 characters
    assert core.qm.enqueue_message(d.queue_reference, bad) == st.MQ_OK
    enqueue(core, d, b"good")
    entry, read, finish = receive(core, d)
    with caplog.at_level("ERROR"):
        assert run_read_now(core, entry, read, finish) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, None)
    assert f"message {bad.lookup_identifier:#x} of private$\\shared cannot be returned" in caplog.text
    assert "qm2qm move QUEUE ID SUBQUEUE" in caplog.text and states(d) == [PositionState.AVAILABLE] * 2
    aside = core.qm.subqueue(d.queue_reference, "bad", create=True)
    assert core.qm.move_message(d.queue_reference.message_position_list.get(bad.lookup_identifier), aside) == 0
    entry, read, finish = receive(core, d, request_id=2)
    status, packet = run_read_now(core, entry, read, finish)
    assert status == st.MQ_OK and b"good" in packet.buffer
