"""MS-MQDMPR queue-manager model (knows nothing of RPC). Main entry points are re-exported lazily."""
from __future__ import annotations

_EXPORTS = {
    "QueueManager": "shared_adm.queue_manager",
    "PendingRead": "shared_adm.descriptor",
    "ReadResult": "shared_adm.descriptor",
    "OpenQueueDescriptor": "shared_adm.descriptor",
    "Cursor": "shared_adm.cursor",
    "Queue": "shared_adm.queue",
    "MessagePosition": "shared_adm.queue",
    "AsyncioScheduler": "shared_adm.clock",
    "ManualScheduler": "shared_adm.clock",
    "INFINITE": "shared_adm.clock",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shared_adm' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)
