"""Injectable time for the MS-MQDMPR timers (3.1.2.3 Waiting Message Read Timer, 3.1.2.4 Time To Be Received Timer).

All durations are milliseconds (MS-MQQP passes ``ulTimeout`` in ms; MS-MQDMPR speaks of seconds — see
DEFECTS.md "Units"). ``INFINITE`` (0xFFFFFFFF) never fires: callers must not schedule it.
Everything runs on one thread (the asyncio loop thread); neither scheduler is thread-safe.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable, Protocol

INFINITE = 0xFFFFFFFF


class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled before it fires."""

    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The time source of a QueueManager (3.1.2): a monotonic ms clock, the wall clock and one-shot timers."""

    def now_ms(self) -> int: ...
    def wall_time(self) -> float: ...
    def call_later(self, ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class AsyncioScheduler:
    """Scheduler on an asyncio event loop (the server's)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop given, or the running loop at first use."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def now_ms(self) -> int:
        """The loop's monotonic clock in milliseconds."""
        return int(self.loop.time() * 1000)

    def wall_time(self) -> float:
        """Seconds since 1970-01-01 UTC."""
        return time.time()

    def call_later(self, ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """Run ``callback`` on the loop after ``ms`` milliseconds."""
        return self.loop.call_later(max(ms, 0) / 1000.0, callback)


class _ManualHandle:
    """A ManualScheduler timer entry."""
    __slots__ = ("due", "callback", "cancelled")

    def __init__(self, due: int, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Scheduler for tests: time moves only through ``advance(ms)``, which fires due timers in due order."""

    def __init__(self, start_ms: int = 0, wall_epoch: float = 1_700_000_000.0) -> None:
        self._now = start_ms
        self._wall_epoch = wall_epoch
        self._heap: list[tuple[int, int, _ManualHandle]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        """Manual time in milliseconds."""
        return self._now

    def wall_time(self) -> float:
        """The wall epoch plus manual time, in seconds."""
        return self._wall_epoch + self._now / 1000.0

    def call_later(self, ms: int, callback: Callable[[], None]) -> _ManualHandle:
        """Run ``callback`` when ``advance`` reaches now + ``ms``."""
        handle = _ManualHandle(self._now + max(int(ms), 0), callback)
        heapq.heappush(self._heap, (handle.due, next(self._seq), handle))
        return handle

    def pending(self) -> int:
        """Number of timers not yet fired nor cancelled."""
        return sum(1 for _, _, h in self._heap if not h.cancelled)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, firing every timer due on the way (timers set by callbacks included)."""
        target = self._now + int(ms)
        while self._heap and self._heap[0][0] <= target:
            due, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self._now = max(self._now, due)
            handle.cancelled = True
            handle.callback()
        self._now = target
