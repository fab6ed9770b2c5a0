"""Composition of `qm2qm serve`: QueueManager on SqliteStore + RpcServer(qm2qm) + RpcServer(qmcomm, qmcomm2) + admin
API (MS-MQQP 3.1.3, MS-MQMP 3.1.3)."""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
from pathlib import Path
from typing import Any, Callable

from aiohttp import web

from qm2qm.config import ADMIN_HOST, PORT_INCREMENT, ServerConfig
from qm2qm.ready import host_port

log = logging.getLogger("qm2qm.app")

# First connection id of the qmcomm listener (qm2qm's count from 1), so a trace never merges two sessions.
QMCOMM_CONNECTION_IDS = 1 << 31
# Seconds a shutdown gives in-flight calls before they are answered with the cancel fault.
SHUTDOWN_GRACE_S = 0.5


class StartupError(RuntimeError):
    """The server cannot start: the message is one line naming the file or address at fault."""


def _open_store(data_dir: str, options: dict[str, Any] | None = None):
    from shared_adm.store.base import MemoryStore, StoreError
    from shared_adm.store.sqlite import SqliteStore

    if data_dir == ":memory:":
        return MemoryStore()
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        raise StartupError(f"data directory '{path}' is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create data directory '{path}': {exc.strerror or exc}") from None
    try:
        return SqliteStore(path, **(options or {}))
    except StoreError as exc:
        raise StartupError(str(exc)) from None
    except OSError as exc:
        raise StartupError(f"cannot open store in '{path}': {exc.strerror or exc}") from None


class App:
    """One running queue manager: store, QueueManager, qm2qm RPC listener and admin API."""

    def __init__(self, config: ServerConfig, *, scheduler: Any = None) -> None:
        self.config = config
        self.scheduler = scheduler
        self.store = None
        self.qm = None
        self.service = None
        self.mqrr_service = None        # --mqrr: the MS-MQRR RemoteRead service
        self.rpc = None
        self.qmcomm = None              # the qmcomm + qmcomm2 listener (MS-MQMP, IP_HANDSHAKE)
        self.qmcomm_service = None
        self._runner: web.AppRunner | None = None
        self._admin_server: asyncio.AbstractServer | None = None     # qm2qm/admin_listener.py
        self.admin_connections = None
        self.admin_port = 0
        self.endpoints = None           # EndpointRegistry: what ept_map answers
        self.epm = None                 # the endpoint mapper's own RpcServer (--epm-port)
        self.directory = None           # MS-MQDMPR directory (3.1.7.1.18–25) over the embedded backend
        self.mqcn = None                # MS-MQCN server role: consumer of notify_queue$
        self.mqsd = None                # MS-MQSD discovery responder (UDP)
        self.tracer = None              # --trace
        self.metrics = None             # qm2qm.metrics.RpcMetrics: the RPC observer and commit timer (metrics)
        self.auth = None                # AuthPolicy (--users, --auth, ...; docs/authentication.md)
        self.reassembly_budget = None   # ReassemblyBudget every listener shares (--max-reassembly-mib)
        self.unread_budget = None       # UnreadAnswerBudget every listener shares (--max-unread-mib)
        self.connection_slots = None    # ConnectionSlots every listener shares (--max-connections)
        self.security = None            # SecurityProvider every listener shares (MAX_LIVE_SECURITY_CONTEXTS)

    @property
    def rpc_address(self) -> str:
        """host:port of the bound qm2qm listener."""
        return host_port(self.config.host, self.rpc.port)

    @property
    def admin_url(self) -> str:
        """Base URL of the admin API."""
        return f"http://{ADMIN_HOST}:{self.admin_port}"

    def ready_line(self) -> str:
        """The one line `qm2qm serve` prints once every listener is bound."""
        line = f"qm2qm listening rpc={self.rpc_address} admin={self.admin_url}"
        if self.epm is not None:
            line += f" epm={host_port(self.epm.host, self.epm.port)}"
        if self.mqsd is not None:
            line += f" mqsd=udp:{host_port(self.mqsd.host, self.mqsd.port)}"
        return line

    async def start(self) -> None:
        """Open the store, initialize the queue manager, bind RPC then admin; undo everything on failure."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        from shared_adm.clock import AsyncioScheduler
        from shared_adm.queue_manager import QueueManager
        from shared_adm.store.base import StoreError
        from qm2qm.mqqp.interface import build_service, service_interface
        from qm2qm.mqqp.server_config import MqqpConfig
        from qm2qm.rpc.auth.security import SecurityProvider
        from qm2qm.rpc.budget import ConnectionSlots, ReassemblyBudget, UnreadAnswerBudget
        from qm2qm.rpc.server import RpcServer

        self.auth = self._auth_policy()
        self.connection_slots = ConnectionSlots(self.config.max_connections)     # over every listener
        self.reassembly_budget = ReassemblyBudget(self.config.max_reassembly_mib * 1024 * 1024)
        self.unread_budget = UnreadAnswerBudget(self.config.max_unread_mib * 1024 * 1024)
        self.security = SecurityProvider(self.auth)
        self.store = _open_store(self.config.data_dir, self.config.store_options)
        if self.config.metrics:
            from qm2qm.metrics import RpcMetrics
            self.metrics = RpcMetrics()
            if hasattr(self.store, "on_commit"):
                self.store.on_commit = self.metrics.commit_done
        self.qm = QueueManager(self.store, scheduler=self.scheduler or AsyncioScheduler(),
                               computer_name=self.config.computer_name)
        try:
            self.qm.initialize()
        except StoreError as exc:
            raise StartupError(str(exc)) from None
        self.qm.allow_anonymous_read = self.config.allow_anonymous_read
        self.qm.max_open_queues, self.qm.max_cursors = self.config.max_open_queues, self.config.max_cursors
        self.qm.max_subqueues = self.config.max_subqueues
        mqqp_config = MqqpConfig(qmcomm_port=self.config.qmcomm_port)
        self.service = build_service(self.qm, mqqp_config)
        interface = service_interface(self.service)
        if self.config.trace:
            interface = self._traced(interface)
        self.rpc = await self._bind_rpc(RpcServer, interface)
        mqqp_config.bound_port = self.rpc.port
        if self.config.mqrr:
            self._start_mqrr()
        await self._start_qmcomm(RpcServer)
        mqqp_config.qmcomm_port = self.qmcomm.port       # RemoteQMGetQMQMServerPort(IP_HANDSHAKE): the bound port
        await self._start_endpoint_mapper()
        await self._start_directory()
        await self._start_discovery()
        await self._bind_admin()

    def listeners(self) -> list:
        """The RPC listeners running now: qm2qm (with MS-MQRR), qmcomm, the endpoint mapper's own."""
        return [server for server in (self.rpc, self.qmcomm, self.epm) if server is not None]

    def _start_mqrr(self) -> None:
        """MS-MQRR RemoteRead on the qm2qm listener (before the endpoint mapper registers what it serves); its
        R_GetServerPort answers that listener's port (MS-MQRR 3.1.4.1)."""
        from qm2qm.mqrr.interface import build_service as build_mqrr, service_interface as mqrr_interface
        self.mqrr_service = build_mqrr(self.qm, port=self.rpc.port)
        interface = mqrr_interface(self.mqrr_service)
        self.rpc.register(interface)        # not traced: --trace records the qm2qm interface (one tracer per file)

    async def _start_qmcomm(self, server_cls: Callable[..., Any]) -> None:
        """qmcomm + qmcomm2 on --qmcomm-port (MS-MQMP 3.1.4.24: 2103, +11 while the default is busy)."""
        from qm2qm.mqmp.handlers._service import QmcommConfig
        from qm2qm.mqmp.interface import build_interfaces
        self.qmcomm_service, interfaces = build_interfaces(self.qm, QmcommConfig(qm2qm_port=self.rpc.port))
        if self.tracer is not None:
            from qm2qm.pipeline.trace import wrap_interface
            interfaces = [wrap_interface(i, self.tracer) for i in interfaces]
        self.qmcomm = await self._bind(server_cls, interfaces, self.config.qmcomm_port,
                                       self.config.increments_busy_qmcomm_port, "MS-MQMP 3.1.4.24",
                                       first_connection_id=QMCOMM_CONNECTION_IDS)
        self.qmcomm_service.config.qmcomm_port = self.qmcomm.port

    def _traced(self, interface: Any) -> Any:
        from qm2qm.pipeline.trace import trace_interface
        try:
            interface, self.tracer = trace_interface(interface, self.config.trace, self.qm)
        except OSError as exc:
            raise StartupError(f"cannot write trace '{self.config.trace}': {exc.strerror or exc}") from None
        return interface

    async def _start_endpoint_mapper(self) -> None:
        """ept_map on the qm2qm port itself (MS-RPCE 2.2.1.2) and, unless --epm-port 0, on its own listener."""
        from qm2qm.rpc.epm import EndpointRegistry, EpmListenerError, build_epm_interface, start_epm_listener
        self.endpoints = EndpointRegistry()
        self.rpc.register(build_epm_interface(self.endpoints, server=self.rpc))
        self.endpoints.register_server(self.rpc)
        self.endpoints.register_server(self.qmcomm)
        if not self.config.epm_port:
            return
        try:
            self.epm = await start_epm_listener(self.endpoints, host=self.config.host, port=self.config.epm_port,
                                                auth=self.auth, reassembly_budget=self.reassembly_budget,
                                                unread_budget=self.unread_budget, security=self.security,
                                                connection_slots=self.connection_slots, observer=self.metrics,
                                                keepalive_s=self.config.keepalive)
        except EpmListenerError as exc:
            if not self.config.epm_port_is_default:
                raise StartupError(str(exc)) from None
            # The default port 135 needs privileges: without them the server still runs, as qm2qm on 2105
            # is also reachable directly and its own port answers ept_map.
            log.warning("endpoint mapper not started: %s", exc)

    async def _start_directory(self) -> None:
        """The embedded directory (same SQLite file as the store) and the MS-MQCN notification consumer."""
        from shared_adm.directory import Directory, DirectoryStoreError, MemoryDirectory, SqliteDirectory
        from qm2qm.mqcn.client import ChangeNotificationClient
        from qm2qm.mqcn.server import ChangeNotificationServer
        path = getattr(self.store, "path", None)
        try:
            backend = SqliteDirectory(path) if path is not None else MemoryDirectory()
        except DirectoryStoreError as exc:
            raise StartupError(str(exc)) from None
        self.directory = Directory(backend, scheduler=self.qm.scheduler, local_queue_manager=self.qm)
        self.directory.send_change_notification = ChangeNotificationClient(self.qm).send_change_notification
        self.mqcn = ChangeNotificationServer(self.qm, self.directory)
        status = await self.mqcn.start()
        if status != 0:
            log.warning("MS-MQCN notification consumer not started: status 0x%08X", status)
            self.mqcn = None

    async def _start_discovery(self) -> None:
        """The MS-MQSD responder, only when --mqsd-port is set (MS-MQSD 2.1: UDP 1801)."""
        if not self.config.mqsd_port:
            return
        import uuid
        from qm2qm.mqsd.codec import ServerEntry
        from qm2qm.mqsd.responder import Topology, start_responder
        qm_id = uuid.UUID(str(self.qm.identifier))
        site = uuid.UUID(self.config.mqsd_site_id) if self.config.mqsd_site_id else uuid.uuid5(qm_id, "site")
        networks = [uuid.UUID(n) for n in self.config.mqsd_networks] or [uuid.uuid5(qm_id, "network")]
        servers = list(self.config.mqsd_directory_servers) or [self.config.computer_name]
        topology = Topology(site, networks, [ServerEntry(name) for name in servers])
        try:
            self.mqsd = await start_responder(topology, host=self.config.host, port=self.config.mqsd_port)
        except OSError as exc:
            raise StartupError(f"cannot listen on udp {self.config.host}:{self.config.mqsd_port} for MS-MQSD: "
                               f"{exc.strerror or exc}") from None

    async def _bind_rpc(self, server_cls: Callable[..., Any], interface: Any):
        return await self._bind(server_cls, [interface], self.config.port, self.config.increments_busy_port,
                                "MS-MQQP 3.1.4.8")

    async def _bind(self, server_cls: Callable[..., Any], interfaces: list, port: int, increments: bool,
                    section: str, first_connection_id: int = 1):
        while True:
            server = server_cls(interfaces, host=self.config.host, port=port,
                                max_connections=self.config.max_connections,
                                connection_slots=self.connection_slots, auth=self.auth,
                                max_context_handles=self.config.max_context_handles,
                                idle_timeout_s=self.config.idle_timeout, first_connection_id=first_connection_id,
                                keepalive_s=self.config.keepalive,
                                reassembly_budget=self.reassembly_budget, unread_budget=self.unread_budget,
                                security=self.security)
            server.observer = self.metrics
            if self.tracer is not None:         # the tracer forgets what it kept of connections that closed
                from qm2qm.pipeline.trace import TracingObserver
                server.observer = TracingObserver(self.tracer, self.metrics)
            try:
                await server.start()
                return server
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise StartupError(f"cannot listen on {self.config.host}:{port}: {exc.strerror or exc}") from None
                # MS-MQQP 3.1.4.8 / MS-MQMP 3.1.4.24: the default port moves by 11 until a free one is found.
                if increments and port + PORT_INCREMENT <= 0xFFFF:
                    log.warning("port %d is busy; trying %d (%s)", port, port + PORT_INCREMENT, section)
                    port += PORT_INCREMENT
                    continue
                raise StartupError(f"cannot listen on {self.config.host}:{port}: address already in use") from None

    def _auth_policy(self):
        """The authentication policy from --users / --auth / --min-auth-level / --allow-anonymous-ntlm / --keytab."""
        from qm2qm.rpc.auth import AuthPolicy, UserFileError, UserStore
        config = self.config
        if config.auth == "required" and config.users is None and config.keytab is None:
            raise StartupError("--auth required needs --users (or --keytab): nobody could authenticate")
        if config.keytab is not None:
            self._check_keytab(config.keytab)
        users = None
        if config.users is not None:
            try:
                users = UserStore.load(config.users)
            except UserFileError as exc:
                raise StartupError(str(exc)) from None
        return AuthPolicy(mode=config.auth, min_level=config.min_auth_level,
                          allow_anonymous_ntlm=config.allow_anonymous_ntlm, users=users, keytab=config.keytab)

    @staticmethod
    def _check_keytab(path: str) -> None:
        """An unreadable keytab, or one GSSAPI cannot accept with (an empty file), is a startup error; without
        pyspnego[kerberos] Kerberos binds get bind_nak 8."""
        from qm2qm.rpc.auth.security import kerberos_available, keytab_problem
        if not os.access(path, os.R_OK) or not os.path.isfile(path):
            raise StartupError(f"--keytab {path}: not a readable file")
        if not kerberos_available():
            log.warning("--keytab %s: Kerberos needs pyspnego[kerberos] (python-gssapi and python-krb5; "
                        "pip install 'qm2qm[kerberos]'): Kerberos binds get bind_nak 8", path)
            return
        problem = keytab_problem(path)
        if problem is not None:
            raise StartupError(f"--keytab {path}: GSSAPI cannot accept with it: {problem}")

    async def _bind_admin(self) -> None:
        from qm2qm.admin import HTTP_LOG, AdminApi

        api = AdminApi(self.qm, info=self.info, service=self.service, directory=self.directory,
                       mqrr_service=self.mqrr_service)
        from qm2qm.web import attach_app
        attach_app(api, self)
        self._runner = web.AppRunner(api.app, access_log=None, handle_signals=False, logger=HTTP_LOG)
        await self._runner.setup()
        from qm2qm.admin_listener import AdminConnections, listen
        self.admin_connections = AdminConnections()
        try:
            self._admin_server = await listen(self._runner, ADMIN_HOST, self.config.admin_port, self.admin_connections)
        except OSError as exc:
            raise StartupError(f"cannot listen on admin address {ADMIN_HOST}:{self.config.admin_port}: "
                               f"{exc.strerror or exc}") from None
        self.admin_port = self._admin_server.sockets[0].getsockname()[1]

    def info(self) -> dict:
        """What GET /v1/info reports: where to reach the server and which ports GetQMQMServerPort answers."""
        return {
            "rpc": {"host": self.config.host, "port": self.rpc.port if self.rpc else None},
            "admin": self.admin_url,
            "qmcomm_port": self.qmcomm.port if self.qmcomm else self.config.qmcomm_port,
            "allow_anonymous_read": bool(self.qm.allow_anonymous_read) if self.qm else None,
            "data_dir": self.config.data_dir,
            "computer_name": self.config.computer_name,
            "event_loop": _event_loop_name(),
            "queue_manager": str(getattr(self.qm, "identifier", "")),
            "version": list(self.service.config.version) if self.service else None,
            "limits": {"max_connections": self.config.max_connections,
                       "max_context_handles": self.config.max_context_handles,
                       "max_open_queues": self.config.max_open_queues, "max_cursors": self.config.max_cursors,
                       "max_subqueues": self.config.max_subqueues,
                       "max_reassembly_mib": self.config.max_reassembly_mib,
                       "max_unread_mib": self.config.max_unread_mib, "keepalive": self.config.keepalive},
        }

    async def close(self) -> None:
        """Stop accepting, answer pending calls, run handles down, flush and close the store (idempotent)."""
        if self.rpc is not None:
            log.info("shutting down: answering pending calls, running handles down, flushing the store")
        if self._admin_server is not None:
            self._admin_server.close()
            self._admin_server = None
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self.mqsd is not None:
            mqsd, self.mqsd = self.mqsd, None
            mqsd.close()
        if self.epm is not None:
            epm, self.epm = self.epm, None
            await epm.close()
        if self.qmcomm is not None:
            qmcomm, self.qmcomm = self.qmcomm, None
            await qmcomm.close(grace_s=SHUTDOWN_GRACE_S)
        if self.rpc is not None:
            rpc, self.rpc = self.rpc, None
            await rpc.close(grace_s=SHUTDOWN_GRACE_S)
        if self.tracer is not None:
            tracer, self.tracer = self.tracer, None
            await asyncio.to_thread(tracer.close)
        if self.mqcn is not None:
            mqcn, self.mqcn = self.mqcn, None
            await mqcn.stop()
        if self.directory is not None:
            directory, self.directory = self.directory, None
            directory.close()
        from shared_adm.store.base import StoreError
        if self.qm is not None:
            qm, self.qm = self.qm, None
            try:
                await qm.durable()
            except StoreError:
                pass                    # the store logged why; store.close() below reports it once
            except Exception:
                log.exception("final commit failed")
        if self.auth is not None and self.auth.users is not None:
            self.auth.users.close()
        if self.store is not None:
            store, self.store = self.store, None
            try:
                try:
                    store.flush()
                finally:
                    store.close()       # a store that cannot commit still releases its files
            except StoreError as exc:
                # disk full / read-only at shutdown: one line, no traceback; the caller exits non-zero
                log.error("store closed without its last changes: %s", exc)
                raise
            log.info("store flushed and closed")


def _event_loop_name() -> str:
    """'uvloop' or 'asyncio': the loop this server runs on (None outside a loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return "none"
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


async def serve(config: ServerConfig, *, on_ready: Callable[[App], None],
                stop: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set), then shut down cleanly."""
    stop = stop or asyncio.Event()
    app = App(config)
    await app.start()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        on_ready(app)
        await stop.wait()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await app.close()
