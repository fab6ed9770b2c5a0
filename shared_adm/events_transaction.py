"""Transaction events of the QueueManager: MS-MQDMPR 3.1.7.1.8 and 3.1.4.3–3.1.4.5."""
from __future__ import annotations

from shared_adm import status as st
from shared_adm.compact import recoverable
from shared_adm.enums import MessageClass, OperationType, PositionState
from shared_adm.store.base import PackedStoredMessage
from shared_adm.transaction import Transaction, TransactionalOperation


class TransactionEvents:
    """Mixin of QueueManager: Create Transaction, Transaction Prepare / Commit / Abort (single-phase only)."""

    def create_transaction(self, transaction_identifier: bytes) -> Transaction:
        """Create Transaction (3.1.7.1.8); an identifier already in use is refused with ValueError."""
        if not isinstance(transaction_identifier, (bytes, str)) or not transaction_identifier:
            raise ValueError("transaction identifier must be non-empty bytes or str")
        if transaction_identifier in self.transaction_collection:
            raise ValueError(f"transaction {transaction_identifier!r} already exists")
        transaction = Transaction(transaction_identifier)
        self.transaction_collection[transaction_identifier] = transaction
        return transaction

    def _add_operation(self, transaction: Transaction, operation: TransactionalOperation) -> None:
        """Append to TransactionalOperationCollection (3.1.1.14), noting which position the operation names."""
        transaction.transactional_operation_collection.append(operation)
        self._operation_by_position[id(operation.message_position_reference)] = operation

    def transactional_operation_on(self, position) -> TransactionalOperation | None:
        """The TransactionalOperation of any Transaction in TransactionCollection whose MessagePositionReference is
        ``position`` (what a Locked message is locked by), or None."""
        operation = self._operation_by_position.get(id(position))
        return operation if operation is not None and operation.message_position_reference is position else None

    def _end_operations(self, transaction: Transaction) -> None:
        """The transaction's outcome is applied: its operations name no position any more."""
        by_position = self._operation_by_position
        for operation in transaction.transactional_operation_collection:
            key = id(operation.message_position_reference)
            if by_position.get(key) is operation:
                del by_position[key]
        transaction.transactional_operation_collection.clear()

    def transaction_prepare(self, transaction_identifier, single_phase: bool = True) -> int:
        """Transaction Prepare (3.1.4.3): not found → MQ_ERROR_TRANSACTION_SEQUENCE, checked first (#16)."""
        transaction = self.transaction_collection.get(transaction_identifier)
        if transaction is None:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
        transaction.single_phase = single_phase
        return st.MQ_OK

    def transaction_commit(self, transaction_identifier) -> int:
        """Transaction Commit (3.1.4.4): Enqueue → Available, Dequeue → Deleted (its DequeueReason), Move → moved."""
        transaction = self.transaction_collection.pop(transaction_identifier, None)
        if transaction is None:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
        for op in transaction.transactional_operation_collection:
            position = op.message_position_reference
            queue = position.queue
            if position not in queue.message_position_list:
                continue
            if op.operation_type is OperationType.ENQUEUE:
                if recoverable(position.packed):
                    self.store.put_message(PackedStoredMessage(queue.store_identifier, position.lookup_identifier,
                                                               PositionState.AVAILABLE.value, position.packed))
                self._make_available(queue, position, record=False)
            elif op.operation_type is OperationType.DEQUEUE:
                self.message_position_deleted(queue, position, op.dequeue_reason or MessageClass.ACK_RECEIVE)
            else:
                target = self._live_move_target(op.target_queue_reference)
                if target is not None:
                    self._move_now(position, target)
                else:           # its target queue was deleted meanwhile: the message stays where it was
                    self.message_position_available(queue, position)
        self._end_operations(transaction)
        return st.MQ_OK

    def transaction_abort(self, transaction_identifier) -> int:
        """Transaction Abort (3.1.4.5), with the indentation read as #16 decides."""
        transaction = self.transaction_collection.pop(transaction_identifier, None)
        if transaction is None:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
        for op in transaction.transactional_operation_collection:
            position = op.message_position_reference
            queue = position.queue
            if position not in queue.message_position_list:
                continue
            if op.operation_type is OperationType.ENQUEUE:
                self._remove(queue, position, PositionState.DELETED, record=False)   # never stored
            elif position.state is PositionState.PURGE_PENDING:
                self.message_position_deleted(queue, position, op.dequeue_reason or MessageClass.NACK_QUEUE_PURGED)
            else:
                self.message_position_available(queue, position)
        self._end_operations(transaction)
        return st.MQ_OK
