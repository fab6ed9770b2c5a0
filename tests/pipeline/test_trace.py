"""Tracing by wrapping interface handlers: what is recorded, in which format, and that the wrapper keeps the
handler's nature (plain function or coroutine), its faults and its cancellation."""
from __future__ import annotations

import asyncio
import json
import uuid
from types import SimpleNamespace

import pytest

from qm2qm.mqqp.constants import QM2QM_UUID, QM2QM_VERSION
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.normalize import compare, normalize_session
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.rpc_client import RpcClient
from qm2qm.pipeline.trace import Tracer, read_calls, trace_interface, wrap_interface
from qm2qm.rpc.interface import NDR20, Interface, Operation, RpcFault

from tests.pipeline.conftest import COMPUTER, QUEUE, LiveServer, scenario, setup_queue


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_trace_records_every_call_like_the_capture_of_the_same_run(tmp_path, suffix):
    trace_path = tmp_path / f"trace.{suffix}"
    tracers = []

    def wrap(interface, qm):
        traced, tracer = trace_interface(interface, trace_path, qm)
        tracers.append(tracer)
        return traced

    server = LiveServer(wrap)
    sink = PcapSink(tmp_path / "same.pcap")
    proxy = RecordingProxy(("127.0.0.1", server.port), sink)
    try:
        setup_queue(server.admin)
        exp = scenario(proxy.port, server.admin)
    finally:
        proxy.close()
        sink.close()
        server.close()
        tracers[0].close()
    traced = ingest_file(trace_path)
    captured = ingest_file(tmp_path / "same.pcap")
    assert traced.problems == [] and len(traced.calls) == 13
    assert [c["source"] for c in traced.calls] == ["trace"] * 13
    for t, c in zip(traced.calls, captured.calls):
        for col in ("session_seq", "call_index", "call_id", "opnum", "op_name", "transfer_syntax", "request_stub",
                    "response_stub", "status_kind", "hresult", "return_value", "request_fields", "response_fields",
                    "message_fields", "context_handle_in", "context_handle_out", "queue_handle", "cursor",
                    "request_id", "association_group_id", "interface_uuid", "interface_version"):
            assert t[col] == c[col], col
        assert t["latency_us"] >= 0
    name = f"{COMPUTER}\\{QUEUE}"
    assert [c["queue_name"] for c in traced.calls] == [None, None] + [name] * 11
    assert traced.calls[2]["queue_handle"] == exp.h_queue
    # the two sources are one schema: the normalized diff of trace vs capture is empty
    for seq in (0, 1):
        left = normalize_session([c for c in traced.calls if c["session_seq"] == seq])
        right = normalize_session([c for c in captured.calls if c["session_seq"] == seq])
        assert [m for a, b in zip(left, right) for m in compare(a, b)] == []


async def test_a_fault_is_traced_with_its_status(tmp_path):
    trace_path = tmp_path / "faults.parquet"
    tracers = []

    def wrap(interface, qm):
        traced, tracer = trace_interface(interface, trace_path, qm)
        tracers.append(tracer)
        return traced

    server = await asyncio.to_thread(LiveServer, wrap)
    try:
        client = RpcClient("127.0.0.1", server.port)
        await client.connect((QM2QM_UUID, *QM2QM_VERSION), (NDR20[0], NDR20[1], 0))
        assert await client.call(7, b"\x09\x00\x00\x00") == ("fault", 0x6C6)   # dwPortType 9: [range] (0, 3)
        assert await client.call(7, b"\x01\x00") == ("fault", 0x6F7)                     # truncated stub
        await client.close()
    finally:
        await asyncio.to_thread(server.close)
        tracers[0].close()
    rows = read_calls(trace_path).to_pylist()
    assert [(r["status_kind"], r["fault_status"]) for r in rows] == [("fault", 0x6C6), ("fault", 0x6F7)]
    bad = rows[1]
    assert bad["fault_status"] == 0x6F7 and bad["request_stub"] == b"\x01\x00" and bad["response_stub"] is None
    assert "request: " in bad["decode_error"]


def _fake_interface(handlers: dict) -> Interface:
    ops = {n: Operation(n, f"op{n}", h) for n, h in handlers.items()}
    return Interface(uuid=uuid.UUID(int=1), version=(1, 0), name="fake", operations=ops)


def _ctx(call_id: int) -> SimpleNamespace:
    return SimpleNamespace(call_id=call_id, opnum=0, ndr64=False, connection_id=5, association_group_id=9)


async def test_wrapper_keeps_plain_handlers_plain_and_coroutines_awaitable(tmp_path):
    started = asyncio.Event()

    async def slow(ctx, stub):
        started.set()
        await asyncio.sleep(3600)

    async def later(ctx, stub):
        return b"late" + stub

    def fails(ctx, stub):
        raise RpcFault(0x1C010002)

    tracer = Tracer(tmp_path / "fake.jsonl")
    iface = wrap_interface(_fake_interface({0: lambda ctx, stub: b"now", 1: later, 2: fails, 3: slow}), tracer)
    assert iface.name == "fake" and sorted(iface.operations) == [0, 1, 2, 3]
    assert iface.operations[0].handler(_ctx(1), b"a") == b"now"                 # bytes, not a coroutine
    assert await iface.operations[1].handler(_ctx(2), b"b") == b"lateb"
    with pytest.raises(RpcFault):
        iface.operations[2].handler(_ctx(3), b"c")
    task = asyncio.ensure_future(iface.operations[3].handler(_ctx(4), b"d"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    tracer.close()
    rows = read_calls(tmp_path / "fake.jsonl").to_pylist()
    got = [(r["call_id"], r["status_kind"], r["response_stub"], r["fault_status"], r["call_index"]) for r in rows]
    assert got == [(1, "ok", b"now", None, 0), (2, "ok", b"lateb", None, 1), (3, "fault", None, 0x1C010002, 2),
                   (4, "cancelled", None, None, 3)]
    assert {r["session_id"] for r in rows} == {"conn-5"} and {r["association_group_id"] for r in rows} == {9}
    assert all(r["interface_name"] == "fake" and r["request_fields"] is None for r in rows)


def test_header_line_of_a_jsonl_trace(tmp_path):
    tracer = Tracer(tmp_path / "empty.jsonl")
    tracer.close()
    header = json.loads((tmp_path / "empty.jsonl").read_text().splitlines()[0])
    assert header == {"format": "qm2qm-calls", "version": 1, "source": "trace"}
    assert read_calls(tmp_path / "empty.jsonl").num_rows == 0


def test_a_spool_left_by_a_crash_becomes_a_trace(tmp_path):
    from qm2qm.pipeline.trace import finalize_spool
    tracer = Tracer(tmp_path / "crashed.parquet")
    handler = wrap_interface(_fake_interface({0: lambda ctx, stub: b"r" + stub}), tracer).operations[0].handler
    for i in range(5):
        handler(_ctx(i), bytes([i]))
    # the server dies after the writer thread spooled the calls: close() never runs
    tracer._stop.set()
    tracer._thread.join()
    tracer._spool.close()
    assert not (tmp_path / "crashed.parquet").exists()
    assert finalize_spool(tracer.spool_path, tmp_path / "recovered.jsonl") == 5
    rows = read_calls(tmp_path / "recovered.jsonl").to_pylist()
    assert [(r["call_id"], r["response_stub"]) for r in rows] == [(i, b"r" + bytes([i])) for i in range(5)]
    assert all(abs(r["request_time_us"] / 1e6 - __import__("time").time()) < 3600 for r in rows)


@pytest.mark.parametrize("decode_live", [False, True], ids=["spool", "decode_live"])
def test_a_closed_connection_leaves_nothing_in_the_tracer_and_sessions_keep_their_ranks(tmp_path, decode_live):
    """Found by a hostile probe: the tracer kept every connection's session (and, decoding live, its queue names)
    for the server's life, ~200 bytes a connection. They go when the connection closes (connection ids are never
    reused), and session_seq still counts sessions in the order of their first call."""
    from qm2qm.pipeline.trace import TracingObserver
    tracer = Tracer(tmp_path / "many.jsonl", decode_live=decode_live)
    handler = wrap_interface(_fake_interface({0: lambda ctx, stub: b"r"}), tracer).operations[0].handler
    observer = TracingObserver(tracer)
    for connection in range(1, 301):
        ctx = SimpleNamespace(call_id=1, opnum=0, ndr64=False, connection_id=connection, association_group_id=9)
        handler(ctx, b"a")
        handler(SimpleNamespace(**{**vars(ctx), "call_id": 2}), b"b")
        observer.connection_closed(SimpleNamespace(id=connection))
    assert tracer._sessions == {}
    tracer.close()
    assert tracer._names == {}
    rows = read_calls(tmp_path / "many.jsonl").to_pylist()
    assert [(r["session_seq"], r["call_index"], r["connection_id"]) for r in rows] == \
        [(c - 1, i, c) for c in range(1, 301) for i in (0, 1)]


def test_the_tracing_observer_passes_every_notification_on_to_the_metrics_observer(tmp_path):
    from qm2qm.pipeline.trace import TracingObserver
    seen = []
    inner = SimpleNamespace(connection_opened=lambda c: seen.append(("opened", c.id)),
                            connection_closed=lambda c: seen.append(("closed", c.id)),
                            call_done=lambda *args: seen.append(("call", args[1])))
    tracer = Tracer(tmp_path / "x.jsonl")
    observer = TracingObserver(tracer, inner)
    observer.connection_opened(SimpleNamespace(id=4))
    observer.call_done(None, 9, None, b"", 0.1)
    observer.connection_closed(SimpleNamespace(id=4))
    tracer.close()
    assert seen == [("opened", 4), ("call", 9), ("closed", 4)]


@pytest.mark.parametrize("decode_live", [False, True], ids=["spool", "decode_live"])
def test_a_trace_and_its_spool_are_readable_by_their_owner_only(tmp_path, decode_live):
    """They hold request and response stubs in the clear, those of sealed (privacy-level) calls too."""
    import stat
    path = tmp_path / "private.parquet"
    path.write_bytes(b"an older file")
    path.chmod(0o644)
    tracer = Tracer(path, decode_live=decode_live)
    wrap_interface(_fake_interface({0: lambda ctx, stub: b"secret"}), tracer).operations[0].handler(_ctx(1), b"x")
    if not decode_live:
        assert stat.S_IMODE(tracer.spool_path.stat().st_mode) == 0o600
    tracer.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_calls(path).to_pylist()[0]["response_stub"] == b"secret"
