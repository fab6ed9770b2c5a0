"""Cursor (MS-MQDMPR 3.2): the CursorState machine of 3.2.1.2 and its events 3.2.7.1–3.2.7.6.

Transitions (3.2.7; WaitPeek/WaitReceive are left only through Message Available or Wait Time Expired):

    Unread --GetMessageForPeek found--> Read          Unread --GetMessageForPeek none--> WaitPeek
    Read   --GetNextMessageForPeek found--> Read      Read   --GetNextMessageForPeek none--> WaitPeek
    Unread --GetNextMessageForDequeue none, wait--> WaitReceive
    Read   --GetNextMessageForDequeue current Available--> Unread
    WaitPeek --MessageAvailable--> Read               WaitReceive --MessageAvailable--> Unread
    WaitPeek --WaitTimeExpired--> state before the wait, position unchanged (DEFECTS.md #20)
    WaitReceive --WaitTimeExpired--> Unread, position unchanged (DEFECTS.md #20)
"""
from __future__ import annotations

import enum

from shared_adm.compact import allow_peek_when_locked
from shared_adm.enums import CursorState, PositionState, SeekDirection
from shared_adm.queue import END_KEY, START_KEY, MessagePosition
from shared_adm.seek import seek_available_message_position


class CursorResult(enum.Enum):
    """rStatus of the cursor events 3.2.7.2–3.2.7.4."""
    SUCCEEDED = "Succeeded"
    ALREADY_RECEIVED = "AlreadyReceived"
    WAITING = "Waiting"
    NOT_FOUND = "NotFound"
    ILLEGAL_CURSOR_ACTION = "IllegalCursorAction"


# what the per-read events test, as module names: an Enum class attribute costs ~57 ns an access on 3.11, a name ~7
_READ, _UNREAD = CursorState.READ, CursorState.UNREAD
_WAIT_STATES = (CursorState.WAIT_PEEK, CursorState.WAIT_RECEIVE)
_SUCCEEDED = CursorResult.SUCCEEDED
_FORWARD = SeekDirection.FORWARD
_AVAILABLE, _LOCKED = PositionState.AVAILABLE, PositionState.LOCKED


class Cursor:
    """Cursor (3.2.1.2): Handle, OpenQueueDescriptorReference, MessagePositionReference, CursorState."""
    __slots__ = ("handle", "open_queue_descriptor_reference", "message_position_reference", "cursor_state",
                 "_state_before_wait", "waiting_read")

    def __init__(self, handle: int, descriptor) -> None:
        self.handle = handle
        self.open_queue_descriptor_reference = descriptor
        self.message_position_reference: MessagePosition | None = None
        self.cursor_state = _UNREAD
        self._state_before_wait = _UNREAD
        self.waiting_read = None    # its WaitingMessageReadOperation while one is in its descriptor's collection

    @property
    def waiting(self) -> bool:
        """CursorState is WaitPeek or WaitReceive."""
        return self.cursor_state in _WAIT_STATES

    def initialize(self) -> None:
        """Initialize (3.2.7.1): reference the queue's Start, state Unread."""
        queue = self.open_queue_descriptor_reference.queue_reference
        if queue is None:
            return
        self.message_position_reference = queue.message_position_list.start
        self.cursor_state = _UNREAD

    def _seek(self, peek: bool) -> MessagePosition:
        queue = self.open_queue_descriptor_reference.queue_reference
        return seek_available_message_position(self.message_position_reference, queue, peek, _FORWARD)

    def _wait(self, state: CursorState) -> tuple[CursorResult, None]:
        self._state_before_wait = self.cursor_state
        self.cursor_state = state
        return CursorResult.WAITING, None

    def get_message_for_peek(self) -> tuple[CursorResult, MessagePosition | None]:
        """Get Message For Peek (3.2.7.2)."""
        if self.cursor_state is _UNREAD:
            found = self._seek(True)
            if found.lookup_identifier == END_KEY:
                return self._wait(CursorState.WAIT_PEEK)
            self.cursor_state = _READ
            self.message_position_reference = found
            return _SUCCEEDED, found
        if self.cursor_state is _READ:
            current = self.message_position_reference
            if current.state is _AVAILABLE or (
                    current.state is _LOCKED and allow_peek_when_locked(current.packed)):
                return _SUCCEEDED, current
            return CursorResult.ALREADY_RECEIVED, None
        return CursorResult.ILLEGAL_CURSOR_ACTION, None

    def get_next_message_for_peek(self) -> tuple[CursorResult, MessagePosition | None]:
        """Get Next Message For Peek (3.2.7.3)."""
        if self.cursor_state is _READ:
            found = self._seek(True)
            if found.lookup_identifier == END_KEY:
                return self._wait(CursorState.WAIT_PEEK)
            self.message_position_reference = found
            return _SUCCEEDED, found
        return CursorResult.ILLEGAL_CURSOR_ACTION, None

    def get_next_message_for_dequeue(self, no_wait: bool) -> tuple[CursorResult, MessagePosition | None]:
        """Get Next Message For Dequeue (3.2.7.4)."""
        if self.cursor_state is _UNREAD:
            found = self._seek(False)
            if found.lookup_identifier == END_KEY:
                if no_wait:
                    return CursorResult.NOT_FOUND, None
                return self._wait(CursorState.WAIT_RECEIVE)
            self.message_position_reference = found
            return _SUCCEEDED, found
        if self.cursor_state is _READ:
            current = self.message_position_reference
            if current.state is _AVAILABLE:
                self.cursor_state = _UNREAD
                return _SUCCEEDED, current
            return CursorResult.ALREADY_RECEIVED, None
        return CursorResult.ILLEGAL_CURSOR_ACTION, None

    def accepts(self, position: MessagePosition) -> bool:
        """Whether a position made available may satisfy this cursor's wait: it lies ahead of the cursor (DEFECTS.md #7)."""
        ref = self.message_position_reference
        return ref is None or ref.lookup_identifier == START_KEY or position.lookup_identifier > ref.lookup_identifier

    def message_available(self, position: MessagePosition) -> None:
        """Message Available (3.2.7.5)."""
        if self.cursor_state is CursorState.WAIT_PEEK:
            self.cursor_state = _READ
        elif self.cursor_state is CursorState.WAIT_RECEIVE:
            self.cursor_state = _UNREAD
        self.message_position_reference = position

    def wait_time_expired(self) -> None:
        """Wait Time Expired (3.2.7.6), with the position kept where it was (DEFECTS.md #20)."""
        if self.cursor_state is CursorState.WAIT_RECEIVE:
            self.cursor_state = _UNREAD
        elif self.cursor_state is CursorState.WAIT_PEEK:
            self.cursor_state = self._state_before_wait
