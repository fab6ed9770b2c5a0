"""Split one capture by TCP connection so its sessions can be ingested in parallel (docs/pipeline.md): a first pass
reads only frame headers and assigns whole connections to parts of about equal bytes; each part is ingested on
its own (capture.ingest_capture with ``keep``); connection and session numbers are then made file-wide again."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qm2qm.pipeline.capture import IngestResult, ingest_capture, report_link_type, report_unknown_interfaces
from qm2qm.pipeline.pcapfile import SUPPORTED_LINKTYPES, CaptureError, flow_key, read_frames

FlowKey = tuple[bytes, bytes]


@dataclass
class Part:
    """Whole TCP connections of one capture, and the file offsets of their first and last records."""
    keys: list[FlowKey]
    start: int
    stop: int
    bytes: int


def plan(path: str | Path, parts: int) -> tuple[IngestResult, list[Part]]:
    """First pass over frame headers only: (what the parts will not see: frames of no TCP connection, unsupported
    link types, an unreadable record; the parts). Connections, in order of their first frame, are cut into at most
    ``parts`` runs of about equal captured bytes, so each part reads a narrow range of the file."""
    head = IngestResult(str(path))
    spans: dict[FlowKey, list[int]] = {}                  # key -> [first offset, last offset, bytes]
    warned: set[int] = set()
    try:
        with open(path, "rb") as fh:
            for frame in read_frames(fh):
                key = flow_key(frame)
                if key is None:
                    head.count("frames")
                    head.count("capture_bytes", len(frame.data))
                    if frame.linktype in SUPPORTED_LINKTYPES:
                        head.count("non_tcp_frames")
                    else:
                        report_link_type(path, frame, warned, head)
                    continue
                span = spans.get(key)
                if span is None:
                    spans[key] = [frame.offset, frame.offset, len(frame.data)]
                else:
                    span[1] = frame.offset
                    span[2] += len(frame.data)
    except OSError as exc:
        head.report("unreadable", None, f"{path}: cannot open: {exc.strerror or exc}")
    except CaptureError as exc:
        head.report(exc.kind, exc.offset, f"{path}: offset {exc.offset}: {exc}")
    share = sum(span[2] for span in spans.values()) / max(1, min(parts, len(spans)))
    out: list[Part] = []
    done = 0
    for key, (first, last, size) in spans.items():            # dicts keep first-frame order
        if not out or (done >= share * len(out) and len(out) < parts):
            out.append(Part([], first, last, 0))
        part = out[-1]
        part.keys.append(key)
        part.start, part.stop, part.bytes = min(part.start, first), max(part.stop, last), part.bytes + size
        done += size
    return head, out


def ingest_part(path: str | Path, part: Part) -> IngestResult:
    """The calls of one part's connections (capture.ingest_capture with ``keep``)."""
    return ingest_capture(path, keep=frozenset(part.keys), start=part.start, stop=part.stop)


def renumber(connections: list[dict]) -> dict[str, tuple[int, int | None]]:
    """session_id → (connection_id, session_seq) over every part of one file, as an unsplit ingest numbers them:
    connections in order of their first frame, sessions by their earliest call (schema.number_sessions)."""
    ordered = sorted(connections, key=lambda c: c["first_offset"])
    numbers: dict[str, tuple[int, int | None]] = {}
    with_calls = []
    for connection_id, conn in enumerate(ordered):
        numbers[conn["session_id"]] = (connection_id, None)
        if conn["first_call"] is not None:
            with_calls.append((tuple(conn["first_call"]), connection_id, conn["session_id"]))
    for session_seq, (_first, connection_id, session_id) in enumerate(sorted(with_calls)):
        numbers[session_id] = (connection_id, session_seq)
    return numbers


def apply_numbers(rows: list[dict], numbers: dict[str, tuple[int, int | None]]) -> None:
    """Set connection_id and session_seq of call or session rows from renumber()."""
    for row in rows:
        known = numbers.get(row["session_id"])
        if known is not None:
            row["connection_id"], row["session_seq"] = known


def ingest_split(path: str | Path, parts: int) -> IngestResult:
    """One capture ingested part by part and merged: the same rows as capture.ingest_capture (the in-process
    statement of what the Spark job does with a large capture)."""
    head, planned = plan(path, parts)
    return merge([head, *(ingest_part(path, part) for part in planned)])


def merge(results: list[IngestResult]) -> IngestResult:
    """One file's first pass and parts as one result, numbered as an unsplit ingest of the file numbers it."""
    merged = IngestResult(results[0].path)
    for result in results:
        merged.calls.extend(result.calls)
        merged.sessions.extend(result.sessions)
        merged.problems.extend(result.problems)
        merged.connections.extend(result.connections)
        for key, value in result.counters.items():
            merged.count(key, value)
    numbers = renumber(merged.connections)
    apply_numbers(merged.calls, numbers)
    apply_numbers(merged.sessions, numbers)
    report_unknown_interfaces(merged.path, merged)
    return merged
