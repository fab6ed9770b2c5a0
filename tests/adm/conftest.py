"""Fixtures for the shared_adm tests: a QueueManager on a ManualScheduler and a MemoryStore."""
from __future__ import annotations

import pytest

from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import QueueAccessType, QueueShareMode
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

RECEIVE = QueueAccessType.RECEIVE_ACCESS
PEEK = QueueAccessType.PEEK_ACCESS
SEND = QueueAccessType.SEND_ACCESS
DENY_NONE = QueueShareMode.DENY_NONE
DENY_RECEIVE = QueueShareMode.DENY_RECEIVE
QNAME = r"DIRECT=OS:qm2qm\private$\q"


@pytest.fixture
def sched() -> ManualScheduler:
    return ManualScheduler()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def qm(sched, store) -> QueueManager:
    manager = QueueManager(store=store, scheduler=sched, computer_name="qm2qm")
    manager.initialize()
    return manager


@pytest.fixture
def queue(qm):
    status, q = qm.create_queue(r".\private$\q")
    assert status == st.MQ_OK
    return q


@pytest.fixture
def desc(qm, queue):
    status, d = qm.open_queue(QNAME, RECEIVE, DENY_NONE)
    assert status == st.MQ_OK
    return d


def put(qm, queue, *bodies, priority=3, **fields):
    """Enqueue one message per body; returns their LookupIdentifiers."""
    ids = []
    for body in bodies:
        message = Message(body=body if isinstance(body, bytes) else body.encode(), priority=priority, **fields)
        assert qm.enqueue_message(queue, message) == 0
        ids.append(message.lookup_identifier)
    return ids


def bodies(qm, queue):
    """Bodies of the queue's positions in list order with their state names."""
    return [(p.message.body, p.state.value) for p in queue.message_position_list]
