"""Fuzz targets for the coverage-guided fuzzer: the qm2qm stub decoders (MS-MQQP 2.2, MS-RPCE 2.2.5) and the
UserMessage packet parser (MS-MQMQ 2.2.20, MS-MQDMPR 3.1.7.1.31). Each either returns or raises its documented
error (RpcFault / PacketError); anything else is a crash."""
from __future__ import annotations

from qm2qm.mqqp import codec
from qm2qm.rpc.interface import RpcFault
from shared_adm.packet import PacketError, deserialize_message_from_buffer

OPNUMS = 11


def decode_stub(data: bytes) -> None:
    """First byte: opnum (mod 11), NDR64 bit, request/response bit; the rest is the stub."""
    if not data:
        return
    selector, stub = data[0], data[1:]
    opnum, ndr64, response = selector % OPNUMS, bool(selector & 0x40), bool(selector & 0x80)
    try:
        (codec.decode_response if response else codec.decode_request)(opnum, stub, ndr64)
    except RpcFault:
        pass


def parse_packet(data: bytes) -> None:
    try:
        deserialize_message_from_buffer(data)
    except PacketError:
        pass


TARGETS = {"stub": decode_stub, "packet": parse_packet}


def seed_inputs(target: str) -> list[bytes]:
    """Valid inputs to start from: every qm2qm request seed in both syntaxes, and a few UserMessage packets."""
    if target == "stub":
        from soak import seeds
        out = []
        for ndr64 in (False, True):
            for opnum, stubs in seeds._qm2qm(ndr64).items():
                out += [bytes([opnum | (0x40 if ndr64 else 0)]) + s for s in stubs]
        return out
    from qm2qm.admin import message_from_request
    from shared_adm.packet import serialize_message_to_buffer
    out = []
    for fields in ({"body": "hello"}, {"body": "x" * 300, "label": "lbl", "priority": 6, "delivery": "recoverable"},
                   {"body_base64": "AAEC", "app_specific": 7, "correlation_id": "11" * 20, "trace": True,
                    "response_queue": "DIRECT=OS:.\\private$\\r", "admin_queue": "DIRECT=OS:.\\private$\\a",
                    "acknowledgement": "full_receive", "extension_base64": "AQID", "journal": True}):
        m = message_from_request(fields, now=lambda: 1_700_000_000.0)     # fixed SentTime: stable seed files
        m.destination_queue_format_name = "DIRECT=OS:host\\private$\\q"
        out.append(serialize_message_to_buffer(m))
    return out
