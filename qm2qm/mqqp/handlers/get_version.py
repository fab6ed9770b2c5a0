"""RemoteQmGetVersion (MS-MQQP 3.1.4.9, opnum 8): the Message Queuing version the server reports (<22>–<24>)."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.mqqp.handlers._service import Service
from qm2qm.rpc.interface import CallContext


def get_version(service: Service) -> tuple[int, int, int]:
    """(pMajor, pMinor, pBuildNumber): 6.1 and the configured build (docs/mqqp-choices.md)."""
    return service.config.version


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 8 on the wire: no [in] parameters beyond the binding handle."""
    codec.decode_request(8, stub, ctx.ndr64)
    major, minor, build = get_version(service)
    return codec.encode_response(8, codec.RemoteQmGetVersionResponse(major, minor, build), ctx.ndr64)
