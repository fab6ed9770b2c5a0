"""The values the qm2qm codec reads and writes: REMOTEREADDESC, REMOTEREADDESC2 (MS-MQQP 2.2.2) and one request and
one response dataclass per method (MS-MQQP 3.1.4.1-3.1.4.11), fields named and ordered as the IDL parameters."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from qm2qm.mqqp.constants import REMOTEREADACK

CONTEXT_HANDLE_SIZE = 20
NULL_CONTEXT_HANDLE = b"\x00" * CONTEXT_HANDLE_SIZE


# ----------------------------------------------------------------------------------------------------------
# Types (MS-MQQP 2.2.2)
# ----------------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class REMOTEREADDESC:
    """MS-MQQP 2.2.2.1 REMOTEREADDESC; lpBuffer None is the NULL unique pointer."""
    hRemoteQueue: int = 0
    hCursor: int = 0
    ulAction: int = 0
    ulTimeout: int = 0
    dwSize: int = 0
    dwQueue: int = 0
    dwRequestID: int = 0
    Reserved: int = 0
    dwArriveTime: int = 0
    eAckNack: int = REMOTEREADACK.RR_UNKNOWN
    lpBuffer: bytes | None = None


@dataclass(slots=True)
class REMOTEREADDESC2:
    """MS-MQQP 2.2.2.2 REMOTEREADDESC2; pRemoteReadDesc None is the NULL unique pointer."""
    pRemoteReadDesc: REMOTEREADDESC | None = None
    SequentialId: int = 0


# ----------------------------------------------------------------------------------------------------------
# Requests ([in] parameters) and responses ([out] parameters, then the return value) of MS-MQQP 3.1.4.x.
# An HRESULT return is ErrorCode (an unsigned 32-bit value, e.g. 0xC00E0007); a DWORD return is ReturnValue.
# ----------------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class RemoteQMStartReceiveRequest:
    """MS-MQQP 3.1.4.1 RemoteQMStartReceive (opnum 0) [in] parameters."""
    lpRemoteReadDesc: REMOTEREADDESC


@dataclass(slots=True)
class RemoteQMStartReceiveResponse:
    """MS-MQQP 3.1.4.1 RemoteQMStartReceive (opnum 0) [out] parameters and HRESULT."""
    pphContext: bytes
    lpRemoteReadDesc: REMOTEREADDESC
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMEndReceiveRequest:
    """MS-MQQP 3.1.4.2 RemoteQMEndReceive (opnum 1) [in] parameters."""
    pphContext: bytes
    dwAck: int


@dataclass(slots=True)
class RemoteQMEndReceiveResponse:
    """MS-MQQP 3.1.4.2 RemoteQMEndReceive (opnum 1) [out] parameters and HRESULT."""
    pphContext: bytes
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMOpenQueueRequest:
    """MS-MQQP 3.1.4.3 RemoteQMOpenQueue (opnum 2) [in] parameters."""
    pLicGuid: uuid.UUID
    dwMQS: int
    hQueue: int
    pQueue: int
    dwpContext: int


@dataclass(slots=True)
class RemoteQMOpenQueueResponse:
    """MS-MQQP 3.1.4.3 RemoteQMOpenQueue (opnum 2) [out] parameters and HRESULT."""
    phContext: bytes
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMCloseQueueRequest:
    """MS-MQQP 3.1.4.4 RemoteQMCloseQueue (opnum 3) [in] parameters."""
    pphContext: bytes


@dataclass(slots=True)
class RemoteQMCloseQueueResponse:
    """MS-MQQP 3.1.4.4 RemoteQMCloseQueue (opnum 3) [out] parameters and HRESULT."""
    pphContext: bytes
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMCloseCursorRequest:
    """MS-MQQP 3.1.4.5 RemoteQMCloseCursor (opnum 4) [in] parameters."""
    hQueue: int
    hCursor: int


@dataclass(slots=True)
class RemoteQMCloseCursorResponse:
    """MS-MQQP 3.1.4.5 RemoteQMCloseCursor (opnum 4) HRESULT."""
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMCancelReceiveRequest:
    """MS-MQQP 3.1.4.6 RemoteQMCancelReceive (opnum 5) [in] parameters."""
    hQueue: int
    pQueue: int
    dwRequestID: int


@dataclass(slots=True)
class RemoteQMCancelReceiveResponse:
    """MS-MQQP 3.1.4.6 RemoteQMCancelReceive (opnum 5) HRESULT."""
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMPurgeQueueRequest:
    """MS-MQQP 3.1.4.7 RemoteQMPurgeQueue (opnum 6) [in] parameters."""
    hQueue: int


@dataclass(slots=True)
class RemoteQMPurgeQueueResponse:
    """MS-MQQP 3.1.4.7 RemoteQMPurgeQueue (opnum 6) HRESULT."""
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMGetQMQMServerPortRequest:
    """MS-MQQP 3.1.4.8 RemoteQMGetQMQMServerPort (opnum 7) [in] parameters."""
    dwPortType: int


@dataclass(slots=True)
class RemoteQMGetQMQMServerPortResponse:
    """MS-MQQP 3.1.4.8 RemoteQMGetQMQMServerPort (opnum 7) DWORD return value (a port, 0 on failure)."""
    ReturnValue: int = 0


@dataclass(slots=True)
class RemoteQmGetVersionRequest:
    """MS-MQQP 3.1.4.9 RemoteQmGetVersion (opnum 8): no [in] parameters (empty stub)."""


@dataclass(slots=True)
class RemoteQmGetVersionResponse:
    """MS-MQQP 3.1.4.9 RemoteQmGetVersion (opnum 8) [out] parameters (void return)."""
    pMajor: int
    pMinor: int
    pBuildNumber: int


@dataclass(slots=True)
class RemoteQMStartReceive2Request:
    """MS-MQQP 3.1.4.10 RemoteQMStartReceive2 (opnum 9) [in] parameters."""
    lpRemoteReadDesc2: REMOTEREADDESC2


@dataclass(slots=True)
class RemoteQMStartReceive2Response:
    """MS-MQQP 3.1.4.10 RemoteQMStartReceive2 (opnum 9) [out] parameters and HRESULT."""
    pphContext: bytes
    lpRemoteReadDesc2: REMOTEREADDESC2
    ErrorCode: int = 0


@dataclass(slots=True)
class RemoteQMStartReceiveByLookupIdRequest:
    """MS-MQQP 3.1.4.11 RemoteQMStartReceiveByLookupId (opnum 10) [in] parameters."""
    LookupId: int
    lpRemoteReadDesc2: REMOTEREADDESC2


@dataclass(slots=True)
class RemoteQMStartReceiveByLookupIdResponse:
    """MS-MQQP 3.1.4.11 RemoteQMStartReceiveByLookupId (opnum 10) [out] parameters and HRESULT."""
    pphContext: bytes
    lpRemoteReadDesc2: REMOTEREADDESC2
    ErrorCode: int = 0


REQUEST_TYPES: dict[int, type] = {
    0: RemoteQMStartReceiveRequest, 1: RemoteQMEndReceiveRequest, 2: RemoteQMOpenQueueRequest,
    3: RemoteQMCloseQueueRequest, 4: RemoteQMCloseCursorRequest, 5: RemoteQMCancelReceiveRequest,
    6: RemoteQMPurgeQueueRequest, 7: RemoteQMGetQMQMServerPortRequest, 8: RemoteQmGetVersionRequest,
    9: RemoteQMStartReceive2Request, 10: RemoteQMStartReceiveByLookupIdRequest,
}
RESPONSE_TYPES: dict[int, type] = {
    0: RemoteQMStartReceiveResponse, 1: RemoteQMEndReceiveResponse, 2: RemoteQMOpenQueueResponse,
    3: RemoteQMCloseQueueResponse, 4: RemoteQMCloseCursorResponse, 5: RemoteQMCancelReceiveResponse,
    6: RemoteQMPurgeQueueResponse, 7: RemoteQMGetQMQMServerPortResponse, 8: RemoteQmGetVersionResponse,
    9: RemoteQMStartReceive2Response, 10: RemoteQMStartReceiveByLookupIdResponse,
}
