"""Fuzz seeds of qmcomm and qmcomm2 (MS-MQMP 3.1.4, 3.1.5, 6): valid request stubs, NDR and NDR64.

The hosted opnums (1, 2, 3, 4, 31) are built with qm2qm.mqmp.idl as qm2qm.mqmp.client fills them. The
supporting-server opnums qm2qm refuses before reading the stub (3.1.4 <9>, not_supporting_server.py) have no
declaration in qm2qm.mqmp.idl; the ones whose in-parameters are plain (handles, DWORDs, XACTUOW, a string, a byte
array, OBJECT_FORMAT) are declared below from MS-MQMP 6, the PROPVARIANT / CACTransferBufferV2 ones are sent as
handle-shaped stubs (the gate answers every stub the same way).
"""
from __future__ import annotations

import uuid

from impacket.dcerpc.v5.dtypes import DWORD, LPWSTR, NULL, WSTR
from impacket.dcerpc.v5.ndr import NDRCALL, NDRPOINTER, NDRSTRUCT, NDRUNION, NDRUniConformantArray

from qm2qm.mqmp import codec, idl
from qm2qm.mqmp.client import create_remote_cursor_request
from qm2qm.mqmp.constants import IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, IPX_READ, MQ_DENY_NONE, \
    MQ_DENY_RECEIVE_SHARE, MQ_PEEK_ACCESS, MQ_RECEIVE_ACCESS

from soak.seeds_common import QUEUE_HANDLE, SESSION, ndr, repeatable

OPEN_OPNUM = 2
SEED_FORMAT_NAME = "DIRECT=OS:.\\private$\\soak-seed"
PRIVATE_FORMAT_NAME = "PRIVATE=" + str(uuid.UUID(int=14)) + "\\00000001"


class _HANDLE(NDRSTRUCT):
    """A [context_handle] parameter: 20 bytes (C706 14.2.16.6)."""
    structure = (("Data", "20s=b''"),)

    def getAlignment(self):
        return 4


class _BYTES(NDRUniConformantArray):
    item = "c"


class _PQUEUE_FORMAT(NDRPOINTER):
    referent = (("Data", idl.QUEUE_FORMAT),)


class _OBJECT_FORMAT_UNION(NDRUNION):
    commonHdr = (("tag", DWORD),)
    union = {1: ("pQueueFormat", _PQUEUE_FORMAT)}


class _OBJECT_FORMAT(NDRSTRUCT):
    """OBJECT_FORMAT (MS-MQMP 2.2.3): [range(1,2)] ObjType, [switch_is(ObjType)] union { QUEUE_FORMAT* }."""
    structure = (("ObjType", DWORD), ("u", _OBJECT_FORMAT_UNION))


def _call(opnum: int, *fields) -> type:
    return type(f"Opnum{opnum}", (NDRCALL,), {"opnum": opnum, "structure": tuple(fields)})


# MS-MQMP 6, the in-parameters of the gated opnums with plain types
R_QMDeleteObject = _call(9, ("pObjectFormat", _OBJECT_FORMAT))
R_QMObjectPathToObjectFormat = _call(12, ("lpwcsPathName", WSTR), ("pObjectFormat", _OBJECT_FORMAT))
R_QMGetTmWhereabouts = _call(14, ("cbBufSize", DWORD))
R_QMEnlistTransaction = _call(15, ("pUow", idl.XACTUOW), ("cbCookie", DWORD), ("pbCookie", _BYTES))
R_QMEnlistInternalTransaction = _call(16, ("pUow", idl.XACTUOW))
R_QMCommitTransaction = _call(17, ("phIntXact", _HANDLE))
R_QMAbortTransaction = _call(18, ("phIntXact", _HANDLE))
rpc_ACCloseHandle = _call(20, ("phQueue", _HANDLE))
rpc_ACCloseCursor = _call(22, ("hQueue", _HANDLE), ("hCursor", DWORD))
rpc_ACSetCursorProperties = _call(23, ("hProxy", _HANDLE), ("hCursor", DWORD), ("hRemoteCursor", DWORD))
rpc_ACHandleToFormatName = _call(26, ("hQueue", _HANDLE), ("dwFormatNameRPCBufferLen", DWORD),
                                 ("lpwcsFormatName", LPWSTR), ("pdwLength", DWORD))
rpc_ACPurgeQueue = _call(27, ("hQueue", _HANDLE))
R_QMQueryQMRegistryInternal = _call(28, ("dwQueryType", DWORD))

# PROPVARIANT arrays (6, 7, 8, 10, 11), rpc_QMOpenQueueInternal (19) and qmcomm2's CACTransferBufferV2 calls
UNDECLARED = (6, 7, 8, 10, 11, 19)
QMCOMM2_OPNUMS = (0, 1, 2, 3)


def _handle_shaped() -> list[bytes]:
    return [b"", SESSION + bytes(8), QUEUE_HANDLE.to_bytes(4, "little") + bytes(28)]


def open_remote_queue(format_name: str, ndr64: bool, access: int = MQ_RECEIVE_ACCESS,
                      share_mode: int = MQ_DENY_NONE) -> bytes:
    """R_QMOpenRemoteQueue (opnum 2, 3.1.4.2) of ``format_name``, as qm2qm.mqmp.client sends it."""
    r = idl.R_QMOpenRemoteQueue()
    codec.fill_queue_format(r["pQueueFormat"], format_name)
    r["dwCallingProcessID"], r["dwDesiredAccess"], r["dwShareMode"] = 14, access, share_mode
    r["pLicGuid"] = uuid.UUID(int=0x50AC).bytes_le
    r["dwMQS"] = 0
    return ndr(r, ndr64)


def opened_handle(response: bytes) -> int:
    """phQueue of an R_QMOpenRemoteQueue response (the DWORD after the handle, pdwContext and dwpQueue)."""
    return int.from_bytes(response[28:32], "little") if len(response) >= 36 else 0


def _object_format(call) -> None:
    call["pObjectFormat"]["ObjType"] = 1
    call["pObjectFormat"]["u"]["tag"] = 1
    codec.fill_queue_format(call["pObjectFormat"]["u"]["pQueueFormat"], PRIVATE_FORMAT_NAME)


@repeatable
def build_qmcomm(ndr64: bool) -> dict[int, list[bytes]]:
    """qmcomm opnums 1-4, 31 (hosted) and 6-28 (supporting-server gate, 3.1.4)."""
    out: dict[int, list[bytes]] = {}
    r1 = idl.R_QMGetRemoteQueueName()
    r1["pQueue"] = QUEUE_HANDLE
    r1["lplpRemoteQueueName"] = NULL
    out[1] = [ndr(r1, ndr64)]
    out[2] = [open_remote_queue(SEED_FORMAT_NAME, ndr64, access) for access in (MQ_RECEIVE_ACCESS, MQ_PEEK_ACCESS)]
    out[2].append(open_remote_queue(PRIVATE_FORMAT_NAME, ndr64, MQ_RECEIVE_ACCESS, MQ_DENY_RECEIVE_SHARE))
    r3 = idl.R_QMCloseRemoteQueueContext()
    r3["pphContext"] = SESSION
    out[3] = [ndr(r3, ndr64)]
    out[4] = [ndr(create_remote_cursor_request(QUEUE_HANDLE), ndr64)]
    out[31] = []
    for f_ip in (IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, IPX_READ):
        r31 = idl.R_QMGetRTQMServerPort()
        r31["fIP"] = f_ip
        out[31].append(ndr(r31, ndr64))
    for opnum in UNDECLARED:
        out[opnum] = _handle_shaped()
    out.update(_gated(ndr64))
    return out


def _gated(ndr64: bool) -> dict[int, list[bytes]]:
    r9 = R_QMDeleteObject()
    _object_format(r9)
    r12 = R_QMObjectPathToObjectFormat()
    r12["lpwcsPathName"] = ".\\private$\\soak-seed\x00"
    _object_format(r12)
    r14 = R_QMGetTmWhereabouts()
    r14["cbBufSize"] = 512
    r15 = R_QMEnlistTransaction()
    r15["pUow"]["rgb"] = uuid.UUID(int=15).bytes_le
    r15["cbCookie"], r15["pbCookie"] = 4, list(b"soak")
    r16 = R_QMEnlistInternalTransaction()
    r16["pUow"]["rgb"] = uuid.UUID(int=16).bytes_le
    r26 = rpc_ACHandleToFormatName()
    r26["hQueue"], r26["dwFormatNameRPCBufferLen"] = SESSION, 8
    r26["lpwcsFormatName"], r26["pdwLength"] = "soak\x00", 8
    r28 = R_QMQueryQMRegistryInternal()
    r28["dwQueryType"] = 1
    out = {9: [r9], 12: [r12], 14: [r14], 15: [r15], 16: [r16], 26: [r26], 28: [r28]}
    for opnum, cls in ((17, R_QMCommitTransaction), (18, R_QMAbortTransaction), (20, rpc_ACCloseHandle),
                       (27, rpc_ACPurgeQueue)):
        call = cls()
        call[call.structure[0][0]] = SESSION
        out[opnum] = [call]
    r22 = rpc_ACCloseCursor()
    r22["hQueue"], r22["hCursor"] = SESSION, 1
    r23 = rpc_ACSetCursorProperties()
    r23["hProxy"], r23["hCursor"], r23["hRemoteCursor"] = SESSION, 1, 2
    out[22], out[23] = [r22], [r23]
    return {opnum: [ndr(call, ndr64) for call in calls] for opnum, calls in out.items()}


@repeatable
def build_qmcomm2(ndr64: bool) -> dict[int, list[bytes]]:
    """qmcomm2 opnums 0-3 (3.1.5): all supporting-server methods over CACTransferBufferV2 / RPC_QUEUE_HANDLE."""
    return {opnum: _handle_shaped() for opnum in QMCOMM2_OPNUMS}
