"""Subqueues (MS-MQDMPR 3.1.1.2 SubqueueCollection; MS-MQMQ 2.1.1 "QueueName;Subqueue") of the QueueManager.

The specifications say what a subqueue is, not when one comes or goes; this follows Windows (MSMQ 4.0): the first
Open Queue naming one creates it, and it is gone once it holds no message and no OpenQueueDescriptor references it.
A subqueue shares its queue's attributes (Transactional, Security: copied or read through ``parent_queue``), has no
queue journal (3.1.7.1.3), takes no sends (messages come only by Move Message, 3.1.7.1.16), and is stored as a
Queue of its own so that its messages survive a restart.
"""
from __future__ import annotations

import uuid

from shared_adm.enums import QueueType
from shared_adm.format_name import is_subqueue_name
from shared_adm.queue import Queue
from shared_adm.store.base import StoredQueue, StoreError

DEFAULT_MAX_SUBQUEUES = 65536       # about 4 KiB each (a Queue and its two sorted lists): near 256 MiB in all


class SubqueueLimitReached(Exception):
    """A subqueue not made: the queue manager already holds ``max_subqueues`` (answered
    MQ_ERROR_INSUFFICIENT_RESOURCES by the protocols, 507 by the admin API)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the queue manager already holds {limit} subqueues")
        self.status = 0xC00E0027        # MQ_ERROR_INSUFFICIENT_RESOURCES


class SubqueueEvents:
    """Mixin of QueueManager: find, create, drop and reload subqueues."""

    def subqueue(self, parent: Queue, name: str, create: bool = False) -> Queue | None:
        """The subqueue ``name`` of ``parent`` (compared without case, as queue names are), created when ``create``
        and absent; None when absent and not created, or when ``parent`` is itself a subqueue or a system queue.
        SubqueueLimitReached when one is to be made and ``max_subqueues`` are held."""
        if not self._may_hold_subqueues(parent):
            return None
        found = self._subqueue_names.get((parent.identifier, name.lower()))
        if found is not None or not create or not is_subqueue_name(name):
            return found
        if len(self._subqueues) >= self.max_subqueues:
            raise SubqueueLimitReached(self.max_subqueues)
        now = int(self.scheduler.wall_time())
        queue = Queue(pathname=f"{parent.pathname};{name}", queue_type=parent.queue_type, create_time=now,
                      modify_time=now, transactional=parent.transactional, label=parent.label)
        self._attach_subqueue(parent, queue, record=True)
        return queue

    def may_have_subqueue(self, parent: Queue, name: str) -> bool:
        """Whether Open Queue of ``parent;name`` would make that subqueue were it absent (the checks of subqueue()
        but the count of those held)."""
        return self._may_hold_subqueues(parent) and is_subqueue_name(name)

    def _may_hold_subqueues(self, queue: Queue) -> bool:
        """A queue of QueueCollection that is not a system queue: only such a queue has subqueues."""
        return queue.parent_queue is None and queue.queue_type is not QueueType.SYSTEM and self.is_live_queue(queue)

    def _attach_subqueue(self, parent: Queue, queue: Queue, record: bool) -> None:
        """Put ``queue`` in ``parent``'s SubqueueCollection; ``record``: write it to the store (not when loading)."""
        if record:
            self.store.put_queue(StoredQueue(queue.store_identifier, queue.persistent_attributes()))
        queue.parent_queue = parent
        queue.queue_manager = self
        queue.qualified_pathname = queue.pathname
        parent.subqueue_collection[queue] = None
        self._subqueues[queue.identifier] = queue
        self._subqueue_names[parent.identifier, queue.subqueue_name.lower()] = queue

    def is_live_queue(self, queue: Queue) -> bool:
        """The queue is in QueueCollection, or is a subqueue in the SubqueueCollection of one that is."""
        parent = queue.parent_queue
        if parent is None:
            return self.queue_collection.get(queue.identifier) is queue
        return self._subqueues.get(queue.identifier) is queue and self.queue_collection.get(
            parent.identifier) is parent

    def queue_by_identifier(self, identifier: uuid.UUID) -> Queue | None:
        """A queue of QueueCollection or a live subqueue, by Identifier (the store's queue key)."""
        return self.queue_collection.get(identifier) or self._subqueues.get(identifier)

    def queues_and_subqueues(self):
        """Every queue of QueueCollection, each followed by its subqueues."""
        for queue in list(self.queue_collection.values()):
            yield queue
            yield from list(queue.subqueue_collection)

    def drop_subqueue_if_idle(self, queue: Queue | None) -> None:
        """A subqueue with no message and no OpenQueueDescriptor is gone (Windows deletes it implicitly)."""
        if queue is None or queue.parent_queue is None or queue.message_position_list \
                or queue.open_queue_descriptor_collection or self._subqueues.get(queue.identifier) is not queue:
            return
        del self._subqueues[queue.identifier]
        self._forget_subqueue_name(queue)
        del queue.parent_queue.subqueue_collection[queue]
        self.store.delete_queue(queue.store_identifier)

    def _live_move_target(self, queue: Queue) -> Queue | None:
        """Where a transaction's pending Move into ``queue`` lands at Commit: the queue itself while it is there; for a
        subqueue that went idle meanwhile, the subqueue of that name its queue has now, or ``queue`` attached again;
        None once the queue (or the subqueue's queue) is gone."""
        if self.is_live_queue(queue):
            return queue
        parent = queue.parent_queue
        if parent is None or self.queue_collection.get(parent.identifier) is not parent:
            return None
        existing = self.subqueue(parent, queue.subqueue_name)
        if existing is not None:
            return existing
        self._attach_subqueue(parent, queue, record=True)
        return queue

    def _delete_subqueues(self, parent: Queue) -> None:
        """Delete Queue (3.1.7.1.4) of ``parent`` takes its subqueues with it, their messages and waits first."""
        for queue in list(parent.subqueue_collection):
            self._delete_contents(queue)    # which drops a subqueue no descriptor holds
            if self._subqueues.pop(queue.identifier, None) is queue:
                self.store.delete_queue(queue.store_identifier)
            self._forget_subqueue_name(queue)
        parent.subqueue_collection.clear()

    def _forget_subqueue_name(self, queue: Queue) -> None:
        key = (queue.parent_queue.identifier, queue.subqueue_name.lower())
        if self._subqueue_names.get(key) is queue:
            del self._subqueue_names[key]

    def _load_subqueues(self, stored: list[tuple[str, Queue]], where: str) -> None:
        """Initialization (3.1.3): attach the stored subqueues to their queues; one whose queue is gone is deleted."""
        for identifier, queue in stored:
            parent_path, _, name = queue.pathname.partition(";")
            parent = self._by_path.get(parent_path.lower())
            if parent is None or parent.queue_type is QueueType.SYSTEM:
                self.store.delete_queue(identifier)
                continue
            if self.subqueue(parent, name) is not None:
                raise StoreError(f"{where}: corrupt queue {identifier!r:.60}: subqueue {queue.pathname!r:.60} is "
                                 "stored twice")
            self._attach_subqueue(parent, queue, record=False)

    def _drop_idle_subqueues(self) -> None:
        """After loading: a stored subqueue left empty (its last message went just before a stop) is gone."""
        for queue in list(self._subqueues.values()):
            self.drop_subqueue_if_idle(queue)
