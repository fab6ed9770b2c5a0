"""qmcomm / qmcomm2 identities, opnums and wire constants (MS-MQMP 1.9, 2.2, 3.1.4, 3.1.5, 6)."""
from __future__ import annotations

import uuid

from qm2qm.rpc.faults import NCA_S_OP_RNG_ERROR, RPC_X_BAD_STUB_DATA  # noqa: F401 (re-exported)

# MS-MQMP 6: uuid(fdb3a030-065f-11d1-bb9b-00a024ea5525), version(1.0); uuid(76d12b80-...), version(1.0)
QMCOMM_UUID = uuid.UUID("fdb3a030-065f-11d1-bb9b-00a024ea5525")
QMCOMM_VERSION = (1, 0)
QMCOMM_NAME = "qmcomm"
QMCOMM2_UUID = uuid.UUID("76d12b80-3467-11d3-91ff-0090272f9ea3")
QMCOMM2_VERSION = (1, 0)
QMCOMM2_NAME = "qmcomm2"

# MS-MQMP 3.1.4 "Methods in RPC Opnum Order" (qmcomm)
OPNUM_NAMES: dict[int, str] = {
    1: "R_QMGetRemoteQueueName", 2: "R_QMOpenRemoteQueue", 3: "R_QMCloseRemoteQueueContext",
    4: "R_QMCreateRemoteCursor", 6: "R_QMCreateObjectInternal", 7: "R_QMSetObjectSecurityInternal",
    8: "R_QMGetObjectSecurityInternal", 9: "R_QMDeleteObject", 10: "R_QMGetObjectProperties",
    11: "R_QMSetObjectProperties", 12: "R_QMObjectPathToObjectFormat", 14: "R_QMGetTmWhereabouts",
    15: "R_QMEnlistTransaction", 16: "R_QMEnlistInternalTransaction", 17: "R_QMCommitTransaction",
    18: "R_QMAbortTransaction", 19: "rpc_QMOpenQueueInternal", 20: "rpc_ACCloseHandle", 22: "rpc_ACCloseCursor",
    23: "rpc_ACSetCursorProperties", 26: "rpc_ACHandleToFormatName", 27: "rpc_ACPurgeQueue",
    28: "R_QMQueryQMRegistryInternal", 31: "R_QMGetRTQMServerPort",
}
# "Reserved for local use" (3.1.4, <10>): clients MUST NOT send them; not registered, so the runtime answers
# nca_s_op_rng_error.
RESERVED_OPNUMS = frozenset({0, 5, 13, 21, 24, 25, 29, 30, 32, 33, 34})
# 3.1.4: a server whose LocalQueueManager.SupportingServer is False MUST fail these (opnum 1 is answered by its
# own rule, 3.1.4.1, which gives the same kind of refusal).
SUPPORTING_SERVER_OPNUMS = frozenset({6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 22, 23, 26, 27, 28})
# MS-MQMP 3.1.5 (qmcomm2): all four are supporting-server methods.
QMCOMM2_OPNUM_NAMES: dict[int, str] = {
    0: "QMSendMessageInternalEx", 1: "rpc_ACSendMessageEx", 2: "rpc_ACReceiveMessageEx", 3: "rpc_ACCreateCursorEx",
}

OPNUM_R_QMGetRemoteQueueName = 1
OPNUM_R_QMOpenRemoteQueue = 2
OPNUM_R_QMCloseRemoteQueueContext = 3
OPNUM_R_QMCreateRemoteCursor = 4
OPNUM_R_QMGetRTQMServerPort = 31

# 3.1.4.2 dwDesiredAccess / dwShareMode
MQ_RECEIVE_ACCESS = 0x00000001
MQ_PEEK_ACCESS = 0x00000020
MQ_DENY_NONE = 0x00000000
MQ_DENY_RECEIVE_SHARE = 0x00000001

# 3.1.4.24 fIP
IP_HANDSHAKE = 0x00000000
IP_READ = 0x00000001
IPX_HANDSHAKE = 0x00000002
IPX_READ = 0x00000003

# MS-MQMQ 2.2.6 QUEUE_FORMAT_TYPE
QUEUE_FORMAT_TYPE_UNKNOWN = 0
QUEUE_FORMAT_TYPE_PUBLIC = 1
QUEUE_FORMAT_TYPE_PRIVATE = 2
QUEUE_FORMAT_TYPE_DIRECT = 3
QUEUE_FORMAT_TYPE_MACHINE = 4
QUEUE_FORMAT_TYPE_CONNECTOR = 5
QUEUE_FORMAT_TYPE_DL = 6
QUEUE_FORMAT_TYPE_MULTICAST = 7
QUEUE_FORMAT_TYPE_SUBQUEUE = 8

# MS-MQMQ 2.2.11 QUEUE_SUFFIX_TYPE (low nibble of m_SuffixAndFlags) and the SYSTEM flag (high nibble)
QUEUE_SUFFIX_TYPE_NONE = 0
QUEUE_SUFFIX_TYPE_JOURNAL = 1
QUEUE_SUFFIX_TYPE_DEADLETTER = 2
QUEUE_SUFFIX_TYPE_DEADXACT = 3
QUEUE_SUFFIX_TYPE_XACTONLY = 4
QUEUE_SUFFIX_TYPE_SUBQUEUE = 5
QUEUE_FORMAT_FLAG_SYSTEM = 0x80

# MS-MQMP 2.2.2.1 TRANSFER_TYPE (CACTransferBufferV1.uTransferType, [range(0,2)])
CACTB_SEND = 0
CACTB_RECEIVE = 1
CACTB_CREATECURSOR = 2
