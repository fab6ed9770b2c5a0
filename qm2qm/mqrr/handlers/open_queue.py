"""R_OpenQueue (MS-MQRR 3.1.4.2, opnum 2): open a queue for peek or receive; failures are thrown as RPC faults."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr.codec import decode, encode
from qm2qm.mqrr.constants import MQ_DENY_NONE, MQ_DENY_SHARE, PEEK_ACCESS, RECEIVE_ACCESS
from qm2qm.mqrr.queue_format import format_name
from qm2qm.mqrr.service import QueueContext, Service
from shared_adm import format_name as format_names
from shared_adm import security as access
from qm2qm.rpc.handles import HandleLimitReached
from qm2qm.rpc.interface import CallContext, RpcFault
from shared_adm import status as st
from shared_adm.enums import QueueAccessType, QueueShareMode, RemoteReadState

ACCESS = {RECEIVE_ACCESS: QueueAccessType.RECEIVE_ACCESS, PEEK_ACCESS: QueueAccessType.PEEK_ACCESS}
DIRECT_PROTOCOLS = ("TCP", "OS")        # 2.2.3: the subset of MS-MQMQ 2.1.2's Protocol Address Specifications


def open_descriptor(service: Service, ctx: CallContext, queue_format: Any, required: QueueAccessType,
                    share_mode: int) -> Any:
    """The bullets 3.1.4.2 and 3.1.4.11 share: look the queue up, check the caller's rights (2.1), generate
    Open Queue; returns the OpenQueueDescriptor or raises RpcFault(status)."""
    name = format_name(queue_format)
    if name is None or share_mode not in (MQ_DENY_NONE, MQ_DENY_SHARE):
        raise RpcFault(st.MQ_ERROR_INVALID_PARAMETER, "pQueueFormat or dwShareMode is invalid")
    if name.upper().startswith("DIRECT=") and format_names.parse(name).protocol not in DIRECT_PROTOCOLS:
        raise RpcFault(st.MQ_ERROR_INVALID_PARAMETER, f"{name!r}: MS-MQRR 2.2.3 takes DIRECT=TCP: and DIRECT=OS: only")
    share = QueueShareMode.DENY_NONE if share_mode == MQ_DENY_NONE else QueueShareMode.DENY_RECEIVE
    status, descriptor = access.open_queue_as(service.qm, ctx.principal.sids, name, required, share,
                                              RemoteReadState.OPENED)
    if status == st.MQ_ERROR_ACCESS_DENIED:
        raise RpcFault(status, f"{ctx.principal.name} may not open {name!r}")
    if status != st.MQ_OK:
        raise RpcFault(status, f"Open Queue {name!r}: {status:#010x}")
    descriptor.opener_host = ctx.peer_host      # its Handle value reaches no other host's qm2qm or qmcomm calls
    return descriptor


def open_queue(service: Service, ctx: CallContext, request: Any) -> bytes:
    """The processing rules of 3.1.4.2; returns the QUEUE_CONTEXT_HANDLE_SERIALIZE. pClientId, Major, Minor,
    BuildNumber and fWorkgroup are ignored (<14>, <16>–<19>)."""
    required = ACCESS.get(request["dwAccess"])
    if required is None:
        raise RpcFault(st.MQ_ERROR_INVALID_PARAMETER, f"dwAccess {request['dwAccess']:#x}")
    descriptor = open_descriptor(service, ctx, request["pQueueFormat"], required, request["dwShareMode"])
    return new_queue_handle(service, ctx, QueueContext(descriptor))


def new_queue_handle(service: Service, ctx: CallContext, context: QueueContext) -> bytes:
    """The QUEUE_CONTEXT_HANDLE of an opened descriptor; should none be made, the descriptor is closed first
    ([DESIGN] the association's most handles, rpc/handles.py: MQ_ERROR_INSUFFICIENT_RESOURCES)."""
    try:
        return ctx.new_handle(service.handle_type, context)
    except HandleLimitReached:
        service.qm.close_queue(context.descriptor)
        raise RpcFault(st.MQ_ERROR_INSUFFICIENT_RESOURCES, "the association holds its most context handles") from None
    except BaseException:
        service.qm.close_queue(context.descriptor)
        raise


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 2 on the wire: decode, apply 3.1.4.2, encode."""
    return encode(2, ctx.ndr64, pphContext=open_queue(service, ctx, decode(2, stub, ctx.ndr64)))
