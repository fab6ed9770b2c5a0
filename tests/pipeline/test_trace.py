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
