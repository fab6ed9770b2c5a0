"""Give freed heap memory back to the system after a connection's unsent answers were dropped (glibc malloc_trim).

glibc keeps the memory of freed large answers in its heap; after a wave of woken 4 MiB peeks whose connections
were closed unread (server.MAX_UNREAD_ANSWERS, budget.UnreadAnswerBudget) the process kept 2 GiB resident with
135 MiB alive until malloc_trim(0) returned the rest (BENCHMARKS.md, twenty-third pass).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable


def _malloc_trim() -> Callable[[], object] | None:
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):   # not glibc (musl, macOS, Windows): nothing to call
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


_TRIM = _malloc_trim()


def give_back_free_memory() -> bool:
    """Return the heap's free pages to the system; False where the C library has no malloc_trim."""
    if _TRIM is None:
        return False
    _TRIM()
    return True
