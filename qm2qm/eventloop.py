"""The event loop `qm2qm serve` runs on: uvloop when installed (the faster transport), else asyncio's own."""
from __future__ import annotations

import asyncio
import gc
from typing import Any, Callable, Coroutine

# Young-generation collections every 20,000 net container allocations instead of 700, and the older ones 50
# times rarer than that: with thousands of pending reads a middle-generation pass took up to 17 ms and a full one
# 157 ms in `qm2qm serve` (the tail of the wake benchmark, scripts/bench.py --only wake).
GC_THRESHOLDS = (20_000, 50, 50)


class EventLoopError(RuntimeError):
    """The chosen event loop cannot be used here; the message says why and what to do."""


def uvloop_available() -> bool:
    """uvloop can be imported (it has no Windows build)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def resolve(choice: str) -> str:
    """'auto' -> 'uvloop' when installed, else 'asyncio'; an explicit 'uvloop' must be installed."""
    if choice == "auto":
        return "uvloop" if uvloop_available() else "asyncio"
    if choice == "uvloop" and not uvloop_available():
        raise EventLoopError("loop: uvloop is not installed (pip install 'uvloop>=0.19'; it has no Windows "
                             "build); use --loop asyncio")
    if choice not in ("asyncio", "uvloop"):
        raise EventLoopError(f"loop: expected auto, asyncio or uvloop, got {choice!r}")
    return choice


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for asyncio.Runner making the resolved loop."""
    if resolve(choice) == "uvloop":
        import uvloop
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def clear_gc() -> None:
    """Before the server starts (the store not loaded yet, so the heap is small): collect the start-up garbage,
    so that settle_gc need not collect a heap holding every stored message (0.25 s per 1,000,000 of them)."""
    gc.collect()


def settle_gc(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> None:
    """Once the server is up: move every object alive now (the loaded store, the listeners) out of the collector's
    sight (gc.freeze) and make collections rarer, so a pass no longer stalls the loop for milliseconds. Loading
    makes no garbage (clear_gc collected before it), so nothing is collected here."""
    gc.freeze()
    gc.set_threshold(*thresholds)


def run(main: Coroutine[Any, Any, Any], choice: str = "auto") -> Any:
    """asyncio.run(main) on the chosen loop; a loop that cannot be had closes ``main`` unstarted (no warning)."""
    try:
        factory = loop_factory(choice)
    except BaseException:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
