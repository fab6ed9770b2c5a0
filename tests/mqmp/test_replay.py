"""The Windows remote-read sequence recorded as a capture (two recording proxies: qmcomm and qm2qm) replays on a
fresh server with live handles (the qmcomm ones learned from R_QMOpenRemoteQueue / R_QMCreateRemoteCursor), and
the normalized diff of the two call tables is empty."""
from __future__ import annotations

import asyncio
from collections import defaultdict

from qm2qm.client import RemoteReader
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.normalize import compare, normalize_session
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.replay import load_recording, replay
from tests.pipeline.conftest import QUEUE, LiveServer, setup_queue


def _server() -> LiveServer:
    server = LiveServer()
    server.app.qm.allow_anonymous_read = True
    server.admin.create_queue("private$\\unrelated")
    server.admin.open_queue("private$\\unrelated")         # live handles differ from the recorded ones
    setup_queue(server.admin)
    return server


def _record(server: LiveServer, path) -> list[str]:
    sink = PcapSink(path)
    qmcomm = RecordingProxy(("127.0.0.1", server.app.qmcomm.port), sink)
    qm2qm = RecordingProxy(("127.0.0.1", server.port), sink)
    try:
        with RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\" + QUEUE, qmcomm_port=qmcomm.port,
                          qm2qm_port=qm2qm.port, cursor=True) as reader:
            reader.peek()
            reader.peek_next()
            reader.receive()
            steps = reader.steps
    finally:
        qmcomm.close()
        qm2qm.close()
        sink.close()
    return steps


def _by_session(rows):
    sessions = defaultdict(list)
    for row in rows:
        sessions[row["session_seq"]].append(row)
    return {k: normalize_session(v) for k, v in sessions.items()}


def test_recorded_sequence_replays_with_an_empty_diff(tmp_path):
    recorded_server = _server()
    try:
        steps = _record(recorded_server, tmp_path / "sequence.pcap")
    finally:
        recorded_server.close()
    assert "R_QMOpenRemoteQueue" in steps and "R_QMCreateRemoteCursor" in steps
    rows, problems = load_recording(tmp_path / "sequence.pcap")
    assert problems == []
    names = [r["op_name"] for r in rows]
    assert {"R_QMGetRTQMServerPort", "R_QMOpenRemoteQueue", "R_QMCreateRemoteCursor",
            "R_QMCloseRemoteQueueContext", "RemoteQMOpenQueue", "RemoteQMCloseQueue"} <= set(names)
    assert all(not r["decode_error"] for r in rows), [r["decode_error"] for r in rows if r["decode_error"]]
    live_server = _server()
    try:
        result = asyncio.run(replay(rows, "127.0.0.1", live_server.port, tmp_path / "replay.parquet"))
    finally:
        live_server.close()
    assert result.failed == 0 and result.problems == [], result.problems
    assert result.sent == len(rows) and result.opened_queues == {}          # no admin API needed
    live = ingest_file(tmp_path / "replay.parquet").calls
    recorded_handles = {r["queue_handle"] for r in rows if r["queue_handle"]}
    assert recorded_handles and recorded_handles.isdisjoint({r["queue_handle"] for r in live if r["queue_handle"]})
    left, right = _by_session(rows), _by_session(live)
    assert left.keys() == right.keys()
    mismatches = [m for key in left for a, b in zip(left[key], right[key]) for m in compare(a, b)]
    assert mismatches == []
    assert all(len(left[k]) == len(right[k]) for k in left)
