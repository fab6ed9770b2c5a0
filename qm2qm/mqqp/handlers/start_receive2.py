"""RemoteQMStartReceive2 (MS-MQQP 3.1.4.10, opnum 9): RemoteQMStartReceive that also returns the SequentialId."""
from __future__ import annotations

from typing import Any

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._read import Delivery, answer2, encode_delivery
from qm2qm.mqqp.handlers._service import Service
from qm2qm.mqqp.handlers.start_receive import start_receive
from qm2qm.rpc.interface import CallContext
from shared_adm import status as st


async def start_receive2(service: Service, ctx: CallContext, desc2: Any) -> Delivery:
    """The processing rules of 3.1.4.10: the NULL checks on lpRemoteReadDesc2, then those of 3.1.4.1."""
    if desc2 is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    if desc2.pRemoteReadDesc is None:
        return Delivery(st.MQ_ERROR_INVALID_HANDLE)
    return await start_receive(service, ctx, desc2.pRemoteReadDesc)


async def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 9 on the wire: decode, apply 3.1.4.10, encode."""
    request = codec.decode_request(9, stub, ctx.ndr64)
    desc2 = request.lpRemoteReadDesc2
    delivery = await start_receive2(service, ctx, desc2)
    response = codec.RemoteQMStartReceive2Response(delivery.handle, answer2(desc2, delivery), delivery.status)
    return encode_delivery(service, ctx, 9, response, delivery)
