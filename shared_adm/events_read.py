"""Read events of the QueueManager: MS-MQDMPR 3.1.7.1.10–15, 3.1.7.1.17, 3.1.7.3.1–7 and 3.1.6.3.

Every read returns a ``ReadResult`` at once, or a ``PendingRead`` when it must wait (Wait For New
Message, 3.1.7.3.1). Timeouts are milliseconds; INFINITE (0xFFFFFFFF) never expires; 0 never waits and
answers MQ_ERROR_IO_TIMEOUT when nothing is there (DEFECTS.md #5, #6).
"""
from __future__ import annotations

from shared_adm import status as st
from shared_adm.clock import INFINITE
from shared_adm.cursor import Cursor, CursorResult
from shared_adm.descriptor import OpenQueueDescriptor, PendingRead, ReadResult, WaitingMessageReadOperation
from shared_adm.enums import MessageClass, MessageSeekAction, OperationType, PositionState, SeekDirection
from shared_adm.queue import END_KEY, START_KEY, MessagePosition, Queue
from shared_adm.seek import HEAD, seek_available_message_position, seek_available_message_position_with_id
from shared_adm.transaction import TransactionalOperation

# looked at on every read: module names (an Enum class attribute costs more per access)
_OK = st.MQ_OK
_SUCCEEDED, _WAITING = CursorResult.SUCCEEDED, CursorResult.WAITING
_CURSOR_STATUS = {
    CursorResult.ALREADY_RECEIVED: st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
    CursorResult.NOT_FOUND: st.MQ_ERROR_IO_TIMEOUT,                     # #6
    CursorResult.ILLEGAL_CURSOR_ACTION: st.MQ_ERROR_ILLEGAL_CURSOR_ACTION,
}


class ReadEvents:
    """Mixin of QueueManager: the read, wait and cancel events."""

    # ------------------------------------------------------------------ argument checks
    def _check_read(self, descriptor, timeout, cursor, receive: bool) -> int:
        if not isinstance(descriptor, OpenQueueDescriptor) or self._descriptors.get(descriptor.handle) is not descriptor:
            return st.MQ_ERROR_INVALID_HANDLE
        if descriptor.queue_reference is None:
            return st.MQ_ERROR_QUEUE_NOT_AVAILABLE
        if not (descriptor.can_receive if receive else descriptor.can_peek):
            return st.MQ_ERROR_ACCESS_DENIED                                  # #19
        if timeout is not None and not (type(timeout) is int and 0 <= timeout <= INFINITE) \
                and (not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 <= timeout <= INFINITE):
            return st.MQ_ERROR_INVALID_PARAMETER          # (a plain int in range is decided by the first test)
        if cursor is not None and (not isinstance(cursor, Cursor) or cursor.open_queue_descriptor_reference
                                   is not descriptor or self._cursors.get(cursor.handle) is not cursor):
            return st.MQ_ERROR_INVALID_HANDLE
        return st.MQ_OK

    def _check_transaction(self, transaction) -> int:
        if transaction is not None and self.transaction_collection.get(
                getattr(transaction, "identifier", None)) is not transaction:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
        return st.MQ_OK

    # ------------------------------------------------------------------ 3.1.7.1.10 / 11 / 12
    def dequeue_message(self, descriptor: OpenQueueDescriptor, timeout: int = INFINITE, cursor: Cursor | None = None,
                        transaction=None, tag=None, two_phase_read: bool = False) -> ReadResult | PendingRead:
        """Dequeue Message (3.1.7.1.10); with a transaction the transaction wins over two-phase (#11)."""
        status = self._check_read(descriptor, timeout, cursor, receive=True) or self._check_transaction(transaction)
        if status:
            return ReadResult(status)
        timeout = INFINITE if timeout is None else timeout
        queue = descriptor.queue_reference

        def dispose(position: MessagePosition) -> ReadResult:
            return self._dispose(descriptor, queue, position, transaction, two_phase_read)

        if cursor is not None:
            if cursor.waiting:
                return ReadResult(st.MQ_ERROR_ILLEGAL_CURSOR_ACTION)
            result, position = cursor.get_next_message_for_dequeue(no_wait=timeout == 0)
            if result is _SUCCEEDED:
                return dispose(position)
            if result is not _WAITING:
                return ReadResult(_CURSOR_STATUS[result])
        else:
            position = seek_available_message_position(HEAD, queue, False)
            if position.lookup_identifier != END_KEY:
                return dispose(position)

        def complete(position: MessagePosition) -> ReadResult | None:
            if position.state is not PositionState.AVAILABLE or (cursor is not None and not cursor.accepts(position)):
                return None
            if cursor is not None:
                cursor.message_available(position)
            return dispose(position)

        return self.wait_for_new_message(descriptor, timeout, True, tag, cursor, complete)

    def _dispose(self, descriptor, queue: Queue, position: MessagePosition, transaction, two_phase: bool) -> ReadResult:
        """Step 5 of 3.1.7.1.10 / step 4 of 3.1.7.1.13: Locked (+op), Locked (two-phase) or deleted (AckReceive).
        rMessage is rebuilt from the compact form only if asked for (a remote read serializes from that form)."""
        message = None
        if transaction is not None:
            self._set_state(queue, position, PositionState.LOCKED)
            self._add_operation(transaction, TransactionalOperation(
                OperationType.DEQUEUE, position, dequeue_reason=MessageClass.ACK_RECEIVE))
            return ReadResult(st.MQ_OK, message, position, packed=position.packed)
        if two_phase:
            self._set_state(queue, position, PositionState.LOCKED)
            descriptor.locked_positions[position.lookup_identifier] = position
            return ReadResult(st.MQ_OK, message, position, two_phase=True, packed=position.packed)
        self.message_position_deleted(queue, position, MessageClass.ACK_RECEIVE)
        return ReadResult(st.MQ_OK, message, None, packed=position.packed)

    def dequeue_message_begin(self, descriptor: OpenQueueDescriptor, timeout: int = INFINITE,
                              cursor: Cursor | None = None, tag=None, transaction=None) -> ReadResult | PendingRead:
        """Dequeue Message Begin (3.1.7.1.11): Dequeue Message with iTwoPhaseRead True; the position stays Locked."""
        return self.dequeue_message(descriptor, timeout, cursor, transaction, tag, two_phase_read=True)

    def dequeue_message_end(self, descriptor: OpenQueueDescriptor, position: MessagePosition,
                            delete_message: bool, transactional: bool = False) -> int:
        """Dequeue Message End (3.1.7.1.12): ACK deletes (AckReceive / NackQueuePurged), NACK makes it Available."""
        if not isinstance(descriptor, OpenQueueDescriptor) or self._descriptors.get(descriptor.handle) is not descriptor:
            return st.MQ_ERROR_INVALID_HANDLE
        if descriptor.queue_reference is None:
            return st.MQ_ERROR_QUEUE_NOT_AVAILABLE
        if not isinstance(position, MessagePosition) or position.state is PositionState.AVAILABLE:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
        if transactional:
            return st.MQ_OK
        if descriptor.locked_positions.get(position.lookup_identifier) is not position:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE                           # #11: not Locked by a read here
        self._end_two_phase(descriptor, position, bool(delete_message))
        return st.MQ_OK

    def _end_two_phase(self, descriptor, position: MessagePosition, delete_message: bool) -> None:
        descriptor.locked_positions.pop(position.lookup_identifier, None)
        queue = position.queue
        if position not in queue.message_position_list:
            return
        if delete_message or position.state is PositionState.PURGE_PENDING:
            reason = (MessageClass.NACK_QUEUE_PURGED if position.state is PositionState.PURGE_PENDING
                      else MessageClass.ACK_RECEIVE)
            self.message_position_deleted(queue, position, reason)
        else:
            self.message_position_available(queue, position)

    def _abandon(self, result: ReadResult, descriptor: OpenQueueDescriptor) -> None:
        """A resolved two-phase read whose awaiter went away: NACK it so the message is not stranded (it is Locked in
        the locked_positions of the descriptor it was read through, unless that descriptor ended it already)."""
        position = result.position
        if result.two_phase and position is not None \
                and descriptor.locked_positions.get(position.lookup_identifier) is position:
            self._end_two_phase(descriptor, position, delete_message=False)

    # ------------------------------------------------------------------ 3.1.7.1.13 lookup
    def read_message_by_lookup_identifier(self, descriptor: OpenQueueDescriptor, lookup_id: int,
                                          lookup_operation: MessageSeekAction, peek_operation: bool = False,
                                          two_phase_read: bool = False, transaction=None) -> ReadResult:
        """Read Message By Lookup Identifier (3.1.7.1.13): never waits; #2, #3, #4 for the seek."""
        status = self._check_read(descriptor, None, None, receive=not peek_operation) \
            or self._check_transaction(transaction)
        if status:
            return ReadResult(status)
        if not isinstance(lookup_id, int) or isinstance(lookup_id, bool) or not 0 <= lookup_id < (1 << 64) \
                or not isinstance(lookup_operation, MessageSeekAction) or (peek_operation and transaction is not None):
            return ReadResult(st.MQ_ERROR_INVALID_PARAMETER)
        queue = descriptor.queue_reference
        status, position = self.seek_available_message_position_with_id(queue, lookup_id, peek_operation,
                                                                         lookup_operation)
        if status:
            return ReadResult(status)
        if peek_operation:
            return ReadResult(st.MQ_OK, None, None, packed=position.packed)
        return self._dispose(descriptor, queue, position, transaction, two_phase_read)

    def seek_available_message_position(self, initial, queue: Queue, peek_operation: bool,
                                        seek_direction: SeekDirection = SeekDirection.FORWARD) -> MessagePosition:
        """Seek Available Message Position (3.1.7.3.2); ``initial`` may be seek.HEAD (inclusive, #1)."""
        return seek_available_message_position(initial, queue, peek_operation, seek_direction)

    def seek_available_message_position_with_id(self, queue: Queue, lookup_id: int, peek_operation: bool,
                                                lookup_action: MessageSeekAction):
        """Seek Available Message Position With Id (3.1.7.3.3) -> (rStatus, rMessagePosition)."""
        return seek_available_message_position_with_id(queue, lookup_id, peek_operation, lookup_action)

    # ------------------------------------------------------------------ 3.1.7.1.14 / 15 peeks
    def peek_message(self, descriptor: OpenQueueDescriptor, timeout: int = INFINITE, cursor: Cursor | None = None,
                     tag=None) -> ReadResult | PendingRead:
        """Peek Message (3.1.7.1.15): peek current with a cursor, first message without; a tag makes it cancellable (#8)."""
        status = self._check_read(descriptor, timeout, cursor, receive=False)
        if status:
            return ReadResult(status)
        timeout = INFINITE if timeout is None else timeout
        queue = descriptor.queue_reference
        if cursor is not None:
            if cursor.waiting:
                return ReadResult(st.MQ_ERROR_ILLEGAL_CURSOR_ACTION)
            result, position = cursor.get_message_for_peek()
            if result is _SUCCEEDED:
                return ReadResult(_OK, None, None, False, position.packed)
            if result is not _WAITING:
                return ReadResult(_CURSOR_STATUS[result])
        else:
            position = seek_available_message_position(HEAD, queue, True)
            if position.lookup_identifier != END_KEY:
                return ReadResult(_OK, None, None, False, position.packed)
        return self.wait_for_new_message(descriptor, timeout, False, tag, cursor, self._peek_completion(cursor))

    def peek_next_message(self, descriptor: OpenQueueDescriptor, timeout: int = INFINITE,
                          cursor: Cursor | None = None, tag=None) -> ReadResult | PendingRead:
        """Peek Next Message (3.1.7.1.14): a cursor is required; Unread cursor → MQ_ERROR_ILLEGAL_CURSOR_ACTION."""
        status = self._check_read(descriptor, timeout, cursor, receive=False)
        if status:
            return ReadResult(status)
        if cursor is None:
            return ReadResult(st.MQ_ERROR_INVALID_PARAMETER)
        if cursor.waiting:
            return ReadResult(st.MQ_ERROR_ILLEGAL_CURSOR_ACTION)
        timeout = INFINITE if timeout is None else timeout
        result, position = cursor.get_next_message_for_peek()
        if result is _SUCCEEDED:
            return ReadResult(_OK, None, None, False, position.packed)
        if result is not _WAITING:
            return ReadResult(_CURSOR_STATUS[result])
        return self.wait_for_new_message(descriptor, timeout, False, tag, cursor, self._peek_completion(cursor))

    @staticmethod
    def _peek_completion(cursor: Cursor | None):
        def complete(position: MessagePosition) -> ReadResult | None:
            if position.state is not PositionState.AVAILABLE or (cursor is not None and not cursor.accepts(position)):
                return None
            if cursor is not None:
                cursor.message_available(position)
            return ReadResult(_OK, None, None, False, position.packed)
        return complete

    # ------------------------------------------------------------------ 3.1.7.3.1 and its timer
    def wait_for_new_message(self, descriptor: OpenQueueDescriptor, timeout: int, destructive_read: bool, tag,
                             cursor: Cursor | None, complete) -> ReadResult | PendingRead:
        """Wait For New Message (3.1.7.3.1): "Failed" is MQ_ERROR_IO_TIMEOUT (#5); else a PendingRead."""
        if descriptor.queue_reference is None or timeout <= 0:
            if cursor is not None:
                cursor.wait_time_expired()
            return ReadResult(st.MQ_ERROR_QUEUE_NOT_AVAILABLE if descriptor.queue_reference is None
                              else st.MQ_ERROR_IO_TIMEOUT)
        op = WaitingMessageReadOperation(destructive_read=destructive_read, tag=tag, cursor_reference=cursor,
                                         descriptor=descriptor, queue_manager=self, complete=complete)
        op.pending = PendingRead(op)
        if not descriptor.waiting_message_read_operation_collection:
            descriptor.queue_reference.waiting_descriptors[descriptor.open_order] = descriptor
        descriptor.waiting_message_read_operation_collection[op] = None
        op.queue = descriptor.queue_reference
        ref = None if cursor is None else cursor.message_position_reference
        op.accept_key = START_KEY if ref is None else ref.lookup_identifier       # what Cursor.accepts compares
        op.queue.waiting_read_keys.add(op.accept_key)
        if cursor is not None:
            cursor.waiting_read = op
        if tag is not None:
            descriptor.waiting_by_tag.setdefault(_tag_key(tag), {})[op] = None
        self.waiting_message_read_timer_start(op, timeout)
        return op.pending

    def waiting_message_read_timer_start(self, reader: WaitingMessageReadOperation, timeout: int) -> None:
        """Waiting Message Read Timer Start (3.1.7.3.4); INFINITE never expires (3.1.2.3)."""
        if timeout != INFINITE:
            reader.timer = self.scheduler.call_later(timeout, lambda: self.waiting_message_read_timer_expired(reader))

    def waiting_message_read_timer_expired(self, reader: WaitingMessageReadOperation) -> None:
        """Waiting Message Read Timer Expired (3.1.6.3): stop the wait with MQ_ERROR_IO_TIMEOUT."""
        reader.timer = None
        self._stop_waiting(reader, st.MQ_ERROR_IO_TIMEOUT)

    def _stop_waiting(self, reader: WaitingMessageReadOperation, status: int) -> None:
        """Waiting Message Read Timer Stop (3.1.7.3.5): the wait ends with ``status``; the cursor's wait expires."""
        if reader.pending is None or reader.pending.done():
            return
        self._detach(reader)
        if reader.cursor_reference is not None:
            reader.cursor_reference.wait_time_expired()
        reader.pending._resolve(ReadResult(status))

    def _detach(self, reader: WaitingMessageReadOperation) -> None:
        descriptor = reader.descriptor
        descriptor.waiting_message_read_operation_collection.pop(reader, None)
        if reader.queue is not None:
            reader.queue.waiting_read_keys.remove(reader.accept_key)
            if not descriptor.waiting_message_read_operation_collection:
                reader.queue.waiting_descriptors.pop(descriptor.open_order, None)
            reader.queue = None
        if reader.cursor_reference is not None and reader.cursor_reference.waiting_read is reader:
            reader.cursor_reference.waiting_read = None
        if reader.tag is not None:
            key = _tag_key(reader.tag)
            bucket = descriptor.waiting_by_tag.get(key)
            if bucket is not None and bucket.pop(reader, 0) is None and not bucket:
                del descriptor.waiting_by_tag[key]
        if reader.timer is not None:
            reader.timer.cancel()
            reader.timer = None

    def _offer(self, queue: Queue, position: MessagePosition) -> None:
        """The reader loop of Message Position Available (3.1.7.2.2) with Waiting Message Read Satisfied (3.1.7.3.6)."""
        keys = queue.waiting_read_keys
        if not keys or keys[0] >= position.lookup_identifier:
            return              # no reader waits, or every one waits on a cursor at or past the position
        for desc in list(queue.waiting_descriptors.values()):
            for reader in list(desc.waiting_message_read_operation_collection):
                if position.state is not PositionState.AVAILABLE:
                    return
                if reader.pending.done():
                    continue
                result = reader.complete(position)
                if result is None:
                    continue
                self._detach(reader)
                reader.pending._resolve(result)
                if reader.destructive_read:
                    return

    # ------------------------------------------------------------------ 3.1.7.1.17
    def cancel_waiting_message_read_request(self, queue_or_descriptor, tag, status: int) -> int:
        """Cancel Waiting Message Read Request (3.1.7.1.17): MQ_OK or STATUS_NOT_FOUND; scoped to a descriptor (#15)."""
        if tag is None:
            return st.STATUS_NOT_FOUND
        if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 0xFFFFFFFF:
            return st.MQ_ERROR_INVALID_PARAMETER
        if isinstance(queue_or_descriptor, OpenQueueDescriptor):
            descriptors = [queue_or_descriptor]
        elif isinstance(queue_or_descriptor, Queue):
            descriptors = list(queue_or_descriptor.waiting_descriptors.values())     # (no wait, no match)
        else:
            return st.STATUS_NOT_FOUND
        key = _tag_key(tag)
        for desc in descriptors:        # the first with that Tag, FIFO as in the collection
            reader = next((r for r in desc.waiting_by_tag.get(key, ()) if r.tag == tag), None)
            if reader is not None:
                self._stop_waiting(reader, status)
                return st.MQ_OK
        return st.STATUS_NOT_FOUND


_UNHASHABLE_TAG = object()      # the one key of every Tag that cannot be a key itself


def _tag_key(tag) -> object:
    """A Tag as a key of OpenQueueDescriptor.waiting_by_tag: itself, or _UNHASHABLE_TAG (those are told apart by ==)."""
    try:
        hash(tag)
    except TypeError:
        return _UNHASHABLE_TAG
    return tag
