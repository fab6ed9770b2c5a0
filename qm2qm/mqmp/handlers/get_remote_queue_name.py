"""R_QMGetRemoteQueueName (MS-MQMP 3.1.4.1, opnum 1): obsolete; the server SHOULD take no action and raise
MQ_ERROR_ILLEGAL_OPERATION (<11>, <12>: what Windows Server 2003 and later do instead of the NT/2000 rules)."""
from __future__ import annotations

from qm2qm.mqmp.handlers._service import QmcommService
from qm2qm.rpc.interface import CallContext, RpcFault
from shared_adm import status as st


def serve(service: QmcommService, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 1 on the wire: no action, the exception at once (the stub is not even read)."""
    raise RpcFault(st.MQ_ERROR_ILLEGAL_OPERATION, "R_QMGetRemoteQueueName is obsolete (MS-MQMP 3.1.4.1)")
