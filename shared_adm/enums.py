"""Enumerations of the MS-MQDMPR abstract data model (3.1.1.17, 3.1.1.11, 3.1.1.12, 3.1.1.13, 3.1.1.16, 3.2.1.2)."""
from __future__ import annotations

import enum


class QueueAccessType(enum.Enum):
    """QueueAccessType (3.1.1.17): the access an Open Queue event requests."""
    RECEIVE_ACCESS = "ReceiveAccess"
    SEND_ACCESS = "SendAccess"
    PEEK_ACCESS = "PeekAccess"
    MOVE_ACCESS = "MoveAccess"
    RECEIVE_ADMIN_ACCESS = "ReceiveAdminAccess"
    PEEK_ADMIN_ACCESS = "PeekAdminAccess"


class QueueShareMode(enum.Enum):
    """QueueShareMode (3.1.1.17)."""
    DENY_NONE = "DenyNone"
    DENY_RECEIVE = "DenyReceive"


class MessageSeekAction(enum.Enum):
    """MessageSeekAction (3.1.1.17): the iLookupOperation of Read Message By Lookup Identifier."""
    SEEK_FIRST = "SeekFirst"
    SEEK_PREVIOUS = "SeekPrevious"
    SEEK_CURRENT = "SeekCurrent"
    SEEK_NEXT = "SeekNext"
    SEEK_LAST = "SeekLast"


class SeekDirection(enum.Enum):
    """iSeekDirection of Seek Available Message Position (3.1.7.3.2)."""
    FORWARD = "Forward"
    BACKWARD = "Backward"


class PositionState(enum.Enum):
    """MessagePosition.State (3.1.1.11); the value is the name the Store records."""
    AVAILABLE = "Available"
    LOCKED = "Locked"
    DELETED = "Deleted"
    PURGE_PENDING = "PurgePending"


class CursorState(enum.Enum):
    """Cursor.CursorState (3.2.1.2)."""
    UNREAD = "Unread"
    READ = "Read"
    WAIT_PEEK = "WaitPeek"
    WAIT_RECEIVE = "WaitReceive"


class RemoteReadState(enum.Enum):
    """OpenQueueDescriptor.RemoteReadState (3.1.1.16)."""
    NONE = "None"
    OPENED = "Opened"
    READY_FOR_READ = "ReadyForRead"


class QueueType(enum.Enum):
    """Queue.QueueType (3.1.1.2)."""
    PRIVATE = "Private"
    PUBLIC = "Public"
    SYSTEM = "System"
    CONNECTOR = "Connector"


class OperationType(enum.Enum):
    """TransactionalOperation.OperationType (3.1.1.13)."""
    ENQUEUE = "Enqueue"
    DEQUEUE = "Dequeue"
    MOVE = "Move"


class MessageClass(enum.IntEnum):
    """Message.Class values used as iReason / DequeueReason (3.1.1.12), with the wire values of 3.1.7.1.32."""
    NORMAL = 0x0000
    REPORT = 0x0001
    ACK_REACH_QUEUE = 0x0002
    ACK_RECEIVE = 0x4000
    NACK_BAD_DEST_QUEUE = 0x8000
    NACK_PURGED = 0x8001
    NACK_REACH_QUEUE_TIMEOUT = 0x8002
    NACK_QUEUE_EXCEED_QUOTA = 0x8003
    NACK_ACCESS_DENIED = 0x8004
    NACK_HOP_COUNT_EXCEEDED = 0x8005
    NACK_BAD_SIGNATURE = 0x8006
    NACK_BAD_ENCRYPTION = 0x8007
    NACK_NOT_TRANSACTIONAL_QUEUE = 0x8009
    NACK_NOT_TRANSACTIONAL_MESSAGE = 0x800A
    NACK_UNSUPPORTED_CRYPTO_PROVIDER = 0x800B
    NACK_QUEUE_DELETED = 0xC000
    NACK_QUEUE_PURGED = 0xC001
    NACK_RECEIVE_TIMEOUT = 0xC002
    NACK_RECEIVE_REJECTED = 0xC004


class HashAlgorithm(enum.IntEnum):
    """Message.HashAlgorithm values (3.1.7.1.32 table; CryptoAPI CALG_*). 0x8003 is MD5 (DEFECTS.md #18)."""
    MD2 = 0x8001
    MD4 = 0x8002
    MD5 = 0x8003
    SHA1 = 0x8004
    SHA_256 = 0x800C
    SHA_512 = 0x800E
