"""The Time To Be Received timer's heap (MS-MQDMPR 3.1.2.4, 3.1.7.2.7): entries of messages gone before their time
do not pile up, and rebuilding the heap changes no expiry."""
from __future__ import annotations

import random

import pytest

from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import QueueAccessType
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

from .conftest import DENY_NONE, QNAME, RECEIVE

DAY = 86_400


def test_entries_of_messages_received_before_their_time_do_not_pile_up(qm, queue, desc, sched):
    for n in range(3 * qm.TTBR_STALE_SLACK):
        assert qm.enqueue_message(queue, Message(body=b"%d" % n, time_to_be_received=DAY)) == 0
        assert qm.dequeue_message(desc, 0).status == st.MQ_OK
    assert not qm._ttbr_entries
    assert len(qm._ttbr_heap) <= qm.TTBR_STALE_SLACK + 1
    # the heap still serves the messages that stay
    assert qm.enqueue_message(queue, Message(body=b"short", time_to_be_received=2)) == 0
    assert qm.enqueue_message(queue, Message(body=b"long", time_to_be_received=DAY)) == 0
    sched.advance(2000)
    assert [p.message.body for p in queue.message_position_list] == [b"long"]


def test_a_purge_forgets_the_entries_of_what_it_deletes(qm, queue):
    for n in range(10):
        assert qm.enqueue_message(queue, Message(body=b"%d" % n, time_to_be_received=DAY)) == 0
    assert len(qm._ttbr_entries) == 10
    assert qm.purge_queue(queue) == st.MQ_OK
    assert not qm._ttbr_entries


def test_a_message_whose_time_passed_in_a_moving_transaction_expires_in_the_target(qm, sched):
    """#14: an expired message is never delivered again, also when a committed move takes it to a subqueue."""
    queue = qm.create_queue(r".\private$\tq", transactional=True)[1]
    assert qm.enqueue_message(queue, Message(body=b"m", time_to_be_received=1)) == 0
    position = next(iter(queue.message_position_list))
    target = qm.open_queue(r"DIRECT=OS:qm2qm\private$\tq;retry", QueueAccessType.MOVE_ACCESS, DENY_NONE)[1]
    reader = qm.open_queue(r"DIRECT=OS:qm2qm\private$\tq;retry", RECEIVE, DENY_NONE)[1]
    waiting = qm.dequeue_message(reader)                # a reader already waits on the subqueue
    transaction = qm.create_transaction(b"move")
    assert qm.move_message(position, target.queue_reference, transaction) == st.MQ_OK
    sched.advance(1500)                                 # its time passes while the transaction holds it
    assert qm.transaction_commit(b"move") == st.MQ_OK
    assert not waiting.done()
    assert not target.queue_reference.message_position_list


class _Driver:
    """Random sends (short and day-long TTBR), receives, two-phase reads, moves to a subqueue, purges and time."""

    def __init__(self, seed: int, slack: int) -> None:
        self.rng = random.Random(seed)
        self.sched = ManualScheduler()
        self.qm = QueueManager(store=MemoryStore(), scheduler=self.sched, computer_name="qm2qm")
        self.qm.TTBR_STALE_SLACK = slack
        self.qm.initialize()
        self.queue = self.qm.create_queue(r".\private$\q")[1]
        self.reader = self.qm.open_queue(QNAME, RECEIVE, DENY_NONE)[1]
        self.sub = self.qm.open_queue(QNAME + ";s", QueueAccessType.MOVE_ACCESS, DENY_NONE)[1]
        self.held: list = []
        self.n = 0

    def step(self) -> None:
        rng, qm = self.rng, self.qm
        op = rng.choice(("send", "send", "send", "receive", "receive", "read", "end", "move", "time", "purge"))
        if op == "send":
            self.n += 1
            ttbr = rng.choice((1, 2, 5, DAY, None))
            qm.enqueue_message(self.queue, Message(body=b"%d" % self.n, time_to_be_received=ttbr,
                                                   negative_journaling_requested=rng.random() < 0.5))
        elif op == "receive":
            qm.dequeue_message(self.reader, 0)
        elif op == "read":
            result = qm.dequeue_message_begin(self.reader, 0)
            if result.status == st.MQ_OK:
                self.held.append(result.position)
        elif op == "end" and self.held:
            qm.dequeue_message_end(self.reader, self.held.pop(rng.randrange(len(self.held))), rng.random() < 0.5)
        elif op == "move":
            available = [p for p in self.queue.message_position_list if p.state.name == "AVAILABLE"]
            if available:
                qm.move_message(rng.choice(available), self.sub.queue_reference)
        elif op == "time":
            self.sched.advance(rng.choice((300, 1000, 2500)))
        elif op == "purge" and rng.random() < 0.2:
            qm.purge_queue(self.queue)

    def places(self) -> list:
        return sorted((queue.pathname, position.message.body, position.state.name)
                      for queue in self.qm.queues_and_subqueues() for position in queue.message_position_list)


@pytest.mark.parametrize("seed", range(20))
def test_rebuilding_the_heap_changes_no_expiry(seed):
    rebuilt, kept = _Driver(seed, slack=0), _Driver(seed, slack=1 << 62)
    for _ in range(400):
        rebuilt.step()
        kept.step()
        assert rebuilt.places() == kept.places()
        assert len(rebuilt.qm._ttbr_heap) <= 2 * len(kept.qm._ttbr_heap) + 1
        for driver in (rebuilt, kept):      # every live entry is still to fire; a fired one is no longer live
            queued = {id(entry) for entry in driver.qm._ttbr_heap}
            assert all(id(entry) in queued for entry in driver.qm._ttbr_entries.values())
    assert len(rebuilt.qm._ttbr_heap) < len(kept.qm._ttbr_heap) or not kept.qm._ttbr_heap
