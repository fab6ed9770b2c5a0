"""The capture reader parses headers, bind_acks, faults and auth trailers with the runtime's pdu module and stays
tolerant of damage in either direction (C706 12.6.4.4, 12.6.4.7; MS-RPCE 2.2.2.11); it never answers."""
from __future__ import annotations

import struct

from impacket.dcerpc.v5 import rpcrt

from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.pipeline.capture import ingest_capture
from qm2qm.pipeline.recorder import PcapSink
from qm2qm.rpc.events import ContextItem
from qm2qm.rpc.interface import NDR20
from qm2qm.rpc.pdu import (build_bind, build_bind_ack, build_fault, build_request, parse_bind_ack_body,
                           parse_fault_status)

from tests.pipeline.test_capture import Wire

NDR = (NDR20[0], NDR20[1], 0)
QM2QM = (QM2QM_UUID, 1, 0)


def _bind_ack(call_id: int = 1) -> bytes:
    return build_bind_ack(call_id, alter_context=False, max_xmit_frag=4280, max_recv_frag=4280, assoc_group_id=9,
                          secondary_address="2105", results=[(0, 0, NDR), (2, 2, None)])


def test_bind_ack_parser_reads_what_impacket_reads():
    data = _bind_ack()
    ours = parse_bind_ack_body(data, len(data))
    theirs = rpcrt.MSRPCBindAck(data)
    assert (ours.max_xmit_frag, ours.assoc_group_id) == (theirs["max_tfrag"], theirs["assoc_group"])
    assert ours.secondary_address == theirs["SecondaryAddr"].encode() + b"\x00"     # port_any_t keeps its NUL
    assert [r[:2] for r in ours.results] == [(0, 0), (2, 2)] and theirs["ctx_num"] == 2


def test_fault_status_parser():
    assert parse_fault_status(build_fault(4, 0x1C010003, context_id=1)) == 0x1C010003


def _capture(tmp_path, pdus: list[tuple[bool, bytes]]):
    path = tmp_path / "c.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    for from_client, data in pdus:
        wire.send(from_client, data)
    sink.close()
    return ingest_capture(path)


def test_truncated_bind_ack_is_a_bad_pdu_and_later_calls_stay_unbound(tmp_path):
    ack = _bind_ack()
    short = ack[:16 + 10] + bytes(4)                     # result list cut off
    short = short[:8] + struct.pack("<H", len(short)) + short[10:]
    result = _capture(tmp_path, [(True, build_bind(1, [ContextItem(0, QM2QM, (NDR,))])), (False, short),
                                 (True, build_request(2, 0, 8, b""))])
    (bad,) = [p for p in result.problems if p["kind"] == "bad_pdu"]
    assert "PDU type 12 call_id 1" in bad["message"] and "bind_ack" in bad["message"]
    (call,) = result.calls
    assert "never bound" in call["decode_error"]


def test_auth_trailer_overlapping_the_header_is_a_bad_pdu_in_either_direction(tmp_path):
    request = bytearray(build_request(2, 0, 8, b"\x00" * 8))
    struct.pack_into("<H", request, 10, 20)              # auth_length reaching into the request header
    response = bytearray(build_request(3, 0, 8, b""))
    response[2] = 2                                      # a response PDU with the same fault
    struct.pack_into("<H", response, 10, 4)
    result = _capture(tmp_path, [(True, build_bind(1, [ContextItem(0, QM2QM, (NDR,))])), (False, _bind_ack()),
                                 (True, bytes(request)), (False, bytes(response))])
    messages = [p["message"] for p in result.problems if p["kind"] == "bad_pdu"]
    assert len(messages) == 2
    assert all("does not fit in frag_length" in m for m in messages)
    assert "PDU type 0 call_id 2" in messages[0] and "PDU type 2 call_id 3" in messages[1]


def test_a_frag_length_past_the_end_of_the_stream_is_an_incomplete_call_naming_it(tmp_path):
    huge = bytearray(build_request(2, 0, 8, b""))
    struct.pack_into("<H", huge, 8, 65535)
    result = _capture(tmp_path, [(True, build_bind(1, [ContextItem(0, QM2QM, (NDR,))])), (False, _bind_ack()),
                                 (True, bytes(huge)), (True, build_request(3, 0, 8, b""))])
    (problem,) = [p for p in result.problems if p["kind"] == "incomplete_call"]
    assert "has frag_length 65535, only 48 bytes follow: it and the stream after it are lost" in problem["message"]
    assert str(tmp_path / "c.pcap") in problem["message"]
