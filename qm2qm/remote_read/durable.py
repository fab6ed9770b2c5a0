"""Answering a call that acknowledged a change once the change is durable (group commit): inline when it already
is, else as a Future the commit completes (answer_once_durable) or a coroutine (answer_when_durable). A commit the
store cannot make (disk full, read-only file system: StoreError) is answered MQ_ERROR_INSUFFICIENT_RESOURCES,
never MQ_OK and never a server fault; the change is written once the store recovers (docs/mqqp-choices.md)."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from shared_adm import status as st
from shared_adm.store.base import StoreError

log = logging.getLogger(__name__)


def not_durable_status(what: str, exc: StoreError) -> int:
    """The status a caller gets when ``what`` could not be committed (one WARNING line, no traceback)."""
    log.warning("%s is not durable: %s", what, exc)
    return st.MQ_ERROR_INSUFFICIENT_RESOURCES


async def await_durable(durable: Coroutine | None, what: str) -> int | None:
    """Await ``durable``; None when it is (or there was nothing to wait for), else the failure status."""
    if durable is None:
        return None
    try:
        await durable
    except StoreError as exc:
        return not_durable_status(what, exc)
    return None


def answer_once_durable(qm: Any, encode: Callable[[int | None], bytes], what: str = "the ACK") -> bytes | Any:
    """``encode(None)`` now when nothing recorded awaits its commit; else a Future of the answer that the store's
    commit completes (the runtime answers it from a done-callback: no task). A store without ``when_durable``
    (tests' gated stores) takes answer_when_durable(qm.durable(), ...)."""
    when_durable = getattr(qm.store, "when_durable", None)
    if when_durable is None:
        return answer_when_durable(qm.durable(), encode, what)
    loop = getattr(qm.scheduler, "loop", None)         # the queue manager's loop: no getpid(2) in get_running_loop
    if loop is not None and not loop.is_running():
        loop = None
    try:
        future = when_durable(lambda error: encode(None if error is None else not_durable_status(what, error)), loop)
    except StoreError as exc:
        return encode(not_durable_status(what, exc))
    return encode(None) if future is None else future


def answer_when_durable(durable: Coroutine | None, encode: Callable[[int | None], bytes],
                        what: str = "the ACK") -> bytes | Any:
    """``encode(None)`` now if ``durable`` is None or completes without waiting; else a coroutine that finishes it.
    A failed commit answers ``encode(MQ_ERROR_INSUFFICIENT_RESOURCES)`` instead."""
    if durable is not None:
        try:
            waiting = durable.send(None)
        except StopIteration:
            pass
        except StoreError as exc:
            return encode(not_durable_status(what, exc))
        else:
            return _finish(durable, waiting, encode, what)
    return encode(None)


async def _finish(durable: Coroutine, waiting: Any, encode: Callable[[int | None], bytes], what: str) -> bytes:
    """Drive the rest of qm.durable() (already started, now waiting on ``waiting``) as the task would have."""
    try:
        await _resume(durable, waiting)
    except StoreError as exc:
        return encode(not_durable_status(what, exc))
    return encode(None)


async def _resume(durable: Coroutine, waiting: Any) -> None:
    """Step ``durable`` until it returns; its StoreError (or a cancellation it does not handle) propagates."""
    while True:
        try:
            if waiting is None:                 # a bare yield (asyncio.sleep(0)): the task would step again
                await asyncio.sleep(0)
            else:                               # a Future: the task would wait for it (taking its yield first)
                waiting._asyncio_future_blocking = False
                await waiting
        except BaseException as exc:            # cancelled, or the commit failed: durable() sees it
            try:
                waiting = durable.throw(exc)
            except StopIteration:
                return
            continue
        try:
            waiting = durable.send(None)
        except StopIteration:
            return
