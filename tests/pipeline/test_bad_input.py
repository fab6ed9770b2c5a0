"""Bad input gets a clear problem naming the file and the offset, and whatever came before it is kept."""
from __future__ import annotations

import json
import socket
import struct

import dpkt
import pyarrow.parquet as pq

from qm2qm.pipeline import schema
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.trace import CallWriter, TraceError, read_calls

import pytest


def _records(path):
    """(offset, length) of every pcap record."""
    data = path.read_bytes()
    out, pos = [], 24
    while pos < len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        out.append((pos, 16 + caplen))
        pos += 16 + caplen
    return out


def test_truncated_pcap_names_the_offset_and_keeps_earlier_calls(tmp_path, recorded):
    src, _ = recorded
    records = _records(src)
    cut_at, length = records[len(records) // 2]
    bad = tmp_path / "truncated.pcap"
    bad.write_bytes(src.read_bytes()[:cut_at + length - 5])
    result = ingest_file(bad)
    truncated = [p for p in result.problems if p["kind"] == "truncated"]
    assert len(truncated) == 1
    assert truncated[0]["offset"] == cut_at
    assert str(bad) in truncated[0]["message"] and f"offset {cut_at}" in truncated[0]["message"]
    assert 0 < len(result.calls) < len(ingest_file(src).calls)


def test_truncated_file_header(tmp_path):
    bad = tmp_path / "short.pcap"
    bad.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
    (problem,) = ingest_file(bad).problems
    assert problem["kind"] == "truncated" and problem["offset"] == 4 and "short.pcap" in problem["message"]


def test_wrong_link_type_is_reported_once_and_skipped(tmp_path, recorded):
    src, _ = recorded
    data = bytearray(src.read_bytes())
    struct.pack_into("<I", data, 20, 147)           # LINKTYPE_USER0
    bad = tmp_path / "user0.pcap"
    bad.write_bytes(bytes(data))
    result = ingest_file(bad)
    assert [p["kind"] for p in result.problems] == ["link_type"]
    assert result.problems[0]["offset"] == 24 and "link type 147" in result.problems[0]["message"]
    assert result.calls == []


def test_non_rpc_traffic_is_counted_not_decoded(tmp_path):
    """An HTTP exchange recorded through the proxy: a non_rpc problem, no calls, no crash."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.close()

    import threading
    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    path = tmp_path / "http.pcap"
    sink = PcapSink(path)
    proxy = RecordingProxy(("127.0.0.1", listener.getsockname()[1]), sink)
    with socket.create_connection(("127.0.0.1", proxy.port)) as client:
        client.sendall(b"GET / HTTP/1.0\r\n\r\n")
        while client.recv(1024):
            pass
    proxy.close()
    sink.close()
    thread.join(10)
    listener.close()
    result = ingest_file(path)
    assert result.calls == [] and [p["kind"] for p in result.problems] == ["non_rpc"]
    assert "not DCE/RPC" in result.problems[0]["message"]


def test_damaged_stream_keeps_the_calls_before_the_damage(tmp_path, recorded):
    """A corrupted PDU header in the middle of the first connection's client bytes."""
    src, _ = recorded
    with open(src, "rb") as fh:
        frames = list(dpkt.pcap.Reader(fh))
    out = tmp_path / "damaged.pcap"
    damaged_done = False
    seen_client_pdus = 0
    with open(out, "wb") as fh:
        writer = dpkt.pcap.Writer(fh)
        for ts, buf in frames:
            eth = dpkt.ethernet.Ethernet(buf)
            tcp = eth.data.data
            if not damaged_done and tcp.data and tcp.data[:1] == b"\x05" and tcp.data[2] == 0:   # a request
                seen_client_pdus += 1
                if seen_client_pdus == 4:
                    tcp.data = b"\x04" + bytes(tcp.data[1:])               # rpc_vers 4
                    eth.data.sum = 0
                    tcp.sum = 0
                    damaged_done = True
            writer.writepkt(bytes(eth), ts=ts)
    result = ingest_file(out)
    kinds = [p["kind"] for p in result.problems]
    assert kinds == ["damaged_stream", "orphan_response"]
    assert "bad PDU header (version 4.0" in result.problems[0]["message"]
    assert "4 response(s) with no request" in result.problems[1]["message"]     # calls 4..7 were lost
    first = [c for c in result.calls if c["session_seq"] == 0]
    assert len(first) == 3                         # the three requests before the damaged one
    assert result.sessions[0]["damaged"] is True and "stream offset" in result.sessions[0]["note"]
    assert len([c for c in result.calls if c["session_seq"] == 1]) == 6     # the other connection is whole


def test_pcapng_with_a_damaged_block_length(tmp_path, recorded):
    src, _ = recorded
    path = tmp_path / "x.pcapng"
    with open(src, "rb") as fh, open(path, "wb") as out:
        writer = dpkt.pcapng.Writer(out)
        for ts, buf in dpkt.pcap.Reader(fh):
            writer.writepkt(buf, ts=ts)
    data = bytearray(path.read_bytes())
    # SHB and IDB come first; damage the length of the 5th block
    pos = 0
    for _ in range(4):
        pos += struct.unpack_from("<I", data, pos + 4)[0]
    struct.pack_into("<I", data, pos + 4, 7)
    path.write_bytes(bytes(data))
    result = ingest_file(path)
    (problem,) = [p for p in result.problems if p["kind"] == "damaged"]
    assert problem["offset"] == pos and "block length 7" in problem["message"]


def test_unknown_file_kind(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_bytes(b"hello, not a capture")
    (problem,) = ingest_file(bad).problems
    assert problem["kind"] == "unknown_file" and "notes.txt: offset 0" in problem["message"]


def test_trace_from_a_newer_version_is_refused_by_name(tmp_path):
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"format": schema.FORMAT_NAME, "version": schema.FORMAT_VERSION + 1}) + "\n")
    with pytest.raises(TraceError, match=r"future\.jsonl: line 1 \(offset 0\): trace format version 2 is newer"):
        read_calls(path)
    (problem,) = ingest_file(path).problems
    assert problem["kind"] == "bad_trace" and problem["offset"] == 0

    pq_path = tmp_path / "future.parquet"
    table = schema.table([], schema.CALL_SCHEMA).replace_schema_metadata(
        {b"format": schema.FORMAT_NAME.encode(), b"version": b"99"})
    pq.write_table(table, pq_path)
    with pytest.raises(TraceError, match="version 99 is newer"):
        read_calls(pq_path)


def test_jsonl_trace_with_a_broken_line_names_line_and_offset(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = CallWriter(path)
    row = schema.empty_call()
    row.update(source="trace", session_id="conn-1", session_seq=0, call_index=0, opnum=8, request_stub=b"")
    writer.write([row])
    writer.close()
    good = path.read_bytes()
    path.write_bytes(good + b"{not json\n")
    with pytest.raises(TraceError, match=rf"line 3 \(offset {len(good)}\): not JSON"):
        read_calls(path)
    path.write_bytes(good + b'{"source": "trace", "session_id": "x", "request_stub": "***"}\n')
    with pytest.raises(TraceError, match="request_stub is not base64"):
        read_calls(path)
    path.write_bytes(good + b'{"source": "trace", "session_id": "x", "opnum": "eight"}\n')
    with pytest.raises(TraceError, match="wrong type"):
        read_calls(path)


@pytest.mark.parametrize("args, says", [
    (["--target", "127.0.0.1:1", "--out", "{tmp}/no/such/dir/r.pcap"],
     "qm2qm: error: cannot write {tmp}/no/such/dir/r.pcap: No such file or directory"),
    (["--target", "127.0.0.1:1", "--listen", "70000", "--out", "{tmp}/r.pcap"], "70000 is not in the range"),
    (["--target", "127.0.0.1:99999", "--out", "{tmp}/r.pcap"], "--target must be HOST:PORT"),
])
def test_record_refuses_what_it_cannot_do_in_one_line(tmp_path, args, says):
    from click.testing import CliRunner
    from qm2qm.cli.pipeline import record
    result = CliRunner().invoke(record, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code in (1, 2) and says.format(tmp=tmp_path) in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
