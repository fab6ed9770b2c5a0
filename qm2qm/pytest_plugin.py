"""pytest fixtures for testing against a real qm2qm server (installed as the ``qm2qm`` pytest11 plugin).

    qm2qm_server          a server in this process (its own thread and event loop), ephemeral ports, fresh store
    qm2qm_server_process  the same as a `qm2qm serve` subprocess
    qm2qm_admin           qm2qm.client.AdminClient on qm2qm_server's admin API
    qm2qm_client          qm2qm.client.Qm2qmClient bound to qm2qm_server's qm2qm port (MS-MQQP)
    qm2qm_qmcomm_client   qm2qm.mqmp.client.QmcommClient bound to qm2qm_server's qmcomm port (MS-MQMP, from /v1/info)
    qm2qm_mqrr_client     qm2qm.mqrr.client.MqrrClient bound to MS-MQRR RemoteRead on qm2qm_server (turns --mqrr on)
    qm2qm_reader          factory: qm2qm_reader(queue, protocol="qm2qm"|"mqrr"|"auto", **options) -> an opened
                          qm2qm.client.RemoteReader on qm2qm_server (closed at teardown)
    qm2qm_queues          helpers: make(name, messages=...) a queue, send to it, open_session(queue) for remote reads

MS-MQRR is off on a server by default, as under `qm2qm serve` (so a Windows client falls back to qmcomm + qm2qm).
A test turns it on by requesting ``qm2qm_mqrr_client``, or for any server option with the ``qm2qm`` marker, whose
keyword arguments are server settings (the TOML keys; `--key` flags for the subprocess)::

    @pytest.mark.qm2qm(mqrr=True)
    def test_reads_over_remoteread(qm2qm_reader, qm2qm_queues):
        with qm2qm_reader(qm2qm_queues.make(messages=["hi"]), protocol="mqrr") as reader: ...

Servers listen on ephemeral ports only (qm2qm, qmcomm, admin; the endpoint mapper's own port is off) and let
ANONYMOUS LOGON read (``--allow-anonymous-read``), since test clients bind unauthenticated; pass
``allow_anonymous_read=False`` to ``start_in_process`` (or test the refusal) where that matters.

Every fixture is function-scoped: each test gets its own server and store. To run the same tests against the
subprocess, override ``qm2qm_server`` in a conftest.py::

    @pytest.fixture
    def qm2qm_server(qm2qm_server_process):
        return qm2qm_server_process

A client of another interface (qmcomm / MS-MQMP, MS-MQRR) is one more fixture on ``qm2qm_server``: it reads
its port from ``qm2qm_server.info`` (GET /v1/info), connects, and closes at teardown, like ``qm2qm_client``.
MS-MQRR lives on the qm2qm listener (``qm2qm_server.port``), which also answers ept_map.
"""
from __future__ import annotations

import asyncio
import os
import queue as queue_module
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from qm2qm.ready import parse_ready_line

# Hang guards, not timing assertions: a server that is not up (or not down) by then is broken.
START_GUARD_S = 60.0
STOP_GUARD_S = 60.0


@dataclass
class ServerHandle:
    """Where a running test server listens; ``app`` is the qm2qm.app.App when it runs in this process."""
    host: str
    port: int
    admin_url: str
    data_dir: Path
    app: Any = None
    process: subprocess.Popen | None = None
    runner: Any = field(default=None, repr=False)       # the InProcessServer
    line: str = ""                                      # the ready line `qm2qm serve` printed (subprocess)
    _info: dict | None = field(default=None, repr=False)

    def call(self, fn, *args: Any) -> Any:
        """Run fn(*args) on the in-process server's loop thread and return its result."""
        if self.runner is None:
            raise RuntimeError("call() needs the in-process server (qm2qm_server), not a subprocess")
        return self.runner.call(fn, *args)

    @property
    def info(self) -> dict:
        """GET /v1/info of the server: its listeners and ports (new interfaces appear here)."""
        if self._info is None:
            from qm2qm.client import AdminClient
            self._info = AdminClient(self.admin_url).info()
        return self._info

    def admin(self):
        """A new AdminClient on this server."""
        from qm2qm.client import AdminClient
        return AdminClient(self.admin_url)

    def client(self, **options: Any):
        """A new, connected Qm2qmClient (the caller closes it)."""
        from qm2qm.client import Qm2qmClient
        return Qm2qmClient(self.host, self.port, **options).connect()


class InProcessServer:
    """qm2qm.app.App on its own event loop in a daemon thread; ``call`` runs a function on that loop."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.app = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready: queue_module.Queue = queue_module.Queue()
        self._thread = threading.Thread(target=self._run, name="qm2qm test server", daemon=True)

    def start(self) -> None:
        """Start the thread and wait until every listener is bound (or raise what stopped it)."""
        self._thread.start()
        try:
            error = self._ready.get(timeout=START_GUARD_S)
        except queue_module.Empty:
            raise RuntimeError("the in-process qm2qm server did not start") from None
        if error is not None:
            raise error

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        from qm2qm.app import App
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.app = App(self.config)
        try:
            await self.app.start()
        except BaseException as exc:            # report to the test, not to the thread's stderr
            self._ready.put(exc)
            return
        self._ready.put(None)
        try:
            await self._stop.wait()
        finally:
            await self.app.close()

    def call(self, fn, *args: Any) -> Any:
        """Run fn(*args) on the server's loop thread (the QueueManager is single-threaded) and return its result."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=START_GUARD_S)

    def stop(self) -> None:
        """Close the server (answers pending calls, runs handles down, flushes the store) and join the thread."""
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=STOP_GUARD_S)
        if self._thread.is_alive():
            raise RuntimeError("the in-process qm2qm server did not stop")


def start_in_process(data_dir: Path, **config: Any) -> tuple[ServerHandle, InProcessServer]:
    """A server in this process on ephemeral ports over a fresh store in ``data_dir``."""
    from qm2qm.config import load_config
    values = {"data_dir": str(data_dir), "port": 0, "admin_port": 0, "epm_port": 0, "qmcomm_port": 0,
              "allow_anonymous_read": True, **config}
    server = InProcessServer(load_config(None, values))
    server.start()
    app = server.app
    handle = ServerHandle(app.config.host, app.rpc.port, app.admin_url, data_dir, app=app, runner=server)
    return handle, server


def server_options(request: Any) -> dict[str, Any]:
    """The server settings a test asks for: the ``qm2qm`` marker's keywords, plus mqrr=True when the test uses
    ``qm2qm_mqrr_client``."""
    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("qm2qm"))):     # the closest marker wins
        options.update(marker.kwargs)
    if "qm2qm_mqrr_client" in request.fixturenames:
        options.setdefault("mqrr", True)
    return options


def as_flags(options: dict[str, Any]) -> list[str]:
    """Server settings as `qm2qm serve` flags: True -> --key, False -> --no-key, else --key value."""
    flags: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    return flags


def start_subprocess(data_dir: Path, *extra: str, env: dict | None = None, cwd: Path | None = None) -> ServerHandle:
    """`python -m qm2qm serve` on ephemeral ports over a fresh store; returns once it printed its ready line
    (``handle.line``)."""
    cmd = [sys.executable, "-m", "qm2qm", "serve", "--data-dir", str(data_dir), "--port", "0", "--admin-port", "0",
           "--epm-port", "0", "--qmcomm-port", "0", "--allow-anonymous-read", *extra]
    if env is None:
        env = dict(os.environ)
        env.pop("QM2QM_ADMIN", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=None if cwd is None else str(cwd))
    lines: queue_module.Queue = queue_module.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=START_GUARD_S).rstrip("\n")
    except queue_module.Empty:
        proc.kill()
        raise RuntimeError("qm2qm serve printed nothing: " + proc.communicate()[1]) from None
    ready = parse_ready_line(line)
    if ready is None:
        proc.kill()
        raise RuntimeError(f"qm2qm serve did not start: {line!r}; stderr: {proc.communicate()[1]}")
    return ServerHandle(ready.host, ready.port, ready.admin, data_dir, process=proc, line=line)


def stop_subprocess(handle: ServerHandle) -> tuple[int, str]:
    """SIGINT the server and wait for it; (exit code, stderr)."""
    proc = handle.process
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=STOP_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


@dataclass
class Session:
    """A remote-read session: the admin handle (hRemoteQueue), the bound client and its RemoteQMOpenQueue handle."""
    queue: str
    handle: int
    client: Any
    session: bytes


class QueueHelpers:
    """Queues and messages through the admin API, and remote-read sessions through a qm2qm client."""

    def __init__(self, server: ServerHandle) -> None:
        self.server = server
        self.admin = server.admin()
        self._clients: list[Any] = []

    def make(self, name: str | None = None, *, messages: Any = (), **attrs: Any) -> str:
        """Create a private queue (a fresh name unless given) holding ``messages`` (str bodies, or dicts of
        send fields); returns its path name, as `.\\private$\\name`."""
        pathname = name if name and "\\" in name else f".\\private$\\{name or 'q-' + uuid.uuid4().hex[:8]}"
        self.admin.create_queue(pathname, **attrs)
        for message in messages:
            self.send(pathname, message)
        return pathname

    def send(self, pathname: str, message: Any = "", **fields: Any) -> dict:
        """Send one message: a str body, bytes, or a dict of admin send fields (label, priority, ...)."""
        if isinstance(message, dict):
            fields = {**message, **fields}
        elif isinstance(message, bytes):
            import base64
            fields["body_base64"] = base64.b64encode(message).decode("ascii")
        else:
            fields["body"] = message
        return self.admin.send(pathname, **fields)

    def open_session(self, pathname: str, *, access: str = "receive") -> Session:
        """Open the queue for remote read (admin, as R_QMOpenRemoteQueue) and RemoteQMOpenQueue it on a new client."""
        handle = self.admin.open_queue(pathname, access=access)["hRemoteQueue"]
        client = self.server.client()
        self._clients.append(client)
        hresult, session = client.open_queue(handle, lic_guid=uuid.uuid4())
        if hresult != 0:
            raise AssertionError(f"RemoteQMOpenQueue of {pathname} returned 0x{hresult:08X}")
        return Session(pathname, handle, client, session)

    def close(self) -> None:
        for client in self._clients:
            client.close()


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "qm2qm(**settings): server settings (TOML keys, e.g. mqrr=True) for the "
                            "qm2qm plugin's servers")


@pytest.fixture
def qm2qm_server(tmp_path: Path, request: Any) -> Iterator[ServerHandle]:
    """A qm2qm server in this process on ephemeral ports with a fresh store (``.app`` is the running App;
    ``.call(fn, *args)`` runs fn on its loop thread); settings from the ``qm2qm`` marker."""
    handle, server = start_in_process(tmp_path / "qm2qm-data", **server_options(request))
    try:
        yield handle
    finally:
        server.stop()


@pytest.fixture
def qm2qm_server_process(tmp_path: Path, request: Any) -> Iterator[ServerHandle]:
    """A `qm2qm serve` subprocess on ephemeral ports with a fresh store (``.process`` is its Popen); settings from
    the ``qm2qm`` marker, as flags."""
    handle = start_subprocess(tmp_path / "qm2qm-data", *as_flags(server_options(request)))
    try:
        yield handle
    finally:
        stop_subprocess(handle)


@pytest.fixture
def qm2qm_admin(qm2qm_server: ServerHandle):
    """An AdminClient of the test server's admin API."""
    return qm2qm_server.admin()


@pytest.fixture
def qm2qm_client(qm2qm_server: ServerHandle) -> Iterator[Any]:
    """A Qm2qmClient connected and bound to the test server's qm2qm endpoint (MS-MQQP)."""
    client = qm2qm_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def qm2qm_queues(qm2qm_server: ServerHandle) -> Iterator[QueueHelpers]:
    """Helpers to create queues and messages and to open remote-read sessions on the test server."""
    helpers = QueueHelpers(qm2qm_server)
    try:
        yield helpers
    finally:
        helpers.close()


@pytest.fixture
def qm2qm_qmcomm_client(qm2qm_server: ServerHandle) -> Iterator[Any]:
    """A QmcommClient connected to the test server's qmcomm endpoint (MS-MQMP; the port from /v1/info)."""
    from qm2qm.mqmp.client import QmcommClient
    client = QmcommClient(qm2qm_server.host, int(qm2qm_server.info["qmcomm_port"])).connect()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def qm2qm_mqrr_client(qm2qm_server: ServerHandle) -> Iterator[Any]:
    """An MqrrClient bound to MS-MQRR RemoteRead on the test server's qm2qm listener (the server runs with
    mqrr=True for a test that uses this fixture)."""
    from impacket.dcerpc.v5.rpcrt import DCERPCException
    from qm2qm.mqrr.client import MqrrClient
    try:
        client = MqrrClient(qm2qm_server.host, qm2qm_server.port)
    except DCERPCException as exc:
        raise RuntimeError(f"MS-MQRR is not served by the test server (mqrr=False in the qm2qm marker?): {exc}") \
            from None
    try:
        yield client
    finally:
        client.disconnect()


@pytest.fixture
def qm2qm_reader(qm2qm_server: ServerHandle) -> Iterator[Any]:
    """A factory of opened RemoteReaders on the test server: ``qm2qm_reader(queue, protocol=..., **options)``
    (options as qm2qm.client.RemoteReader's; the ports come from the server). Readers left open are closed."""
    from qm2qm.cli.read import _format_name as format_name     # DIRECT=TCP:host\\<queue> for a path name
    from qm2qm.client import RemoteReader
    readers: list[Any] = []

    def make(pathname: str, *, protocol: str = "qm2qm", **options: Any) -> Any:
        host = qm2qm_server.host
        ports = {"qmcomm_port": int(qm2qm_server.info["qmcomm_port"]), "qm2qm_port": qm2qm_server.port,
                 "epm_port": qm2qm_server.port}      # the qm2qm listener answers ept_map (MS-RPCE 2.2.1.2)
        reader = RemoteReader(host, format_name(pathname, host), protocol=protocol, **{**ports, **options})
        readers.append(reader)
        return reader.open()

    try:
        yield make
    finally:
        for reader in readers:
            reader.close()
