"""Seek Available Message Position (MS-MQDMPR 3.1.7.3.2) and Seek Available Message Position With Id (3.1.7.3.3)."""
from __future__ import annotations

from shared_adm import status as st
from shared_adm.compact import allow_peek_when_locked
from shared_adm.enums import MessageSeekAction, PositionState, SeekDirection
from shared_adm.queue import END_KEY, START_KEY, MessagePosition, Queue

_FORWARD = SeekDirection.FORWARD             # module names: an Enum class attribute costs more per access
_AVAILABLE, _LOCKED = PositionState.AVAILABLE, PositionState.LOCKED
HEAD = "Head"   # iInitialPosition := Head — the search includes Head itself (DEFECTS.md #1)


def _visible(position: MessagePosition, peek: bool) -> bool:
    if position.state is _AVAILABLE:
        return True
    return peek and position.state is _LOCKED and allow_peek_when_locked(position.packed)


def seek_available_message_position(initial: "MessagePosition | str", queue: Queue, peek: bool,
                                    direction: SeekDirection = SeekDirection.FORWARD) -> MessagePosition:
    """3.1.7.3.2: the next Available (or peek-visible Locked) position from ``initial``; End (Start backward) if none."""
    lst = queue.message_position_list
    if initial == HEAD:
        key = START_KEY if direction is _FORWARD else END_KEY
    else:
        key = initial.lookup_identifier
    if direction is _FORWARD:
        if peek and lst.peek_locked:
            for position in lst.irange_after_values(key):
                if _visible(position, True):
                    return position
            return lst.end
        return lst.first_available_after(key)
    if peek and lst.peek_locked:
        for position in lst.irange_before_values(key):
            if _visible(position, True):
                return position
        return lst.start
    return lst.last_available_before(key)


def seek_available_message_position_with_id(queue: Queue, lookup_id: int, peek: bool,
                                            lookup_action: MessageSeekAction) -> tuple[int, MessagePosition | None]:
    """3.1.7.3.3 with DEFECTS.md #2 (SeekFirst/SeekLast need no existing id), #3 (End/Start → MESSAGE_NOT_FOUND), #4."""
    lst = queue.message_position_list
    if lookup_action is MessageSeekAction.SEEK_FIRST:
        found = seek_available_message_position(lst.start, queue, peek, SeekDirection.FORWARD)
    elif lookup_action is MessageSeekAction.SEEK_LAST:
        found = seek_available_message_position(lst.end, queue, peek, SeekDirection.BACKWARD)
    else:
        initial = lst.get(lookup_id)
        if initial is None:
            return st.MQ_ERROR_MESSAGE_NOT_FOUND, None
        if lookup_action is MessageSeekAction.SEEK_PREVIOUS:
            found = seek_available_message_position(initial, queue, peek, SeekDirection.BACKWARD)
        elif lookup_action is MessageSeekAction.SEEK_NEXT:
            found = seek_available_message_position(initial, queue, peek, SeekDirection.FORWARD)
        else:
            return _seek_current(initial, peek)
    if found.lookup_identifier in (START_KEY, END_KEY):
        return st.MQ_ERROR_MESSAGE_NOT_FOUND, None
    return st.MQ_OK, found


def _seek_current(position: MessagePosition, peek: bool) -> tuple[int, MessagePosition | None]:
    """SeekCurrent branch of 3.1.7.3.3 (DEFECTS.md #4)."""
    state = position.state
    if state is PositionState.AVAILABLE:
        return st.MQ_OK, position
    if state is PositionState.LOCKED:
        if peek and allow_peek_when_locked(position.packed):
            return st.MQ_OK, position
        return (st.MQ_ERROR_TRANSACTION_USAGE if peek else st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED), None
    if state is PositionState.DELETED:
        return st.MQ_ERROR_MESSAGE_ALREADY_RECEIVED, None
    return st.MQ_ERROR_MESSAGE_NOT_FOUND, None
