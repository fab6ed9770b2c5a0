"""Split one capture by TCP connection so its sessions can be ingested in parallel (docs/pipeline.md): a first pass
reads only frame headers and assigns whole connections to parts of about equal bytes; each part is ingested on
its own (capture.ingest_capture with ``keep``); connection and session numbers are then made file-wide again."""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qm2qm.pipeline.capture import IngestResult, ingest_capture, report_link_type, report_unknown_interfaces
from qm2qm.pipeline.headerscan import scan_ethernet_pcap
from qm2qm.pipeline.pcapfile import (EVERY_FLOW, LINKTYPE_ETHERNET, SUPPORTED_LINKTYPES, CaptureError, Frame,
                                     PcapRecords, flow_key, read_frames, sniff, tcp_segment)
from qm2qm.pipeline.tcp import FIN, RST, SYN

FlowKey = tuple[bytes, bytes]
# A connection as the first pass predicts it and a part finds it: (session_id, first_offset, first_call)
Found = tuple[str, int, tuple[int, int] | None]
ACK = 0x10
# Offsets of frames of no TCP connection the first pass keeps to tell exclusive parts; past this, no part is.
KEYLESS_KEPT = 1 << 16


@dataclass
class Part:
    """Whole TCP connections of one capture, and the file offsets of their first and last records. ``expect``: the
    connections the first pass predicts for this part, ``numbers`` their file-wide (connection_id, session_seq);
    the part applies the numbers only when it finds exactly the connections expected (ingest_part)."""
    keys: list[FlowKey]
    start: int
    stop: int
    bytes: int
    expect: list[Found] | None = None
    numbers: dict[str, tuple[int, int | None]] | None = None
    # no frame of another part and no frame of no TCP connection between start and stop: read without a filter
    exclusive: bool = False


class _Connection:
    """One TCP connection as capture._segment opens them (a 4-tuple reused after data or a close is a new one)."""
    __slots__ = ("key", "session_id", "first_offset", "first_call", "saw_data", "closed")

    def __init__(self, key: FlowKey, session_id: str, first_offset: int) -> None:
        self.key, self.session_id, self.first_offset = key, session_id, first_offset
        self.first_call: tuple[int, int] | None = None
        self.saw_data = self.closed = False


class _Scan:
    """The first pass's state: per flow key its span, and the connections ingest will open with a guess of each
    one's first call (time, call_id): the first TCP payload that opens with a whole request PDU (C706 12.6.4.9)."""

    def __init__(self, path: str | Path) -> None:
        self.head = IngestResult(str(path))
        self.spans: dict[FlowKey, list[int]] = {}              # key -> [first offset, last offset, bytes]
        self.current: dict[FlowKey, _Connection] = {}
        self.connections: list[_Connection] = []
        self.prefixes: dict[str, int] = {}
        self.warned: set[int] = set()
        self.keyless: list[int] | None = []                    # offsets of frames of no flow (None: too many)

    def learned(self) -> tuple:
        """Everything the pass learned, comparable between two passes over one file (headerscan's and Frame by
        Frame's): spans in first-frame order, connections, the head's problems and counters."""
        return (list(self.spans.items()),
                [(c.key, c.session_id, c.first_offset, c.first_call, c.saw_data, c.closed) for c in self.connections],
                self.head.problems, self.head.counters)

    def no_flow(self, offset: int) -> None:
        """A frame of no TCP connection at ``offset``: the parts whose range holds it must filter (Part.exclusive)."""
        if self.keyless is not None:
            self.keyless.append(offset)
            if len(self.keyless) > KEYLESS_KEPT:
                self.keyless = None

    def frame(self, frame: Frame) -> None:
        """One frame read as a Frame (any link type): as flow_key and tcp_segment read it."""
        key = flow_key(frame)
        if key is None:
            self.no_flow(frame.offset)
            self.head.count("frames")
            self.head.count("capture_bytes", len(frame.data))
            if frame.linktype in SUPPORTED_LINKTYPES:
                self.head.count("non_tcp_frames")
            else:
                report_link_type(self.head.path, frame, self.warned, self.head)
            return
        self.span(key, frame.offset, len(frame.data))
        seg = tcp_segment(frame)
        if seg is not None:
            conn = self.connection(key, seg.flags, frame.offset, lambda: (seg.src, seg.sport, seg.dst, seg.dport))
            self.segment(conn, seg.flags, seg.payload, 0, len(seg.payload), frame.time_us)

    def span(self, key: FlowKey, offset: int, size: int) -> None:
        span = self.spans.get(key)
        if span is None:
            self.spans[key] = [offset, offset, size]
        else:
            span[1] = offset
            span[2] += size

    def connection(self, key: FlowKey, flags: int, offset: int, ends: Any) -> _Connection:
        """The connection a segment belongs to, opened as capture._segment opens it; ``ends()`` gives
        (src, sport, dst, dport) of the segment, asked only when a connection opens."""
        conn = self.current.get(key)
        if flags & SYN and not flags & ACK and conn is not None and (conn.saw_data or conn.closed):
            conn = None
        if conn is None:
            src, sport, dst, dport = ends()
            prefix = f"{src}:{sport}-{dst}:{dport}"
            n = self.prefixes.get(prefix, 0)
            self.prefixes[prefix] = n + 1
            conn = self.current[key] = _Connection(key, prefix + (f"#{n}" if n else ""), offset)
            self.connections.append(conn)
        return conn

    @staticmethod
    def segment(conn: _Connection, flags: int, data: bytes, at: int, size: int, time_us: int | Any) -> None:
        """A segment of ``size`` payload bytes at data[at:]; ``time_us`` may be a callable (made on demand)."""
        if size:
            conn.saw_data = True
            # a whole little-endian request PDU with PFC_FIRST_FRAG | PFC_LAST_FRAG (C706 12.6.3.1, 12.6.4.9)
            if conn.first_call is None and size >= 24 and data[at] == 5 and data[at + 1] <= 1 \
                    and data[at + 2] == 0 and data[at + 3] & 3 == 3 and data[at + 4] & 0xF0 == 0x10 \
                    and 24 <= (data[at + 8] | data[at + 9] << 8) <= size:
                conn.first_call = (time_us() if callable(time_us) else time_us,
                                   int.from_bytes(data[at + 12:at + 16], "little"))
        if flags & (FIN | RST):
            conn.closed = True


def scan_file(path: str | Path, vectorized: bool = True) -> _Scan:
    """The first pass over one capture: an Ethernet pcap through headerscan (``vectorized``), any other file
    Frame by Frame; a file that cannot be read on is reported in the scan's head (after what came before)."""
    scan = _Scan(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
            if vectorized and sniff(magic) == "pcap":
                records = PcapRecords(fh, magic)
                if records.linktype == LINKTYPE_ETHERNET and scan_ethernet_pcap(scan, records):
                    return scan
            fh.seek(0)
            for frame in read_frames(fh):
                scan.frame(frame)
    except OSError as exc:
        scan.head.report("unreadable", None, f"{path}: cannot open: {exc.strerror or exc}")
    except CaptureError as exc:
        scan.head.report(exc.kind, exc.offset, f"{path}: offset {exc.offset}: {exc}")
    finally:
        scan.spans = dict(sorted(scan.spans.items(), key=lambda item: item[1][0]))     # in first-frame order
    return scan


def plan(path: str | Path, parts: int) -> tuple[IngestResult, list[Part]]:
    """First pass over frame headers only: (what the parts will not see: frames of no TCP connection, unsupported
    link types, an unreadable record; the parts). Connections, in order of their first frame, are cut into at most
    ``parts`` runs of about equal captured bytes, so each part reads a narrow range of the file. Each part also
    carries the numbering the pass predicts (Part.expect, Part.numbers)."""
    scan = scan_file(path)
    head, spans = scan.head, scan.spans
    share = sum(span[2] for span in spans.values()) / max(1, min(parts, len(spans)))
    out: list[Part] = []
    done = 0
    owner: dict[FlowKey, Part] = {}
    for key, (first, last, size) in spans.items():            # dicts keep first-frame order
        if not out or (done >= share * len(out) and len(out) < parts):
            out.append(Part([], first, last, 0, [], {}))
        part = owner[key] = out[-1]
        part.keys.append(key)
        part.start, part.stop, part.bytes = min(part.start, first), max(part.stop, last), part.bytes + size
        done += size
    mark_exclusive(out, scan.keyless)
    numbers = renumber([{"session_id": c.session_id, "first_offset": c.first_offset, "first_call": c.first_call}
                        for c in scan.connections])
    for conn in scan.connections:
        part = owner[conn.key]
        part.expect.append((conn.session_id, conn.first_offset, conn.first_call))
        part.numbers[conn.session_id] = numbers[conn.session_id]
    return head, out


def mark_exclusive(parts: list[Part], keyless: list[int] | None) -> None:
    """Set Part.exclusive where no other part's connection and no frame of no connection has a frame between the
    part's start and stop. Parts hold runs of connections in first-frame order, so a later part's connections
    start at or after its start, and an earlier one's end by the latest stop of the parts before."""
    if keyless is None:
        return
    latest_stop = -1
    for index, part in enumerate(parts):
        later = parts[index + 1].start if index + 1 < len(parts) else None
        holds_keyless = bisect.bisect_left(keyless, part.start) < bisect.bisect_right(keyless, part.stop)
        part.exclusive = latest_stop < part.start and (later is None or later > part.stop) and not holds_keyless
        latest_stop = max(latest_stop, part.stop)


def ingest_part(path: str | Path, part: Part) -> IngestResult:
    """The calls of one part's connections (capture.ingest_capture with ``keep``), numbered file-wide when the
    part finds exactly the connections the first pass predicted (``numbered``); else merge/renumber must."""
    keep = EVERY_FLOW if part.exclusive else frozenset(part.keys)
    result = ingest_capture(path, keep=keep, start=part.start, stop=part.stop)
    if part.expect is not None and part.numbers is not None and found(result) == sorted(map(_found, part.expect)):
        apply_numbers(result.calls, part.numbers)
        apply_numbers(result.sessions, part.numbers)
        result.numbered = True
    return result


def _found(entry: Any) -> Found:
    session_id, first_offset, first_call = entry
    return session_id, first_offset, None if first_call is None else tuple(first_call)


def found(result: IngestResult) -> list[Found]:
    """The connections an ingest opened, as the first pass predicts them (sorted)."""
    return sorted(_found((c["session_id"], c["first_offset"], c["first_call"])) for c in result.connections)


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
