"""The recording proxy (qm2qm/pipeline/recorder.py, docs/pipeline.md "Workflow"): any target `qm2qm record`
accepts is relayed and recorded."""
from __future__ import annotations

import socket
import threading

from qm2qm.client import Qm2qmClient
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.pcapfile import read_frames, tcp_segment
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy

from tests.pipeline.conftest import HANG_GUARD_S, LiveServer


def test_a_host_name_target_is_relayed_and_recorded_at_its_address(tmp_path):
    server = LiveServer()
    try:
        sink = PcapSink(tmp_path / "named.pcap")
        proxy = RecordingProxy(("localhost", server.port), sink)
        try:
            with Qm2qmClient("127.0.0.1", proxy.port, connect_timeout=10, call_timeout=10) as c:   # hang guards
                c.get_version()
        finally:
            proxy.close()
            sink.close()
    finally:
        server.close()
    (call,) = ingest_file(tmp_path / "named.pcap").calls
    assert call["op_name"] == "RemoteQmGetVersion" and call["status_kind"] == "ok"
    assert call["server"] == f"127.0.0.1:{server.port}"


def test_an_ipv6_target_is_recorded_as_ipv6_frames(tmp_path):
    listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    port = listener.getsockname()[1]

    def echo() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    sink = PcapSink(tmp_path / "v6.pcap")
    proxy = RecordingProxy(("::1", port), sink)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as c:     # a hang guard
            c.sendall(b"ping")
            assert c.recv(4) == b"ping"
    finally:
        proxy.close()
        sink.close()
        thread.join(HANG_GUARD_S)
        listener.close()
    with open(tmp_path / "v6.pcap", "rb") as fh:
        segments = [tcp_segment(f) for f in read_frames(fh)]
    payloads = [(s.src, s.dport if s.dst == "::1" else s.sport, s.payload) for s in segments if s.payload]
    assert payloads == [("::ffff:127.0.0.1", port, b"ping"), ("::1", port, b"ping")]


def test_frames_are_on_disk_as_written_and_close_ends_idle_connections(tmp_path):
    server = LiveServer()
    try:
        sink = PcapSink(tmp_path / "live.pcap")
        proxy = RecordingProxy(("127.0.0.1", server.port), sink)
        with Qm2qmClient("127.0.0.1", proxy.port, connect_timeout=10, call_timeout=10) as c:   # hang guards
            c.get_version()
        # what a killed recorder leaves: every frame so far, readable
        with open(tmp_path / "live.pcap", "rb") as fh:
            assert [s.payload[2] for s in map(tcp_segment, read_frames(fh)) if s.payload] == [11, 12, 0, 2]
        frames = sink.frames
        idle = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)       # a hang guard
        for _ in range(HANG_GUARD_S * 100):                                           # until its handshake is recorded
            if sink.frames >= frames + 3:
                break
            threading.Event().wait(0.01)
        proxy.close()
        assert idle.recv(1) == b""
        assert not proxy.sockets and not any(t.is_alive() for t in proxy.threads)
        idle.close()
        sink.close()
    finally:
        server.close()
