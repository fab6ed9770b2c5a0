"""R_StartReceive (MS-MQRR 3.1.4.7, opnum 7): peek or receive by queue head, cursor or lookup identifier."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qm2qm.mqrr.codec import decode
from qm2qm.mqrr.codec_fast import encode_receive_response
from qm2qm.mqrr.handlers._queue import queue_of
from qm2qm.mqrr.sections import Section, packet_sections
from qm2qm.mqrr.service import PendingRequestEntry, Service
from qm2qm.remote_read.actions import (LOOKUP_ACTIONS, MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                       is_receive)
from qm2qm.remote_read.cursors import find_cursor
from qm2qm.remote_read.locks import release
from qm2qm.remote_read.packets import take_packet
from qm2qm.remote_read.reads import answerable_now, lookup_event, read_event, run_read, run_read_now
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st

SEQUENCE_ID_MASK = (1 << 56) - 1        # pSequenceId: the least significant 7 bytes of LookupIdentifier
ARRIVE_TIME_MASK = 0xFFFFFFFF


@dataclass(slots=True)
class Answer:
    """What R_StartReceive / R_StartTransactionalReceive answer."""
    status: int
    arrive_time: int = 0
    sequence_id: int = 0
    sections: list[Section] = field(default_factory=list)


def valid_arguments(lookup_id: int, h_cursor: int, action: int, timeout: int) -> bool:
    """The valid combinations of LookupId, hCursor, ulAction and ulTimeout (3.1.4.7 parameter descriptions)."""
    if action in LOOKUP_ACTIONS:
        return lookup_id != 0 and h_cursor == 0 and timeout == 0
    if lookup_id != 0:
        return False
    if action == MQ_ACTION_PEEK_NEXT:
        return h_cursor != 0
    return action in (MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_CURRENT)


def check(service: Service, ctx: CallContext, r: Any) -> tuple[int, Any, Any]:
    """The argument and lookup bullets of 3.1.4.7 → (HRESULT or MQ_OK, queueDesc, localCursor)."""
    if not valid_arguments(r["LookupId"], r["hCursor"], r["ulAction"], r["ulTimeout"]):
        return st.MQ_ERROR_INVALID_PARAMETER, None, None
    _, descriptor = queue_of(service, ctx, r["phContext"])
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE, None, None
    if is_receive(r["ulAction"]) and service.table.find(descriptor.handle, r["dwRequestId"]) is not None:
        return st.MQ_ERROR_INVALID_PARAMETER, None, None        # dwRequestId is still in use (3.1.4.7)
    cursor = None
    if r["hCursor"] != 0:
        cursor = find_cursor(descriptor, r["hCursor"])
        if cursor is None:
            return st.STATUS_INVALID_HANDLE, None, None
    return st.MQ_OK, descriptor, cursor


def begin(service: Service, r: Any, descriptor: Any, cursor: Any, timeout: int, transaction: Any = None):
    """(PendingRequestEntry, the read event for ulAction, the completion) of 3.1.4.7 / 3.1.4.13."""
    action, request_id = r["ulAction"], r["dwRequestId"]
    entry = PendingRequestEntry(descriptor_handle=descriptor.handle, request_id=request_id, timeout=r["ulTimeout"],
                                action=action, descriptor=descriptor, time_stamp=service.qm.scheduler.now_ms(),
                                transaction=transaction)
    lookup = LOOKUP_ACTIONS.get(action)
    if lookup is None:
        def read():
            return read_event(service.qm, descriptor, action, timeout, cursor, request_id, transaction)
    else:
        peek, seek = lookup

        def read():
            return lookup_event(service.qm, descriptor, r["LookupId"], peek, seek, transaction)
    return entry, read, lambda result: complete(service, entry, result, r["dwMaxBodySize"])


def complete(service: Service, entry: PendingRequestEntry, result: Any, max_body: int) -> Answer:
    """On MQ_OK: the packet as ppPacketSections, pdwArriveTime and pSequenceId; a receive keeps its entry, with
    the Locked message's LookupIdentifier, and starts its Pending Request Cleanup Timer (3.1.2.2)."""
    if result.status != st.MQ_OK:
        return Answer(result.status)
    receive = is_receive(entry.action)
    status, packet = take_packet(service, entry, result, receive=receive)
    if packet is None:
        return Answer(status)
    try:
        sections = packet_sections(packet.buffer, max_body)
    except Exception:
        if receive:
            release(service, entry, transactional=entry.transaction is not None)
        raise
    if receive:
        entry.timer = service.qm.scheduler.call_later(service.cleanup_ms, lambda: cleanup(service, entry))
    return Answer(st.MQ_OK, packet.arrival_time & ARRIVE_TIME_MASK, packet.lookup_identifier & SEQUENCE_ID_MASK,
                  sections)


def cleanup(service: Service, entry: PendingRequestEntry) -> None:
    """Pending Request Cleanup Timer Event (3.1.5.1): Dequeue Message End with iDeleteMessage False."""
    entry.timer = None
    release(service, entry, delete=False, transactional=entry.transaction is not None)


async def start_receive(service: Service, ctx: CallContext, r: Any) -> Answer:
    """The processing rules of 3.1.4.7."""
    status, descriptor, cursor = check(service, ctx, r)
    if status != st.MQ_OK:
        return Answer(status)
    return await run_read(service, *begin(service, r, descriptor, cursor, r["ulTimeout"]))


def start_receive_now(service: Service, ctx: CallContext, r: Any) -> Answer | None:
    """start_receive when it completes at once, or None — nothing changed — when it would wait."""
    if not answerable_now(r["ulTimeout"], r["hCursor"] != 0):
        return None
    status, descriptor, cursor = check(service, ctx, r)
    if status != st.MQ_OK:
        return Answer(status)
    return run_read_now(service, *begin(service, r, descriptor, cursor, 0))


def encode_answer(opnum: int, ndr64: bool, answer: Answer) -> bytes:
    """The [out] arguments (codec_fast.py): on failure no sections (the client disregards them)."""
    sections = [(s.section_type, s.size_alloc, s.buffer) for s in answer.sections]
    return encode_receive_response(answer.arrive_time, answer.sequence_id, sections, answer.status, ndr64)


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes | Any:
    """Opnum 7 on the wire — inline when the runtime allows it and the read completes at once."""
    request = decode(7, stub, ctx.ndr64)
    if getattr(ctx, "answer_now", False):
        answer = start_receive_now(service, ctx, request)
        if answer is not None:
            return encode_answer(7, ctx.ndr64, answer)
    return _serve(service, ctx, request)


async def _serve(service: Service, ctx: CallContext, request: Any) -> bytes:
    return encode_answer(7, ctx.ndr64, await start_receive(service, ctx, request))
