"""Starting, waiting for and completing a remote read over the MS-MQDMPR read events (3.1.7.1.11–15, 3.1.7.3.1)."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from qm2qm.remote_read.core import ReadCore
from qm2qm.remote_read.entries import ReadEntry
from shared_adm import status as st
from shared_adm.clock import INFINITE
from shared_adm.descriptor import ReadResult

T = TypeVar("T")


def read_event(qm: Any, descriptor: Any, action: int, timeout: int, cursor: Any, tag: int,
               transaction: Any = None) -> Any:
    """The read event for a cursor/queue-head ulAction: Dequeue Message Begin, Peek Message or Peek Next
    Message; the request id is the tag Cancel Waiting Message Read Request finds the read by (3.1.7.1.17)."""
    if action == MQ_ACTION_RECEIVE:
        return qm.dequeue_message_begin(descriptor, timeout, cursor=cursor, tag=tag, transaction=transaction)
    if action == MQ_ACTION_PEEK_CURRENT:
        return qm.peek_message(descriptor, timeout, cursor=cursor, tag=tag)
    return qm.peek_next_message(descriptor, timeout, cursor=cursor, tag=tag)


def lookup_event(qm: Any, descriptor: Any, lookup_id: int, peek: bool, seek: Any, transaction: Any = None) -> Any:
    """Read Message By Lookup Identifier (MS-MQDMPR 3.1.7.1.13) for a lookup action: a receive is two-phase
    (its message stays Locked until the End) unless it is in a transaction. Never waits."""
    return qm.read_message_by_lookup_identifier(descriptor, lookup_id, seek, peek_operation=peek,
                                                two_phase_read=not peek, transaction=transaction)


async def wait_for_read(entry: ReadEntry, result: Any) -> ReadResult:
    """The ReadResult of a read event, waiting while it is a PendingRead (MS-MQDMPR 3.1.7.3.1).

    If the call itself is cancelled meanwhile (co_cancel, lost connection) the PendingRead withdraws the
    read and returns a message it had already Locked to the queue (shared_adm.descriptor.PendingRead.wait)."""
    if not inspect.isawaitable(result):
        return result
    entry.waiting = result
    try:
        return await result
    finally:
        entry.waiting = None


async def run_read(core: ReadCore, entry: ReadEntry, read: Callable[[], Any],
                   finish: Callable[[ReadResult], T]) -> T:
    """Hold the entry among the reads in progress while ``read()`` runs and is waited for; ``finish`` its result."""
    core.pending.add(entry)
    try:
        return finish(await wait_for_read(entry, read()))
    finally:
        core.pending.remove(entry)


def answerable_now(timeout: Any, has_cursor: bool) -> bool:
    """Whether a read may be tried at once with timeout 0 and answered inline if it finds a message.

    A read with timeout 0 never waits. Without a cursor, a read with another timeout that finds a message at
    once returns exactly what a read with timeout 0 returns, and one that finds none changes nothing
    (MS-MQDMPR 3.1.7.3.2 seeks, then Wait For New Message fails at once). A cursor read with a timeout may
    move its cursor before waiting: never tried."""
    if timeout == 0:
        return True
    return not has_cursor and type(timeout) is int and 0 < timeout <= INFINITE


def run_read_now(core: ReadCore, entry: ReadEntry, read: Callable[[], Any],
                 finish: Callable[[ReadResult], T]) -> T | None:
    """run_read for a read tried with timeout 0: ``finish`` its result, or None — having changed nothing and
    registered no wait — when it found no message but the caller's own timeout was not 0.

    The entry is among the reads in progress only while this runs; nothing else runs meanwhile (one thread, no
    await: entries.py) and neither ``read`` nor ``finish`` looks at that table, so it is not added and removed."""
    result = read()
    return None if would_wait(entry.timeout, result) else finish(result)


def would_wait(timeout: int, result: ReadResult) -> bool:
    """Whether a read tried at once with timeout 0 (answerable_now) found no message although its caller's own
    timeout is not 0: it is not answered then, and the read is run again as one that waits (run_read)."""
    return timeout != 0 and result.status != st.MQ_OK
