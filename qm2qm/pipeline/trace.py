"""RPC call tracing: wrap an Interface's handlers, record each call, write call-table rows (docs/pipeline.md).

The hot path only appends a tuple (times, ids, stub bytes) to a list; decoding (MS-MQQP 3.1.4 stubs with
qm2qm.mqqp.codec) and writing run in a background thread on batches, so tracing stays cheap."""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import itertools
import json
import marshal
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qm2qm.pipeline import schema
from qm2qm.pipeline.decode import decode_call
from qm2qm.rpc.faults import NCA_S_FAULT_UNSPEC
from qm2qm.rpc.interface import Interface, Operation, RpcFault

BATCH = 2048                   # rows per decode/write batch at close
POLL_S = 0.05                  # how often the writer thread takes what the hot path appended
SPOOL_FORMAT = 1
_BINARY = {f.name for f in schema.CALL_FIELDS if f.type == pa.binary()}
_TYPES = {f.name: f.type for f in schema.CALL_FIELDS}
# Columns every call needs (replay and diff order and send calls by them) and the values they can take: opnum is
# an unsigned short in the request PDU (C706 12.6.4.9), session_seq and call_index are ranks.
_REQUIRED_RANGES = {"session_seq": (0, 2**31 - 1), "call_index": (0, 2**31 - 1), "opnum": (0, 0xFFFF)}
_OPEN_QUEUE = 2


class TraceError(Exception):
    """A trace file that cannot be read; the message names the file and the offset."""


def trace_format(path: str | Path) -> str:
    """'parquet' for *.parquet / *.pq, else 'jsonl'."""
    return "parquet" if str(path).lower().endswith((".parquet", ".pq")) else "jsonl"


def _owner_only_file(path: Path) -> Any:
    """``path`` opened for binary writing (truncated), readable by its owner alone."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)                # an existing file keeps its mode through O_CREAT
    return os.fdopen(fd, "wb")


class CallWriter:
    """Writes call rows to one Parquet or JSON-lines file (the call-table schema, docs/pipeline.md)."""

    def __init__(self, path: str | Path, source: str = "trace", *, owner_only: bool = False) -> None:
        """``owner_only``: the file is readable by its owner alone (a server's trace holds the stubs of sealed
        calls in the clear)."""
        self.path = Path(path)
        self.format = trace_format(path)
        self.source = source
        self.rows_written = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if owner_only:      # made owner-only before a byte is written: the writers below truncate, keeping the mode
            _owner_only_file(self.path).close()
        if self.format == "parquet":
            self._pq = pq.ParquetWriter(str(self.path), schema.CALL_SCHEMA)
            self._fh = None
        else:
            self._pq = None
            self._fh = open(self.path, "w", encoding="utf-8")
            self._fh.write(json.dumps({"format": schema.FORMAT_NAME, "version": schema.FORMAT_VERSION,
                                       "source": source}) + "\n")

    def write(self, rows: list[dict]) -> None:
        """Append call rows (dicts with the call-table columns)."""
        if not rows:
            return
        if self._pq is not None:
            self._pq.write_table(schema.table(rows, schema.CALL_SCHEMA))
        else:
            lines = []
            for row in rows:
                out = {k: (base64.b64encode(v).decode("ascii") if k in _BINARY and v is not None else v)
                       for k, v in row.items()}
                lines.append(json.dumps(out, separators=(",", ":")))
            self._fh.write("\n".join(lines) + "\n")
        self.rows_written += len(rows)

    def write_table(self, tbl: pa.Table) -> None:
        """Append an Arrow table of the call schema (Parquet writers only)."""
        self._pq.write_table(tbl)
        self.rows_written += tbl.num_rows

    def close(self) -> None:
        """Finish the file (the Parquet footer)."""
        if self._pq is not None:
            self._pq.close()
            self._pq = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class Tracer:
    """Collects raw call records on the event loop; a background thread appends them, undecoded, to
    PATH.spool every 50 ms (marshal frames: ~0.3 µs a call); close() decodes the spool into PATH (Parquet or
JSON lines).

    Decoding and Arrow conversion cost ~50 µs a call, about what serving it costs, so they wait for close() to
    keep tracing under the 20 % throughput budget; ``decode_live=True`` decodes in the background thread
    instead (PATH grows while the server runs, at roughly half the throughput). ``finalize_spool(spool, path)``
    turns a spool left by a crashed server into a trace (the last 50 ms of calls are lost). ``queue_of(handle) -> pathname | None`` names the
    queue of RemoteQMOpenQueue's hQueue."""

    def __init__(self, path: str | Path, *, source: str = "trace", batch: int = BATCH,
                 queue_of: Callable[[int], str | None] | None = None, decode_live: bool = False) -> None:
        self.path = Path(path)
        self.source = source
        self.batch = batch
        self.queue_of = queue_of
        self.decode_live = decode_live
        self.spool_path = self.path.with_name(self.path.name + ".spool")
        self.writer = CallWriter(self.path, source, owner_only=True) if decode_live else None
        self._spool = None if decode_live else _owner_only_file(self.spool_path)
        self._pending: list[tuple] = []
        # the hot path reads perf_counter_ns only; wall time = perf + this offset (fixed at start)
        self._wall_offset = time.time_ns() - time.perf_counter_ns()
        if self._spool is not None:
            self._spool.write(marshal.dumps({"spool": SPOOL_FORMAT, "wall_offset": self._wall_offset,
                                             "source": source}))
        self._sessions: dict[int, list[int]] = {}       # open connection_id -> [session_seq, next call_index]
        self._session_ranks = itertools.count()         # session_seq: the order connections made their first call
        self._stop = threading.Event()
        # the hot path only appends; the writer thread takes what is there every POLL_S (list.append and
        # taking a prefix with `del lst[:n]` are each atomic under the GIL, and appends only go to the end)
        self.add = self._pending.append
        self._names: dict[int, dict[Any, str]] = {}     # connection -> {hQueue or context handle: queue name}
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="qm2qm-trace", daemon=True)
        self._thread.start()
        self.closed = False

    # -- writer thread --

    def _drain(self) -> None:
        pending = self._pending
        while True:
            stopping = self._stop.wait(POLL_S)
            taken = len(pending)
            if taken:
                batch = pending[:taken]
                del pending[:taken]
                try:
                    if self.decode_live:
                        self.writer.write(self._decoded_batch(batch))
                    else:
                        self._spool.write(marshal.dumps(batch))
                except BaseException as exc:   # noqa: BLE001 - kept and re-raised by close()
                    self._error = exc
            if stopping and not pending:
                return

    def connection_closed(self, connection_id: int) -> None:
        """A connection ended (connection ids are never reused): forget its session, and, once its calls before this
        are decoded, the queue names of its handles (a marker record, in call order), so memory follows the
        connections open, not every connection ever traced."""
        if self._sessions.pop(connection_id, None) is not None:
            self.add((None, connection_id))

    def _decoded_batch(self, batch: list[tuple]) -> list[dict]:
        """The rows of a batch of records; a connection's end marker drops its queue names."""
        rows = []
        for rec in batch:
            if rec[0] is None:
                self._names.pop(rec[1], None)
            else:
                rows.append(self._decoded(self._row(rec)))
        return rows

    def _row(self, rec: tuple) -> dict:
        (start, latency_ns, connection_id, group_id, call_id, ndr64, seq, index, (iface, opnum), stub, kind, answer,
         queue_name) = rec
        wall_ns = start + self._wall_offset
        row = schema.empty_call()
        row.update(source=self.source, source_file=None, session_id=f"conn-{connection_id}",
                   session_seq=seq, call_index=index, connection_id=connection_id,
                   association_group_id=group_id, call_id=call_id, request_time_us=wall_ns // 1000,
                   latency_us=None if latency_ns is None else latency_ns // 1000,
                   interface_uuid=iface[0], interface_version=iface[1], interface_name=iface[2],
                   transfer_syntax="NDR64" if ndr64 else "NDR", opnum=opnum, request_stub=stub,
                   request_bytes=len(stub), status_kind=kind, queue_name=queue_name)
        if latency_ns is not None:
            row["response_time_us"] = (wall_ns + latency_ns) // 1000
        if kind == schema.OK:
            row["response_stub"] = answer
            row["response_bytes"] = len(answer)
        elif kind == schema.FAULT:
            row["fault_status"] = answer
        return row

    def _decoded(self, row: dict) -> dict:
        decode_call(row)
        self._name_queue(row, row["connection_id"], row["queue_name"])
        return row

    def _name_queue(self, row: dict, connection_id: int, queue_name: str | None) -> None:
        """Carry the queue name from RemoteQMOpenQueue to the calls that use its handle or session."""
        names = self._names.get(connection_id)
        if names is None:
            names = self._names[connection_id] = {}
        if queue_name is not None:
            names[row["queue_handle"]] = queue_name
            if row["context_handle_out"]:
                names[row["context_handle_out"]] = queue_name
        name = queue_name
        for key in (row["queue_handle"], row["context_handle_in"]):
            if name is None and key is not None:
                name = names.get(key)
        row["queue_name"] = name
        if name is not None and row["context_handle_out"] and row["opnum"] in (0, 9, 10):
            names[row["context_handle_out"]] = name

    def close(self) -> None:
        """Write everything recorded so far, decode the spool into PATH (idempotent); re-raises a writer failure."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        self._thread.join()
        if self.writer is not None:
            self.writer.close()
        if self._spool is not None:
            self._spool.close()
        if self._error is not None:
            raise self._error
        if not self.decode_live:
            self._finalize()

    def _finalize(self) -> None:
        final = CallWriter(self.path, self.source, owner_only=True)
        try:
            for batch in _spool_batches(self.spool_path):
                final.write(self._decoded_batch(batch))
        finally:
            final.close()
        self.spool_path.unlink()


def _spool_batches(spool: Path, header: dict | None = None):
    """The record batches of a spool (its header dict goes into ``header``); a frame cut short by a crash
    ends the iteration."""
    with open(spool, "rb") as fh:
        while True:
            try:
                frame = marshal.load(fh)
            except (EOFError, ValueError, TypeError):
                return
            if isinstance(frame, dict):
                if header is not None:
                    header.update(frame)
            elif isinstance(frame, list):
                yield frame
            else:
                return


def finalize_spool(spool: str | Path, path: str | Path, source: str = "trace") -> int:
    """Decode a spool left by a server that stopped without closing its Tracer into the trace ``path``;
    returns the number of calls written."""
    tracer = Tracer.__new__(Tracer)
    header: dict = {}
    tracer.source, tracer._names = source, {}
    written = 0
    final = CallWriter(path, source, owner_only=True)
    try:
        for batch in _spool_batches(Path(spool), header):
            if header.get("spool") != SPOOL_FORMAT:
                raise TraceError(f"{spool}: offset 0: not a qm2qm trace spool of this version")
            tracer._wall_offset = header["wall_offset"]
            rows = tracer._decoded_batch(batch)
            final.write(rows)
            written += len(rows)
    finally:
        final.close()
    return written


def _traced(op: Operation, tracer: Tracer, iface: tuple[str, str, str]) -> Operation:
    handler = op.handler
    opnum = op.opnum
    meta = (iface, opnum)
    add = tracer.add
    sessions = tracer._sessions
    ranks = tracer._session_ranks
    perf = time.perf_counter_ns
    name_queue = tracer.queue_of if opnum == _OPEN_QUEUE else None
    OK, FAULT, CANCELLED = schema.OK, schema.FAULT, schema.CANCELLED

    def queue_name(ctx: Any, stub: bytes) -> str | None:
        from qm2qm.mqqp.codec import decode_request
        try:
            return name_queue(decode_request(opnum, stub, ctx.ndr64).hQueue)
        except Exception:   # noqa: BLE001 - a bad stub is answered by the handler; the name is optional
            return None

    def record(ctx: Any, t0: int, entry: list, index: int, stub: bytes, kind: str, answer: Any, qname: Any) -> None:
        add((t0, perf() - t0, ctx.connection_id, ctx.association_group_id, ctx.call_id, ctx.ndr64, entry[0], index,
             meta, stub, kind, answer, qname))

    async def finish(awaitable: Any, ctx: Any, stub: bytes, t0: int, entry: list, index: int, qname: Any) -> Any:
        try:
            result = await awaitable
        except asyncio.CancelledError:
            record(ctx, t0, entry, index, stub, CANCELLED, None, qname)
            raise
        except RpcFault as fault:
            record(ctx, t0, entry, index, stub, FAULT, fault.status & 0xFFFFFFFF, qname)
            raise
        except Exception:
            record(ctx, t0, entry, index, stub, FAULT, NCA_S_FAULT_UNSPEC, qname)
            raise
        record(ctx, t0, entry, index, stub, OK, bytes(result), qname)
        return result

    def traced(ctx: Any, stub: bytes) -> Any:
        t0 = perf()
        entry = sessions.get(ctx.connection_id)
        if entry is None:
            entry = sessions[ctx.connection_id] = [next(ranks), 0]
        index = entry[1]
        entry[1] = index + 1
        qname = queue_name(ctx, stub) if name_queue is not None else None
        try:
            result = handler(ctx, stub)
        except RpcFault as fault:
            record(ctx, t0, entry, index, stub, FAULT, fault.status & 0xFFFFFFFF, qname)
            raise
        except Exception:
            record(ctx, t0, entry, index, stub, FAULT, NCA_S_FAULT_UNSPEC, qname)
            raise
        if type(result) is bytes:
            add((t0, perf() - t0, ctx.connection_id, ctx.association_group_id, ctx.call_id, ctx.ndr64, entry[0],
                 index, meta, stub, OK, result, qname))
            return result
        if inspect.isawaitable(result):
            return finish(result, ctx, stub, t0, entry, index, qname)
        return result                    # not bytes: the runtime answers with a fault and logs it

    return Operation(op.opnum, op.name, traced)


def wrap_interface(interface: Interface, tracer: Tracer) -> Interface:
    """A copy of ``interface`` whose every Operation handler records its calls in ``tracer`` (without lanes, which
    would answer calls around the handlers)."""
    iface = (str(interface.uuid), f"{interface.version[0]}.{interface.version[1]}", interface.name)
    operations = {opnum: _traced(op, tracer, iface) for opnum, op in interface.operations.items()}
    return dataclasses.replace(interface, operations=operations, lanes={})


# ------------------------------------------------------------------------------------------------ reading

def _check_version(path: Path, version: Any, fmt: Any, where: str) -> None:
    if fmt != schema.FORMAT_NAME:
        raise TraceError(f"{path}: {where}: not a qm2qm call table (format {fmt!r})")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(f"{path}: {where}: trace format version {version!r} is not a whole number (this qm2qm "
                         f"writes {schema.FORMAT_VERSION})")
    if version > schema.FORMAT_VERSION:
        raise TraceError(f"{path}: {where}: trace format version {version!r} is newer than this qm2qm reads "
                         f"(up to {schema.FORMAT_VERSION}); upgrade qm2qm")


def read_calls(path: str | Path) -> pa.Table:
    """A trace file (Parquet or JSON lines) as a call table; raises TraceError naming the file and offset."""
    path = Path(path)
    if trace_format(path) == "parquet":
        return _read_parquet(path)
    return _to_table(path, read_jsonl_rows(path))


def _read_parquet(path: Path) -> pa.Table:
    try:
        tbl = pq.read_table(str(path))
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"{path}: offset 0: not a readable Parquet file: {exc}") from None
    meta = tbl.schema.metadata or {}
    try:
        version = int(meta.get(b"version", b"-1"))
    except ValueError:
        version = meta[b"version"].decode("utf-8", "replace")
    _check_version(path, version, (meta.get(b"format") or b"").decode("utf-8", "replace"), "offset 0")
    missing = [c for c in schema.CALL_COLUMNS if c not in tbl.column_names]
    if missing:
        raise TraceError(f"{path}: offset 0: call table lacks columns {', '.join(missing)}")
    try:
        tbl = tbl.select(schema.CALL_COLUMNS).cast(schema.CALL_SCHEMA)
    except (pa.ArrowException, ValueError) as exc:
        raise TraceError(f"{path}: offset 0: column types differ from the call table: {exc}") from None
    for name, (low, high) in _REQUIRED_RANGES.items():
        column = tbl.column(name)
        within = pc.fill_null(pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high)), False)
        first_bad = pc.index(within, False).as_py()
        if first_bad >= 0:
            raise TraceError(f"{path}: record {first_bad + 1}: {_range_problem(name, column[first_bad].as_py())}")
    return tbl


def read_jsonl_rows(path: Path) -> list[dict]:
    """The rows of a JSON-lines trace; raises TraceError naming the line and byte offset."""
    rows = []
    offset = 0
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open: {exc.strerror or exc}") from None
    with fh:
        for number, line in enumerate(fh):
            where = f"line {number + 1} (offset {offset})"
            offset += len(line)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise TraceError(f"{path}: {where}: not JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{path}: {where}: a record must be a JSON object")
            if number == 0:
                _check_version(path, obj.get("version"), obj.get("format"), where)
                continue
            rows.append(_json_row(path, where, obj))
    if offset == 0:
        raise TraceError(f"{path}: offset 0: empty file, no qm2qm trace header")
    return rows


def _json_row(path: Path, where: str, obj: dict) -> dict:
    row = schema.empty_call()
    for key, value in obj.items():
        if key not in row:
            continue
        if key in _BINARY and value is not None:
            try:
                value = base64.b64decode(value, validate=True)
            except (ValueError, TypeError) as exc:
                raise TraceError(f"{path}: {where}: {key} is not base64: {exc}") from None
        else:
            _check_type(path, where, key, value)
        row[key] = value
    if not isinstance(row.get("session_id"), str) or not isinstance(row.get("source"), str):
        raise TraceError(f"{path}: {where}: record lacks source/session_id")
    for name, (low, high) in _REQUIRED_RANGES.items():
        if row[name] is None or not low <= row[name] <= high:
            raise TraceError(f"{path}: {where}: {_range_problem(name, row[name])}")
    return row


def _check_type(path: Path, where: str, key: str, value: Any) -> None:
    """A JSON value of the column's type (integers within its width), else TraceError naming the column."""
    if value is None:
        return
    column_type = _TYPES[key]
    if pa.types.is_integer(column_type):
        limit = 1 << (column_type.bit_width - 1)
        if isinstance(value, int) and not isinstance(value, bool) and -limit <= value < limit:
            return
        expected = f"an integer that fits {column_type}"
    elif pa.types.is_string(column_type):
        if isinstance(value, str):
            return
        expected = "a string"
    else:
        return
    raise TraceError(f"{path}: {where}: {key} has the wrong type: {json.dumps(value)[:40]} is not {expected}")


def _range_problem(name: str, value: Any) -> str:
    if value is None:
        return f"{name} is missing or null; every call needs one"
    low, high = _REQUIRED_RANGES[name]
    return f"{name} {value} is out of range ({low}..{high})"


def _to_table(path: Path, rows: list[dict]) -> pa.Table:
    try:
        return schema.table(rows, schema.CALL_SCHEMA)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise TraceError(f"{path}: a record has a value of the wrong type: {exc}") from None


def queue_namer(qm: Any) -> Callable[[int], str | None]:
    """hQueue → the queue's path name (MS-MQMQ 2.1.1) through the QueueManager's OpenQueueDescriptor table."""
    def name(handle: int) -> str | None:
        desc = qm.descriptor_by_handle(handle)
        queue = getattr(desc, "queue_reference", None)
        if queue is None:
            return None
        return f"{qm.computer_name}\\{queue.pathname}"
    return name


class TracingObserver:
    """The RpcObserver (qm2qm/rpc/observer.py) of a traced listener: tells the Tracer which connections closed and
    passes every notification on to ``inner`` (the metrics observer, or None)."""

    def __init__(self, tracer: Tracer, inner: Any = None) -> None:
        self.tracer = tracer
        self.inner = inner
        if inner is not None:                   # the per-call notification goes straight to it
            self.connection_opened = inner.connection_opened
            self.call_done = inner.call_done

    def connection_opened(self, connection: Any) -> None:
        pass

    def connection_closed(self, connection: Any) -> None:
        self.tracer.connection_closed(connection.id)
        if self.inner is not None:
            self.inner.connection_closed(connection)

    def call_done(self, interface: Interface, opnum: int, fault: int | None, stub: bytes | None,
                  seconds: float) -> None:
        pass


def trace_interface(interface: Interface, path: str | Path, qm: Any = None) -> tuple[Interface, Tracer]:
    """What `qm2qm serve --trace PATH` does: (the traced interface to register, the Tracer to close at shutdown)."""
    tracer = Tracer(path, queue_of=queue_namer(qm) if qm is not None else None)
    return wrap_interface(interface, tracer), tracer
