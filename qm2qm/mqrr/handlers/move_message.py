"""R_MoveMessage (MS-MQRR 3.1.4.10, opnum 10): move a message between a queue and its subqueues."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import decode, encode, signed
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.handlers._transaction import NULL_UOW, find_transaction, uow_of
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.enums import PositionState, QueueAccessType


def parent_pathname(queue: Any) -> str:
    """The pathname without its subqueue part and the ';' before it (MS-MQMQ 2.1.1)."""
    return queue.pathname.split(";", 1)[0].lower()


def related(source: Any, destination: Any) -> bool:
    """One of the three relations 3.1.4.10 allows between the two queues."""
    # A queue is in another's SubqueueCollection exactly when that one is its parent_queue (both are open here, so
    # neither subqueue has been dropped): one test instead of a scan of every subqueue.
    return (source.parent_queue is destination or destination.parent_queue is source
            or parent_pathname(source) == parent_pathname(destination))


def move_message(service: Service, ctx: CallContext, wire: bytes, context_to: int, lookup_id: int,
                 uow: bytes) -> int:
    """The processing rules of 3.1.4.10; returns the HRESULT."""
    _, source = queue_of(service, ctx, wire)
    if source is None:
        return st.MQ_ERROR_INVALID_HANDLE
    if source.access_type is not QueueAccessType.RECEIVE_ACCESS:
        # [DESIGN] phContextFrom MUST come from R_OpenQueue with RECEIVE_ACCESS (3.1.4.10): a peek handle, which
        # opens under another reader's DenyReceive, would otherwise take that reader's messages away.
        return st.MQ_ERROR_ACCESS_DENIED
    destination = service.descriptor_of(service.move_contexts.get(context_to))
    if destination is None or destination.access_type is not QueueAccessType.MOVE_ACCESS:
        return st.MQ_ERROR_INVALID_HANDLE
    source_queue, target_queue = source.queue_reference, destination.queue_reference
    if source_queue is None or target_queue is None:
        return st.MQ_ERROR_QUEUE_DELETED
    if not related(source_queue, target_queue):
        return st.STATUS_INVALID_PARAMETER
    if uow != NULL_UOW and not target_queue.transactional:
        return st.MQ_ERROR_TRANSACTION_USAGE
    position = source_queue.message_position_list.get(lookup_id)
    if position is None:
        return st.MQ_ERROR_MESSAGE_NOT_FOUND
    if position.state is not PositionState.AVAILABLE:
        if service.qm.transactional_operation_on(position) is not None:
            return st.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION
        # [DESIGN] Locked by another reader's receive (or Deleted, PurgePending): not there to move, as a lookup
        # read would not find it; moving it would let that reader's ACK delete a message that lives on moved.
        return st.MQ_ERROR_MESSAGE_NOT_FOUND
    transaction = None
    if uow != NULL_UOW:
        transaction = find_transaction(service.qm, uow)
        if transaction is None:
            return st.MQ_ERROR_TRANSACTION_SEQUENCE
    return service.qm.move_message(position, target_queue, transaction)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 10 on the wire: decode, apply 3.1.4.10, encode."""
    r = decode(10, stub, ctx.ndr64)
    status = move_message(service, ctx, r["phContextFrom"], r["ullContextTo"], r["LookupId"],
                          uow_of(r["pTransactionId"]))
    return encode(10, ctx.ndr64, ErrorCode=signed(status))
