"""OpenQueueDescriptor (MS-MQDMPR 3.1.1.16), WaitingMessageReadOperation (3.1.1.10), and the read results.

A read that must wait (Wait For New Message, 3.1.7.3.1) returns a ``PendingRead``: awaitable on the
asyncio loop, or observable without a loop through ``done()``/``result()``/``add_done_callback``.
It always resolves — to the ``ReadResult`` the immediate path would have returned, to the Waiting
Message Read Timer's MQ_ERROR_IO_TIMEOUT (3.1.6.3), or to the status given to Cancel Waiting Message
Read Request (3.1.7.1.17) by a caller, Close Queue, Close Cursor or Delete Queue.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from shared_adm import status as st
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode, RemoteReadState
from shared_adm.compact import unpack
from shared_adm.message import Message


# checked on every read: tuples of the members themselves (an Enum's hash is a Python call; `in` tries identity first)
_RECEIVE_TYPES = (QueueAccessType.RECEIVE_ACCESS, QueueAccessType.RECEIVE_ADMIN_ACCESS)
_PEEK_TYPES = _RECEIVE_TYPES + (QueueAccessType.PEEK_ACCESS, QueueAccessType.PEEK_ADMIN_ACCESS)


class ReadResult:
    """rStatus and rMessage of a read event; ``position`` is the MessagePosition a two-phase read Locked;
    ``packed`` is the compact form the message was read from (shared_adm/compact.py), when there is one.

    Given ``packed`` without ``message``, the Message is rebuilt from it on first use (a peek answered from
    a serialized-packet memo never needs it)."""
    __slots__ = ("status", "_message", "position", "two_phase", "packed")

    def __init__(self, status: int, message: Message | None = None, position: object = None,
                 two_phase: bool = False, packed: bytes | None = None) -> None:
        self.status = status
        self._message = message
        self.position = position
        self.two_phase = two_phase
        self.packed = packed

    @property
    def message(self) -> Message | None:
        """rMessage (None unless rStatus is MQ_OK)."""
        message = self._message
        if message is None and self.packed is not None:
            message = self._message = unpack(self.packed)
        return message

    @message.setter
    def message(self, value: Message | None) -> None:
        self._message = value
        self.packed = None                  # the compact form no longer names this message

    @property
    def ok(self) -> bool:
        """rStatus is MQ_OK."""
        return self.status == st.MQ_OK

    def __eq__(self, other: object) -> bool:
        if type(other) is not ReadResult:
            return NotImplemented
        return (self.status, self.message, self.position, self.two_phase) == \
            (other.status, other.message, other.position, other.two_phase)

    __hash__ = None

    def __repr__(self) -> str:
        return (f"ReadResult(status={self.status!r}, message={self.message!r}, position={self.position!r}, "
                f"two_phase={self.two_phase!r})")


class PendingRead:
    """A read waiting for a message (3.1.7.3.1); resolves exactly once to a ReadResult."""
    __slots__ = ("operation", "_result", "_callbacks")

    def __init__(self, operation: "WaitingMessageReadOperation") -> None:
        self.operation = operation
        self._result: ReadResult | None = None
        self._callbacks: list[Callable[["PendingRead"], None]] = []

    @property
    def tag(self):
        """The WaitingMessageReadOperation's Tag (the caller's request id)."""
        return self.operation.tag

    def done(self) -> bool:
        """True once the read has its ReadResult."""
        return self._result is not None

    def result(self) -> ReadResult:
        """The ReadResult; asyncio.InvalidStateError while still waiting."""
        if self._result is None:
            raise asyncio.InvalidStateError("read still waiting")
        return self._result

    def add_done_callback(self, callback: Callable[["PendingRead"], None]) -> None:
        """Call ``callback(self)`` when resolved (at once if already resolved)."""
        if self._result is not None:
            callback(self)
        else:
            self._callbacks.append(callback)

    def _resolve(self, result: ReadResult) -> None:
        if self._result is not None:
            return
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def cancel(self, status: int = st.MQ_ERROR_OPERATION_CANCELLED) -> bool:
        """Stop waiting with ``status`` (Waiting Message Read Timer Stop, 3.1.7.3.5); False if already resolved."""
        if self._result is not None:
            return False
        self.operation.queue_manager._stop_waiting(self.operation, status)
        return True

    async def wait(self) -> ReadResult:
        """Await the result. If the awaiting task is cancelled the read is cancelled too, and a message it
        had already Locked by a two-phase read is made Available again, so nothing is left hanging."""
        if self._result is not None:
            return self._result
        future = asyncio.get_running_loop().create_future()

        def _wake(_: PendingRead) -> None:
            if not future.done():
                future.set_result(None)

        self.add_done_callback(_wake)
        try:
            await future
        except asyncio.CancelledError:
            if self._result is None:
                self.cancel(st.MQ_ERROR_OPERATION_CANCELLED)
            else:
                self.operation.queue_manager._abandon(self._result, self.operation.descriptor)
            raise
        return self._result

    def __await__(self):
        return self.wait().__await__()


@dataclass(eq=False)
class WaitingMessageReadOperation:
    """WaitingMessageReadOperation (3.1.1.10): DestructiveRead, Tag, CursorReference, plus how to finish the read."""
    destructive_read: bool
    tag: object
    cursor_reference: object
    descriptor: "OpenQueueDescriptor"
    queue_manager: object
    complete: Callable[[object], ReadResult | None] = None     # Waiting Message Read Satisfied continuation
    expire: Callable[[int], ReadResult] = None                 # Waiting Message Read Timer Stop continuation
    timer: object = None
    pending: PendingRead | None = None
    # While it waits: the Queue whose waiting_read_keys holds its accept_key (the cursor's position, or START_KEY)
    queue: object = None
    accept_key: int = -1


@dataclass(eq=False)
class OpenQueueDescriptor:
    """OpenQueueDescriptor (3.1.1.16)."""
    handle: int
    context_value: int
    access_type: QueueAccessType
    share_mode: QueueShareMode
    queue_reference: object
    format_name: str
    multiple: bool = False
    remote_read_state: RemoteReadState = RemoteReadState.NONE
    open_queue_descriptor_collection: list = field(default_factory=list)
    cursor_collection: dict = field(default_factory=dict)                       # Cursor.Handle -> Cursor
    # FIFO: an insertion-ordered dict used as a set (the operations hash by identity), so one leaves in one step
    waiting_message_read_operation_collection: dict = field(default_factory=dict)
    # ours: Tag -> the waiting operations with that Tag, FIFO (Cancel Waiting Message Read Request by Tag, 3.1.7.1.17)
    waiting_by_tag: dict = field(default_factory=dict, repr=False)
    locked_positions: dict = field(default_factory=dict)   # lookup id -> position Locked by a two-phase read here
    open_order: int = 0     # ours: its rank in its queue's OpenQueueDescriptorCollection (Queue.waiting_descriptors)
    # ours: the network host a remote-read open came from (qmcomm R_QMOpenRemoteQueue); the protocols that name the
    # descriptor by its 32-bit Handle alone (qm2qm, R_QMCreateRemoteCursor) serve it to that host only. None: any.
    opener_host: str | None = None

    def serves(self, host: str) -> bool:
        """Whether a protocol naming this descriptor by its Handle alone may use it for a caller on ``host``."""
        return self.opener_host is None or self.opener_host == host

    @property
    def can_receive(self) -> bool:
        """AccessType allows receive and purge (3.1.1.17 ReceiveAccess / ReceiveAdminAccess)."""
        return self.access_type in _RECEIVE_TYPES

    @property
    def can_peek(self) -> bool:
        """AccessType allows peek (3.1.1.17)."""
        return self.access_type in _PEEK_TYPES


__all__ = ["ReadResult", "PendingRead", "WaitingMessageReadOperation", "OpenQueueDescriptor", "PositionState"]
