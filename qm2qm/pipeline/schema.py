"""The call table, sessions table and problems table shared by traces, captures and replays (docs/pipeline.md)."""
from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from shared_adm.collector import collector_paused

# Bumped when a column changes meaning or disappears; readers refuse a newer major version by name.
FORMAT_NAME = "qm2qm-calls"
FORMAT_VERSION = 1
# MS-ERREF 2.1: an HRESULT with bit 31 (S) set is a failure; MQ_INFORMATION_* (0x400E....) are successes
HRESULT_SEVERITY_ERROR = 0x80000000

# status_kind values
OK = "ok"                      # a response PDU came back
FAULT = "fault"                # a fault PDU (fault_status is set)
CANCELLED = "cancelled"        # the call was cancelled and no response was recorded
NO_RESPONSE = "no_response"    # the capture/trace ended (or the connection closed) before an answer

CALL_FIELDS: list[pa.Field] = [
    pa.field("source", pa.string(), nullable=False),          # trace | capture | replay
    pa.field("source_file", pa.string()),
    pa.field("session_id", pa.string(), nullable=False),      # unique within source_file
    pa.field("session_seq", pa.int32()),                      # rank of the session's first call in the file
    pa.field("call_index", pa.int32()),                       # rank of the call within its session
    pa.field("connection_id", pa.int64()),
    pa.field("association_group_id", pa.int64()),
    pa.field("client", pa.string()),                          # "ip:port" (captures) or None
    pa.field("server", pa.string()),
    pa.field("call_id", pa.int64()),
    pa.field("context_id", pa.int32()),
    pa.field("request_time_us", pa.int64()),                  # epoch microseconds, UTC
    pa.field("response_time_us", pa.int64()),
    pa.field("latency_us", pa.int64()),
    pa.field("interface_uuid", pa.string()),
    pa.field("interface_version", pa.string()),               # "major.minor"
    pa.field("interface_name", pa.string()),                  # None for an interface we do not know
    pa.field("transfer_syntax", pa.string()),                 # NDR | NDR64 | uuid,version of another syntax
    pa.field("opnum", pa.int32()),
    pa.field("op_name", pa.string()),
    pa.field("request_stub", pa.binary()),
    pa.field("response_stub", pa.binary()),
    pa.field("request_bytes", pa.int64()),
    pa.field("response_bytes", pa.int64()),
    pa.field("status_kind", pa.string()),
    pa.field("hresult", pa.int64()),                          # ErrorCode of an HRESULT method (unsigned)
    pa.field("return_value", pa.int64()),                     # ReturnValue of a DWORD method (opnum 7)
    pa.field("fault_status", pa.int64()),
    pa.field("request_fields", pa.string()),                  # JSON of the decoded [in] parameters
    pa.field("response_fields", pa.string()),                 # JSON of the decoded [out] parameters
    pa.field("message_fields", pa.string()),                  # JSON of the UserMessage packet in lpBuffer
    pa.field("decode_error", pa.string()),
    pa.field("context_handle_in", pa.binary()),               # 20 bytes sent by the client
    pa.field("context_handle_out", pa.binary()),              # 20 bytes returned by the server
    pa.field("queue_handle", pa.int64()),                     # hQueue / hRemoteQueue of the call
    pa.field("cursor", pa.int64()),
    pa.field("request_id", pa.int64()),
    pa.field("lookup_id", pa.int64()),
    pa.field("queue_name", pa.string()),                      # queue path name when known
]
CALL_SCHEMA = pa.schema(CALL_FIELDS, metadata={b"format": FORMAT_NAME.encode(),
                                                b"version": str(FORMAT_VERSION).encode()})
CALL_COLUMNS = [f.name for f in CALL_FIELDS]

SESSION_FIELDS: list[pa.Field] = [
    pa.field("source", pa.string(), nullable=False),
    pa.field("source_file", pa.string()),
    pa.field("session_id", pa.string(), nullable=False),
    pa.field("session_seq", pa.int32()),
    pa.field("connection_id", pa.int64()),
    pa.field("association_group_id", pa.int64()),
    pa.field("client", pa.string()),
    pa.field("server", pa.string()),
    pa.field("start_time_us", pa.int64()),
    pa.field("end_time_us", pa.int64()),
    pa.field("calls", pa.int64()),
    pa.field("faults", pa.int64()),
    pa.field("errors", pa.int64()),                           # calls whose HRESULT has the severity bit set
    pa.field("unknown_interface_calls", pa.int64()),
    pa.field("bytes_to_server", pa.int64()),
    pa.field("bytes_to_client", pa.int64()),
    pa.field("transfer_syntax", pa.string()),
    pa.field("damaged", pa.bool_()),
    pa.field("note", pa.string()),
]
SESSION_SCHEMA = pa.schema(SESSION_FIELDS)
SESSION_COLUMNS = [f.name for f in SESSION_FIELDS]

PROBLEM_FIELDS: list[pa.Field] = [
    pa.field("source_file", pa.string()),
    pa.field("offset", pa.int64()),                           # byte offset in the file, when known
    pa.field("kind", pa.string()),                            # truncated | link_type | non_rpc | damaged_stream ...
    pa.field("message", pa.string()),
]
PROBLEM_SCHEMA = pa.schema(PROBLEM_FIELDS)
PROBLEM_COLUMNS = [f.name for f in PROBLEM_FIELDS]


def empty_call() -> dict[str, Any]:
    """A call row with every column present (None)."""
    return dict.fromkeys(CALL_COLUMNS)


# Rows per Arrow batch in table(): one struct array of 200,000 calls took 0.79-1.71 s CPU, 10,000-row slices of the
# same rows 0.45-0.50 s (BENCHMARKS.md, twelfth pass); the builder's buffers of a slice stay small.
TABLE_SLICE_ROWS = 10_000


def table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) as an Arrow table of ``schema``; missing keys are null."""
    rows = rows if isinstance(rows, list) else list(rows)
    # Arrow reads the dicts itself (one struct array per slice, then its fields as columns): a third less CPU than
    # transposing them into per-column lists in Python first. The collector is paused meanwhile: with it on,
    # its full passes rescan every row of a large ingest again and again.
    struct = pa.struct(list(schema))
    with collector_paused():
        batches = [pa.RecordBatch.from_struct_array(pa.array(rows[at:at + TABLE_SLICE_ROWS], type=struct))
                   for at in range(0, len(rows), TABLE_SLICE_ROWS)]
    return pa.Table.from_batches(batches, schema=pa.schema(list(struct))).cast(schema)


def number_sessions(rows: list[dict]) -> None:
    """Set session_seq (by first request time) and call_index (by request time, then call_id) in place."""
    by_session: dict[str, list[dict]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    key = (lambda r: (r["request_time_us"] if r["request_time_us"] is not None else 0, r["call_id"] or 0))
    firsts = sorted(by_session, key=lambda s: min(key(r) for r in by_session[s]))
    for seq, sid in enumerate(firsts):
        for index, row in enumerate(sorted(by_session[sid], key=key)):
            row["session_seq"] = seq
            row["call_index"] = index


def sessions_from_calls(rows: list[dict], extra: dict[str, dict] | None = None) -> list[dict]:
    """One sessions-table row per session_id of ``rows`` (``extra`` adds per-session columns, e.g. bytes)."""
    out: dict[str, dict] = {}
    for r in rows:
        s = out.get(r["session_id"])
        if s is None:
            s = out[r["session_id"]] = {
                "source": r["source"], "source_file": r["source_file"], "session_id": r["session_id"],
                "session_seq": r["session_seq"], "connection_id": r["connection_id"],
                "association_group_id": r["association_group_id"], "client": r["client"], "server": r["server"],
                "start_time_us": r["request_time_us"], "end_time_us": r["response_time_us"] or r["request_time_us"],
                "calls": 0, "faults": 0, "errors": 0, "unknown_interface_calls": 0, "bytes_to_server": 0,
                "bytes_to_client": 0, "transfer_syntax": r["transfer_syntax"], "damaged": False, "note": None}
        s["calls"] += 1
        s["faults"] += r["status_kind"] == FAULT
        s["errors"] += (r["hresult"] or 0) >= HRESULT_SEVERITY_ERROR
        s["unknown_interface_calls"] += r["interface_name"] is None
        s["bytes_to_server"] += r["request_bytes"] or 0
        s["bytes_to_client"] += r["response_bytes"] or 0
        for t in (r["request_time_us"], r["response_time_us"]):
            if t is not None:
                s["start_time_us"] = t if s["start_time_us"] is None else min(s["start_time_us"], t)
                s["end_time_us"] = t if s["end_time_us"] is None else max(s["end_time_us"], t)
        if s["association_group_id"] is None:
            s["association_group_id"] = r["association_group_id"]
    for sid, cols in (extra or {}).items():
        if sid in out:
            out[sid].update(cols)
    return list(out.values())
