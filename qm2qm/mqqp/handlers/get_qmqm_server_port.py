"""RemoteQMGetQMQMServerPort (MS-MQQP 3.1.4.8, opnum 7): the qmcomm or qm2qm TCP port; 0 for anything else (<19>, <20>)."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import IP_HANDSHAKE, IP_READ
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext

FAILURE = 0x00000000


def get_qmqm_server_port(service: Service, port_type: int) -> int:
    """IP_HANDSHAKE → the configured qmcomm port, IP_READ → the port qm2qm is bound to, else 0."""
    if port_type == IP_HANDSHAKE:
        return service.config.qmcomm_port
    if port_type == IP_READ:
        return service.config.bound_port
    return FAILURE


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 7 on the wire (dwPortType outside [range(0, 3)] is refused by the stub codec)."""
    request = codec.decode_request(7, stub, ctx.ndr64)
    port = get_qmqm_server_port(service, request.dwPortType)
    return codec.encode_response(7, codec.RemoteQMGetQMQMServerPortResponse(port), ctx.ndr64)
