"""R_GetServerPort (MS-MQRR 3.1.4.1, opnum 0): the TCP port of the RemoteRead interface."""
from __future__ import annotations

from qm2qm.mqrr.codec import encode
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import CallContext


def get_server_port(service: Service) -> int:
    """The port determined at initialization (3.1.3); 0 on error (there is none once bound)."""
    return service.port & 0xFFFFFFFF


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 0 on the wire (no [in] arguments beyond the binding handle)."""
    return encode(0, ctx.ndr64, ErrorCode=get_server_port(service))
