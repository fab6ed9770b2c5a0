"""The supporting-server gate (MS-MQMP 3.1.4, 3.1.5): with LocalQueueManager.SupportingServer False (qm2qm is never
one) the server MUST return an error for every supporting-server method of qmcomm and all of qmcomm2.

[DESIGN] the error is the fault MQ_ERROR_WKS_CANT_SERVE_CLIENT (0xC00E0066, MS-MQMQ 2.4: "The MSMQ service cannot be
a supporting server"), raised before the stub is read, so every such opnum gets the same clear answer whatever its
signature."""
from __future__ import annotations

from qm2qm.rpc.interface import CallContext, RpcFault
from shared_adm import status as st


def serve(name: str, ctx: CallContext, stub: bytes) -> bytes:
    """Any gated opnum: the fault, at once."""
    raise RpcFault(st.MQ_ERROR_WKS_CANT_SERVE_CLIENT, f"{name}: this queue manager is not a supporting server")
