"""Replay keeps the recorded concurrency: a read pending on one connection while another connection works and
cancels it (RemoteQMCancelReceive, MS-MQQP 3.1.4.6), and a read cancelled with co_cancel (C706 12.6.4.6)."""
from __future__ import annotations

import asyncio
import uuid

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import QM2QM_UUID, QM2QM_VERSION
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.normalize import compare, normalize_session
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.replay import load_recording, replay
from qm2qm.pipeline.rpc_client import RpcClient
from qm2qm.rpc.interface import NDR20

from tests.pipeline.conftest import QUEUE, LiveServer

INFINITE = 0xFFFFFFFF
SYNTAX = (NDR20[0], NDR20[1], 0)


def _read(h: int, request_id: int) -> bytes:
    desc = codec.REMOTEREADDESC(hRemoteQueue=h, dwQueue=h, ulAction=0, ulTimeout=INFINITE, dwRequestID=request_id)
    return codec.encode_request(0, codec.RemoteQMStartReceiveRequest(desc), False)


async def _until_waiting(admin) -> None:
    """Until the server holds a WaitingMessageReadOperation (the read is pending, not merely sent)."""
    while not (await asyncio.to_thread(admin.list_reads))["waiting"]:
        await asyncio.sleep(0.01)


async def _exchange(port: int, h: int, admin) -> dict:
    a, b = RpcClient("127.0.0.1", port), RpcClient("127.0.0.1", port)
    await a.connect((QM2QM_UUID, *QM2QM_VERSION), SYNTAX)
    await b.connect((QM2QM_UUID, *QM2QM_VERSION), SYNTAX)
    open_req = codec.encode_request(2, codec.RemoteQMOpenQueueRequest(uuid.UUID(int=7), 0, h, h, h), False)
    assert (await a.call(2, open_req))[0] == "ok"
    _, first = await a.start(0, _read(h, 1))                          # waits: the queue is empty
    await _until_waiting(admin)
    assert (await b.call(8, b""))[0] == "ok"                          # meanwhile on the other connection
    cancel = codec.encode_request(5, codec.RemoteQMCancelReceiveRequest(h, h, 1), False)
    out = {"cancel": await b.call(5, cancel), "first": await first}
    call_id, second = await a.start(0, _read(h, 2))
    await _until_waiting(admin)
    a.cancel(call_id)
    out["second"] = await second
    await a.close()
    await b.close()
    return out


def _record(server: LiveServer, path) -> tuple[int, dict]:
    server.admin.create_queue(QUEUE)
    h = server.admin.open_queue(QUEUE)["hRemoteQueue"]
    sink = PcapSink(path)
    proxy = RecordingProxy(("127.0.0.1", server.port), sink)
    try:
        return h, asyncio.run(_exchange(proxy.port, h, server.admin))
    finally:
        proxy.close()
        sink.close()


def test_pending_reads_and_cancels_replay_the_same(tmp_path):
    server = LiveServer()
    try:
        h, seen = _record(server, tmp_path / "cancel.pcap")
    finally:
        server.close()
    assert seen["second"] == ("fault", 0x1C00000D)
    recorded = ingest_file(tmp_path / "cancel.pcap").calls
    assert [(c["session_seq"], c["op_name"], c["status_kind"]) for c in recorded] == [
        (0, "RemoteQMOpenQueue", "ok"), (0, "RemoteQMStartReceive", "ok"), (0, "RemoteQMStartReceive", "fault"),
        (1, "RemoteQmGetVersion", "ok"), (1, "RemoteQMCancelReceive", "ok")]
    # the first read was answered after the cancel was sent on the other connection
    assert recorded[1]["response_time_us"] > recorded[4]["request_time_us"] > recorded[1]["request_time_us"]

    server = LiveServer()
    try:
        server.admin.create_queue(QUEUE)
        rows, _ = load_recording(tmp_path / "cancel.pcap")
        result = asyncio.run(replay(rows, "127.0.0.1", server.port, tmp_path / "replay.parquet",
                                    admin=server.admin, queue_map={h: QUEUE}, call_timeout=30))
    finally:
        server.close()
    assert (result.sent, result.failed, result.problems) == (5, 0, [])
    live = ingest_file(tmp_path / "replay.parquet").calls
    for seq in (0, 1):
        left = normalize_session([c for c in recorded if c["session_seq"] == seq])
        right = normalize_session([c for c in live if c["session_seq"] == seq])
        assert len(left) == len(right) and [m for x, y in zip(left, right) for m in compare(x, y)] == []
    assert [c["status_kind"] for c in live if c["session_seq"] == 0] == ["ok", "ok", "fault"]
