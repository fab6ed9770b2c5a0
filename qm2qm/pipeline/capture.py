"""Capture ingest: pcap/pcapng → TCP streams → DCE/RPC PDUs → calls, decoded into the call table
(ncacn_ip_tcp, MS-RPCE 2.1.1.1; qm2qm stubs MS-MQQP 3.1.4). Problems are reported, never raised."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

from qm2qm.pipeline import schema
from qm2qm.pipeline.decode import QM2QM_UUID_STR, QMCOMM_UUID_STR, decode_call
from qm2qm.pipeline.pcapfile import SUPPORTED_LINKTYPES, CaptureError, read_frames, tcp_segment
from qm2qm.pipeline.rpcstream import SEALED, Conversation, Framer, Pdu
from qm2qm.pipeline.tcp import FIN, RST, SYN, Direction

ACK = 0x10


@dataclass
class IngestResult:
    """What one file gave: call rows, session rows, problem rows and counters."""
    path: str
    calls: list[dict] = field(default_factory=list)
    sessions: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    # per TCP connection, in file order: session_id, first_offset (file offset of its first frame), first_call
    # ((request_time_us, call_id) of its earliest call, or None): what split.renumber needs to merge parts
    connections: list[dict] = field(default_factory=list)
    # a part of a split capture already numbered file-wide from the first pass's prediction (split.ingest_part)
    numbered: bool = False

    def count(self, key: str, n: int = 1) -> None:
        """Add n to a counter of this file."""
        self.counters[key] = self.counters.get(key, 0) + n

    def report(self, kind: str, offset: int | None, message: str) -> None:
        """Record a problem row (and count it by kind)."""
        self.problems.append({"source_file": self.path, "offset": offset, "kind": kind, "message": message})
        self.count(kind)


class _Connection:
    """Both directions of one TCP connection and the DCE/RPC conversation on it."""

    def __init__(self, session_id: str, result: IngestResult) -> None:
        self.session_id = session_id
        self.result = result
        self.conversation = Conversation(session_id, self.report)
        self.dirs: dict[tuple[str, int], tuple[Direction, Framer]] = {}
        self.bytes: dict[tuple[str, int], int] = {}
        self.saw_data = False
        self.closed = False
        self.first_offset = 0
        self._out: list[Pdu] = []

    def report(self, kind: str, offset: int | None, message: str) -> None:
        """A problem of this connection: it names the file and, unless the problem's own offset is known, the
        offset of the connection's first frame (docs/pipeline.md "Problems table")."""
        offset = self.first_offset if offset is None else offset
        self.result.report(kind, offset, f"{self.result.path}: offset {offset}: {message}")

    def direction(self, src: tuple[str, int], dst: tuple[str, int]) -> tuple[Direction, Framer]:
        """The reassembler and PDU framer of the bytes ``src`` sends."""
        entry = self.dirs.get(src)
        if entry is None:
            framer = Framer()
            sender, receiver = f"{src[0]}:{src[1]}", f"{dst[0]}:{dst[1]}"

            out = self._out
            feed, handle = framer.feed, self.conversation.pdu
            self.bytes[src] = 0

            def deliver(data: bytes, time_us: int) -> None:
                self.bytes[src] += len(data)
                feed(data, time_us, out)
                for pdu in out:
                    handle(pdu, sender, receiver)
                out.clear()

            entry = self.dirs[src] = (Direction(deliver), framer)
        return entry

    def finish(self) -> tuple[list[dict], dict]:
        """(call rows, extra sessions-table columns); reports gaps, damage and non-RPC streams."""
        conv = self.conversation
        damaged = False
        notes = []
        rpc = any(f.pdus for _, f in self.dirs.values())
        for src, (direction, framer) in self.dirs.items():
            who = f"{src[0]}:{src[1]}"
            gap = direction.finish()
            if framer.non_rpc and not rpc:
                continue
            if framer.error is not None:
                damaged = True
                notes.append(f"{who}: {framer.error} at stream offset {framer.error_offset}")
                self.report("damaged_stream", None, f"{self.session_id}: bytes from {who}: {framer.error} "
                                                    f"at stream offset {framer.error_offset}")
            if gap is not None:
                damaged = True
                notes.append(f"{who}: bytes missing after stream offset {gap}")
                self.report("tcp_gap", None, f"{self.session_id}: bytes from {who} missing after stream "
                                             f"offset {gap}; later PDUs of that direction are lost")
            if framer.leftover() and framer.error is None:
                notes.append(f"{who}: {framer.leftover()} bytes of an incomplete PDU at the end")
                self.report("incomplete_call", None, f"{self.session_id}: bytes from {who}: {framer.incomplete()}")
        if not rpc:
            if any(f.non_rpc for _, f in self.dirs.values()):
                self.report("non_rpc", None, f"{self.session_id}: TCP stream is not DCE/RPC; skipped")
            return [], {}
        calls = conv.finish()
        client_src = conv.client
        to_server = sum(n for s, n in self.bytes.items() if f"{s[0]}:{s[1]}" == client_src)
        extra = {"bytes_to_server": to_server, "bytes_to_client": sum(self.bytes.values()) - to_server,
                 "damaged": damaged, "note": "; ".join(notes) or None}
        return calls, extra


def ingest_capture(path: str | Path, result: IngestResult | None = None, keep: Collection | None = None,
                   start: int | None = None, stop: int | None = None) -> IngestResult:
    """Read one capture file into call, session and problem rows; a bad file yields problems, not exceptions.

    With ``keep`` (flow keys, ``pcapfile.flow_key``) only those TCP connections are read, from the record at file
    offset ``start`` to the one at ``stop``: one part of a capture split by session (split.py), whose first pass
    reports the frames of no connection and the file-level problems instead."""
    path = Path(path)
    result = result or IngestResult(str(path))
    conns: dict[tuple, _Connection] = {}
    order: list[_Connection] = []
    prefixes: dict[str, int] = {}
    warned_links: set[int] = set()
    frames = captured = non_tcp = 0
    try:
        fh = open(path, "rb")
    except OSError as exc:
        result.report("unreadable", None, f"{path}: cannot open: {exc.strerror or exc}")
        return result
    with fh:
        try:
            for frame in read_frames(fh, start, stop, keep):
                frames += 1
                captured += len(frame.data)
                if frame.linktype not in SUPPORTED_LINKTYPES:
                    report_link_type(path, frame, warned_links, result)
                    continue
                seg = tcp_segment(frame)
                if seg is None:
                    non_tcp += 1
                    continue
                _segment(seg, frame, conns, order, prefixes, result)
        except CaptureError as exc:
            if keep is None:
                result.report(exc.kind, exc.offset, f"{path}: offset {exc.offset}: {exc}")
    for key, n in (("frames", frames), ("capture_bytes", captured), ("non_tcp_frames", non_tcp)):
        if n:
            result.count(key, n)
    _finish(path, order, result, report_unknown=keep is None)
    return result


def report_link_type(path: str | Path, frame: Any, warned: set[int], result: IngestResult) -> None:
    """One problem row per unsupported link type of a file (its frames are skipped)."""
    if frame.linktype not in warned:
        warned.add(frame.linktype)
        result.report("link_type", frame.offset, f"{path}: offset {frame.offset}: link type {frame.linktype} is "
                                                 f"not supported (Ethernet, SLL, SLL2, loopback, raw IP are); "
                                                 f"frames skipped")


def _segment(seg: Any, frame: Any, conns: dict, order: list, prefixes: dict, result: IngestResult) -> None:
    a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
    key = (a, b) if a <= b else (b, a)
    conn = conns.get(key)
    if seg.flags & SYN and not seg.flags & ACK and conn is not None and (conn.saw_data or conn.closed):
        conn = None                                    # the 4-tuple is reused by a new connection
    if conn is None:
        prefix = f"{a[0]}:{a[1]}-{b[0]}:{b[1]}"
        n = prefixes.get(prefix, 0)
        prefixes[prefix] = n + 1
        conn = conns[key] = _Connection(prefix + (f"#{n}" if n else ""), result)
        conn.first_offset = frame.offset
        order.append(conn)
    time_us = frame.time_us
    direction, _ = conn.direction(a, b)
    if seg.payload:
        conn.saw_data = True
    if seg.flags & (FIN | RST):
        conn.closed = True
    direction.segment(seg.seq, seg.flags, seg.payload, time_us)


def _finish(path: Path, order: list[_Connection], result: IngestResult, report_unknown: bool = True) -> None:
    rows: list[dict] = []
    extras: dict[str, dict] = {}
    for connection_id, conn in enumerate(order):
        calls, extra = conn.finish()
        result.connections.append({"session_id": conn.session_id, "first_offset": conn.first_offset,
                                   "first_call": min(((r["request_time_us"] or 0, r["call_id"] or 0) for r in calls),
                                                     default=None)})
        if not calls and not extra:
            continue
        for index, row in enumerate(calls):
            row["source_file"] = str(path)
            row["connection_id"] = connection_id
            if row["decode_error"] != SEALED:
                decode_call(row)
            if row["interface_uuid"] not in (QM2QM_UUID_STR, QMCOMM_UUID_STR):
                result.count("unknown_interface_calls")
            if row["decode_error"]:
                result.count("decode_errors")
        rows.extend(calls)
        extras[conn.session_id] = extra
        result.count("rpc_sessions")
    schema.number_sessions(rows)
    propagate_queue_names(rows)
    result.calls = rows
    result.sessions = schema.sessions_from_calls(rows, extras)
    result.count("calls", len(rows))
    if report_unknown:
        report_unknown_interfaces(path, result)


def report_unknown_interfaces(path: str | Path, result: IngestResult) -> None:
    """One problem row counting the calls of a file that are on interfaces other than qm2qm, if any."""
    if result.counters.get("unknown_interface_calls"):
        result.report("unknown_interface", None, f"{path}: {result.counters['unknown_interface_calls']} call(s) on "
                                                 f"interfaces other than qm2qm (not decoded)")


def propagate_queue_names(rows: list[dict], names: dict[int, str] | None = None) -> None:
    """Fill queue_name from a handle→pathname map and along each session's handles (opnum 2 phContext)."""
    by_session: dict[str, list[dict]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    for calls in by_session.values():
        known: dict[Any, str] = {}
        for row in sorted(calls, key=lambda r: r["call_index"] or 0):
            name = row["queue_name"]
            if name is None and names and row["queue_handle"] in names:
                name = names[row["queue_handle"]]
            for key in (row["queue_handle"], row["context_handle_in"]):
                if name is None and key is not None:
                    name = known.get(key)
            if name is not None:
                row["queue_name"] = name
                if row["queue_handle"] is not None:
                    known.setdefault(row["queue_handle"], name)
                if row["context_handle_out"] and any(row["context_handle_out"]):
                    known[row["context_handle_out"]] = name
