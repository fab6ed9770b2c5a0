"""Answering a call that acknowledged a change once the change is durable (qm.durable(), group commit): inline
when it already is, as a coroutine otherwise — exactly as the task running the handler would have."""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


def answer_when_durable(durable: Coroutine | None, encode: Callable[[], bytes]) -> bytes | Any:
    """``encode()`` now if ``durable`` is None or completes without waiting; else a coroutine that finishes it."""
    if durable is not None:
        try:
            waiting = durable.send(None)
        except StopIteration:
            pass
        else:
            return _finish(durable, waiting, encode)
    return encode()


async def _finish(durable: Coroutine, waiting: Any, encode: Callable[[], bytes]) -> bytes:
    """Drive the rest of qm.durable() (already started, now waiting on ``waiting``) as the task would have."""
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
                break
            continue
        try:
            waiting = durable.send(None)
        except StopIteration:
            break
    return encode()
