"""qm2qm interface identity, opnums and the wire constants of MS-MQQP 2.2 / 3.1.4 (and the NDR fault statuses)."""
from __future__ import annotations

import enum
import uuid

from qm2qm.rpc.faults import NCA_S_OP_RNG_ERROR, RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND  # noqa: F401 (re-exported)

# MS-MQQP 6: uuid(1088a980-eae5-11d0-8d9b-00a02453c337), version(1.0)
QM2QM_UUID = uuid.UUID("1088a980-eae5-11d0-8d9b-00a02453c337")
QM2QM_VERSION = (1, 0)
QM2QM_NAME = "qm2qm"

# MS-MQQP 3.1.4, "Methods in RPC Opnum Order"
OPNUM_RemoteQMStartReceive = 0
OPNUM_RemoteQMEndReceive = 1
OPNUM_RemoteQMOpenQueue = 2
OPNUM_RemoteQMCloseQueue = 3
OPNUM_RemoteQMCloseCursor = 4
OPNUM_RemoteQMCancelReceive = 5
OPNUM_RemoteQMPurgeQueue = 6
OPNUM_RemoteQMGetQMQMServerPort = 7
OPNUM_RemoteQmGetVersion = 8
OPNUM_RemoteQMStartReceive2 = 9
OPNUM_RemoteQMStartReceiveByLookupId = 10

OPNUM_NAMES: dict[int, str] = {
    0: "RemoteQMStartReceive",
    1: "RemoteQMEndReceive",
    2: "RemoteQMOpenQueue",
    3: "RemoteQMCloseQueue",
    4: "RemoteQMCloseCursor",
    5: "RemoteQMCancelReceive",
    6: "RemoteQMPurgeQueue",
    7: "RemoteQMGetQMQMServerPort",
    8: "RemoteQmGetVersion",
    9: "RemoteQMStartReceive2",
    10: "RemoteQMStartReceiveByLookupId",
}


class REMOTEREADACK(enum.IntEnum):
    """MS-MQQP 2.2.1.3 REMOTEREADACK (an NDR enum: 16 bits in NDR, 32 bits in NDR64)."""
    RR_UNKNOWN = 0
    RR_NACK = 1
    RR_ACK = 2


RR_UNKNOWN = REMOTEREADACK.RR_UNKNOWN
RR_NACK = REMOTEREADACK.RR_NACK
RR_ACK = REMOTEREADACK.RR_ACK

# MS-MQQP 2.2.2.1 REMOTEREADDESC.ulAction (the same values as MS-MQRR's ulAction)
from qm2qm.remote_read.actions import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,  # noqa: E402,F401
                                       MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV,
                                       MQ_LOOKUP_RECEIVE_CURRENT, MQ_LOOKUP_RECEIVE_NEXT, MQ_LOOKUP_RECEIVE_PREV)

# MS-MQQP 2.2.2.1 REMOTEREADDESC.Reserved values (informative; the field MUST be ignored)
REMOTEREADDESC_RESERVED_CLIENT = 0x00000000
REMOTEREADDESC_RESERVED_SERVER = 0x00000001

# MS-MQQP 2.2.2.1: dwSize is [range(0, 4325376)] (0x00420000)
MAX_REMOTEREAD_BUFFER = 4325376

# [range] attributes of MS-MQQP 6, as (low, high) inclusive
RANGE_dwSize = (0, MAX_REMOTEREAD_BUFFER)
RANGE_dwAck = (1, 2)
RANGE_dwMQS = (0, 16)
RANGE_dwPortType = (0, 3)

# MS-MQQP 3.1.4.8 dwPortType
IP_HANDSHAKE = 0x00000000
IP_READ = 0x00000001
IPX_HANDSHAKE = 0x00000002
IPX_READ = 0x00000003

# Fault statuses raised by the stub codec (MS-RPCE 3.1.1.5.3, 3.1.3.5.2; MS-ERREF 2.2)
RPC_S_INVALID_BOUND = RPC_X_INVALID_BOUND      # the name MS-ERREF gives 0x6C6

# Windows-style referent ids: the first pointer marshalled in a stub is 0x00020000, then +4 (MS-RPCE 2.2.4 practice)
REFERENT_ID_BASE = 0x00020000
REFERENT_ID_STEP = 4
