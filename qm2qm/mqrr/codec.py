"""Decode a request stub and encode a response with the impacket NDR declarations of idl.py (NDR and NDR64)."""
from __future__ import annotations

import struct
from typing import Any

from qm2qm.mqrr import codec_fast, idl
from qm2qm.rpc.interface import RpcFault
from qm2qm.rpc.quiet_ndr import parse_quietly

RPC_X_BAD_STUB_DATA = 0x000006F7
_HRESULT = struct.Struct("<I")


# the read path's requests (codec_fast.py): decoded by struct when laid out as expected, anything else by impacket
FAST_DECODERS = {2: codec_fast.decode_open_queue, 3: codec_fast.decode_context_handle,
                 4: codec_fast.decode_queue_handle, 5: codec_fast.decode_close_cursor,
                 6: codec_fast.decode_queue_handle, 7: codec_fast.decode_start_receive,
                 8: codec_fast.decode_cancel_receive,
                 9: codec_fast.decode_end_receive, 13: codec_fast.decode_start_transactional_receive,
                 15: codec_fast.decode_end_receive}
# and the responses of a session's open, cursor and close, when their fields are as expected
FAST_ENCODERS = {2: codec_fast.encode_handle, 3: codec_fast.encode_handle_and_status,
                 4: codec_fast.encode_dword_and_status}


def decode(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """The idl.py request of ``opnum`` from its stub (a dict of its fields on the read path); undecodable input
    is the fault rpc_x_bad_stub_data."""
    fast = FAST_DECODERS.get(opnum)
    if fast is not None:
        fields = fast(stub, ndr64)
        if fields is not None:
            return fields
    request = idl.OPNUMS[opnum][0](isNDR64=ndr64)
    try:
        parse_quietly(request, stub)
    except Exception as exc:
        raise RpcFault(RPC_X_BAD_STUB_DATA, f"{type(request).__name__}: {exc}") from None
    if "pQueueFormat" in request.fields:
        _check_union_arm(request, request["pQueueFormat"]["u"])
    return request


def _check_union_arm(request: Any, union: Any) -> None:
    """impacket reads a union's tag but not its arm when 4 bytes or fewer follow: that stub is cut short."""
    arm = union.union.get(union["tag"], (None,))[0]
    if arm not in union.fields:
        raise RpcFault(RPC_X_BAD_STUB_DATA, f"{type(request).__name__}: QUEUE_FORMAT union arm "
                                            f"{union['tag']} is missing (stub cut short)")


def encode(opnum: int, ndr64: bool, **fields: Any) -> bytes:
    """The idl.py response of ``opnum`` with these fields, as stub bytes (an HRESULT alone is its 4 bytes in
    both transfer syntaxes)."""
    if fields.keys() == {"ErrorCode"}:
        return _HRESULT.pack(fields["ErrorCode"] & 0xFFFFFFFF)
    fast = FAST_ENCODERS.get(opnum)
    if fast is not None:
        stub = fast(**fields)
        if stub is not None:
            return stub
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
