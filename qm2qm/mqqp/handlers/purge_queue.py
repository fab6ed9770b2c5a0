"""RemoteQMPurgeQueue (MS-MQQP 3.1.4.7, opnum 6): delete every message of the queue; failures are faults (<18>)."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._events import find_open_queue_descriptor
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import RpcFault
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st
from shared_adm.store.base import StoreError


async def purge_queue(service: Service, h_queue: int, peer_host: str) -> int:
    """The processing rules of 3.1.4.7; returns MQ_OK once the purge is durable, else raises RpcFault."""
    if service.adm.open_queue_entries.find(h_queue) is None:
        raise RpcFault(st.MQ_ERROR_INVALID_HANDLE, f"no open queue entry for hQueue {h_queue:#x}")
    descriptor = find_open_queue_descriptor(service.qm, h_queue, peer_host)
    if descriptor is None:
        raise RpcFault(st.MQ_ERROR_INVALID_HANDLE, f"no open queue descriptor {h_queue:#x}")
    if descriptor.queue_reference is None:
        raise RpcFault(st.MQ_ERROR_QUEUE_DELETED, f"the queue of descriptor {h_queue:#x} was deleted")
    if not descriptor.can_receive:
        raise RpcFault(st.MQ_ERROR_ACCESS_DENIED, f"descriptor {h_queue:#x} was opened without ReceiveAccess")
    service.qm.purge_queue(descriptor.queue_reference)
    try:
        await service.qm.durable()
    except StoreError as exc:           # disk full / read-only store: a fault with a status, as <18> says
        raise RpcFault(st.MQ_ERROR_INSUFFICIENT_RESOURCES, f"the purge is not durable: {exc}") from None
    return st.MQ_OK


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 6 on the wire: decode, apply 3.1.4.7, encode."""
    request = codec.decode_request(6, stub, ctx.ndr64)
    status = await purge_queue(service, request.hQueue, ctx.peer_host)
    return codec.encode_response(6, codec.RemoteQMPurgeQueueResponse(status), ctx.ndr64)
