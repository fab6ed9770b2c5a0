"""Replay order from recorded timestamps that do not tell it plainly (docs/pipeline.md "Replay"): a response
stamped before its request, and frames sharing one timestamp."""
from __future__ import annotations

import asyncio

from qm2qm.client import Qm2qmClient
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.replay import replay

from tests.pipeline.conftest import HANG_GUARD_S, QUEUE, LiveServer


def _record(tmp_path, client_side) -> tuple[list[dict], int]:
    """The ingested calls of ``client_side(port, h)`` run through a recording proxy, and the queue handle used."""
    server = LiveServer()
    try:
        server.admin.create_queue(QUEUE)
        h = server.admin.open_queue(QUEUE)["hRemoteQueue"]
        sink = PcapSink(tmp_path / "rec.pcap")
        proxy = RecordingProxy(("127.0.0.1", server.port), sink)
        try:
            client_side(proxy.port, h)
        finally:
            proxy.close()
            sink.close()
    finally:
        server.close()
    return ingest_file(tmp_path / "rec.pcap").calls, h


def _replay(rows, tmp_path, h):
    server = LiveServer()
    try:
        server.admin.create_queue(QUEUE)
        coro = replay(rows, "127.0.0.1", server.port, tmp_path / "replay.parquet", admin=server.admin,
                      queue_map={h: QUEUE}, call_timeout=HANG_GUARD_S)
        return asyncio.run(asyncio.wait_for(coro, HANG_GUARD_S / 3))     # a hang guard
    finally:
        server.close()


def test_a_response_stamped_before_its_request_does_not_hold_the_replay(tmp_path):
    def versions(port, h):
        with Qm2qmClient("127.0.0.1", port) as c:
            c.get_version()
            c.get_version()
    rows, h = _record(tmp_path, versions)
    second = rows[1]
    second["response_time_us"] = second["request_time_us"] - 1000       # a clock step between the two frames
    result = _replay(rows, tmp_path, h)
    assert (result.sent, result.failed) == (2, 0)
    assert any("response recorded 1000 µs before its request" in p for p in result.problems)


def test_calls_sharing_one_timestamp_keep_their_sessions_order(tmp_path):
    def open_then_close(port, h):
        with Qm2qmClient("127.0.0.1", port) as c:
            status, context = c.open_queue(h)
            assert status == 0
            for _ in range(3):
                c.get_version()
            c.close_queue(context)
    rows, h = _record(tmp_path, open_then_close)
    instant = rows[0]["request_time_us"]
    for row in rows:
        row["request_time_us"] = row["response_time_us"] = instant
    result = _replay(rows, tmp_path, h)
    assert (result.sent, result.failed, result.problems) == (5, 0, [])
    live = ingest_file(tmp_path / "replay.parquet").calls
    assert [(r["op_name"], r["status_kind"], r["hresult"] or 0) for r in live] == [
        ("RemoteQMOpenQueue", "ok", 0)] + [("RemoteQmGetVersion", "ok", 0)] * 3 + [("RemoteQMCloseQueue", "ok", 0)]
