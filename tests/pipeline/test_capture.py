"""Capture ingest (pcap/pcapng → TCP → DCE/RPC → qm2qm calls): decoded table checked field by field against what
the client saw; reassembly under small segments and retransmissions; synthetic fragments, alter_context,
unknown interfaces."""
from __future__ import annotations

import json
import uuid

import pytest

from qm2qm.mqqp.codec import (REMOTEREADDESC, REMOTEREADDESC2, RemoteQMStartReceiveByLookupIdRequest,
                              RemoteQmGetVersionResponse, decode_response, encode_request, encode_response)
from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.pipeline.capture import ingest_capture
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.recorder import PcapSink
from qm2qm.rpc.events import ContextItem
from qm2qm.rpc.interface import NDR20, NDR64
from qm2qm.rpc.pdu import append_response, build_bind, build_bind_ack, build_fault, build_request, fragment_request

from tests.pipeline.conftest import COMPUTER, QUEUE, LiveServer, record_scenario

OPS_SESSION_0 = ["RemoteQmGetVersion", "RemoteQMGetQMQMServerPort", "RemoteQMOpenQueue", "RemoteQMStartReceive2",
                 "RemoteQMStartReceive", "RemoteQMEndReceive", "RemoteQMCloseCursor"]
OPS_SESSION_1 = ["RemoteQMOpenQueue", "RemoteQMStartReceive2", "RemoteQMEndReceive", "RemoteQMCancelReceive",
                 "RemoteQMPurgeQueue", "RemoteQMCloseQueue"]
CLIENT = ("10.0.0.1", 50000)
SERVER = ("10.0.0.2", 2105)


def test_capture_calls_match_what_the_client_saw(recorded):
    path, exp = recorded
    result = ingest_file(path)
    assert result.problems == []
    calls = result.calls
    assert [c["op_name"] for c in calls] == OPS_SESSION_0 + OPS_SESSION_1
    assert [c["session_seq"] for c in calls] == [0] * 7 + [1] * 6
    assert [c["call_index"] for c in calls] == list(range(7)) + list(range(6))
    assert [c["transfer_syntax"] for c in calls] == ["NDR"] * 7 + ["NDR64"] * 6
    assert [c["call_id"] for c in calls] == list(range(1, 8)) + list(range(1, 7))
    assert {c["status_kind"] for c in calls} == {"ok"}
    assert [c["hresult"] for c in calls] == exp.hresults
    assert all(c["interface_uuid"] == str(QM2QM_UUID) and c["interface_version"] == "1.0" for c in calls)
    assert all(c["latency_us"] >= 0 and c["response_time_us"] >= c["request_time_us"] for c in calls)
    assert all(c["decode_error"] is None for c in calls)
    s0, s1 = calls[:7], calls[7:]
    assert len({c["association_group_id"] for c in s0}) == 1 and s0[0]["association_group_id"]
    assert s0[0]["client"] != s1[0]["client"] and s0[0]["server"] == s1[0]["server"]
    version = json.loads(s0[0]["response_fields"])
    assert (version["pMajor"], version["pMinor"], version["pBuildNumber"]) == exp.version
    assert s0[1]["return_value"] == exp.port and json.loads(s0[1]["request_fields"]) == {"dwPortType": 0}
    open_req = json.loads(s0[2]["request_fields"])
    assert open_req["hQueue"] == open_req["pQueue"] == open_req["dwpContext"] == exp.h_queue
    assert s0[2]["context_handle_out"] == exp.sessions[0] and s1[0]["context_handle_out"] == exp.sessions[1]
    assert s1[5]["context_handle_in"] == exp.sessions[1]
    assert (s0[3]["queue_handle"], s0[3]["cursor"], s0[3]["request_id"]) == (exp.h_queue, exp.cursor, 7)
    assert (s0[4]["queue_handle"], s0[4]["cursor"], s0[4]["request_id"]) == (exp.h_queue, 0, 8)
    assert s0[4]["context_handle_out"] == exp.read_contexts[0] == s0[5]["context_handle_in"]
    assert s1[2]["context_handle_in"] == exp.read_contexts[1]
    labels = [json.loads(c["message_fields"])["label"] for c in (s0[3], s0[4], s1[1])]
    assert labels == exp.labels
    body = json.loads(s0[4]["message_fields"])["body"]
    assert bytes.fromhex(body) == b"first order"
    assert json.loads(s0[4]["message_fields"])["destination_queue_format_name"] == f"DIRECT=OS:{COMPUTER}\\{QUEUE}"
    assert (s1[3]["request_id"], s1[3]["queue_handle"]) == (99, exp.h_queue2)
    # the response stub is the real one: decoding it again gives the recorded ErrorCode
    assert decode_response(0, s0[4]["response_stub"], False).ErrorCode == s0[4]["hresult"]


def test_sessions_table_counts_calls_and_bytes(recorded):
    path, _ = recorded
    result = ingest_file(path)
    s0, s1 = result.sessions
    assert (s0["calls"], s1["calls"]) == (7, 6)
    assert (s0["transfer_syntax"], s1["transfer_syntax"]) == ("NDR", "NDR64")
    assert s1["errors"] == 1 and s0["errors"] == 0 and s0["faults"] == 0
    assert not s0["damaged"] and s0["note"] is None
    # bytes are whole PDUs (bind + requests), so more than the request stubs
    stubs = sum(c["request_bytes"] for c in result.calls if c["session_seq"] == 0)
    assert s0["bytes_to_server"] > stubs + 7 * 24
    assert s0["start_time_us"] <= s0["end_time_us"] <= s1["start_time_us"]


def _decoded(calls):
    keep = ("op_name", "transfer_syntax", "hresult", "request_fields", "response_fields", "message_fields",
            "call_id", "session_seq", "call_index")
    return [{k: c[k] for k in keep} for c in calls]


def test_pcapng_small_segments_and_retransmissions_give_the_same_calls(tmp_path):
    server = LiveServer()
    try:
        record_scenario(server, tmp_path / "a.pcap")
    finally:
        server.close()
    server = LiveServer()
    try:
        record_scenario(server, tmp_path / "b.pcapng", pcapng=True, mss=7, duplicate=True)
    finally:
        server.close()
    plain, chopped = ingest_file(tmp_path / "a.pcap"), ingest_file(tmp_path / "b.pcapng")
    assert chopped.problems == []
    assert chopped.counters["frames"] > 4 * plain.counters["frames"]
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("response_fields", "message_fields")}  # noqa: E731
                          for r in _decoded(rows)]
    # handles and message ids differ between the two servers; everything else is equal
    assert [r["op_name"] for r in strip(chopped.calls)] == [r["op_name"] for r in strip(plain.calls)]
    assert [r["hresult"] for r in chopped.calls] == [r["hresult"] for r in plain.calls]
    assert [json.loads(r["message_fields"])["body"] for r in chopped.calls if r["message_fields"]] == \
           [json.loads(r["message_fields"])["body"] for r in plain.calls if r["message_fields"]]


# ------------------------------------------------------------------------------------ synthetic exchanges

class Wire:
    """Writes a synthetic ncacn_ip_tcp exchange (handshake, PDUs both ways) into a capture."""

    def __init__(self, sink: PcapSink, client=CLIENT, server=SERVER) -> None:
        self.sink, self.client, self.server = sink, client, server
        self.seq = {client: 100, server: 9000}
        sink.segment(client, server, 99, 0, 0x02)
        sink.segment(server, client, 8999, 100, 0x12)

    def send(self, from_client: bool, data: bytes) -> None:
        a, b = (self.client, self.server) if from_client else (self.server, self.client)
        self.seq[a] = self.sink.data(a, b, self.seq[a], self.seq[b], data)


def _syntax(ident):
    return (ident[0], ident[1], 0)


def test_fragmented_request_alter_context_ndr64_and_unknown_interface(tmp_path):
    path = tmp_path / "synthetic.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    qm2qm = (QM2QM_UUID, 1, 0)
    other = (uuid.UUID("12345678-1234-abcd-ef00-0123456789ab"), 1, 0)
    wire.send(True, build_bind(1, [ContextItem(0, qm2qm, (_syntax(NDR20),)),
                                   ContextItem(1, other, (_syntax(NDR20),))]))
    wire.send(False, build_bind_ack(1, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840,
                                    assoc_group_id=0x1234, secondary_address="2105",
                                    results=[(0, 0, _syntax(NDR20)), (0, 0, _syntax(NDR20))]))
    # opnum 10 on qm2qm, its request split into 16-byte fragments
    lookup = (10).to_bytes(8, "little")
    desc = REMOTEREADDESC(hRemoteQueue=5, dwQueue=5, dwRequestID=3, ulAction=0x40000010)
    stub = encode_request(10, RemoteQMStartReceiveByLookupIdRequest(10, REMOTEREADDESC2(desc, 0)), False)
    assert stub[:8] == lookup
    for frag in fragment_request(2, 0, 10, stub, 24 + 16 + 24):   # 16-byte chunks
        wire.send(True, frag)
    wire.send(False, build_fault(2, 0x6F7))
    # a call on the unknown interface, answered
    wire.send(True, build_request(3, 1, 4, b"\x01\x02\x03\x04"))
    out = bytearray()
    append_response(out, 3, 1, b"\x00" * 8, 5840)
    wire.send(False, bytes(out))
    # alter_context adds context 2 = qm2qm over NDR64; GetVersion on it
    wire.send(True, build_bind(4, [ContextItem(2, qm2qm, (_syntax(NDR64),))], alter_context=True))
    wire.send(False, build_bind_ack(4, alter_context=True, max_xmit_frag=5840, max_recv_frag=5840,
                                    assoc_group_id=0x1234, secondary_address="", results=[(0, 0, _syntax(NDR64))]))
    wire.send(True, build_request(5, 2, 8, b""))
    out = bytearray()
    append_response(out, 5, 2, encode_response(8, RemoteQmGetVersionResponse(6, 1, 20348), True), 5840)
    wire.send(False, bytes(out))
    # a request with no answer before the capture ends
    wire.send(True, build_request(6, 0, 8, b""))
    sink.close()

    result = ingest_capture(path)
    calls = result.calls
    assert [(c["call_id"], c["opnum"], c["status_kind"]) for c in calls] == [
        (2, 10, "fault"), (3, 4, "ok"), (5, 8, "ok"), (6, 8, "no_response")]
    lookup_call, unknown, version, pending = calls
    assert lookup_call["request_stub"] == stub and lookup_call["fault_status"] == 0x6F7
    assert lookup_call["lookup_id"] == 10 and lookup_call["request_id"] == 3 and lookup_call["queue_handle"] == 5
    assert lookup_call["association_group_id"] == 0x1234
    assert unknown["interface_uuid"] == str(other[0]) and unknown["interface_name"] is None
    assert unknown["request_fields"] is None and unknown["response_stub"] == b"\x00" * 8
    assert version["transfer_syntax"] == "NDR64" and version["context_id"] == 2
    assert json.loads(version["response_fields"]) == {"pMajor": 6, "pMinor": 1, "pBuildNumber": 20348}
    assert pending["response_stub"] is None and pending["latency_us"] is None
    assert result.counters["unknown_interface_calls"] == 1
    assert [p["kind"] for p in result.problems] == ["unknown_interface"]


def test_request_on_a_context_never_bound_is_kept_undecoded(tmp_path):
    path = tmp_path / "midstream.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    wire.send(True, build_request(1, 0, 8, b""))
    out = bytearray()
    append_response(out, 1, 0, encode_response(8, RemoteQmGetVersionResponse(6, 1, 20348), False), 5840)
    wire.send(False, bytes(out))
    sink.close()
    (call,) = ingest_capture(path).calls
    assert call["interface_uuid"] is None and call["request_fields"] is None
    assert "never bound" in call["decode_error"]


def _as_ipv6(ip, server_port: int) -> bytes:
    """The TCP segment of an IPv4 packet carried over IPv6: fd00::1 is the server, fd00::2 the clients."""
    import dpkt
    tcp = ip.data
    addr = {True: b"\xfd" + bytes(14) + b"\x01", False: b"\xfd" + bytes(14) + b"\x02"}
    ip6 = dpkt.ip6.IP6(src=addr[tcp.sport == server_port], dst=addr[tcp.dport == server_port],
                       nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=tcp)
    tcp.sum = 0
    ip6.plen = len(bytes(tcp))
    return bytes(ip6)


@pytest.mark.parametrize("linktype", ["sll", "raw", "null", "ipv6"])
def test_other_link_layers(tmp_path, recorded, linktype):
    """The same frames re-framed as Linux cooked, raw IP, BSD loopback and raw IPv6 captures decode the same
    calls."""
    import dpkt
    src, _ = recorded
    with open(src, "rb") as fh:
        frames = [(ts, dpkt.ethernet.Ethernet(buf)) for ts, buf in dpkt.pcap.Reader(fh)]
    out = tmp_path / f"{linktype}.pcap"
    codes = {"sll": dpkt.pcap.DLT_LINUX_SLL, "raw": 101, "null": dpkt.pcap.DLT_NULL, "ipv6": 101}
    with open(out, "wb") as fh:
        writer = dpkt.pcap.Writer(fh, linktype=codes[linktype])
        for ts, eth in frames:
            ip = bytes(eth.data)
            if linktype == "sll":
                data = (0).to_bytes(2, "big") + (772).to_bytes(2, "big") + (6).to_bytes(2, "big") + bytes(8) \
                    + (0x0800).to_bytes(2, "big") + ip
            elif linktype == "null":
                data = (2).to_bytes(4, "little") + ip
            elif linktype == "ipv6":
                data = _as_ipv6(eth.data, frames[0][1].data.data.dport)
            else:
                data = ip
            writer.writepkt(data, ts=ts)
    again = ingest_file(out)
    assert again.problems == []
    assert _decoded(again.calls) == _decoded(ingest_file(src).calls)
    if linktype == "ipv6":
        assert again.calls[0]["server"].startswith("fd00::1:") and again.calls[0]["client"].startswith("fd00::2:")


def _signed_request(call_id: int, opnum: int, stub: bytes, auth_level: int) -> bytes:
    """A request with an NTLM-style auth trailer (MS-RPCE 2.2.2.11): stub, auth pad to 16, sec_trailer, 16-byte
    verifier."""
    import struct
    pad = -len(stub) % 16
    body = struct.pack("<IHH", len(stub), 0, opnum) + stub + bytes(pad) + struct.pack("<BBBBI", 10, auth_level, pad,
                                                                                      0, 0) + b"\xee" * 16
    return struct.pack("<BBBB4sHHI", 5, 0, 0, 3, b"\x10\x00\x00\x00", 16 + len(body), 16, call_id) + body


@pytest.mark.parametrize("auth_level, decoded", [(5, True), (6, False)])
def test_auth_trailer_is_cut_off_and_privacy_stubs_are_not_decoded(tmp_path, auth_level, decoded):
    path = tmp_path / "auth.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    qm2qm = (QM2QM_UUID, 1, 0)
    wire.send(True, build_bind(1, [ContextItem(0, qm2qm, (_syntax(NDR20),))]))
    wire.send(False, build_bind_ack(1, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840,
                                    assoc_group_id=7, secondary_address="2105", results=[(0, 0, _syntax(NDR20))]))
    wire.send(True, _signed_request(2, 7, b"\x01\x00\x00\x00", auth_level))
    sink.close()
    (call,) = ingest_capture(path).calls
    assert call["request_stub"] == b"\x01\x00\x00\x00"
    if decoded:
        assert json.loads(call["request_fields"]) == {"dwPortType": 1} and call["decode_error"] is None
    else:
        assert call["request_fields"] is None and "sealed" in call["decode_error"]
