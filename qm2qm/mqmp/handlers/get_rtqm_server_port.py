"""R_QMGetRTQMServerPort (MS-MQMP 3.1.4.24, opnum 31): the port bound for qmcomm or qm2qm; 0 for anything else
(SPX, <65>, <66>: Windows XP / Server 2003 and later answer 0 too). Never access-restricted (5.1)."""
from __future__ import annotations

from qm2qm.mqmp import codec
from qm2qm.mqmp.constants import IP_HANDSHAKE, IP_READ
from qm2qm.mqmp.handlers._service import QmcommService
from qm2qm.rpc.interface import CallContext

FAILURE = 0x00000000


def get_rtqm_server_port(service: QmcommService, f_ip: int) -> int:
    """IP_HANDSHAKE → the bound qmcomm port, IP_READ → the bound qm2qm port, anything else → 0."""
    if f_ip == IP_HANDSHAKE:
        return service.config.qmcomm_port
    if f_ip == IP_READ:
        return service.config.qm2qm_port
    return FAILURE


def serve(service: QmcommService, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 31 on the wire."""
    call = codec.decode_request(31, stub, ctx.ndr64)
    return codec.encode_response(31, ctx.ndr64, ReturnValue=get_rtqm_server_port(service, call["fIP"]))
