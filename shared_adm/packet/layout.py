"""Wire constants of the UserMessage Packet: sizes, flag masks, header ids (MS-MQMQ 2.2.18–2.2.20)."""
from __future__ import annotations

import struct

# BaseHeader (2.2.19.1)
VERSION_NUMBER = 0x10
SIGNATURE = 0x524F494C                       # bytes "LIOR" little-endian
MAX_PACKET_SIZE = 0x00400000                 # 2.2.19.1 PacketSize maximum
BASE_HEADER = struct.Struct("<BBHIII")       # VersionNumber Reserved Flags Signature PacketSize TimeToReachQueue
BASE_PR = 0x0007
BASE_IN = 0x0008
BASE_SH = 0x0010
BASE_DH = 0x0020
BASE_TR = 0x0100
BASE_RESERVED = 0xFEC0                       # X9 X8 X6..X0: ignored on receipt

# UserHeader (2.2.19.2)
USER_HEADER = struct.Struct("<16s16sIIII")   # SourceQueueManager QueueManagerAddress TTBR SentTime MessageID Flags
USER_RC = 0x0000001F
USER_DM_SHIFT, USER_DM = 5, 0x00000060
USER_JN = 0x00000100
USER_JP = 0x00000200
USER_DQ_SHIFT, USER_DQ = 10, 0x00001C00
USER_AQ_SHIFT, USER_AQ = 13, 0x0000E000
USER_RQ_SHIFT, USER_RQ = 16, 0x00070000
USER_SH = 0x00080000
USER_TH = 0x00100000
USER_MP = 0x00200000
USER_CQ = 0x00400000
USER_MQ = 0x00800000
USER_AH = 0x02000000
USER_HH = 0x10000000
USER_RESERVED = 0x00000080 | 0x01000000 | 0x0C000000 | 0xE0000000   # X1 X2 X3 X4
MAX_ROUTING_COUNT = 0x1D

# Queue Format Type codes (2.2.18.1.5, 2.2.19.2 tables)
QFT_NONE = 0
QFT_SAME_AS_ADMIN = 1          # RQ only
QFT_PRIVATE_ON_SOURCE = 2      # AQ, RQ
QFT_PRIVATE_ON_DESTINATION = 3
QFT_PRIVATE_ON_ADMIN = 4       # RQ only
QFT_PUBLIC = 5
QFT_PRIVATE_ON_OTHER = 6       # AQ, RQ
QFT_DIRECT = 7
DQ_VALID = frozenset({0, 3, 5, 7})
AQ_VALID = frozenset({0, 2, 3, 5, 6, 7})
RQ_VALID = frozenset(range(8))

# MessagePropertiesHeader (2.2.19.3)
PROPERTIES_HEADER = struct.Struct("<BBH20sIIIIIIII")
PROPERTIES_ACKS = 0x0F          # PA PR NA NR
MAX_LABEL_LENGTH = 0xFA         # WCHARs including the NUL
MAX_LABEL_CHARS = MAX_LABEL_LENGTH - 1

# TransactionHeader (2.2.20.5)
TRANSACTION_HEADER = struct.Struct("<IIIII")  # Flags Ordinal TimeStamp TxSequenceNumber PreviousTxSequenceNumber
TX_CG = 0x1
TX_FA = 0x2
TX_FM = 0x4
TX_LM = 0x8
TX_ID_SHIFT, TX_ID = 4, 0x00FFFFF0
TX_RESERVED = 0xFF000000
MAX_TX_ID = 0xFFFFF

# SecurityHeader (2.2.20.6)
SECURITY_HEADER = struct.Struct("<HHHHII")
SEC_ST = 0x000F
SEC_AU = 0x0010
SEC_EB = 0x0020
SEC_DE = 0x0040
SEC_AI = 0x0080
SEC_AS_SHIFT, SEC_AS = 8, 0x0F00
SEC_RESERVED = 0xF000
SENDER_ID_TYPES = frozenset({0, 1, 2})      # None, Sid, QueueManagerIdentifier
MAX_SENDER_CERT_SIZE = 0xFFFF

# DebugHeader (2.2.20.8)
DEBUG_HEADER = struct.Struct("<HH")
DEBUG_QT = 0x0003
DEBUG_RESERVED = 0xFFFC

# SoapHeader (2.2.20.7)
SOAP_SECTION = struct.Struct("<HHI")
SOAP_HEADER_SECTION_ID = 0x0320
SOAP_BODY_SECTION_ID = 0x0384

# MultiQueueFormatHeader parts (2.2.20.1–2.2.20.3, 2.2.18.1.4)
MQF_ADDRESS_HEADER = struct.Struct("<IHHI")   # HeaderSize HeaderID Reserved ElementCount
MQF_SIGNATURE_HEADER = struct.Struct("<HHI")  # ID Reserved Size
MQF_DESTINATION_ID = 0x0064
MQF_ADMIN_ID = 0x00C8
MQF_RESPONSE_ID = 0x012C
MQF_SIGNATURE_ID = 0x015E
MQF_PUBLIC = 0x0001
MQF_PRIVATE = 0x0002
MQF_DIRECT = 0x0003
MQF_DISTRIBUTION_LIST = 0x0006

SESSION_HEADER_SIZE = 16        # 2.2.20.4, not counted in PacketSize
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
ZEROS = bytes(4)


def pad4(n: int) -> int:
    """Bytes of padding that bring n up to a multiple of 4 (2.2.18.1.5.2, 2.2.19.3)."""
    return -n & 3
