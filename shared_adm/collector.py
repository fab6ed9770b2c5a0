"""The cyclic garbage collector paused around bulk work that makes many objects and no garbage (a store load,
an Arrow conversion): with it on, its passes rescan the growing heap again and again."""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """gc disabled inside the block; re-enabled after it only if it was enabled before (blocks may nest)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
