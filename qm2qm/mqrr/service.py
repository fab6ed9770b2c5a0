"""What every MS-MQRR handler works on (3.1.1): the shared ReadCore, the queue context handles and the
PendingRequestTable (3.1.1.3) over the core's tables."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qm2qm.mqrr.constants import DEFAULT_PORT, PENDING_REQUEST_CLEANUP_MS
from qm2qm.remote_read.actions import is_receive
from qm2qm.remote_read.core import ReadCore
from qm2qm.remote_read.entries import ReadEntry
from qm2qm.rpc.interface import ContextHandleType


@dataclass(eq=False, slots=True)
class PendingRequestEntry(ReadEntry):
    """PendingRequestEntry (3.1.1.2): RequestId, LookupIdentifier, QueueContextHandle (as the handle of its
    OpenQueueDescriptor) and TimeStamp; ``transaction`` is ours: the Transaction a R_StartTransactionalReceive
    received in (None for a plain receive), which decides how its End is generated."""
    time_stamp: int = 0
    transaction: Any = field(default=None, repr=False)


@dataclass(eq=False, slots=True)
class QueueContext:
    """What a QUEUE_CONTEXT_HANDLE_(NO)SERIALIZE (2.2.4) refers to: the OpenQueueDescriptor it opened."""
    descriptor: Any
    move_context: int = 0           # R_OpenQueueForMove's pMoveContext (0 for R_OpenQueue)
    closed: bool = False


class PendingRequestTable:
    """PendingRequestTable (3.1.1.3) keyed on {RequestId, QueueContextHandle}: the receives of a queue context
    still waiting (the core's ``pending``) or holding their Locked message until R_EndReceive (``locked``)."""

    __slots__ = ("_core",)

    def __init__(self, core: ReadCore) -> None:
        self._core = core

    def has_handle(self, descriptor_handle: int) -> bool:
        """Whether the queue context has any entry (3.1.4.9's first bullet)."""
        return self._core.locked.has_descriptor(descriptor_handle) or \
            self._core.pending.receives_of(descriptor_handle) > 0

    def find(self, descriptor_handle: int, request_id: int) -> ReadEntry | None:
        """The entry keyed {request_id, the queue context}, or None."""
        entry = self._core.locked.find(descriptor_handle, request_id)
        if entry is not None:
            return entry
        return next((e for e in self._core.pending.matching(descriptor_handle, request_id) if is_receive(e.action)),
                    None)

    def __len__(self) -> int:
        return sum(1 for e in self._core.pending if is_receive(e.action)) + len(self._core.locked)


@dataclass(eq=False, kw_only=True)
class Service(ReadCore):
    """One RemoteRead server over a QueueManager."""
    port: int = DEFAULT_PORT                # R_GetServerPort (3.1.4.1): the listener's bound port
    cleanup_ms: int = PENDING_REQUEST_CLEANUP_MS
    handle_type: ContextHandleType | None = field(default=None, repr=False)
    table: PendingRequestTable = field(init=False, repr=False)
    move_contexts: dict[int, QueueContext] = field(default_factory=dict, repr=False)
    # R_StartTransactionalReceive calls in flight per UOW, and the UOWs whose Transaction one of them created
    # (start_transactional_receive.py: such a Transaction left empty is aborted)
    transaction_calls: dict[bytes, int] = field(default_factory=dict, repr=False)
    created_transactions: set[bytes] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self.table = PendingRequestTable(self)

    def descriptor_of(self, context: QueueContext | None) -> Any | None:
        """The OpenQueueDescriptor whose Handle the context handle names, if it is still open."""
        if context is None or context.closed:
            return None
        descriptor = context.descriptor
        return descriptor if self.qm.descriptor_by_handle(descriptor.handle) is descriptor else None
