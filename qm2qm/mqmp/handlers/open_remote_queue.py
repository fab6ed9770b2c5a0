"""R_QMOpenRemoteQueue (MS-MQMP 3.1.4.2, opnum 2): open a local queue for a remote reader; the same non-zero
OpenQueueDescriptor.Handle goes back in pdwContext, dwpQueue and phQueue (<28>, Windows XP / Server 2003 and later)."""
from __future__ import annotations

from typing import Any

from qm2qm.mqmp import codec, codec_fast
from qm2qm.mqmp.constants import MQ_DENY_NONE, MQ_DENY_RECEIVE_SHARE, MQ_PEEK_ACCESS, MQ_RECEIVE_ACCESS
from qm2qm.mqmp.handlers._service import QmcommService, RemoteQueueOpenContextHandle
from qm2qm.rpc.handles import HandleLimitReached
from qm2qm.rpc.interface import ANONYMOUS, CallContext
from shared_adm import security
from shared_adm import status as st
from shared_adm.enums import QueueAccessType, QueueShareMode, RemoteReadState

ACCESS = {MQ_RECEIVE_ACCESS: QueueAccessType.RECEIVE_ACCESS, MQ_PEEK_ACCESS: QueueAccessType.PEEK_ACCESS}
SHARE = {MQ_DENY_NONE: QueueShareMode.DENY_NONE, MQ_DENY_RECEIVE_SHARE: QueueShareMode.DENY_RECEIVE}
NULL_HANDLE = codec.NULL_CONTEXT_HANDLE


def open_remote_queue(service: QmcommService, ctx: CallContext, format_name: str | codec.FormatNameError | None,
                      desired_access: int, share_mode: int) -> tuple[int, bytes, int]:
    """The processing rules of 3.1.4.2; returns (HRESULT, pphContext, Handle). dwCallingProcessID, pLicGuid and
    dwMQS are ignored (MAY, <18>, <19>)."""
    # Bullet 1: parameter constraints (pQueueFormat not NULL, a valid name and neither DL nor multicast nor HTTP;
    # dwDesiredAccess and dwShareMode one of the listed values).
    if format_name is None:
        return st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE, 0
    if isinstance(format_name, codec.FormatNameError):
        return format_name.status, NULL_HANDLE, 0
    access = ACCESS.get(desired_access)
    if access is None:
        return st.MQ_ERROR_UNSUPPORTED_ACCESS_MODE, NULL_HANDLE, 0
    share = SHARE.get(share_mode)
    if share is None:
        return st.MQ_ERROR_INVALID_PARAMETER, NULL_HANDLE, 0
    # Bullets 2–3: Open Queue (MS-MQDMPR 3.1.7.1.5); its failure status is the answer. Bullet 4 (RemoteReadState
    # := Opened) rides on the event so that internal queues are refused for remote read. [DESIGN] the access check
    # the spec leaves to the implementation (MS-MQMP 5.1): the caller's SIDs against the queue's security descriptor,
    # MQ_ERROR_ACCESS_DENIED, decided before the open makes anything.
    principal = getattr(ctx, "principal", ANONYMOUS)
    status, descriptor = security.open_queue_as(service.qm, principal.sids, format_name, access, share,
                                                RemoteReadState.OPENED)
    if status != st.MQ_OK:
        return status, NULL_HANDLE, 0
    descriptor.remote_read_state = RemoteReadState.OPENED
    descriptor.opener_host = ctx.peer_host          # the handle values it returns serve this host alone
    # Bullets 5–6: a RemoteQueueOpenContextHandle in iRemoteQueueOpenContextHandleTable; pphContext is its Handle.
    entry = RemoteQueueOpenContextHandle(descriptor)
    try:
        wire = ctx.new_handle(service.open_remote_handle_type, entry)
    except HandleLimitReached:              # [DESIGN] the association's most handles: the open is undone
        service.qm.close_queue(descriptor)
        return st.MQ_ERROR_INSUFFICIENT_RESOURCES, NULL_HANDLE, 0
    except BaseException:
        service.qm.close_queue(descriptor)
        raise
    service.open_contexts.add(entry)
    return st.MQ_OK, wire, descriptor.handle


def _format_name(call: Any) -> str | codec.FormatNameError | None:
    if codec.is_null(call.fields["pQueueFormat"]):
        return None
    try:
        return codec.format_name(call["pQueueFormat"])
    except codec.FormatNameError as exc:
        return exc


def _format_name_of(qft: int, flags: int, value: Any) -> str | codec.FormatNameError:
    try:
        return codec.format_name_of(qft, flags, value)
    except codec.FormatNameError as exc:
        return exc


def serve(service: QmcommService, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 2 on the wire: decode (codec_fast, else impacket's NDR), apply 3.1.4.2, encode (pdwContext = dwpQueue
    = phQueue = Handle, <28>)."""
    fast = codec_fast.decode_open_remote_queue(stub, ctx.ndr64)
    if fast is not None:
        queue_format, desired_access, share_mode = fast
        name = _format_name_of(*queue_format)
    else:
        call = codec.decode_request(2, stub, ctx.ndr64)
        name, desired_access, share_mode = _format_name(call), call["dwDesiredAccess"], call["dwShareMode"]
    status, context, handle = open_remote_queue(service, ctx, name, desired_access, share_mode)
    return codec_fast.encode_open_remote_queue(context, handle, status)
