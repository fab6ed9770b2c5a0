"""impacket NDR declarations of the qmcomm subset, named and ordered as MS-MQMP 6 (idl/qmcomm.idl) and MS-MQMQ 5.

The codec (qm2qm.mqmp.codec) decodes requests and encodes responses with these declarations, over NDR and NDR64,
and an impacket ``DCERPC_v5`` client calls them with ``dce.request(R_QMOpenRemoteQueue())``. impacket conventions
as in qm2qm.mqqp.idl: a top-level ``[ref]`` pointer parameter is declared as its pointee, an HRESULT return is
``ErrorCode``, a context handle is 20 bytes in ``Data``; R_QMGetRTQMServerPort's DWORD return is ``ReturnValue``
(call it with ``checkError=False``)."""
from __future__ import annotations

from impacket.dcerpc.v5.dtypes import DWORD, GUID, HRESULT, LONG, LPDWORD, PGUID, UCHAR, ULONG, USHORT
from impacket.dcerpc.v5.ndr import (NDRCALL, NDRPOINTER, NDRSTRUCT, NDRUNION, NDRUniConformantArray,
                                    NDRUniConformantVaryingArray)
from impacket.dcerpc.v5.rpcrt import DCERPCException
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqmp.constants import QMCOMM2_UUID, QMCOMM2_VERSION, QMCOMM_UUID, QMCOMM_VERSION
from qm2qm.rpc.ndr_arrays import LPWSTR, ScalarArrayItems

MSRPC_UUID_QMCOMM = uuidtup_to_bin((str(QMCOMM_UUID), "%d.%d" % QMCOMM_VERSION))
MSRPC_UUID_QMCOMM2 = uuidtup_to_bin((str(QMCOMM2_UUID), "%d.%d" % QMCOMM2_VERSION))


class DCERPCSessionError(DCERPCException):
    """An HRESULT failure returned by a qmcomm method (MS-MQMP 2.2, MS-MQMQ 2.4)."""

    def __str__(self) -> str:
        return "qmcomm SessionError: code 0x%08x" % ((self.error_code or 0) & 0xFFFFFFFF)


################################################################################
# MS-MQMQ 2.2.6–2.2.10: QUEUE_FORMAT and its arms
################################################################################

# typedef struct _OBJECTID { GUID Lineage; DWORD Uniquifier; } OBJECTID;
class OBJECTID(NDRSTRUCT):
    structure = (
        ("Lineage", GUID),
        ("Uniquifier", DWORD),
    )


# typedef struct _DL_ID { GUID m_DlGuid; [string] wchar_t* m_pwzDomain; } DL_ID;
class DL_ID(NDRSTRUCT):
    structure = (
        ("m_DlGuid", GUID),
        ("m_pwzDomain", LPWSTR),
    )


# typedef struct _MULTICAST_ID { ULONG m_address; ULONG m_port; } MULTICAST_ID;
class MULTICAST_ID(NDRSTRUCT):
    structure = (
        ("m_address", ULONG),
        ("m_port", ULONG),
    )


class _EMPTY(NDRSTRUCT):
    """The arm of [case(QUEUE_FORMAT_TYPE_UNKNOWN)]: nothing on the wire."""
    structure = ()

    def getAlignment(self):
        return 1

    def getData(self, soFar=0):
        return b""

    def getDataReferents(self, soFar=0):
        return b""

    def fromString(self, data, offset=0):
        return 0

    def fromStringReferents(self, data, offset=0):
        return 0


# [switch_is(m_qft)] union { ... }: the discriminant is marshalled again in m_qft's type (unsigned char)
class QUEUE_FORMAT_UNION(NDRUNION):
    commonHdr = (
        ("tag", UCHAR),
    )
    commonHdr64 = (
        ("tag", UCHAR),
    )
    union = {
        0: ("m_unknown", _EMPTY),
        1: ("m_gPublicID", GUID),
        2: ("m_oPrivateID", OBJECTID),
        3: ("m_pDirectID", LPWSTR),
        4: ("m_gMachineID", GUID),
        5: ("m_GConnectorID", GUID),
        6: ("m_DlID", DL_ID),
        7: ("m_MulticastID", MULTICAST_ID),
        8: ("m_pDirectSubqueueID", LPWSTR),
    }


# typedef struct __QUEUE_FORMAT { unsigned char m_qft; unsigned char m_SuffixAndFlags; unsigned short m_reserved;
#     [switch_is(m_qft)] union { ... }; } QUEUE_FORMAT;
class QUEUE_FORMAT(NDRSTRUCT):
    """In NDR64 the structure ends with the trailing pad to its alignment, 8 (MS-RPCE 2.2.5.3.4.1), which impacket
    does not write or skip: the PRIVATE arm (an OBJECTID, 20 bytes at offset 16) ends at 36, so 4 pad bytes."""
    structure = (
        ("m_qft", UCHAR),
        ("m_SuffixAndFlags", UCHAR),
        ("m_reserved", USHORT),
        ("u", QUEUE_FORMAT_UNION),
    )

    def getData(self, soFar=0):
        data = super().getData(soFar)
        return data + bytes(-(soFar + len(data)) % 8) if self._isNDR64 else data

    def fromString(self, data, offset=0):
        size = super().fromString(data, offset)
        return size + (-(offset + size) % 8) if self._isNDR64 else size


class PQUEUE_FORMAT(NDRPOINTER):
    referent = (
        ("Data", QUEUE_FORMAT),
    )


################################################################################
# MS-MQMP 2.2.1.1.3, 2.2.3.2, 2.2.3.4
################################################################################

# typedef [context_handle] void* PCTX_OPENREMOTE_HANDLE_TYPE;
class PCTX_OPENREMOTE_HANDLE_TYPE(NDRSTRUCT):
    structure = (
        ("Data", "20s=b''"),
    )

    def getAlignment(self):
        return 4


# typedef struct CACCreateRemoteCursor { DWORD hCursor; DWORD srv_hACQueue; DWORD cli_pQMQueue; }
class CACCreateRemoteCursor(NDRSTRUCT):
    structure = (
        ("hCursor", DWORD),
        ("srv_hACQueue", DWORD),
        ("cli_pQMQueue", DWORD),
    )


class _WCHAR_ARRAY(ScalarArrayItems, NDRUniConformantArray):
    item = "<H"


class _PWCHAR_ARRAY(NDRPOINTER):
    referent = (("Data", _WCHAR_ARRAY),)


class _PPWCHAR_ARRAY(NDRPOINTER):
    """[size_is(,n)] WCHAR**"""
    referent = (("Data", _PWCHAR_ARRAY),)


class _BYTE_ARRAY(ScalarArrayItems, NDRUniConformantArray):
    item = "c"


class _PBYTE_ARRAY(NDRPOINTER):
    referent = (("Data", _BYTE_ARRAY),)


class _PPBYTE_ARRAY(NDRPOINTER):
    """[size_is(,n)] unsigned char**"""
    referent = (("Data", _PBYTE_ARRAY),)


class _BYTE_VARRAY(ScalarArrayItems, NDRUniConformantVaryingArray):
    item = "c"


class _PBYTE_VARRAY(NDRPOINTER):
    referent = (("Data", _BYTE_VARRAY),)


class _PPBYTE_VARRAY(NDRPOINTER):
    """[size_is(,n), length_is(,m)] unsigned char**"""
    referent = (("Data", _PBYTE_VARRAY),)


class _WCHAR_VARRAY(ScalarArrayItems, NDRUniConformantVaryingArray):
    item = "<H"


class _PWCHAR_VARRAY(NDRPOINTER):
    referent = (("Data", _WCHAR_VARRAY),)


class _PPWCHAR_VARRAY(NDRPOINTER):
    """[size_is(,n), length_is(,m)] WCHAR**"""
    referent = (("Data", _PWCHAR_VARRAY),)


class _PUSHORT(NDRPOINTER):
    referent = (("Data", USHORT),)


class _PUCHAR(NDRPOINTER):
    referent = (("Data", UCHAR),)


class _POBJECTID(NDRPOINTER):
    referent = (("Data", OBJECTID),)


class _PPOBJECTID(NDRPOINTER):
    referent = (("Data", _POBJECTID),)


class _PPGUID(NDRPOINTER):
    referent = (("Data", PGUID),)


# XACTUOW (MS-MQMQ 2.2.18.1.8): unsigned char rgb[16]
class XACTUOW(NDRSTRUCT):
    structure = (
        ("rgb", "16s=b''"),
    )

    def getAlignment(self):
        return 1


class _PXACTUOW(NDRPOINTER):
    referent = (("Data", XACTUOW),)


class _SEND(NDRSTRUCT):
    structure = (
        ("pAdminQueueFormat", PQUEUE_FORMAT),
        ("pResponseQueueFormat", PQUEUE_FORMAT),
    )


class _RECEIVE(NDRSTRUCT):
    structure = (
        ("RequestTimeout", DWORD),
        ("Action", DWORD),
        ("Asynchronous", DWORD),
        ("Cursor", DWORD),
        ("ulResponseFormatNameLen", DWORD),
        ("ppResponseFormatName", _PPWCHAR_ARRAY),
        ("pulResponseFormatNameLenProp", LPDWORD),
        ("ulAdminFormatNameLen", DWORD),
        ("ppAdminFormatName", _PPWCHAR_ARRAY),
        ("pulAdminFormatNameLenProp", LPDWORD),
        ("ulDestFormatNameLen", DWORD),
        ("ppDestFormatName", _PPWCHAR_ARRAY),
        ("pulDestFormatNameLenProp", LPDWORD),
        ("ulOrderingFormatNameLen", DWORD),
        ("ppOrderingFormatName", _PPWCHAR_ARRAY),
        ("pulOrderingFormatNameLenProp", LPDWORD),
    )


class CACTransferBufferV1_UNION(NDRUNION):
    commonHdr = (("tag", DWORD),)
    commonHdr64 = (("tag", DWORD),)
    union = {
        0: ("Send", _SEND),
        1: ("Receive", _RECEIVE),
        2: ("CreateCursor", CACCreateRemoteCursor),
    }


# typedef struct CACTransferBufferV1 { ... } CACTransferBufferV1;  (MS-MQMP 2.2.3.2)
class CACTransferBufferV1(NDRSTRUCT):
    structure = (
        ("uTransferType", DWORD),
        ("u", CACTransferBufferV1_UNION),
        ("pClass", _PUSHORT),
        ("ppMessageID", _PPOBJECTID),
        ("ppCorrelationID", _PPBYTE_VARRAY),
        ("pSentTime", LPDWORD),
        ("pArrivedTime", LPDWORD),
        ("pPriority", _PUCHAR),
        ("pDelivery", _PUCHAR),
        ("pAcknowledge", _PUCHAR),
        ("pAuditing", _PUCHAR),
        ("pApplicationTag", LPDWORD),
        ("ppBody", _PPBYTE_VARRAY),
        ("ulBodyBufferSizeInBytes", DWORD),
        ("ulAllocBodyBufferInBytes", DWORD),
        ("pBodySize", LPDWORD),
        ("ppTitle", _PPWCHAR_VARRAY),
        ("ulTitleBufferSizeInWCHARs", DWORD),
        ("pulTitleBufferSizeInWCHARs", LPDWORD),
        ("ulAbsoluteTimeToQueue", DWORD),
        ("pulRelativeTimeToQueue", LPDWORD),
        ("ulRelativeTimeToLive", DWORD),
        ("pulRelativeTimeToLive", LPDWORD),
        ("pTrace", _PUCHAR),
        ("pulSenderIDType", LPDWORD),
        ("ppSenderID", _PPBYTE_ARRAY),
        ("pulSenderIDLenProp", LPDWORD),
        ("pulPrivLevel", LPDWORD),
        ("ulAuthLevel", DWORD),
        ("pAuthenticated", _PUCHAR),
        ("pulHashAlg", LPDWORD),
        ("pulEncryptAlg", LPDWORD),
        ("ppSenderCert", _PPBYTE_ARRAY),
        ("ulSenderCertLen", DWORD),
        ("pulSenderCertLenProp", LPDWORD),
        ("ppwcsProvName", _PPWCHAR_ARRAY),
        ("ulProvNameLen", DWORD),
        ("pulAuthProvNameLenProp", LPDWORD),
        ("pulProvType", LPDWORD),
        ("fDefaultProvider", LONG),
        ("ppSymmKeys", _PPBYTE_ARRAY),
        ("ulSymmKeysSize", DWORD),
        ("pulSymmKeysSizeProp", LPDWORD),
        ("bEncrypted", UCHAR),
        ("bAuthenticated", UCHAR),
        ("uSenderIDLen", USHORT),
        ("ppSignature", _PPBYTE_ARRAY),
        ("ulSignatureSize", DWORD),
        ("pulSignatureSizeProp", LPDWORD),
        ("ppSrcQMID", _PPGUID),
        ("pUow", _PXACTUOW),
        ("ppMsgExtension", _PPBYTE_VARRAY),
        ("ulMsgExtensionBufferInBytes", DWORD),
        ("pMsgExtensionSize", LPDWORD),
        ("ppConnectorType", _PPGUID),
        ("pulBodyType", LPDWORD),
        ("pulVersion", LPDWORD),
    )


################################################################################
# Methods (MS-MQMP 3.1.4.1–3.1.4.4, 3.1.4.24)
################################################################################

class _PWSTR_INOUT(NDRPOINTER):
    """[in, out, ptr, string] WCHAR** — a full pointer to a string pointer."""
    referent = (("Data", LPWSTR),)


# HRESULT R_QMGetRemoteQueueName([in] handle_t hBind, [in] DWORD pQueue,
#                                [in, out, ptr, string] WCHAR** lplpRemoteQueueName);
class R_QMGetRemoteQueueName(NDRCALL):
    opnum = 1
    structure = (
        ("pQueue", DWORD),
        ("lplpRemoteQueueName", _PWSTR_INOUT),
    )


class R_QMGetRemoteQueueNameResponse(NDRCALL):
    structure = (
        ("lplpRemoteQueueName", _PWSTR_INOUT),
        ("ErrorCode", HRESULT),
    )


# HRESULT R_QMOpenRemoteQueue([in] handle_t hBind, [out] PCTX_OPENREMOTE_HANDLE_TYPE* pphContext,
#     [out] DWORD* pdwContext, [in, unique] QUEUE_FORMAT* pQueueFormat, [in] DWORD dwCallingProcessID,
#     [in] DWORD dwDesiredAccess, [in] DWORD dwShareMode, [in] GUID* pLicGuid, [in] DWORD dwMQS,
#     [out] DWORD* dwpQueue, [out] DWORD* phQueue);
class R_QMOpenRemoteQueue(NDRCALL):
    opnum = 2
    structure = (
        ("pQueueFormat", PQUEUE_FORMAT),
        ("dwCallingProcessID", DWORD),
        ("dwDesiredAccess", DWORD),
        ("dwShareMode", DWORD),
        ("pLicGuid", GUID),
        ("dwMQS", DWORD),
    )


class R_QMOpenRemoteQueueResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_OPENREMOTE_HANDLE_TYPE),
        ("pdwContext", DWORD),
        ("dwpQueue", DWORD),
        ("phQueue", DWORD),
        ("ErrorCode", HRESULT),
    )


# void R_QMCloseRemoteQueueContext([in, out] PCTX_OPENREMOTE_HANDLE_TYPE* pphContext);
class R_QMCloseRemoteQueueContext(NDRCALL):
    opnum = 3
    structure = (
        ("pphContext", PCTX_OPENREMOTE_HANDLE_TYPE),
    )


class R_QMCloseRemoteQueueContextResponse(NDRCALL):
    structure = (
        ("pphContext", PCTX_OPENREMOTE_HANDLE_TYPE),
    )


# HRESULT R_QMCreateRemoteCursor([in] handle_t hBind, [in] struct CACTransferBufferV1* ptb1,
#                                [in] DWORD hQueue, [out] DWORD* phCursor);
class R_QMCreateRemoteCursor(NDRCALL):
    opnum = 4
    structure = (
        ("ptb1", CACTransferBufferV1),
        ("hQueue", DWORD),
    )


class R_QMCreateRemoteCursorResponse(NDRCALL):
    structure = (
        ("phCursor", DWORD),
        ("ErrorCode", HRESULT),
    )


# DWORD R_QMGetRTQMServerPort([in] handle_t hBind, [in] DWORD fIP);
class R_QMGetRTQMServerPort(NDRCALL):
    opnum = 31
    structure = (
        ("fIP", DWORD),
    )


class R_QMGetRTQMServerPortResponse(NDRCALL):
    structure = (
        ("ReturnValue", DWORD),
    )


OPNUMS = {
    1: (R_QMGetRemoteQueueName, R_QMGetRemoteQueueNameResponse),
    2: (R_QMOpenRemoteQueue, R_QMOpenRemoteQueueResponse),
    3: (R_QMCloseRemoteQueueContext, R_QMCloseRemoteQueueContextResponse),
    4: (R_QMCreateRemoteCursor, R_QMCreateRemoteCursorResponse),
    31: (R_QMGetRTQMServerPort, R_QMGetRTQMServerPortResponse),
}
