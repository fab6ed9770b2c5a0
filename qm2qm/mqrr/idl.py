"""impacket NDR declarations of idl/mqrr.idl (MS-MQRR 6), name for name, with QUEUE_FORMAT and XACTUOW (MS-MQMQ 2.2.7, 2.2.18.1.8)."""
from __future__ import annotations

from impacket.dcerpc.v5.dtypes import DWORD, GUID, LONG, LPWSTR, NULL, ULONGLONG, USHORT  # noqa: F401
from impacket.dcerpc.v5.ndr import (NDRCALL, NDRENUM, NDRPOINTER, NDRSTRUCT, NDRUniConformantArray,
                                    NDRUniFixedArray, NDRUSMALL)
from impacket.uuid import uuidtup_to_bin

# MS-MQMQ 2.2.7–2.2.10: QUEUE_FORMAT and its arms are declared once, beside qmcomm's methods (the union's
# discriminant is m_qft's own type, one byte, in NDR64 too).
from qm2qm.mqmp.idl import DL_ID, MULTICAST_ID, OBJECTID, QUEUE_FORMAT, QUEUE_FORMAT_UNION  # noqa: F401
from qm2qm.mqrr.constants import MQRR_UUID, MQRR_VERSION, OPNUM_NAMES
from qm2qm.rpc.ndr_arrays import ScalarArrayItems

MSRPC_UUID_REMOTEREAD = uuidtup_to_bin((str(MQRR_UUID), "%d.%d" % MQRR_VERSION))


class QUEUE_CONTEXT_HANDLE_NOSERIALIZE(NDRSTRUCT):
    """2.2.4.1: a 20-byte context handle on the wire (identical to QUEUE_CONTEXT_HANDLE_SERIALIZE)."""
    structure = (("Data", "20s=b''"),)

    def getAlignment(self):
        return 4


class QUEUE_CONTEXT_HANDLE_SERIALIZE(QUEUE_CONTEXT_HANDLE_NOSERIALIZE):
    """2.2.4.2"""


class BYTE16(NDRUniFixedArray):
    def getDataLen(self, data, offset=0):
        return 16


class XACTUOW(NDRSTRUCT):
    """MS-MQMQ 2.2.18.1.8"""
    structure = (("rgb", BYTE16),)


# --- 2.2.6, 2.2.7 ---
class SectionType(NDRENUM):
    """2.2.7"""
    structure = (("Data", "<H"),)


class BYTE_CARRAY(ScalarArrayItems, NDRUniConformantArray):
    item = "c"


class PBYTE_CARRAY(NDRPOINTER):
    referent = (("Data", BYTE_CARRAY),)


class SectionBuffer(NDRSTRUCT):
    """2.2.6"""
    structure = (("SectionBufferType", SectionType), ("SectionSizeAlloc", DWORD), ("SectionSize", DWORD),
                 ("pSectionBuffer", PBYTE_CARRAY))


class SectionBuffer_ARRAY(NDRUniConformantArray):
    item = SectionBuffer


class PSectionBuffer_ARRAY(NDRPOINTER):
    referent = (("Data", SectionBuffer_ARRAY),)


class UCHAR_CARRAY(ScalarArrayItems, NDRUniConformantArray):
    item = "c"


# --- 3.1.4 opnums ---
class R_GetServerPort(NDRCALL):
    opnum = 0
    structure = ()


class R_GetServerPortResponse(NDRCALL):
    structure = (("ErrorCode", DWORD),)


class R_OpenQueue(NDRCALL):
    opnum = 2
    structure = (("pQueueFormat", QUEUE_FORMAT), ("dwAccess", DWORD), ("dwShareMode", DWORD),
                 ("pClientId", GUID), ("fNonRoutingServer", LONG), ("Major", NDRUSMALL), ("Minor", NDRUSMALL),
                 ("BuildNumber", USHORT), ("fWorkgroup", LONG))


class R_OpenQueueResponse(NDRCALL):
    structure = (("pphContext", QUEUE_CONTEXT_HANDLE_SERIALIZE),)


class R_CloseQueue(NDRCALL):
    opnum = 3
    structure = (("pphContext", QUEUE_CONTEXT_HANDLE_SERIALIZE),)


class R_CloseQueueResponse(NDRCALL):
    structure = (("pphContext", QUEUE_CONTEXT_HANDLE_SERIALIZE), ("ErrorCode", LONG))


class R_CreateCursor(NDRCALL):
    opnum = 4
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE),)


class R_CreateCursorResponse(NDRCALL):
    structure = (("phCursor", DWORD), ("ErrorCode", LONG))


class R_CloseCursor(NDRCALL):
    opnum = 5
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("hCursor", DWORD))


class R_CloseCursorResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_PurgeQueue(NDRCALL):
    opnum = 6
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE),)


class R_PurgeQueueResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_StartReceive(NDRCALL):
    opnum = 7
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("LookupId", ULONGLONG), ("hCursor", DWORD),
                 ("ulAction", DWORD), ("ulTimeout", DWORD), ("dwRequestId", DWORD), ("dwMaxBodySize", DWORD),
                 ("dwMaxCompoundMessageSize", DWORD))


class R_StartReceiveResponse(NDRCALL):
    structure = (("pdwArriveTime", DWORD), ("pSequenceId", ULONGLONG), ("pdwNumberOfSections", DWORD),
                 ("ppPacketSections", PSectionBuffer_ARRAY), ("ErrorCode", LONG))


class R_CancelReceive(NDRCALL):
    opnum = 8
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("dwRequestId", DWORD))


class R_CancelReceiveResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_EndReceive(NDRCALL):
    opnum = 9
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("dwAck", DWORD), ("dwRequestId", DWORD))


class R_EndReceiveResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_MoveMessage(NDRCALL):
    opnum = 10
    structure = (("phContextFrom", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("ullContextTo", ULONGLONG),
                 ("LookupId", ULONGLONG), ("pTransactionId", XACTUOW))


class R_MoveMessageResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_OpenQueueForMove(NDRCALL):
    opnum = 11
    structure = R_OpenQueue.structure


class R_OpenQueueForMoveResponse(NDRCALL):
    structure = (("pMoveContext", ULONGLONG), ("pphContext", QUEUE_CONTEXT_HANDLE_SERIALIZE))


class R_QMEnlistRemoteTransaction(NDRCALL):
    opnum = 12
    structure = (("pTransactionId", XACTUOW), ("cbPropagationToken", DWORD),
                 ("pbPropagationToken", UCHAR_CARRAY), ("pQueueFormat", QUEUE_FORMAT))


class R_QMEnlistRemoteTransactionResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_StartTransactionalReceive(NDRCALL):
    opnum = 13
    structure = R_StartReceive.structure + (("pTransactionId", XACTUOW),)


class R_StartTransactionalReceiveResponse(NDRCALL):
    structure = R_StartReceiveResponse.structure


class R_SetUserAcknowledgementClass(NDRCALL):
    opnum = 14
    structure = (("phContext", QUEUE_CONTEXT_HANDLE_NOSERIALIZE), ("LookupId", ULONGLONG), ("usClass", USHORT))


class R_SetUserAcknowledgementClassResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


class R_EndTransactionalReceive(NDRCALL):
    opnum = 15
    structure = R_EndReceive.structure


class R_EndTransactionalReceiveResponse(NDRCALL):
    structure = (("ErrorCode", LONG),)


# opnum → (request, response), from the method names of MS-MQRR 3.1.4
OPNUMS = {opnum: (globals()[name], globals()[name + "Response"]) for opnum, name in OPNUM_NAMES.items()}
