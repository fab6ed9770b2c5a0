"""Fixtures for the pipeline tests: a live qm2qm App on its own thread and loop (so blocking clients and the
recording proxy can talk to it), a scripted client scenario, recorded captures, and one shared SparkSession."""
from __future__ import annotations

import asyncio
import base64
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from qm2qm.app import App
from qm2qm.client import AdminClient, Qm2qmClient
from qm2qm.config import ServerConfig
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, RR_ACK
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy

COMPUTER = "qmtest"
QUEUE = "private$\\orders"
BODIES = [b"first order", b"second order", b"third order"]
# A hang guard for thread joins, not a speed assertion.
HANG_GUARD_S = 60


class LiveServer:
    """App(:memory:) on a private event loop thread; ``wrap(interface) -> interface`` can alter what it serves,
    ``config`` adds ServerConfig fields (users, auth ...)."""

    def __init__(self, wrap: Callable[[Any, Any], Any] | None = None, **config: Any) -> None:
        self.wrap = wrap
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        server = self

        class _App(App):
            async def _bind_rpc(self, server_cls, interface):
                if server.wrap is not None:
                    interface = server.wrap(interface, self.qm)
                return await super()._bind_rpc(server_cls, interface)

        # every port ephemeral and no endpoint mapper: whether 2103 or 135 is free depends on what else runs on
        # the machine, and two servers of one test then answered different qmcomm ports (RemoteQMGetQMQMServerPort)
        self.app = _App(ServerConfig(data_dir=":memory:", port=0, qmcomm_port=0, admin_port=0, epm_port=0,
                                     computer_name=COMPUTER, **config))
        self._run(self.app.start())
        self.port = self.app.rpc.port
        self.admin = AdminClient(self.app.admin_url)

    def _run(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(HANG_GUARD_S)

    def close(self) -> None:
        self._run(self.app.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HANG_GUARD_S)
        self.loop.close()


def setup_queue(admin: AdminClient) -> None:
    """The same starting state on every server: one queue with three messages."""
    admin.create_queue(QUEUE)
    for i, body in enumerate(BODIES):
        admin.send(QUEUE, label=f"order-{i}", body_base64=base64.b64encode(body).decode("ascii"))


@dataclass
class Expected:
    """What the scripted client saw, to check the ingested tables against."""
    h_queue: int = 0
    h_queue2: int = 0
    cursor: int = 0
    version: tuple = ()
    port: int = 0
    sessions: list = field(default_factory=list)          # context handles returned by RemoteQMOpenQueue
    read_contexts: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    hresults: list = field(default_factory=list)          # per call, in order


def scenario(port: int, admin: AdminClient) -> Expected:
    """Two sequential sessions (NDR, then NDR64) covering opnums 0-9: the recorded client side."""
    exp = Expected()
    exp.h_queue = admin.open_queue(QUEUE)["hRemoteQueue"]
    exp.cursor = admin.open_cursor(exp.h_queue)["hCursor"]
    h = exp.h_queue
    with Qm2qmClient("127.0.0.1", port, ndr64=False) as c:
        exp.version = c.get_version()
        exp.port = c.get_qmqm_server_port(0)
        status, session = c.open_queue(h)
        exp.sessions.append(session)
        peek = c.start_receive2(h, action=MQ_ACTION_PEEK_CURRENT, cursor=exp.cursor, request_id=7)
        read = c.start_receive(h, action=MQ_ACTION_RECEIVE, request_id=8)
        exp.read_contexts.append(read.context)
        exp.labels += [peek.message().label, read.message().label]
        end = c.end_receive(read.context, RR_ACK)
        close_cursor = c.close_cursor(h, exp.cursor)
        exp.hresults += [None, None, status, peek.hresult, read.hresult, end[0], close_cursor]
    # closing session 1 ran its session handle down, which closed descriptor h (MS-MQQP 3.1.6.1)
    exp.h_queue2 = h = admin.open_queue(QUEUE)["hRemoteQueue"]
    with Qm2qmClient("127.0.0.1", port, ndr64=True) as c:
        status, session2 = c.open_queue(h)
        exp.sessions.append(session2)
        read = c.start_receive2(h, action=MQ_ACTION_RECEIVE, request_id=9)
        exp.read_contexts.append(read.context)
        exp.labels.append(read.message().label)
        end = c.end_receive(read.context, RR_ACK)
        cancel = c.cancel_receive(h, 99)
        purge = c.purge_queue(h)
        closed = c.close_queue(session2)
        exp.hresults += [status, read.hresult, end[0], cancel, purge, closed[0]]
    return exp


def record_scenario(server: LiveServer, path: Path, *, pcapng: bool = False, mss: int = 1460,
                    duplicate: bool = False) -> Expected:
    """Run the scenario through a recording proxy; the capture is written to ``path``."""
    sink = PcapSink(path, pcapng=pcapng, mss=mss, duplicate=duplicate)
    proxy = RecordingProxy(("127.0.0.1", server.port), sink)
    try:
        setup_queue(server.admin)
        return scenario(proxy.port, server.admin)
    finally:
        proxy.close()
        sink.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Expected]:
    """A pcap of the scenario against a fresh server."""
    path = tmp_path_factory.mktemp("cap") / "scenario.pcap"
    server = LiveServer()
    try:
        exp = record_scenario(server, path)
    finally:
        server.close()
    return path, exp


@pytest.fixture(scope="session")
def spark():
    """One embedded SparkSession (local[2]) for every Spark test of the run."""
    from qm2qm.pipeline.spark_jobs import spark_session
    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                              "spark.default.parallelism": "2"})
    yield session
    session.stop()
