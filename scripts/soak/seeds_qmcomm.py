"""Fuzz seeds of qmcomm and qmcomm2 (MS-MQMP 3.1.4, 3.1.5, 6): valid request stubs, NDR and NDR64.

The hosted opnums (1, 2, 3, 4, 31) are built with qm2qm.mqmp.idl as qm2qm.mqmp.client fills them. The
supporting-server opnums, which qm2qm refuses before reading the stub (3.1.4, not_supporting_server.py), have no
declaration in qm2qm.mqmp.idl: their in-parameters are declared below from MS-MQMP 6 (PROPVARIANT, MS-MQMQ
2.2.13.1, with the VT_UI4 arm only; CACTransferBufferV2, MS-MQMP 2.2.3.2) on qm2qm.mqmp.idl's types.
"""
from __future__ import annotations

import uuid

from impacket.dcerpc.v5.dtypes import DWORD, GUID, LPWSTR, NULL, UCHAR, ULONG, USHORT, WSTR
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


class _PBYTES(NDRPOINTER):
    referent = (("Data", _BYTES),)


class _DWORDS(NDRUniConformantArray):
    item = "<L"


class _PROPVARIANT_UNION(NDRUNION):
    commonHdr = (("tag", USHORT),)
    union = {19: ("ulVal", ULONG)}                  # VT_UI4


class _PROPVARIANT(NDRSTRUCT):
    """tag_inner_PROPVARIANT (MS-MQMQ 2.2.13.1): vt, three reserved fields, [switch_is(vt)] union."""
    structure = (("vt", USHORT), ("wReserved1", UCHAR), ("wReserved2", UCHAR), ("wReserved3", ULONG),
                 ("_varUnion", _PROPVARIANT_UNION))


class _PROPVARIANTS(NDRUniConformantArray):
    item = _PROPVARIANT


class _PPROPVARIANTS(NDRPOINTER):
    referent = (("Data", _PROPVARIANTS),)


class _PDWORDS(NDRPOINTER):
    referent = (("Data", _DWORDS),)


class _PWSTR(NDRPOINTER):
    referent = (("Data", WSTR),)


class _PPWSTR(NDRPOINTER):
    referent = (("Data", _PWSTR),)


class _PDWORD(NDRPOINTER):
    referent = (("Data", DWORD),)


class _PGUID(NDRPOINTER):
    referent = (("Data", GUID),)


class _CACTransferBufferV2(NDRSTRUCT):
    """CACTransferBufferV2 (MS-MQMP 2.2.3.2): V1 and the three transaction-boundary pointers."""
    structure = (("old", idl.CACTransferBufferV1), ("pbFirstInXact", idl._PUCHAR), ("pbLastInXact", idl._PUCHAR),
                 ("ppXactID", idl._PPOBJECTID))


def _call(opnum: int, *fields) -> type:
    return type(f"Opnum{opnum}", (NDRCALL,), {"opnum": opnum, "structure": tuple(fields)})


# MS-MQMP 6: the in-parameters of the gated opnums (a top-level [ref] pointer declared as its pointee)
R_QMCreateObjectInternal = _call(6, ("dwObjectType", DWORD), ("lpwcsPathName", WSTR), ("SDSize", DWORD),
                                 ("pSecurityDescriptor", _PBYTES), ("cp", DWORD), ("aProp", _DWORDS),
                                 ("apVar", _PROPVARIANTS))
R_QMSetObjectSecurityInternal = _call(7, ("pObjectFormat", _OBJECT_FORMAT), ("SecurityInformation", DWORD),
                                      ("SDSize", DWORD), ("pSecurityDescriptor", _PBYTES))
R_QMGetObjectSecurityInternal = _call(8, ("pObjectFormat", _OBJECT_FORMAT), ("RequestedInformation", DWORD),
                                      ("nLength", DWORD))
R_QMGetObjectProperties = _call(10, ("pObjectFormat", _OBJECT_FORMAT), ("cp", DWORD), ("aProp", _DWORDS),
                                ("apVar", _PROPVARIANTS))
R_QMSetObjectProperties = _call(11, ("pObjectFormat", _OBJECT_FORMAT), ("cp", DWORD), ("aProp", _PDWORDS),
                                ("apVar", _PPROPVARIANTS))
rpc_QMOpenQueueInternal = _call(19, ("pQueueFormat", idl.QUEUE_FORMAT), ("dwDesiredAccess", DWORD),
                                ("dwShareMode", DWORD), ("hRemoteQueue", DWORD), ("lplpRemoteQueueName", _PPWSTR),
                                ("dwpQueue", DWORD), ("pLicGuid", GUID), ("lpClientName", WSTR),
                                ("dwRemoteProtocol", DWORD), ("dwpRemoteContext", DWORD))
QMSendMessageInternalEx = _call(0, ("pQueueFormat", idl.QUEUE_FORMAT), ("ptb", _CACTransferBufferV2),
                                ("pMessageID", idl._POBJECTID))
rpc_ACSendMessageEx = _call(1, ("hQueue", _HANDLE), ("ptb", _CACTransferBufferV2), ("pMessageID", idl._POBJECTID))
rpc_ACReceiveMessageEx = _call(2, ("hQMContext", DWORD), ("ptb", _CACTransferBufferV2))
rpc_ACCreateCursorEx = _call(3, ("hQueue", _HANDLE), ("pcc", idl.CACCreateRemoteCursor))
QMCOMM2_CALLS = (QMSendMessageInternalEx, rpc_ACSendMessageEx, rpc_ACReceiveMessageEx, rpc_ACCreateCursorEx)
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
    out[2].append(open_remote_queue(SEED_FORMAT_NAME + ";poison", ndr64))     # QUEUE_FORMAT_TYPE_SUBQUEUE
    r3 = idl.R_QMCloseRemoteQueueContext()
    r3["pphContext"] = SESSION
    out[3] = [ndr(r3, ndr64)]
    out[4] = [ndr(create_remote_cursor_request(QUEUE_HANDLE), ndr64)]
    out[31] = []
    for f_ip in (IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, IPX_READ):
        r31 = idl.R_QMGetRTQMServerPort()
        r31["fIP"] = f_ip
        out[31].append(ndr(r31, ndr64))
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
    out.update(_gated_objects())
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


def _propvariant(value: int) -> _PROPVARIANT:
    v = _PROPVARIANT()
    v["vt"], v["wReserved1"], v["wReserved2"], v["wReserved3"] = 19, 0, 0, 0
    v["_varUnion"]["tag"], v["_varUnion"]["ulVal"] = 19, value
    return v


def _gated_objects() -> dict[int, list]:
    """The object methods (6-8, 10, 11, 19): a private queue's format name, PROPID_Q_QUOTA-style properties."""
    r6 = R_QMCreateObjectInternal()
    r6["dwObjectType"], r6["lpwcsPathName"] = 1, ".\\private$\\soak-seed\x00"
    r6["SDSize"], r6["pSecurityDescriptor"] = 0, NULL
    r6["cp"], r6["aProp"], r6["apVar"] = 1, [105], [_propvariant(4096)]
    r7 = R_QMSetObjectSecurityInternal()
    _object_format(r7)
    r7["SecurityInformation"], r7["SDSize"], r7["pSecurityDescriptor"] = 4, 4, list(b"\x01\x00\x04\x80")
    r8 = R_QMGetObjectSecurityInternal()
    _object_format(r8)
    r8["RequestedInformation"], r8["nLength"] = 4, 512
    r10 = R_QMGetObjectProperties()
    _object_format(r10)
    r10["cp"], r10["aProp"], r10["apVar"] = 1, [105], [_propvariant(0)]
    r11 = R_QMSetObjectProperties()
    _object_format(r11)
    r11["cp"], r11["aProp"], r11["apVar"] = 1, [105], [_propvariant(4096)]
    r19 = rpc_QMOpenQueueInternal()
    codec.fill_queue_format(r19["pQueueFormat"], PRIVATE_FORMAT_NAME)
    r19["dwDesiredAccess"], r19["dwShareMode"], r19["hRemoteQueue"] = MQ_RECEIVE_ACCESS, MQ_DENY_NONE, 0
    r19["lplpRemoteQueueName"], r19["dwpQueue"] = NULL, 0
    r19["pLicGuid"], r19["lpClientName"] = uuid.UUID(int=0x50AC).bytes_le, "soak\x00"
    r19["dwRemoteProtocol"], r19["dwpRemoteContext"] = 0, 0
    return {6: [r6], 7: [r7], 8: [r8], 10: [r10], 11: [r11], 19: [r19]}


def _transfer_buffer(tb: _CACTransferBufferV2, kind: int) -> None:
    """A CACTransferBufferV2 as a send (CACTB_SEND, no admin/response queue) or a receive (CACTB_RECEIVE)."""
    old = tb["old"]
    old["uTransferType"], old["u"]["tag"] = kind, kind
    if kind == 0:
        old["u"]["Send"]["pAdminQueueFormat"] = NULL
        old["u"]["Send"]["pResponseQueueFormat"] = NULL
    else:
        receive = old["u"]["Receive"]
        receive["RequestTimeout"], receive["Action"], receive["Asynchronous"], receive["Cursor"] = 0, 0, 0, 0
        for name in ("Response", "Admin", "Dest", "Ordering"):
            receive[f"ul{name}FormatNameLen"] = 0
            receive[f"pp{name}FormatName"] = NULL
            receive[f"pul{name}FormatNameLenProp"] = NULL
    old["ulBodyBufferSizeInBytes"] = old["ulAllocBodyBufferInBytes"] = 0
    tb["pbFirstInXact"] = tb["pbLastInXact"] = tb["ppXactID"] = NULL


@repeatable
def build_qmcomm2(ndr64: bool) -> dict[int, list[bytes]]:
    """qmcomm2 opnums 0-3 (3.1.5): all supporting-server methods over CACTransferBufferV2 / RPC_QUEUE_HANDLE."""
    r0 = QMSendMessageInternalEx()
    codec.fill_queue_format(r0["pQueueFormat"], PRIVATE_FORMAT_NAME)
    _transfer_buffer(r0["ptb"], 0)
    r0["pMessageID"] = NULL
    r1 = rpc_ACSendMessageEx()
    r1["hQueue"] = SESSION
    _transfer_buffer(r1["ptb"], 0)
    r1["pMessageID"] = NULL
    r2 = rpc_ACReceiveMessageEx()
    r2["hQMContext"] = QUEUE_HANDLE
    _transfer_buffer(r2["ptb"], 1)
    r3 = rpc_ACCreateCursorEx()
    r3["hQueue"] = SESSION
    r3["pcc"]["hCursor"], r3["pcc"]["srv_hACQueue"], r3["pcc"]["cli_pQMQueue"] = 0, 0, 0
    return {opnum: [ndr(call, ndr64)] for opnum, call in enumerate((r0, r1, r2, r3))}
