"""Fuzz targets for the coverage-guided fuzzer: the stub decoders of qm2qm (MS-MQQP 2.2), qmcomm (MS-MQMP 6) and
MS-MQRR (MS-MQRR 6) over NDR and NDR64 (MS-RPCE 2.2.5), with the QUEUE_FORMAT → format-name mapping their open
handlers apply (MS-MQMQ 2.2.7), and the UserMessage packet parser (MS-MQMQ 2.2.20, MS-MQDMPR 3.1.7.1.31). Each
either returns or raises its documented error (RpcFault / FormatNameError / PacketError); anything else is a
crash."""
from __future__ import annotations

from qm2qm.mqmp import codec as mqmp_codec
from qm2qm.mqqp import codec
from qm2qm.mqrr import codec as mqrr_codec
from qm2qm.mqrr.constants import OPNUM_NAMES as MQRR_OPNUM_NAMES
from qm2qm.mqrr.queue_format import format_name as mqrr_format_name
from qm2qm.rpc.interface import RpcFault
from shared_adm.packet import PacketError, deserialize_message_from_buffer

OPNUMS = 11
QMCOMM_OPNUMS = sorted(mqmp_codec.idl.OPNUMS)           # 1, 2, 3, 4, 31
MQRR_OPNUMS = sorted(MQRR_OPNUM_NAMES)                    # 0, 2-15
QUEUE_FORMAT_OPNUMS = {2: "pQueueFormat", 11: "pQueueFormat", 12: "pQueueFormat"}


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


def _selector(data: bytes, opnums: list[int]) -> tuple[int, bool, bool, bytes]:
    """First byte: opnum index (low 6 bits, mod the opnum count), NDR64 bit 0x40, response bit 0x80."""
    selector = data[0]
    return opnums[(selector & 0x3F) % len(opnums)], bool(selector & 0x40), bool(selector & 0x80), data[1:]


def decode_qmcomm_stub(data: bytes) -> None:
    """qm2qm.mqmp.codec, requests (with the format name R_QMOpenRemoteQueue opens) and responses."""
    if not data:
        return
    opnum, ndr64, response, stub = _selector(data, QMCOMM_OPNUMS)
    try:
        if response:
            mqmp_codec.decode_response(opnum, stub, ndr64)
            return
        call = mqmp_codec.decode_request(opnum, stub, ndr64)
        if opnum == 2 and not mqmp_codec.is_null(call.fields["pQueueFormat"]):
            mqmp_codec.format_name(call["pQueueFormat"])
    except (RpcFault, mqmp_codec.FormatNameError):
        pass


def decode_mqrr_stub(data: bytes) -> None:
    """qm2qm.mqrr.codec requests (with the format name R_OpenQueue / ForMove / Enlist take)."""
    if not data:
        return
    opnum, ndr64, _, stub = _selector(data, MQRR_OPNUMS)
    try:
        request = mqrr_codec.decode(opnum, stub, ndr64)
    except RpcFault:
        return
    if opnum in QUEUE_FORMAT_OPNUMS:
        mqrr_format_name(request[QUEUE_FORMAT_OPNUMS[opnum]])


def parse_packet(data: bytes) -> None:
    try:
        deserialize_message_from_buffer(data)
    except PacketError:
        pass


TARGETS = {"stub": decode_stub, "qmcomm_stub": decode_qmcomm_stub, "mqrr_stub": decode_mqrr_stub,
           "packet": parse_packet}
NAMES = {"stub": "qm2qm stub decoders (opnums 0-10, NDR and NDR64, requests and responses)",
         "qmcomm_stub": "qmcomm stub decoders (opnums 1-4, 31, NDR and NDR64, requests and responses)",
         "mqrr_stub": "MS-MQRR stub decoders (opnums 0, 2-15, NDR and NDR64, with the QUEUE_FORMAT mapping)",
         "packet": "UserMessage packet parser (MS-MQMQ 2.2.20)"}


def seed_inputs(target: str) -> list[bytes]:
    """Valid inputs to start from: every request seed of the interface in both syntaxes (scripts/soak/seeds.py),
    and a few UserMessage packets."""
    if target in ("qmcomm_stub", "mqrr_stub"):
        from soak import seeds
        build, opnums = ((seeds.by_name()["qmcomm"].build, QMCOMM_OPNUMS) if target == "qmcomm_stub"
                         else (seeds.by_name()["mqrr"].build, MQRR_OPNUMS))
        out = []
        for ndr64 in (False, True):
            stubs = build(ndr64)
            out += [bytes([i | (0x40 if ndr64 else 0)]) + s for i, opnum in enumerate(opnums) for s in stubs[opnum]]
        return out
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
