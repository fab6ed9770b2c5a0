"""Ingest one input file of any kind (pcap, pcapng, Parquet trace, JSON-lines trace) into call-table rows."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from qm2qm.pipeline import schema
from qm2qm.pipeline.capture import IngestResult, ingest_capture, propagate_queue_names
from qm2qm.pipeline.decode import decode_call
from qm2qm.pipeline.pcapfile import sniff
from qm2qm.pipeline.trace import TraceError, read_calls


def file_kind(path: str | Path) -> str | None:
    """'pcap', 'pcapng', 'parquet', 'jsonl' from the file's first bytes, or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    kind = sniff(head)
    if kind:
        return kind
    if head == b"PAR1":
        return "parquet"
    if head[:1] == b"{":
        return "jsonl"
    return None


def ingest_file(path: str | Path) -> IngestResult:
    """Call, session and problem rows of one file; every failure is a problem row naming file and offset."""
    try:
        return _ingest_file(Path(path))
    except Exception as exc:   # noqa: BLE001 - a bug met on one file must not stop the batch: report it
        result = IngestResult(str(path))
        result.report("internal_error", None, f"{path}: ingest failed ({type(exc).__name__}: {exc}); "
                                              f"please report this file")
        return result


def _ingest_file(path: Path) -> IngestResult:
    result = IngestResult(str(path))
    if not path.exists():
        result.report("unreadable", None, f"{path}: no such file")
        return result
    kind = file_kind(path)
    result.count("file_bytes", path.stat().st_size)
    if kind in ("pcap", "pcapng"):
        return ingest_capture(path, result)
    if kind in ("parquet", "jsonl"):
        try:
            rows = read_calls(path).to_pylist()
        except TraceError as exc:
            result.report("bad_trace", _offset_of(str(exc)), str(exc))
            return result
        undecoded = False
        for row in rows:
            row["source_file"] = str(path)
            if row["request_fields"] is None and row["decode_error"] is None and row["request_stub"] is not None:
                decode_call(row)                 # a spool left by a server that did not close its Tracer
                undecoded = True
        if undecoded:
            propagate_queue_names(rows)
        result.calls = rows
        result.sessions = schema.sessions_from_calls(rows)
        result.count("calls", len(rows))
        return result
    result.report("unknown_file", 0, f"{path}: offset 0: neither pcap, pcapng nor a qm2qm trace")
    return result


def _offset_of(message: str) -> int | None:
    marker = "offset "
    pos = message.find(marker)
    if pos < 0:
        return None
    digits = ""
    for ch in message[pos + len(marker):]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def result_tables(result: IngestResult) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(calls, sessions, problems) Arrow tables of one ingest result."""
    return (schema.table(result.calls, schema.CALL_SCHEMA), schema.table(result.sessions, schema.SESSION_SCHEMA),
            schema.table(result.problems, schema.PROBLEM_SCHEMA))
