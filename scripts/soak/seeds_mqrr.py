"""Fuzz seeds of MS-MQRR RemoteRead (MS-MQRR 3.1.4, 6): opnums 0 and 2-15, NDR and NDR64, with qm2qm.mqrr.idl.

Calls on an open queue carry the ``SESSION`` placeholder; a stateful conversation first runs a real R_OpenQueue
(``open_queue``) and the fuzzer puts the handle it answered in its place.
"""
from __future__ import annotations

import uuid

from qm2qm.mqrr import idl
from qm2qm.mqrr.constants import MQ_DENY_NONE, MQ_DENY_SHARE, MQ_MOVE_ACCESS, PEEK_ACCESS, RECEIVE_ACCESS, RR_ACK, \
    RR_NACK
from qm2qm.mqrr.queue_format import (QUEUE_FORMAT_TYPE_DIRECT, QUEUE_FORMAT_TYPE_PRIVATE, QUEUE_FORMAT_TYPE_SUBQUEUE,
                                     QUEUE_SUFFIX_TYPE_SUBQUEUE)
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE

from soak.seeds_common import SESSION, ndr, repeatable

OPEN_OPNUM = 2
SEED_FORMAT_NAME = "DIRECT=OS:.\\private$\\soak-seed"
ALL = 0xFFFFFFFF


def _queue_format(qf, format_name: str) -> None:
    """QUEUE_FORMAT of a DIRECT= name (MS-MQMQ 2.2.7; with ";Subqueue" a QUEUE_FORMAT_TYPE_SUBQUEUE), or a PRIVATE=
    one."""
    if format_name.upper().startswith("PRIVATE="):
        guid, number = format_name.split("=", 1)[1].split("\\")
        qf["m_qft"], qf["u"]["tag"] = QUEUE_FORMAT_TYPE_PRIVATE, QUEUE_FORMAT_TYPE_PRIVATE
        qf["u"]["m_oPrivateID"]["Lineage"] = uuid.UUID(guid).bytes_le
        qf["u"]["m_oPrivateID"]["Uniquifier"] = int(number, 16)
    elif ";" in format_name:
        qf["m_qft"], qf["u"]["tag"] = QUEUE_FORMAT_TYPE_SUBQUEUE, QUEUE_FORMAT_TYPE_SUBQUEUE
        qf["u"]["m_pDirectSubqueueID"] = format_name.split("=", 1)[1] + "\x00"
        qf["m_SuffixAndFlags"], qf["m_reserved"] = QUEUE_SUFFIX_TYPE_SUBQUEUE, 0
        return
    else:
        qf["m_qft"], qf["u"]["tag"] = QUEUE_FORMAT_TYPE_DIRECT, QUEUE_FORMAT_TYPE_DIRECT
        qf["u"]["m_pDirectID"] = format_name.split("=", 1)[1] + "\x00"
    qf["m_SuffixAndFlags"], qf["m_reserved"] = 0, 0


def open_queue(format_name: str, ndr64: bool, access: int = RECEIVE_ACCESS, share: int = MQ_DENY_NONE,
               for_move: bool = False) -> bytes:
    """R_OpenQueue (3.1.4.2) or R_OpenQueueForMove (3.1.4.11), as qm2qm.mqrr.client fills them."""
    r = idl.R_OpenQueueForMove() if for_move else idl.R_OpenQueue()
    _queue_format(r["pQueueFormat"], format_name)
    r["dwAccess"], r["dwShareMode"] = access, share
    r["pClientId"] = uuid.UUID(int=0x50AC).bytes_le
    r["fNonRoutingServer"], r["Major"], r["Minor"], r["BuildNumber"], r["fWorkgroup"] = 1, 6, 1, 0, 1
    return ndr(r, ndr64)


def _receive(cls, action: int, lookup: int, transactional: bool):
    r = cls()
    r["phContext"] = SESSION
    r["LookupId"], r["hCursor"], r["ulAction"], r["ulTimeout"] = lookup, 0, action, 0
    r["dwRequestId"], r["dwMaxBodySize"], r["dwMaxCompoundMessageSize"] = 7, ALL, ALL
    if transactional:
        r["pTransactionId"]["rgb"] = uuid.UUID(int=13).bytes_le
    return r


@repeatable
def build(ndr64: bool) -> dict[int, list[bytes]]:
    """Every MS-MQRR opnum (0, 2-15; 1 is not used on the wire)."""
    out: dict[int, list] = {0: [idl.R_GetServerPort()]}
    opens = [open_queue(SEED_FORMAT_NAME, ndr64, a, s) for a, s in ((RECEIVE_ACCESS, MQ_DENY_NONE),
                                                                    (PEEK_ACCESS, MQ_DENY_NONE),
                                                                    (RECEIVE_ACCESS, MQ_DENY_SHARE))]
    opens.append(open_queue("PRIVATE=" + str(uuid.UUID(int=14)) + "\\00000001", ndr64))
    opens.append(open_queue(SEED_FORMAT_NAME + ";poison", ndr64))           # a subqueue, made by this open
    r3 = idl.R_CloseQueue()
    r3["pphContext"] = SESSION
    out[3] = [r3]
    for opnum, cls in ((4, idl.R_CreateCursor), (6, idl.R_PurgeQueue)):
        call = cls()
        call["phContext"] = SESSION
        out[opnum] = [call]
    r5 = idl.R_CloseCursor()
    r5["phContext"], r5["hCursor"] = SESSION, 1
    out[5] = [r5]
    out[7] = [_receive(idl.R_StartReceive, a, lookup, False)
              for a in (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE) for lookup in (0, 0x0300000000000001)]
    out[13] = [_receive(idl.R_StartTransactionalReceive, a, 0, True) for a in (MQ_ACTION_PEEK_CURRENT,
                                                                              MQ_ACTION_RECEIVE)]
    r8 = idl.R_CancelReceive()
    r8["phContext"], r8["dwRequestId"] = SESSION, 7
    out[8] = [r8]
    for opnum, cls in ((9, idl.R_EndReceive), (15, idl.R_EndTransactionalReceive)):
        out[opnum] = []
        for ack in (RR_ACK, RR_NACK):
            call = cls()
            call["phContext"], call["dwAck"], call["dwRequestId"] = SESSION, ack, 7
            out[opnum].append(call)
    r10 = idl.R_MoveMessage()
    r10["phContextFrom"], r10["ullContextTo"], r10["LookupId"] = SESSION, 1, 0x0300000000000001
    r10["pTransactionId"]["rgb"] = uuid.UUID(int=10).bytes_le
    out[10] = [r10]
    r12 = idl.R_QMEnlistRemoteTransaction()
    r12["pTransactionId"]["rgb"] = uuid.UUID(int=12).bytes_le
    r12["cbPropagationToken"], r12["pbPropagationToken"] = 4, list(b"soak")
    _queue_format(r12["pQueueFormat"], SEED_FORMAT_NAME)
    out[12] = [r12]
    r14 = idl.R_SetUserAcknowledgementClass()
    r14["phContext"], r14["LookupId"], r14["usClass"] = SESSION, 0x0300000000000001, 0
    out[14] = [r14]
    stubs = {opnum: [ndr(call, ndr64) for call in calls] for opnum, calls in out.items()}
    stubs[2] = opens
    stubs[11] = [open_queue(SEED_FORMAT_NAME + suffix, ndr64, MQ_MOVE_ACCESS, MQ_DENY_NONE, for_move=True)
                 for suffix in ("", ";retry")]
    return dict(sorted(stubs.items()))
