"""The lookup every method on an open queue starts with: phContext → its OpenQueueDescriptor (MS-MQRR 3.1.4.3–3.1.4.15)."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import handle_bytes
from qm2qm.mqrr.service import QueueContext, Service
from qm2qm.rpc.interface import CallContext


def queue_of(service: Service, ctx: CallContext, wire: Any) -> tuple[QueueContext | None, Any | None]:
    """(the queue context, its OpenQueueDescriptor or None when not found)."""
    context = ctx.lookup_handle(handle_bytes(wire), service.handle_type)
    return context, service.descriptor_of(context)
