"""R_QMGetRTQMServerPort (MS-MQMP 3.1.4.24, opnum 31): the port bound for qmcomm or qm2qm; 0 for anything else
(SPX, <65>, <66>: Windows XP / Server 2003 and later answer 0 too). Never access-restricted (5.1)."""
from __future__ import annotations

from qm2qm.mqmp import codec, codec_fast
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
    """Opnum 31 on the wire: the DWORD fIP in, the DWORD port out, 4 bytes each way in NDR and NDR64 (codec_fast;
    a stub of another length goes to impacket's decode, which faults it)."""
    f_ip = codec_fast.decode_dword(stub)
    if f_ip is None:
        f_ip = codec.decode_request(31, stub, ctx.ndr64)["fIP"]
    return codec_fast.encode_dword(get_rtqm_server_port(service, f_ip))
