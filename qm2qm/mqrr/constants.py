"""MS-MQRR constants: interface identity (6), opnums (3.1.4), dwAccess / dwShareMode (3.1.4.2), SectionType (2.2.7)."""
from __future__ import annotations

import uuid

from qm2qm.remote_read.actions import ACK, NACK

MQRR_UUID = uuid.UUID("1a9134dd-7b39-45ba-ad88-44d01ca47f28")
MQRR_VERSION = (1, 0)
MQRR_NAME = "RemoteRead"

OPNUM_NAMES: dict[int, str] = {
    0: "R_GetServerPort", 2: "R_OpenQueue", 3: "R_CloseQueue", 4: "R_CreateCursor", 5: "R_CloseCursor",
    6: "R_PurgeQueue", 7: "R_StartReceive", 8: "R_CancelReceive", 9: "R_EndReceive", 10: "R_MoveMessage",
    11: "R_OpenQueueForMove", 12: "R_QMEnlistRemoteTransaction", 13: "R_StartTransactionalReceive",
    14: "R_SetUserAcknowledgementClass", 15: "R_EndTransactionalReceive",
}

# 3.1.4.2 dwAccess, 3.1.4.11 MQ_MOVE_ACCESS; dwShareMode
RECEIVE_ACCESS = 0x00000001
PEEK_ACCESS = 0x00000020
MQ_MOVE_ACCESS = 0x00000004
MQ_DENY_NONE = 0x00000000
MQ_DENY_SHARE = 0x00000001

# 3.1.4.9 dwAccess [range(1,2)]
RR_NACK = NACK
RR_ACK = ACK

# 2.2.7 SectionType
stFullPacket = 0
stBinaryFirstSection = 1
stBinarySecondSection = 2
stSrmpFirstSection = 3
stSrmpSecondSection = 4

# 3.1.4.14 usClass
MQMSG_CLASS_NACK_RECEIVE_REJECTED = 0xC004

# 3.1.4.12 cbPropagationToken [range(0, 131072)]
MAX_PROPAGATION_TOKEN = 131072

# 3.1.2.2 <11>: the Windows default Pending Request Cleanup Timer, 5 minutes
PENDING_REQUEST_CLEANUP_MS = 5 * 60 * 1000
# 3.1.4.1 the default RemoteRead port
DEFAULT_PORT = 2103

# MS-ERREF 2.3: R_PurgeQueue without ReceiveAccess (3.1.4.6)
STATUS_ACCESS_DENIED = 0xC0000022
# MS-ERREF 2.2: a [range] violation found while unmarshalling (dwAck is [range(1,2)])
RPC_S_INVALID_BOUND = 0x000006C6
