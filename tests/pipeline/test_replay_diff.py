"""Replay a recorded exchange against a fresh server and diff (Spark, local[2]): a faithful server gives zero
mismatches, a deliberately altered answer gives exactly one. Also the ingest and stats jobs and the report."""
from __future__ import annotations

import asyncio
import dataclasses
import json

import pyarrow.parquet as pq
from click.testing import CliRunner

from qm2qm.cli.pipeline import report as report_command, replay as replay_command
from qm2qm.mqqp.codec import decode_response, encode_response
from qm2qm.pipeline import spark_jobs
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.normalize import compare, normalize_session
from qm2qm.pipeline.replay import load_recording, replay
from qm2qm.pipeline.report import build_report
from qm2qm.pipeline.trace import trace_interface
from qm2qm.rpc.interface import Operation

from tests.pipeline.conftest import QUEUE, LiveServer, scenario, setup_queue


def fresh_server(wrap=None) -> LiveServer:
    """A new server in the recorded starting state, with another queue opened first so that live handle
    numbers differ from the recorded ones."""
    server = LiveServer(wrap)
    server.admin.create_queue("private$\\unrelated")
    server.admin.open_queue("private$\\unrelated")
    server.admin.open_queue("private$\\unrelated")
    setup_queue(server.admin)
    return server


def run_replay(path, server: LiveServer, out, queue_map=None):
    rows, problems = load_recording(path)
    assert problems == []
    result = asyncio.run(replay(rows, "127.0.0.1", server.port, out, admin=server.admin, queue_map=queue_map))
    assert result.failed == 0 and result.problems == [], result.problems
    return result


def test_replaying_a_capture_on_a_fresh_server_gives_no_mismatch(spark, recorded, tmp_path):
    path, exp = recorded
    server = fresh_server()
    try:
        result = run_replay(path, server, tmp_path / "replay.parquet",
                            queue_map={exp.h_queue: QUEUE, exp.h_queue2: QUEUE})
    finally:
        server.close()
    assert result.sent == 13 and result.opened_queues == {exp.h_queue: QUEUE, exp.h_queue2: QUEUE}
    live = ingest_file(tmp_path / "replay.parquet").calls
    assert {c["queue_handle"] for c in live if c["queue_handle"]}.isdisjoint({exp.h_queue, exp.h_queue2})
    summary = spark_jobs.diff(spark, path, tmp_path / "replay.parquet", tmp_path / "diff")
    assert (summary["aligned_calls"], summary["mismatches"]) == (13, 0), summary["first"]
    page = build_report(tmp_path / "report.html", diff_dir=tmp_path / "diff").read_text()
    assert "0 mismatch(es) over 13 aligned calls" in page


def _altered_version(interface, qm):
    """GetVersion answers build 9999 instead of the real build: one field differs."""
    op = interface.operations[8]

    def handler(ctx, stub):
        response = decode_response(8, op.handler(ctx, stub), ctx.ndr64)
        return encode_response(8, dataclasses.replace(response, pBuildNumber=9999), ctx.ndr64)

    ops = dict(interface.operations)
    ops[8] = Operation(8, op.name, handler)
    return dataclasses.replace(interface, operations=ops)


def test_an_altered_server_answer_is_exactly_one_mismatch(spark, recorded, tmp_path):
    path, exp = recorded
    server = fresh_server(_altered_version)
    try:
        run_replay(path, server, tmp_path / "replay.jsonl", queue_map={exp.h_queue: QUEUE, exp.h_queue2: QUEUE})
    finally:
        server.close()
    summary = spark_jobs.diff(spark, path, tmp_path / "replay.jsonl", tmp_path / "diff")
    assert summary["mismatches"] == 1, summary["first"]
    (m,) = summary["first"]
    assert (m["session_seq"], m["call_index"], m["op_name"], m["kind"], m["field"]) == \
           (0, 0, "RemoteQmGetVersion", "field", "response.pBuildNumber")
    assert (m["left"], m["right"]) == (str(exp.version[2]), "9999")
    rows = pq.read_table(tmp_path / "diff" / "mismatches").to_pylist()
    assert len(rows) == 1
    page = build_report(tmp_path / "report.html", diff_dir=tmp_path / "diff").read_text()
    assert "1 mismatch(es)" in page and "response.pBuildNumber" in page and "data:image/png;base64," in page


def test_replaying_a_trace_infers_the_queue_map(tmp_path):
    trace_path = tmp_path / "orig.parquet"
    tracers = []

    def wrap(interface, qm):
        traced, tracer = trace_interface(interface, trace_path, qm)
        tracers.append(tracer)
        return traced

    server = LiveServer(wrap)
    try:
        setup_queue(server.admin)
        scenario(server.port, server.admin)
    finally:
        server.close()
        tracers[0].close()
    server = fresh_server()
    try:
        result = run_replay(trace_path, server, tmp_path / "replay.parquet")      # no queue map given
    finally:
        server.close()
    assert len(result.opened_queues) == 2
    original, live = ingest_file(trace_path).calls, ingest_file(tmp_path / "replay.parquet").calls
    for seq in (0, 1):
        left = normalize_session([c for c in original if c["session_seq"] == seq])
        right = normalize_session([c for c in live if c["session_seq"] == seq])
        assert len(left) == len(right) and [m for a, b in zip(left, right) for m in compare(a, b)] == []


def test_ingest_many_files_and_stats(spark, recorded, tmp_path):
    path, _ = recorded
    bad = tmp_path / "broken.pcap"
    bad.write_bytes(path.read_bytes()[:100])
    # split_min_bytes=1: the two-session capture is split by session into two tasks (split.py), numbered file-wide
    summary = spark_jobs.ingest(spark, [str(path), str(bad), str(tmp_path / "missing.pcapng")], tmp_path / "out",
                                split_min_bytes=1)
    assert summary["files"] == 3 and summary["totals"]["calls"] == 13 and summary["split_files"] == 1
    assert (summary["tasks"], summary["spark_tasks"]) == (4, 2)
    assert sorted(p["kind"] for p in summary["problems"]) == ["truncated", "unreadable"]
    assert any("broken.pcap: offset 94: truncated packet record header" in p["message"]
               for p in summary["problems"])
    calls = pq.read_table(tmp_path / "out" / "calls").to_pylist()
    numbering = ("session_id", "session_seq", "call_index", "connection_id")
    assert sorted(tuple(c[k] for k in numbering) for c in calls) == \
           sorted(tuple(c[k] for k in numbering) for c in ingest_file(path).calls)
    sessions = pq.read_table(tmp_path / "out" / "sessions").to_pylist()
    assert sorted((s["session_seq"], s["connection_id"], s["bytes_to_server"]) for s in sessions) == \
           sorted((s["session_seq"], s["connection_id"], s["bytes_to_server"]) for s in ingest_file(path).sessions)
    assert summary["per_file"][str(path)]["frames"] == ingest_file(path).counters["frames"]
    result = spark_jobs.stats(spark, tmp_path / "out", tmp_path / "stats", bucket_seconds=3600)
    counts = {r["op_name"]: r["calls"] for r in result["by_opnum"]}
    assert counts == {"RemoteQMStartReceive": 1, "RemoteQMEndReceive": 2, "RemoteQMOpenQueue": 2,
                      "RemoteQMCloseQueue": 1, "RemoteQMCloseCursor": 1, "RemoteQMCancelReceive": 1,
                      "RemoteQMPurgeQueue": 1, "RemoteQMGetQMQMServerPort": 1, "RemoteQmGetVersion": 1,
                      "RemoteQMStartReceive2": 2}
    by_op = {r["op_name"]: r for r in result["by_opnum"]}
    assert by_op["RemoteQMCancelReceive"]["errors"] == 1 and by_op["RemoteQMOpenQueue"]["errors"] == 0
    assert all(r["latency_p50_ms"] <= r["latency_p99_ms"] <= r["latency_max_ms"] for r in result["by_opnum"])
    assert sum(r["calls"] for r in result["over_time"]) == 13
    codes = {(r["op_name"], r["code"]): r["calls"] for r in result["error_codes"]}
    assert codes[("RemoteQMCancelReceive", "0xc00e0007")] == 1
    page = build_report(tmp_path / "stats.html", stats_dir=tmp_path / "stats").read_text()
    assert page.count("data:image/png;base64,") == 3 and "RemoteQMCancelReceive" in page


def test_cli_replay_and_report(recorded, tmp_path):
    path, exp = recorded
    server = fresh_server()
    try:
        runner = CliRunner()
        out = tmp_path / "cli.jsonl"
        res = runner.invoke(replay_command, [str(path), "--target", f"127.0.0.1:{server.port}", "--admin",
                                             server.app.admin_url, "--queue", f"{exp.h_queue}={QUEUE}",
                                             "--queue", f"{exp.h_queue2}={QUEUE}", "--out", str(out),
                                             "--no-progress"])
        assert res.exit_code == 0, res.output
        assert f"replayed 13 of 13 calls (0 failed, 0 not qm2qm) -> {out}" in res.output
        bad = runner.invoke(replay_command, [str(path), "--target", "nowhere"])
        assert bad.exit_code == 2 and "--target must be HOST:PORT, got 'nowhere'" in bad.output
        missing = runner.invoke(replay_command, [str(tmp_path / "none.pcap"), "--target", "127.0.0.1:1"])
        assert missing.exit_code == 2 and "none.pcap: no such file" in missing.output
    finally:
        server.close()
    res = CliRunner().invoke(report_command, ["--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "give --stats DIR, --diff DIR or both" in res.output


def test_cli_ingest_stats_diff_on_the_running_session(spark, recorded, tmp_path):
    """The Spark commands reuse an active session and leave it running."""
    from qm2qm.cli.pipeline import diff as diff_command, ingest as ingest_command, stats as stats_command
    path, _ = recorded
    runner = CliRunner()
    res = runner.invoke(ingest_command, [str(path), "--out", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output
    assert "1 file(s): 13 calls, 2 capture sessions, 0 problem(s)" in res.output
    res = runner.invoke(stats_command, [str(tmp_path / "t"), "--out", str(tmp_path / "s")])
    assert res.exit_code == 0 and "RemoteQMStartReceive2" in res.output
    res = runner.invoke(diff_command, [str(path), str(tmp_path / "t"), "--out", str(tmp_path / "d"),
                                       "--report", str(tmp_path / "d.html")])
    assert res.exit_code == 0, res.output
    assert "0 mismatch(es) over 13 aligned calls" in res.output and (tmp_path / "d.html").exists()
    bad = runner.invoke(diff_command, [str(tmp_path / "nothing.pcap"), str(path), "--out", str(tmp_path / "e")])
    assert bad.exit_code == 2 and "nothing.pcap: no such file" in bad.output
    assert spark.sparkContext._jsc is not None                      # still running


def _port_rows(*answers: int) -> list[dict]:
    return [{"session_seq": 0, "call_index": i, "opnum": 7, "op_name": "RemoteQMGetQMQMServerPort",
             "status_kind": "ok", "return_value": port, "request_fields": json.dumps({"dwPortType": i % 2}),
             "response_fields": json.dumps({"ReturnValue": port})} for i, port in enumerate(answers)]


def test_the_port_a_server_answers_is_compared_as_a_per_session_ordinal():
    """MS-MQQP 3.1.4.8: servers on other ports (2103 busy → 2114) answer alike; the same port for both port
    types where the recording had two, or the failure 0, is still a mismatch."""
    def diff(left, right):
        return [m for a, b in zip(normalize_session(_port_rows(*left)), normalize_session(_port_rows(*right)))
                for m in compare(a, b)]
    assert diff((2103, 2105), (2114, 2105)) == []
    assert [m["right"] for m in diff((2103, 2105), (2114, 2114))] == ["ok return_value=port#1"]
    assert [m["right"] for m in diff((2103, 2105), (2103, 0))] == ["ok return_value=0x00000000"]
