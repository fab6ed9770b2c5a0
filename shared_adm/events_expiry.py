"""Time To Be Received (MS-MQDMPR 3.1.2.4 timer, 3.1.7.2.7 event) for the QueueManager.

Expiry = SentTime + TimeToBeReceived (ArrivalTime when SentTime is 0), in whole seconds on the wall clock
of the injected Scheduler; one scheduler timer serves a heap of (due ms, LookupIdentifier, queue id).
A message found Locked or PurgePending at expiry expires at its Dequeue Message End / Abort (DEFECTS.md #14).

A message received before its time leaves its heap entry behind (a heap cannot drop one cheaply): ``_ttbr_entries``
holds the entries of positions still linked, and the heap is rebuilt from it once the stale entries outnumber the live
ones, so a server that sends and receives messages with a day's TimeToBeReceived does not keep a day of entries.
"""
from __future__ import annotations

import heapq

from shared_adm.clock import INFINITE
from shared_adm.enums import MessageClass, OperationType, PositionState, QueueType
from shared_adm.message import Message
from shared_adm.queue import MessagePosition, Queue
from shared_adm.transaction import TransactionalOperation


class ExpiryEvents:
    """Mixin of QueueManager: the Time To Be Received Timer and its expiry event."""

    # Stale heap entries allowed beyond the live ones before a rebuild (a small heap is never worth rebuilding).
    TTBR_STALE_SLACK = 4096

    def _start_ttbr_timer(self, position: MessagePosition, message: Message) -> None:
        ttbr = message.time_to_be_received
        queue = position.queue
        if ttbr is None or ttbr == INFINITE or queue.queue_type is QueueType.SYSTEM:
            return
        base = message.sent_time or message.arrival_time
        delay_ms = max(0, (base + ttbr) * 1000 - round(self.scheduler.wall_time() * 1000))
        due = self.scheduler.now_ms() + delay_ms
        entry = (due, position.lookup_identifier, queue.identifier)
        live = self._ttbr_entries
        live[position] = entry
        heap = self._ttbr_heap
        heapq.heappush(heap, entry)
        if len(heap) - len(live) > len(live) + self.TTBR_STALE_SLACK:
            self._rebuild_ttbr_heap()
        self._arm_ttbr_timer()

    def _rebuild_ttbr_heap(self) -> None:
        """The heap of the live entries only (a stale entry names a gone position, or one with its own live entry)."""
        heap = list(self._ttbr_entries.values())
        heapq.heapify(heap)
        self._ttbr_heap = heap

    def _arm_ttbr_timer(self) -> None:
        if not self._ttbr_heap:
            return
        due = self._ttbr_heap[0][0]
        if self._ttbr_timer is not None and self._ttbr_timer_due is not None and self._ttbr_timer_due <= due:
            return
        if self._ttbr_timer is not None:
            self._ttbr_timer.cancel()
        self._ttbr_timer_due = due
        self._ttbr_timer = self.scheduler.call_later(due - self.scheduler.now_ms(), self._ttbr_fired)

    def _ttbr_fired(self) -> None:
        self._ttbr_timer = None
        self._ttbr_timer_due = None
        now = self.scheduler.now_ms()
        while self._ttbr_heap and self._ttbr_heap[0][0] <= now:
            entry = heapq.heappop(self._ttbr_heap)
            _, lookup_id, queue_id = entry
            queue = self.queue_by_identifier(queue_id)
            position = queue.message_position_list.get(lookup_id) if queue is not None else None
            if position is not None:
                if self._ttbr_entries.get(position) is entry:
                    del self._ttbr_entries[position]
                self.time_to_be_received_timer_expired(position)
        self._arm_ttbr_timer()

    def time_to_be_received_timer_expired(self, position: MessagePosition) -> None:
        """Time To Be Received Timer Expired (3.1.7.2.7); a Locked/PurgePending message expires at its End (#14)."""
        queue = position.queue
        if position not in queue.message_position_list:
            return
        if position.state is not PositionState.AVAILABLE:
            self._ttbr_deferred.add((queue.identifier, position.lookup_identifier))
            return
        message = position.message
        transaction = self.transaction_collection.get(message.transaction_identifier) \
            if message.transaction_identifier else None
        if transaction is not None:
            self._set_state(queue, position, PositionState.LOCKED)
            self._add_operation(transaction, TransactionalOperation(
                OperationType.DEQUEUE, position, dequeue_reason=MessageClass.NACK_RECEIVE_TIMEOUT))
            return
        self._expire(queue, position)

    def _expire(self, queue: Queue, position: MessagePosition) -> None:
        """Delete an expired message (NackReceiveTimeout); dead-letter it if it asked for negative journaling (#19)."""
        message = position.message
        self._remove(queue, position, PositionState.DELETED)
        if message.negative_journaling_requested:
            dlq = (self.system_transactional_deadletter_queue if message.transaction_identifier
                   else self.system_deadletter_queue)
            message.class_ = int(MessageClass.NACK_RECEIVE_TIMEOUT)
            message.time_to_be_received = INFINITE
            self.enqueue_message(dlq, message)
