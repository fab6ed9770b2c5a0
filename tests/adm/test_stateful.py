"""Random event sequences against a tiny reference model of one queue (MS-MQDMPR 3.1.7.1, 3.2, 3.1.3, 3.1.7.2.7)."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings, strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from shared_adm import status as st
from shared_adm.clock import INFINITE, ManualScheduler
from shared_adm.enums import MessageSeekAction as Seek, QueueAccessType, QueueShareMode
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

QNAME = r"DIRECT=OS:.\private$\q"
LOW7 = (1 << 56) - 1


@dataclass
class M:
    """A message of the reference model."""
    key: int
    body: bytes
    state: str            # "Available" | "Locked" | "PurgePending"
    recoverable: bool
    due: int | None       # scheduler ms at which TTBR expires
    deferred: bool = False


@dataclass
class C:
    """A cursor of the reference model: a key (-1 = Start) and Read/Unread."""
    key: int = -1
    read: bool = False


class QueueModel(RuleBasedStateMachine):
    """Drives QueueManager and the model with the same events; they must agree after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.sched = ManualScheduler()
        self.seq = 0
        self.msgs: dict[int, M] = {}
        self.known_ids: list[int] = [0, (1 << 64) - 1]
        self._start()

    def _start(self) -> None:
        self.qm = QueueManager(store=self.store, scheduler=self.sched)
        self.qm.TTBR_STALE_SLACK = 0            # the TTBR heap is rebuilt whenever stale entries outnumber live ones
        self.qm.initialize()
        self.queue = self.qm.queue_by_pathname(r".\private$\q")
        if self.queue is None:
            self.queue = self.qm.create_queue(r".\private$\q")[1]
        self.desc = self.qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)[1]
        self.cursors: list[tuple[object, C]] = []
        self.locks: list[tuple[object, int]] = []      # (position, key) held by two-phase reads
        self.waiters: list[tuple[object, int, int]] = []   # (PendingRead, tag, deadline ms), FIFO
        self.tags = 0

    # ---------------------------------------------------------------- model helpers
    def _order(self) -> list[M]:
        return [self.msgs[k] for k in sorted(self.msgs)]

    def _first_available(self, after: int = -1) -> M | None:
        return next((m for m in self._order() if m.key > after and m.state == "Available"), None)

    def _last_available(self, before: int) -> M | None:
        return next((m for m in reversed(self._order()) if m.key < before and m.state == "Available"), None)

    def _delete(self, m: M) -> None:
        del self.msgs[m.key]

    def _lock(self, m: M, position) -> None:
        assert position.lookup_identifier == m.key
        m.state = "Locked"
        self.locks.append((position, m.key))

    def _made_available(self, m: M) -> None:
        """Model of Message Position Available (3.1.7.2.2): the first waiting receiver takes the message."""
        if self.waiters:
            pending, tag, _ = self.waiters.pop(0)
            result = pending.result()
            assert result.status == st.MQ_OK and result.message.body == m.body
            self._lock(m, result.position)

    def _check(self, result, expected: M | None, status_if_none: int) -> None:
        if expected is None:
            assert result.status == status_if_none, (hex(result.status), hex(status_if_none))
        else:
            assert result.status == st.MQ_OK, hex(result.status)
            assert result.message.body == expected.body

    # ---------------------------------------------------------------- rules
    @rule(priority=hs.integers(0, 7), recoverable=hs.booleans(), ttbr=hs.none() | hs.integers(0, 3))
    def enqueue(self, priority, recoverable, ttbr):
        self.seq += 1
        body = b"m%d" % self.seq
        message = Message(body=body, priority=priority, time_to_be_received=INFINITE if ttbr is None else ttbr,
                          delivery_guarantee=DeliveryGuarantee.RECOVERABLE if recoverable
                          else DeliveryGuarantee.EXPRESS)
        assert self.qm.enqueue_message(self.queue, message) == 0
        key = message.lookup_identifier
        assert key >> 56 == 7 - priority
        due = None if ttbr is None else (self.sched.now_ms() // 1000 + ttbr) * 1000
        self.msgs[key] = M(key, body, "Available", recoverable, due)
        self.known_ids.append(key)
        self._made_available(self.msgs[key])

    @rule()
    def peek(self):
        self._check(self.qm.peek_message(self.desc, 0), self._first_available(), st.MQ_ERROR_IO_TIMEOUT)

    @rule()
    def receive(self):
        expected = self._first_available()
        self._check(self.qm.dequeue_message(self.desc, 0), expected, st.MQ_ERROR_IO_TIMEOUT)
        if expected:
            self._delete(expected)

    @rule()
    def begin(self):
        expected = self._first_available()
        result = self.qm.dequeue_message_begin(self.desc, 0)
        self._check(result, expected, st.MQ_ERROR_IO_TIMEOUT)
        if expected:
            self._lock(expected, result.position)

    @precondition(lambda self: self.locks)
    @rule(index=hs.integers(0, 100), ack=hs.booleans())
    def end(self, index, ack):
        position, key = self.locks.pop(index % len(self.locks))
        assert self.qm.dequeue_message_end(self.desc, position, ack) == st.MQ_OK
        m = self.msgs[key]
        if ack or m.state == "PurgePending" or m.deferred:
            self._delete(m)
        else:
            m.state = "Available"
            self._made_available(m)
        if key not in self.msgs or self.msgs[key].state != "Locked":    # not re-taken by a waiting reader
            assert self.qm.dequeue_message_end(self.desc, position, ack) == st.MQ_ERROR_TRANSACTION_SEQUENCE

    @rule(timeout=hs.sampled_from([1, 500, 1000, INFINITE]))
    def wait_receive(self, timeout):
        expected = self._first_available()
        self.tags += 1
        result = self.qm.dequeue_message_begin(self.desc, timeout, tag=self.tags)
        if expected is not None:
            self._check(result, expected, st.MQ_OK)
            self._lock(expected, result.position)
            return
        assert not result.done()
        deadline = None if timeout == INFINITE else self.sched.now_ms() + timeout
        self.waiters.append((result, self.tags, deadline))

    @rule(pick=hs.integers(0, 50))
    def cancel(self, pick):
        tag = pick % (self.tags + 1)
        waiting = [w for w in self.waiters if w[1] == tag]
        status = self.qm.cancel_waiting_message_read_request(self.desc, tag, st.MQ_ERROR_OPERATION_CANCELLED)
        assert status == (st.MQ_OK if waiting else st.STATUS_NOT_FOUND)
        if waiting:
            self.waiters.remove(waiting[0])
            assert waiting[0][0].result().status == st.MQ_ERROR_OPERATION_CANCELLED

    @rule()
    def purge(self):
        self.qm.purge_queue(self.queue)
        for m in list(self.msgs.values()):
            if m.state == "Available":
                self._delete(m)
            else:
                m.state = "PurgePending"

    @rule(pick=hs.integers(0, 1000), action=hs.sampled_from(Seek), peek=hs.booleans(), two_phase=hs.booleans())
    def lookup(self, pick, action, peek, two_phase):
        lookup_id = self.known_ids[pick % len(self.known_ids)]
        result = self.qm.read_message_by_lookup_identifier(self.desc, lookup_id, action, peek, two_phase)
        status, expected = st.MQ_OK, None
        if action is Seek.SEEK_FIRST:
            expected = self._first_available()
        elif action is Seek.SEEK_LAST:
            expected = self._last_available(1 << 64)
        elif lookup_id not in self.msgs:
            status = st.MQ_ERROR_MESSAGE_NOT_FOUND
        elif action is Seek.SEEK_NEXT:
            expected = self._first_available(lookup_id)
        elif action is Seek.SEEK_PREVIOUS:
            expected = self._last_available(lookup_id)
        else:
            m = self.msgs[lookup_id]
            if m.state == "Available":
                expected = m
            elif m.state == "Locked":
                status = st.MQ_ERROR_TRANSACTION_USAGE if peek else st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED
            else:
                status = st.MQ_ERROR_MESSAGE_NOT_FOUND
        if status == st.MQ_OK and expected is None:
            status = st.MQ_ERROR_MESSAGE_NOT_FOUND
        self._check(result, expected, status)
        if expected is not None and not peek:
            if two_phase:
                self._lock(expected, result.position)
            else:
                self._delete(expected)

    @precondition(lambda self: len(self.cursors) < 4)
    @rule()
    def open_cursor(self):
        cursor = self.qm.open_cursor(self.desc)
        self.cursors.append((cursor, C()))

    @precondition(lambda self: self.cursors)
    @rule(index=hs.integers(0, 10), op=hs.sampled_from(["peek", "peek_next", "receive"]))
    def cursor_op(self, index, op):
        cursor, model = self.cursors[index % len(self.cursors)]
        if op == "peek":
            result = self.qm.peek_message(self.desc, 0, cursor=cursor)
            if not model.read:
                expected = self._first_available(model.key)
                self._check(result, expected, st.MQ_ERROR_IO_TIMEOUT)
                if expected:
                    model.key, model.read = expected.key, True
            else:
                m = self.msgs.get(model.key)
                self._check(result, m if m and m.state == "Available" else None, st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED)
        elif op == "peek_next":
            result = self.qm.peek_next_message(self.desc, 0, cursor=cursor)
            if not model.read:
                assert result.status == st.MQ_ERROR_ILLEGAL_CURSOR_ACTION
            else:
                expected = self._first_available(model.key)
                self._check(result, expected, st.MQ_ERROR_IO_TIMEOUT)
                if expected:
                    model.key = expected.key
        else:
            result = self.qm.dequeue_message(self.desc, 0, cursor=cursor)
            if not model.read:
                expected = self._first_available(model.key)
                self._check(result, expected, st.MQ_ERROR_IO_TIMEOUT)
            else:
                m = self.msgs.get(model.key)
                expected = m if m and m.state == "Available" else None
                self._check(result, expected, st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED)
            if expected:
                model.key, model.read = expected.key, False
                self._delete(expected)

    @rule(ms=hs.sampled_from([0, 1, 250, 999, 1000, 2500]))
    def advance(self, ms):
        self.sched.advance(ms)
        now = self.sched.now_ms()
        for waiter in list(self.waiters):
            if waiter[2] is not None and waiter[2] <= now:
                self.waiters.remove(waiter)
                assert waiter[0].result().status == st.MQ_ERROR_IO_TIMEOUT
            else:
                assert not waiter[0].done()
        for m in list(self.msgs.values()):
            if m.due is not None and m.due <= now and not m.deferred:
                if m.state == "Available":
                    self._delete(m)
                else:
                    m.deferred = True

    @rule()
    def restart(self):
        self.sched = ManualScheduler(start_ms=self.sched.now_ms())
        for m in list(self.msgs.values()):
            if not m.recoverable or m.state == "PurgePending":
                self._delete(m)
            else:
                m.state, m.deferred = "Available", False
        self._start()

    # ---------------------------------------------------------------- invariants
    @invariant()
    def same_list(self):
        actual = [(p.lookup_identifier, p.state.value) for p in self.queue.message_position_list]
        assert actual == [(m.key, m.state) for m in self._order()]

    @invariant()
    def total_bytes_count_available_only(self):
        lst = self.queue.message_position_list
        assert self.queue.total_bytes == sum(len(p.packed) for p in lst if p.state.value == "Available")
        assert lst.available_count == sum(1 for m in self.msgs.values() if m.state == "Available")

    @invariant()
    def store_holds_recoverable_messages(self):
        stored = {(s.lookup_identifier, s.state) for s in self.store.load().messages}
        assert stored == {(m.key, m.state) for m in self.msgs.values() if m.recoverable}

    @invariant()
    def sequential_id_matches(self):
        if self.msgs:
            assert max(k & LOW7 for k in self.msgs) <= self.qm.sequential_id


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
