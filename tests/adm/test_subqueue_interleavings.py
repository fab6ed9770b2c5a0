"""Random interleavings of sends, opens and closes of a queue and its subqueues, two-phase and transactional receives,
moves (plain and in transactions, as MS-MQRR R_MoveMessage and the admin API make them) and expiries: every message
sent is, at every step, in exactly one queue, subqueue or dead-letter queue, or was received once (MS-MQDMPR 3.1.7.1.16
Move Message with shared_adm/subqueues.py)."""
from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from shared_adm import status as st
from shared_adm.clock import INFINITE, ManualScheduler
from shared_adm.enums import OperationType, PositionState, QueueAccessType, QueueShareMode, QueueType
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

BASE = r"DIRECT=OS:qm2qm\private$\q"
MEMBERS = ("", ";poison", ";retry")


def scan_for_operation(qm, position):
    """The operation naming ``position`` found the slow way: every operation of every live transaction."""
    found = [op for t in qm.transaction_collection.values() for op in t.transactional_operation_collection
             if op.message_position_reference is position]
    assert len(found) <= 1
    return found[0] if found else None


class Model:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sched = ManualScheduler()
        self.qm = QueueManager(store=MemoryStore(), scheduler=self.sched, computer_name="qm2qm")
        self.qm.TTBR_STALE_SLACK = 0            # rebuild the TTBR heap as soon as stale entries outnumber live ones
        self.qm.initialize()
        self.queue = self.qm.create_queue(r".\private$\q", transactional=seed % 2 == 0)[1]
        self.sent: set[bytes] = set()
        self.gone: set[bytes] = set()       # received for good (ACK, committed Dequeue)
        self.descriptors: list = []
        self.held: list = []                # (descriptor, position) of two-phase reads
        self.transactions: list = []
        self.n = 0

    def member(self) -> str:
        return BASE + self.rng.choice(MEMBERS)

    def places(self):
        for queue in self.qm.queues_and_subqueues():        # the dead-letter queues are in QueueCollection
            for position in queue.message_position_list:
                yield queue, position

    def check(self) -> None:
        bodies = Counter(position.message.body for _, position in self.places())
        duplicated = [body for body, count in bodies.items() if count > 1]
        assert not duplicated, duplicated
        assert set(bodies) | self.gone == self.sent, sorted(self.sent - set(bodies) - self.gone)[:3]
        assert not set(bodies) & self.gone
        for queue in self.queue.subqueue_collection:        # no idle subqueue stays
            assert queue.message_position_list or queue.open_queue_descriptor_collection
        assert self.queue.subqueue_bytes == sum(queue.total_bytes for queue in self.queue.subqueue_collection)
        for _, position in self.places():                   # the operation index answers what a scan finds
            assert self.qm.transactional_operation_on(position) is scan_for_operation(self.qm, position)
        assert len(self.qm._operation_by_position) == sum(
            len(t.transactional_operation_collection) for t in self.qm.transaction_collection.values())
        self.check_ttbr()

    def check_ttbr(self) -> None:
        """No message outlives its TimeToBeReceived while Available; only linked positions hold live TTBR entries."""
        now_ms = round(self.sched.wall_time() * 1000)
        for queue, position in self.places():
            message = position.message
            if queue.queue_type is not QueueType.SYSTEM and position.state is PositionState.AVAILABLE \
                    and message.time_to_be_received not in (None, INFINITE):
                assert now_ms < ((message.sent_time or message.arrival_time) + message.time_to_be_received) * 1000
        linked = {id(position) for _, position in self.places()}
        assert all(id(position) in linked for position in self.qm._ttbr_entries)

    def step(self) -> None:
        op = self.rng.choice(["send", "send", "open", "close", "read", "end", "txread", "txend", "move", "move",
                              "txmove", "time"])
        getattr(self, "op_" + op)()
        self.check()

    def op_send(self) -> None:
        self.n += 1
        body = b"m%d" % self.n
        expiring = self.rng.random() < 0.3
        message = Message(body=body, priority=self.rng.randint(0, 7),
                          time_to_be_received=self.rng.randint(1, 3) if expiring else None,
                          negative_journaling_requested=True)
        assert self.qm.enqueue_message(self.queue, message) == 0
        self.sent.add(body)
        if expiring:        # a new entry rebuilds the heap once its stale entries outnumber the live ones
            assert len(self.qm._ttbr_heap) - len(self.qm._ttbr_entries) <= len(self.qm._ttbr_entries)

    def op_open(self) -> None:
        status, desc = self.qm.open_queue(self.member(), QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
        assert status == st.MQ_OK
        self.descriptors.append(desc)

    def op_close(self) -> None:
        if self.descriptors:
            desc = self.descriptors.pop(self.rng.randrange(len(self.descriptors)))
            self.held = [(d, p) for d, p in self.held if d is not desc]
            assert self.qm.close_queue(desc) == st.MQ_OK

    def op_read(self) -> None:
        if self.descriptors:
            desc = self.rng.choice(self.descriptors)
            result = self.qm.dequeue_message_begin(desc, 0)
            if result.status == st.MQ_OK:
                self.held.append((desc, result.position))

    def op_end(self) -> None:
        if self.held:
            desc, position = self.held.pop(self.rng.randrange(len(self.held)))
            ack = self.rng.random() < 0.5
            body = position.message.body
            assert self.qm.dequeue_message_end(desc, position, ack) == st.MQ_OK
            if ack:
                self.gone.add(body)

    def op_txread(self) -> None:
        if self.descriptors and self.queue.transactional:
            transaction = self.qm.create_transaction(os.urandom(16))
            self.transactions.append(transaction)
            self.qm.dequeue_message(self.rng.choice(self.descriptors), 0, transaction=transaction)

    def op_txend(self) -> None:
        if self.transactions:
            transaction = self.transactions.pop(self.rng.randrange(len(self.transactions)))
            commit = self.rng.random() < 0.5
            received = [op.message_position_reference for op in transaction.transactional_operation_collection
                        if op.operation_type is OperationType.DEQUEUE]
            received = [p.message.body for p in received if p in p.queue.message_position_list]
            outcome = self.qm.transaction_commit if commit else self.qm.transaction_abort
            assert outcome(transaction.identifier) == st.MQ_OK
            if commit:
                self.gone.update(received)

    def _move(self, transaction) -> None:
        source = self.rng.choice(self.descriptors) if self.descriptors else None
        if source is None or source.queue_reference is None:
            return
        available = [p for p in source.queue_reference.message_position_list if p.state is PositionState.AVAILABLE]
        if not available:
            return
        status, target = self.qm.open_queue(self.member(), QueueAccessType.MOVE_ACCESS, QueueShareMode.DENY_NONE)
        assert status == st.MQ_OK
        assert self.qm.move_message(self.rng.choice(available), target.queue_reference, transaction) == st.MQ_OK
        if self.rng.random() < 0.7:             # the mover's destination handle closes before any outcome
            self.qm.close_queue(target)
        else:
            self.descriptors.append(target)

    def op_move(self) -> None:
        self._move(None)

    def op_txmove(self) -> None:
        if self.queue.transactional:
            transaction = self.qm.create_transaction(os.urandom(16))
            self.transactions.append(transaction)
            self._move(transaction)

    def op_time(self) -> None:
        self.sched.advance(self.rng.choice((100, 1000, 2500)))


@pytest.mark.parametrize("seed", range(60))
def test_no_message_is_lost_or_duplicated(seed):
    model = Model(seed)
    for _ in range(250):
        model.step()
    for desc in list(model.descriptors):
        model.qm.close_queue(desc)
    for transaction in model.transactions:
        model.qm.transaction_abort(transaction.identifier)
    model.descriptors, model.held = [], []
    model.check()
    assert all(q.message_position_list for q in model.queue.subqueue_collection)
