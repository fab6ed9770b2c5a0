"""R_StartTransactionalReceive (MS-MQRR 3.1.4.13, opnum 13): R_StartReceive inside a transaction.

The top-level [in] XACTUOW* is a [ref] pointer and cannot be NULL on the wire (C706 4.2.20.2):
"pTransactionId is NULL" is read as the zero XACTUOW, as R_MoveMessage's description says it outright."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import decode
from qm2qm.mqrr.handlers import start_receive as sr
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.handlers._transaction import NULL_UOW, find_transaction, uow_of
from qm2qm.mqrr.service import Service
from qm2qm.remote_read.actions import is_receive
from qm2qm.remote_read.cursors import find_cursor
from qm2qm.remote_read.reads import run_read
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


async def start_transactional_receive(service: Service, ctx: CallContext, r: Any) -> sr.Answer:
    """The processing rules of 3.1.4.13."""
    if not sr.valid_arguments(r["LookupId"], r["hCursor"], r["ulAction"], r["ulTimeout"]):
        return sr.Answer(st.MQ_ERROR_INVALID_PARAMETER)
    uow = uow_of(r["pTransactionId"])
    if uow == NULL_UOW:
        return await sr.start_receive(service, ctx, r)
    _, descriptor = queue_of(service, ctx, r["phContext"])
    if descriptor is None:
        return sr.Answer(st.MQ_ERROR_INVALID_HANDLE)
    cursor = None
    if r["hCursor"] != 0:
        cursor = find_cursor(descriptor, r["hCursor"])
        if cursor is None:
            return sr.Answer(st.STATUS_INVALID_HANDLE)
    if descriptor.queue_reference is None or not descriptor.queue_reference.transactional:
        return sr.Answer(st.MQ_ERROR_TRANSACTION_USAGE)
    if not is_receive(r["ulAction"]):
        return sr.Answer(st.MQ_ERROR_TRANSACTION_USAGE)
    if service.table.find(descriptor.handle, r["dwRequestId"]) is not None:
        return sr.Answer(st.MQ_ERROR_INVALID_PARAMETER)
    transaction = find_transaction(service.qm, uow)
    if transaction is None:
        # Create Transaction with the UOW as its Identifier (3.1.4.13 says iTransactionIdentifier := NULL, which
        # would make every later call with this UOW create yet another Transaction that no outcome can reach)
        transaction = service.qm.create_transaction(uow)
        service.created_transactions.add(uow)
    calls = service.transaction_calls
    calls[uow] = calls.get(uow, 0) + 1
    try:
        return await run_read(service, *sr.begin(service, r, descriptor, cursor, r["ulTimeout"], transaction))
    finally:
        _end_call(service, uow, transaction)


def _end_call(service: Service, uow: bytes, transaction: Any) -> None:
    """[DESIGN] A Transaction this method created, once no call in it is in flight, is aborted if it holds no
    operation (nothing to undo): a receive that found no message must not leave one behind, or a caller naming a
    new UOW each time would grow TransactionCollection without end."""
    left = service.transaction_calls[uow] - 1
    if left:
        service.transaction_calls[uow] = left
        return
    del service.transaction_calls[uow]
    if uow in service.created_transactions:
        service.created_transactions.discard(uow)
        if not transaction.transactional_operation_collection \
                and service.qm.transaction_collection.get(uow) is transaction:
            service.qm.transaction_abort(uow)


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 13 on the wire: decode, apply 3.1.4.13, encode."""
    answer = await start_transactional_receive(service, ctx, decode(13, stub, ctx.ndr64))
    return sr.encode_answer(13, ctx.ndr64, answer)
