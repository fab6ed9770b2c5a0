"""Bad input to the trace loader, stats, diff and report: a one-line error naming what is wrong (exit 2), never a
traceback, a Spark schema-inference failure or a false pass."""
from __future__ import annotations

import asyncio
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from qm2qm.cli import pipeline as cli
from qm2qm.pipeline import schema
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.rpc_client import RpcClient
from qm2qm.pipeline.spark_jobs import call_table_dir
from qm2qm.pipeline.trace import CallWriter, TraceError, read_calls


def _call(**changes) -> dict:
    row = schema.empty_call()
    row.update(source="trace", session_id="conn-1", session_seq=0, call_index=0, opnum=8, request_stub=b"")
    row.update(changes)
    return row


MISSING = object()


def _jsonl_with_bad_second_call(path, **changes) -> int:
    """A trace whose second record has ``changes`` (MISSING deletes the key); returns that line's byte offset."""
    writer = CallWriter(path)
    writer.write([_call()])
    writer.close()
    good = path.read_bytes()
    record = json.loads(good.splitlines()[1])
    record["call_index"] = 1
    for key, value in changes.items():
        if value is MISSING:
            del record[key]
        else:
            record[key] = value
    path.write_bytes(good + json.dumps(record).encode() + b"\n")
    return len(good)


@pytest.mark.parametrize("changes, says", [
    ({"opnum": -1}, "opnum -1 is out of range (0..65535)"),
    ({"opnum": 70000}, "opnum 70000 is out of range (0..65535)"),
    ({"opnum": MISSING}, "opnum is missing or null; every call needs one"),
    ({"session_seq": None}, "session_seq is missing or null; every call needs one"),
    ({"call_index": -3}, "call_index -3 is out of range (0..2147483647)"),
    ({"opnum": "nine"}, 'opnum has the wrong type: "nine" is not an integer that fits int32'),
    ({"call_id": 2**70}, "call_id has the wrong type: 1180591620717411303424 is not an integer that fits int64"),
    ({"op_name": 5}, "op_name has the wrong type: 5 is not a string"),
])
def test_jsonl_record_fields_are_checked_by_line_and_field(tmp_path, changes, says):
    path = tmp_path / "bad.jsonl"
    offset = _jsonl_with_bad_second_call(path, **changes)
    with pytest.raises(TraceError) as caught:
        read_calls(path)
    assert str(caught.value) == f"{path}: line 3 (offset {offset}): {says}"
    (problem,) = ingest_file(path).problems
    assert problem["kind"] == "bad_trace" and problem["offset"] == offset


@pytest.mark.parametrize("column, value, says", [
    ("opnum", -1, "opnum -1 is out of range (0..65535)"),
    ("call_index", None, "call_index is missing or null; every call needs one"),
])
def test_parquet_trace_records_are_checked_by_record_number(tmp_path, column, value, says):
    path = tmp_path / "bad.parquet"
    pq.write_table(schema.table([_call(), _call(**{"call_index": 1, column: value})], schema.CALL_SCHEMA), path)
    with pytest.raises(TraceError) as caught:
        read_calls(path)
    assert str(caught.value) == f"{path}: record 2: {says}"


@pytest.mark.parametrize("changes, says", [
    ({"opnum": -1}, "opnum -1 is out of range (0..65535)"),
    ({"opnum": MISSING}, "opnum is missing or null; every call needs one"),
    ({"session_seq": None}, "session_seq is missing or null; every call needs one"),
])
def test_cli_replay_of_a_malformed_trace_is_one_line_exit_2(tmp_path, changes, says):
    path = tmp_path / "bad.jsonl"
    offset = _jsonl_with_bad_second_call(path, **changes)
    res = CliRunner().invoke(cli.replay, [str(path), "--target", "127.0.0.1:1", "--no-progress",
                                          "--out", str(tmp_path / "out.parquet")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output == f"qm2qm: error: {path}: line 3 (offset {offset}): {says}\n"


def test_a_request_that_cannot_be_built_leaves_no_future_behind():
    """Else closing the connection fails that future and asyncio logs "Future exception was never retrieved"."""
    class Writer:
        def write(self, data):
            raise AssertionError("nothing may be sent")

    async def run():
        client = RpcClient("127.0.0.1", 1)
        client.writer = Writer()
        client._reader_task = asyncio.get_running_loop().create_future()      # a connection still reading
        with pytest.raises(Exception):
            await client.start(70000, b"")
        return client.waiting

    assert asyncio.run(run()) == {}


@pytest.fixture
def no_spark(monkeypatch):
    """The refusals must come before Spark starts."""
    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")
    monkeypatch.setattr(cli, "_spark", refuse)


def _dirs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    not_calls = tmp_path / "out" / "sessions"
    not_calls.mkdir(parents=True)
    pq.write_table(schema.table([], schema.SESSION_SCHEMA), not_calls / "part-00000.parquet")
    return empty, not_calls


def test_stats_refuses_a_directory_that_is_not_ingest_output(tmp_path, no_spark):
    empty, not_calls = _dirs(tmp_path)
    runner = CliRunner()
    res = runner.invoke(cli.stats, [str(empty), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and res.output == (
        f"qm2qm: error: {empty}: not ingest output: no call table (no Parquet files in {empty}); "
        "give a `qm2qm ingest` output directory or a trace or capture file\n")
    res = runner.invoke(cli.stats, [str(not_calls), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and f"{not_calls}: not ingest output: " in res.output
    assert "part-00000.parquet is not a call table (lacks " in res.output and res.output.count("\n") == 1


@pytest.mark.parametrize("side", [0, 1])
def test_diff_refuses_either_side_that_is_not_ingest_output(tmp_path, no_spark, side):
    empty, _ = _dirs(tmp_path)
    trace = tmp_path / "t.jsonl"
    writer = CallWriter(trace)
    writer.write([_call()])
    writer.close()
    args = [str(trace), str(trace)]
    args[side] = str(empty)
    res = CliRunner().invoke(cli.diff, [*args, "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and res.output.startswith(f"qm2qm: error: {empty}: not ingest output: no call table")


def test_ingest_output_is_found_as_out_or_out_calls(tmp_path):
    calls = tmp_path / "out" / "calls"
    calls.mkdir(parents=True)
    pq.write_table(schema.table([], schema.CALL_SCHEMA), calls / "part-00000.parquet")
    assert call_table_dir(tmp_path / "out") == calls and call_table_dir(calls) == calls
    assert call_table_dir(tmp_path / "trace.jsonl") is None


def _write_stats(directory, rows=()):
    for name in ("by_opnum", "over_time", "error_codes"):
        (directory / name).mkdir(parents=True)
        pq.write_table(pa.table({"opnum": pa.array(list(rows), pa.int32())}), directory / name / "part-0.parquet")


def test_report_refuses_a_directory_that_is_not_stats_or_diff_output(tmp_path):
    empty, _ = _dirs(tmp_path)
    runner = CliRunner()
    res = runner.invoke(cli.report, ["--diff", str(empty), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and res.output == (
        f"qm2qm: error: {empty}: not a `qm2qm diff` output (lacks mismatches, diff_summary.json)\n")
    res = runner.invoke(cli.report, ["--stats", str(empty), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and res.output == (
        f"qm2qm: error: {empty}: not a `qm2qm stats` output (lacks by_opnum, over_time, error_codes)\n")
    assert not (tmp_path / "r.html").exists()

    diff_dir = tmp_path / "diff"
    (diff_dir / "mismatches").mkdir(parents=True)
    (diff_dir / "diff_summary.json").write_text("{cut")
    res = runner.invoke(cli.report, ["--diff", str(diff_dir), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and res.output.startswith(
        f"qm2qm: error: {diff_dir / 'diff_summary.json'}: unreadable diff summary: ")


def test_report_of_a_stats_output_with_no_calls_still_says_no_calls(tmp_path):
    _write_stats(tmp_path / "stats")
    res = CliRunner().invoke(cli.report, ["--stats", str(tmp_path / "stats"), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert "<p>No calls.</p>" in (tmp_path / "r.html").read_text()


def test_ingest_of_a_directory_skips_its_own_output_directory_inside_it(tmp_path):
    """`qm2qm ingest caps --out caps/tables` run twice read its first run's Parquet as captures (problems)."""
    from qm2qm.pipeline.spark_jobs import expand_inputs
    (tmp_path / "a.pcap").write_bytes(b"x")
    (tmp_path / "tables" / "calls").mkdir(parents=True)
    (tmp_path / "tables" / "calls" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "tables" / "summary.json").write_text("{}")
    assert expand_inputs([str(tmp_path)], skip=tmp_path / "tables") == [str(tmp_path / "a.pcap")]
    assert len(expand_inputs([str(tmp_path)])) == 3


def test_a_report_draws_names_as_text_not_mathtext_and_escapes_the_summary(tmp_path):
    """Found by a hostile probe: an op_name "$\\undefinedcommand{x}$" from a crafted trace raised matplotlib's
    ValueError while drawing (no report written); "$...$" drew other text than the table showed; a crafted
    diff_summary.json's aligned_calls went into the page unescaped."""
    from qm2qm.pipeline.report import build_report
    diff_dir = tmp_path / "diff"
    (diff_dir / "mismatches").mkdir(parents=True)
    row = {"file_rank": 0, "session_seq": 0, "call_index": 0, "opnum": None, "op_name": "$\\undefinedcommand{x}$",
           "kind": "field", "field": "x", "left": "a", "right": "b"}
    pq.write_table(pa.Table.from_pylist([row, {**row, "op_name": "_hidden"}]),
                   diff_dir / "mismatches" / "part-0.parquet")
    (diff_dir / "diff_summary.json").write_text(json.dumps({"aligned_calls": "<b>7</b>", "left": "L", "right": "R"}))
    page = build_report(tmp_path / "r.html", diff_dir=diff_dir).read_text()
    assert "$\\undefinedcommand{x}$" in page and "&lt;b&gt;7&lt;/b&gt; aligned calls" in page


def test_diff_and_stats_print_a_traces_names_escaped(monkeypatch, tmp_path):
    """Found by a hostile probe: a crafted trace's op_name ("\\n\\x1b[31m…") reached the terminal as is from
    `qm2qm diff` and `qm2qm stats`, forging or breaking output lines."""
    import contextlib

    from qm2qm.pipeline import spark_jobs
    hostile = "Peek\n\x1b[31mFORGED"
    monkeypatch.setattr(cli, "_spark", lambda master: contextlib.nullcontext(None))
    monkeypatch.setattr(cli, "_check_call_table", lambda path: None)
    first = {"session_seq": 0, "call_index": 0, "op_name": hostile, "kind": "field", "field": "x", "left": "a",
             "right": "b"}
    monkeypatch.setattr(spark_jobs, "diff", lambda spark, left, right, out: {
        "mismatches": 1, "aligned_calls": 1, "first": [first]})
    monkeypatch.setattr(spark_jobs, "stats", lambda spark, calls, out, bucket: {"by_opnum": [
        {"opnum": 9, "op_name": hostile, "calls": 1, "faults": 0, "errors": 0, "latency_p50_ms": 0.1,
         "latency_p99_ms": 0.2}]})
    runner = CliRunner()
    for command, args in ((cli.diff, ["L", "R", "--out", str(tmp_path / "d")]),
                          (cli.stats, ["C", "--out", str(tmp_path / "s")])):
        output = runner.invoke(command, args).output
        assert "\x1b" not in output and "Peek\\n\\x1b[31mFORGED" in output, output
