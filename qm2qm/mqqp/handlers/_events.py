"""The MS-MQDMPR lookups and events the qm2qm handlers raise (MS-MQQP 3.1.1.1, MS-MQDMPR 3.1.7.1), in one place."""
from __future__ import annotations

import inspect
from typing import Any

from shared_adm.enums import RemoteReadState


def split_result(result: Any) -> tuple[int, Any]:
    """An event's (rStatus, rMessage), whatever shape the QueueManager returns it in."""
    if isinstance(result, int):
        return result, None
    if hasattr(result, "status"):
        return result.status, getattr(result, "message", None)
    return result[0], (result[1] if len(result) > 1 else None)


async def settle(result: Any) -> tuple[int, Any]:
    """Await a PendingRead (or any awaitable) and split its result."""
    if inspect.isawaitable(result):
        result = await result
    return split_result(result)


def find_open_queue_descriptor(qm: Any, handle: int) -> Any | None:
    """The OpenQueueDescriptor with Handle = handle in any Queue.OpenQueueDescriptorCollection (3.1.1.16),
    if it was opened for a remote read (RemoteReadState not None; docs/mqqp-choices.md)."""
    descriptor = qm.find_open_queue_descriptor(handle)
    if descriptor is None or descriptor.remote_read_state is RemoteReadState.NONE:
        return None
    return descriptor


def find_cursor(descriptor: Any, handle: int) -> Any | None:
    """The Cursor with Handle = handle in descriptor.CursorCollection (MS-MQDMPR 3.2.1.2), or None."""
    return descriptor.cursor_collection.get(handle)
