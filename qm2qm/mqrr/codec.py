"""Decode a request stub and encode a response with the impacket NDR declarations of idl.py (NDR and NDR64)."""
from __future__ import annotations

from typing import Any

from qm2qm.mqrr import idl
from qm2qm.rpc.interface import RpcFault

RPC_X_BAD_STUB_DATA = 0x000006F7


def decode(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """The idl.py request of ``opnum`` from its stub; undecodable input is the fault rpc_x_bad_stub_data."""
    request = idl.OPNUMS[opnum][0](isNDR64=ndr64)
    try:
        request.fromString(stub)
    except Exception as exc:
        raise RpcFault(RPC_X_BAD_STUB_DATA, f"{type(request).__name__}: {exc}") from None
    return request


def encode(opnum: int, ndr64: bool, **fields: Any) -> bytes:
    """The idl.py response of ``opnum`` with these fields, as stub bytes."""
    response = idl.OPNUMS[opnum][1](isNDR64=ndr64)
    for name, value in fields.items():
        response[name] = value
    return response.getData()


def signed(status: int) -> int:
    """An HRESULT as the LONG ErrorCode field holds it."""
    status &= 0xFFFFFFFF
    return status - 0x100000000 if status & 0x80000000 else status


def handle_bytes(value: Any) -> bytes:
    """A decoded context-handle field as its 20 wire bytes."""
    return bytes(value["Data"]) if not isinstance(value, (bytes, bytearray)) else bytes(value)
