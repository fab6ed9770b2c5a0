"""Transaction (MS-MQDMPR 3.1.1.14) and TransactionalOperation (3.1.1.13) elements."""
from __future__ import annotations

from dataclasses import dataclass, field

from shared_adm.enums import MessageClass, OperationType


@dataclass(eq=False, slots=True)
class TransactionalOperation:
    """TransactionalOperation (3.1.1.13): OperationType, MessagePositionReference, TargetQueueReference, DequeueReason."""
    operation_type: OperationType
    message_position_reference: object
    target_queue_reference: object = None
    dequeue_reason: MessageClass | None = None


@dataclass(eq=False, slots=True)
class Transaction:
    """Transaction (3.1.1.14): Identifier, TransactionalOperationCollection (FIFO), SinglePhase."""
    identifier: bytes
    transactional_operation_collection: list[TransactionalOperation] = field(default_factory=list)
    single_phase: bool = True
