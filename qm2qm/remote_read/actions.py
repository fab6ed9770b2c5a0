"""The ulAction values and ACK codes both remote-read protocols share (MS-MQQP 2.2.2.1, MS-MQRR 3.1.4.7, 3.1.4.9)."""
from __future__ import annotations

from shared_adm.enums import MessageSeekAction

MQ_ACTION_RECEIVE = 0x00000000
MQ_ACTION_PEEK_CURRENT = 0x80000000
MQ_ACTION_PEEK_NEXT = 0x80000001
MQ_LOOKUP_PEEK_CURRENT = 0x40000010
MQ_LOOKUP_PEEK_NEXT = 0x40000011
MQ_LOOKUP_PEEK_PREV = 0x40000012
MQ_LOOKUP_RECEIVE_CURRENT = 0x40000020
MQ_LOOKUP_RECEIVE_NEXT = 0x40000021
MQ_LOOKUP_RECEIVE_PREV = 0x40000022

ACK = 2             # RR_ACK: delete the received message
NACK = 1            # RR_NACK: make it Available again

# the cursor/queue-head actions, and ulAction → (iPeekOperation, MessageSeekAction) for a lookup read
READ_ACTIONS = frozenset({MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT})
LOOKUP_ACTIONS = {
    MQ_LOOKUP_PEEK_CURRENT: (True, MessageSeekAction.SEEK_CURRENT),
    MQ_LOOKUP_PEEK_NEXT: (True, MessageSeekAction.SEEK_NEXT),
    MQ_LOOKUP_PEEK_PREV: (True, MessageSeekAction.SEEK_PREVIOUS),
    MQ_LOOKUP_RECEIVE_CURRENT: (False, MessageSeekAction.SEEK_CURRENT),
    MQ_LOOKUP_RECEIVE_NEXT: (False, MessageSeekAction.SEEK_NEXT),
    MQ_LOOKUP_RECEIVE_PREV: (False, MessageSeekAction.SEEK_PREVIOUS),
}


def is_receive(action: int) -> bool:
    """A Receive action type (MS-MQRR 3.1.4.7 ulAction): MQ_ACTION_RECEIVE or MQ_LOOKUP_RECEIVE_*. A lookup receive
    Locks its message too (iTwoPhaseRead), so it gets a PendingRequestEntry as well: without one R_EndReceive
    could never find it (3.1.4.7 names only MQ_ACTION_RECEIVE; 3.1.4.9 needs the entry)."""
    lookup = LOOKUP_ACTIONS.get(action)
    return action == MQ_ACTION_RECEIVE or (lookup is not None and not lookup[0])
