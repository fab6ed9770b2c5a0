"""Cursors of a remote read: opening one, by Handle in the descriptor's CursorCollection, closing one (MS-MQDMPR 3.1.7.1.1–2)."""
from __future__ import annotations

from typing import Any

from shared_adm import status as st
from shared_adm.queue_manager import CursorLimitReached


def open_cursor(qm: Any, descriptor: Any | None) -> tuple[int, int]:
    """Open Cursor (MS-MQDMPR 3.1.7.1.1) on a descriptor: (MQ_OK, Cursor.Handle), or (MQ_ERROR_INVALID_HANDLE, 0)
    when there is no descriptor or the event opens none, (MQ_ERROR_INSUFFICIENT_RESOURCES, 0) at the cursor limit."""
    try:
        cursor = qm.open_cursor(descriptor) if descriptor is not None else None
    except CursorLimitReached as refused:
        return refused.status, 0
    if cursor is None:
        return st.MQ_ERROR_INVALID_HANDLE, 0
    return st.MQ_OK, cursor.handle


def find_cursor(descriptor: Any, handle: int) -> Any | None:
    """The Cursor with Handle = handle in descriptor.CursorCollection, or None."""
    return descriptor.cursor_collection.get(handle)


def close_cursor(qm: Any, descriptor: Any | None, handle: int) -> int:
    """Close Cursor for the descriptor's cursor ``handle``: its waiting reads end, cancelled; MQ_ERROR_INVALID_HANDLE
    when there is no such descriptor or cursor."""
    cursor = find_cursor(descriptor, handle) if descriptor is not None else None
    if cursor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    return qm.close_cursor(cursor)
