"""impacket NDR declarations of the qm2qm interface, in the order and with the names of MS-MQQP 6 (idl/qm2qm.idl).

This is the reference marshalling (slow, generic) and what an impacket ``DCERPC_v5`` client calls with
``dce.request(RemoteQMOpenQueue())``. The server's hot path uses ``qm2qm.mqqp.codec`` instead, which the
tests prove byte-equal to these declarations.

impacket conventions kept here: a top-level ``[ref]`` pointer parameter is declared as its pointee; an
HRESULT return value is the field ``ErrorCode`` (impacket's HRESULT is signed); a context handle is an
NDRSTRUCT carrying its 20 wire bytes in ``Data``. Two non-HRESULT returns: RemoteQMGetQMQMServerPort's DWORD
is ``ReturnValue``; RemoteQmGetVersion returns ``void``. Call those two with ``checkError=False``: impacket
treats any non-zero last four response bytes as an error code.
"""
from __future__ import annotations

from impacket.dcerpc.v5.dtypes import DWORD, GUID, HRESULT, UCHAR, ULONGLONG, USHORT
from impacket.dcerpc.v5.enum import Enum
from impacket.dcerpc.v5.ndr import (NDRCALL, NDRENUM, NDRPOINTER, NDRSTRUCT,
                                    NDRUniConformantVaryingArray)
from impacket.dcerpc.v5.rpcrt import DCERPCException
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp.constants import QM2QM_UUID, QM2QM_VERSION
from qm2qm.rpc.ndr_arrays import ScalarArrayItems

MSRPC_UUID_QM2QM = uuidtup_to_bin((str(QM2QM_UUID), "%d.%d" % QM2QM_VERSION))


class DCERPCSessionError(DCERPCException):
    """An HRESULT failure returned by a qm2qm method (MS-MQQP 2.2, MS-MQMQ 2.4)."""

    def __str__(self) -> str:
        return "qm2qm SessionError: code 0x%08x" % ((self.error_code or 0) & 0xFFFFFFFF)


################################################################################
# Context handles (MS-MQQP 2.2.1.1, 2.2.1.2): 20 bytes on the wire (attributes u32 + UUID), aligned 4
################################################################################

class _CONTEXT_HANDLE(NDRSTRUCT):
    structure = (
        ("Data", "20s=b''"),
    )

    def getAlignment(self):
        return 4


# typedef [context_handle] void *PCTX_RRSESSION_HANDLE_TYPE;
class PCTX_RRSESSION_HANDLE_TYPE(_CONTEXT_HANDLE):
    pass


# typedef [context_handle] void *PCTX_REMOTEREAD_HANDLE_TYPE;
class PCTX_REMOTEREAD_HANDLE_TYPE(_CONTEXT_HANDLE):
    pass


# typedef enum _REMOTEREADACK {
#     RR_UNKNOWN,
#     RR_NACK,
#     RR_ACK
# } REMOTEREADACK ;
class REMOTEREADACK(NDRENUM):
    class enumItems(Enum):
        RR_UNKNOWN = 0
        RR_NACK = 1
        RR_ACK = 2


# byte *lpBuffer under [unique, size_is(dwSize), length_is(dwSize)]: a unique pointer to a conformant
# varying byte array
class BYTE_ARRAY(ScalarArrayItems, NDRUniConformantVaryingArray):
    item = "c"


class LPBYTE_ARRAY(NDRPOINTER):
    referent = (
        ("Data", BYTE_ARRAY),
    )


# typedef struct _REMOTEREADDESC {
#     DWORD hRemoteQueue ;
#     DWORD hCursor ;
#     DWORD ulAction ;
#     DWORD ulTimeout ;
#     [range (0, 4325376)] DWORD dwSize ;
#     DWORD dwQueue ;
#     DWORD dwRequestID;
#     DWORD Reserved;
#     DWORD dwArriveTime ;
#     REMOTEREADACK eAckNack ;
#     [unique, size_is(dwSize), length_is(dwSize)] byte *lpBuffer ;
# } REMOTEREADDESC ;
class REMOTEREADDESC(NDRSTRUCT):
    structure = (
        ("hRemoteQueue", DWORD),
        ("hCursor", DWORD),
        ("ulAction", DWORD),
        ("ulTimeout", DWORD),
        ("dwSize", DWORD),
        ("dwQueue", DWORD),
        ("dwRequestID", DWORD),
        ("Reserved", DWORD),
        ("dwArriveTime", DWORD),
        ("eAckNack", REMOTEREADACK),
        ("lpBuffer", LPBYTE_ARRAY),
    )


# REMOTEREADDESC * (embedded, unique by pointer_default(unique))
class PREMOTEREADDESC(NDRPOINTER):
    referent = (
        ("Data", REMOTEREADDESC),
    )


################################################################################
# Methods
################################################################################

# HRESULT
# RemoteQMStartReceive(
#     [in] handle_t hBind,
#     [out] PCTX_REMOTEREAD_HANDLE_TYPE *pphContext,
#     [in, out] REMOTEREADDESC* lpRemoteReadDesc
# );
class RemoteQMStartReceive(NDRCALL):
    opnum = 0
    structure = (
        ("lpRemoteReadDesc", REMOTEREADDESC),
    )


class RemoteQMStartReceiveResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_REMOTEREAD_HANDLE_TYPE),
        ("lpRemoteReadDesc", REMOTEREADDESC),
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMEndReceive(
#     [in] handle_t hBind,
#     [in, out] PCTX_REMOTEREAD_HANDLE_TYPE *pphContext,
#     [in, range(1, 2)] DWORD dwAck
# );
class RemoteQMEndReceive(NDRCALL):
    opnum = 1
    structure = (
        ("pphContext", PCTX_REMOTEREAD_HANDLE_TYPE),
        ("dwAck", DWORD),
    )


class RemoteQMEndReceiveResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_REMOTEREAD_HANDLE_TYPE),
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMOpenQueue (
#     [in] handle_t hBind,
#     [out] PCTX_RRSESSION_HANDLE_TYPE *phContext,
#     [in] GUID *pLicGuid,
#     [in, range(0, 16)] DWORD dwMQS,
#     [in] DWORD hQueue,
#     [in] DWORD pQueue,
#     [in] DWORD dwpContext
# );
class RemoteQMOpenQueue(NDRCALL):
    opnum = 2
    structure = (
        ("pLicGuid", GUID),
        ("dwMQS", DWORD),
        ("hQueue", DWORD),
        ("pQueue", DWORD),
        ("dwpContext", DWORD),
    )


class RemoteQMOpenQueueResponse(NDRCALL):
    structure = (
        ("phContext", PCTX_RRSESSION_HANDLE_TYPE),
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMCloseQueue (
#     [in] handle_t hBind,
#     [in, out] PCTX_RRSESSION_HANDLE_TYPE *pphContext
# );
class RemoteQMCloseQueue(NDRCALL):
    opnum = 3
    structure = (
        ("pphContext", PCTX_RRSESSION_HANDLE_TYPE),
    )


class RemoteQMCloseQueueResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_RRSESSION_HANDLE_TYPE),
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMCloseCursor (
#     [in] handle_t hBind,
#     [in] DWORD hQueue,
#     [in] DWORD hCursor
# );
class RemoteQMCloseCursor(NDRCALL):
    opnum = 4
    structure = (
        ("hQueue", DWORD),
        ("hCursor", DWORD),
    )


class RemoteQMCloseCursorResponse(NDRCALL):
    structure = (
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMCancelReceive (
#     [in] handle_t hBind,
#     [in] DWORD hQueue,
#     [in] DWORD pQueue,
#     [in] DWORD dwRequestID
# );
class RemoteQMCancelReceive(NDRCALL):
    opnum = 5
    structure = (
        ("hQueue", DWORD),
        ("pQueue", DWORD),
        ("dwRequestID", DWORD),
    )


class RemoteQMCancelReceiveResponse(NDRCALL):
    structure = (
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMPurgeQueue (
#     [in] handle_t hBind,
#     [in] DWORD hQueue
# );
class RemoteQMPurgeQueue(NDRCALL):
    opnum = 6
    structure = (
        ("hQueue", DWORD),
    )


class RemoteQMPurgeQueueResponse(NDRCALL):
    structure = (
        ("ErrorCode", HRESULT),
    )


# DWORD
# RemoteQMGetQMQMServerPort (
#     [in] handle_t hBind,
#     [in, range(0, 3)] DWORD dwPortType
# );
class RemoteQMGetQMQMServerPort(NDRCALL):
    opnum = 7
    structure = (
        ("dwPortType", DWORD),
    )


class RemoteQMGetQMQMServerPortResponse(NDRCALL):
    structure = (
        ("ReturnValue", DWORD),
    )


# typedef struct _REMOTEREADDESC2 {
#     REMOTEREADDESC * pRemoteReadDesc;
#     ULONGLONG SequentialId;
# } REMOTEREADDESC2;
class REMOTEREADDESC2(NDRSTRUCT):
    structure = (
        ("pRemoteReadDesc", PREMOTEREADDESC),
        ("SequentialId", ULONGLONG),
    )


# void
# RemoteQmGetVersion(
#     [in] handle_t hBind,
#     [out] unsigned char * pMajor,
#     [out] unsigned char * pMinor,
#     [out] unsigned short * pBuildNumber
# );
class RemoteQmGetVersion(NDRCALL):
    opnum = 8
    structure = ()


class RemoteQmGetVersionResponse(NDRCALL):
    structure = (
        ("pMajor", UCHAR),
        ("pMinor", UCHAR),
        ("pBuildNumber", USHORT),
    )


# HRESULT
# RemoteQMStartReceive2(
#     [in] handle_t hBind,
#     [out] PCTX_REMOTEREAD_HANDLE_TYPE *pphContext,
#     [in, out] REMOTEREADDESC2* lpRemoteReadDesc2
# );
class RemoteQMStartReceive2(NDRCALL):
    opnum = 9
    structure = (
        ("lpRemoteReadDesc2", REMOTEREADDESC2),
    )


class RemoteQMStartReceive2Response(NDRCALL):
    structure = (
        ("pphContext", PCTX_REMOTEREAD_HANDLE_TYPE),
        ("lpRemoteReadDesc2", REMOTEREADDESC2),
        ("ErrorCode", HRESULT),
    )


# HRESULT
# RemoteQMStartReceiveByLookupId(
#     [in] handle_t hBind,
#     [in] ULONGLONG LookupId,
#     [out] PCTX_REMOTEREAD_HANDLE_TYPE *pphContext,
#     [in, out] REMOTEREADDESC2* lpRemoteReadDesc2
# );
class RemoteQMStartReceiveByLookupId(NDRCALL):
    opnum = 10
    structure = (
        ("LookupId", ULONGLONG),
        ("lpRemoteReadDesc2", REMOTEREADDESC2),
    )


class RemoteQMStartReceiveByLookupIdResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_REMOTEREAD_HANDLE_TYPE),
        ("lpRemoteReadDesc2", REMOTEREADDESC2),
        ("ErrorCode", HRESULT),
    )


################################################################################
# OPNUMs and their corresponding structures
################################################################################
OPNUMS = {
    0: (RemoteQMStartReceive, RemoteQMStartReceiveResponse),
    1: (RemoteQMEndReceive, RemoteQMEndReceiveResponse),
    2: (RemoteQMOpenQueue, RemoteQMOpenQueueResponse),
    3: (RemoteQMCloseQueue, RemoteQMCloseQueueResponse),
    4: (RemoteQMCloseCursor, RemoteQMCloseCursorResponse),
    5: (RemoteQMCancelReceive, RemoteQMCancelReceiveResponse),
    6: (RemoteQMPurgeQueue, RemoteQMPurgeQueueResponse),
    7: (RemoteQMGetQMQMServerPort, RemoteQMGetQMQMServerPortResponse),
    8: (RemoteQmGetVersion, RemoteQmGetVersionResponse),
    9: (RemoteQMStartReceive2, RemoteQMStartReceive2Response),
    10: (RemoteQMStartReceiveByLookupId, RemoteQMStartReceiveByLookupIdResponse),
}
