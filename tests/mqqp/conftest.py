"""Fixtures for the qm2qm handler tests (MS-MQQP 3.1): a QueueManager and an RpcServer with the qm2qm interface on
127.0.0.1, reached through impacket's DCE/RPC client with the qm2qm/mqqp/idl.py requests, over NDR and NDR64.

The server and the QueueManager live on the test's event loop; impacket is synchronous, so every client
call runs in a worker thread (``await c.call(...)``). Time is a ManualScheduler: nothing waits on a clock.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.ndr import NULL
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp import idl
from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RR_UNKNOWN
from qm2qm.mqqp.interface import build_service, service_interface
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.server import RpcServer
from shared_adm.clock import ManualScheduler
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode, RemoteReadState
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager

NDR = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64 = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
NULL_HANDLE = bytes(20)
QUEUE_PATH = "private$\\orders"
FORMAT_NAME = "DIRECT=OS:qm2qm\\" + QUEUE_PATH
QMCOMM_PORT = 2103
# Bound for a hung test (a waiting condition that never comes true), not a speed assertion.
HANG_GUARD_S = 60
FAULT_PTYPE = 3


def handle_of(value) -> bytes:
    """A decoded context-handle field as its 20 wire bytes (impacket gives bytes or the struct)."""
    return bytes(value if isinstance(value, (bytes, bytearray)) else value["Data"])


def u32(value: int) -> int:
    """An HRESULT as impacket returns it (signed) → as the spec writes it (unsigned)."""
    return value & 0xFFFFFFFF


class Fault(Exception):
    """A fault PDU (C706 12.6.4.7) and its status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"fault 0x{status:08x}")
        self.status = status


@dataclass
class Read:
    """The decoded answer of opnum 0, 9 or 10."""
    status: int
    context: bytes
    size: int
    arrive_time: int
    reserved: int
    buffer: bytes
    request_id: int
    sequential_id: int | None
    desc: Any = field(repr=False, default=None)


class Client:
    """One impacket connection bound to qm2qm; every opnum as a blocking method, and ``call`` to run one in a
    worker thread. Faults surface as impacket's DCERPCException (``fault_of`` extracts the status)."""

    def __init__(self, port: int, syntax) -> None:
        rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]")
        rpc.set_connect_timeout(HANG_GUARD_S)
        self.dce = rpc.get_dce_rpc()
        self.dce.connect()
        self.dce.bind(idl.MSRPC_UUID_QM2QM, transfer_syntax=syntax)
        assert self.dce.transfer_syntax == uuidtup_to_bin(syntax), "the server did not take the offered syntax"
        self._ids = iter(range(1, 1 << 32))
        self._expect_fault = False

    async def call(self, fn: Callable, *args, **kwargs):
        return await asyncio.to_thread(fn, *args, **kwargs)

    def disconnect(self) -> None:
        """Sever the connection, even while another thread is blocked in a call on it."""
        try:
            self.dce.get_rpc_transport().get_socket().shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.dce.disconnect()
        except Exception:
            pass

    def request(self, req):
        if self._expect_fault:
            return self._fault_request(req)
        return self.dce.request(req, checkError=False)

    def raw(self, req) -> bytes:
        """Send an idl.py request; return the response stub undecoded (for qm2qm.mqqp.codec to decode)."""
        if self.dce.transfer_syntax == self.dce.NDR64Syntax:
            req.changeTransferSyntax(self.dce.NDR64Syntax)
        self.dce.call(req.opnum, req)
        return self.dce.recv()

    def fault(self, fn: Callable, *args, **kwargs) -> int:
        """Call ``fn`` expecting a fault PDU; return its exact status (impacket masks unknown ones)."""
        self._expect_fault = True
        try:
            fn(*args, **kwargs)
        except Fault as fault:
            return fault.status
        finally:
            self._expect_fault = False
        raise AssertionError("the call was answered, not faulted")

    def _fault_request(self, req):
        if self.dce.transfer_syntax == self.dce.NDR64Syntax:
            req.changeTransferSyntax(self.dce.NDR64Syntax)
        return self.stub_fault(req.opnum, req)

    def stub_fault(self, opnum: int, stub) -> int:
        """Send ``stub`` (bytes or an NDR request) as opnum; raise Fault with the status of the fault PDU."""
        self.dce.call(opnum, stub)
        rpc = self.dce.get_rpc_transport()
        header = rpc.recv(count=16)
        body = rpc.recv(count=struct.unpack_from("<H", header, 8)[0] - 16)
        if header[2] != FAULT_PTYPE:
            raise AssertionError(f"expected a fault PDU, got PTYPE {header[2]}")
        raise Fault(struct.unpack_from("<I", body, 8)[0])

    # -- opnums --

    @staticmethod
    def desc(h_queue: int, action: int, timeout: int, cursor: int, request_id: int, dw_queue: int | None):
        d = idl.REMOTEREADDESC()
        d["hRemoteQueue"] = h_queue
        d["hCursor"] = cursor
        d["ulAction"] = action
        d["ulTimeout"] = timeout
        d["dwSize"] = 0
        d["dwQueue"] = h_queue if dw_queue is None else dw_queue
        d["dwRequestID"] = request_id
        d["Reserved"] = 0
        d["dwArriveTime"] = 0
        d["eAckNack"] = RR_UNKNOWN
        d["lpBuffer"] = NULL
        return d

    @staticmethod
    def _read(resp, desc, request_id: int, sequential_id: int | None) -> Read:
        data = desc["lpBuffer"]
        buffer = b"".join(data) if isinstance(data, list) else bytes(data or b"")
        return Read(u32(resp["ErrorCode"]), handle_of(resp["pphContext"]), desc["dwSize"],
                    desc["dwArriveTime"], desc["Reserved"], buffer, request_id, sequential_id, desc)

    def start_receive(self, h_queue: int, action: int = MQ_ACTION_RECEIVE, *, timeout: int = 0, cursor: int = 0,
                      request_id: int | None = None, dw_queue: int | None = None) -> Read:
        request_id = next(self._ids) if request_id is None else request_id
        req = idl.RemoteQMStartReceive()
        req["lpRemoteReadDesc"] = self.desc(h_queue, action, timeout, cursor, request_id, dw_queue)
        resp = self.request(req)
        return self._read(resp, resp["lpRemoteReadDesc"], request_id, None)

    def start_receive2(self, h_queue: int, action: int = MQ_ACTION_RECEIVE, *, timeout: int = 0, cursor: int = 0,
                       request_id: int | None = None, dw_queue: int | None = None, null_desc: bool = False) -> Read:
        request_id = next(self._ids) if request_id is None else request_id
        req = idl.RemoteQMStartReceive2()
        return self._read2(req, h_queue, action, timeout, cursor, request_id, dw_queue, null_desc)

    def start_receive_by_lookup_id(self, h_queue: int, lookup_id: int, action: int, *, timeout: int = 0,
                                   cursor: int = 0, request_id: int | None = None, dw_queue: int | None = None,
                                   null_desc: bool = False) -> Read:
        request_id = next(self._ids) if request_id is None else request_id
        req = idl.RemoteQMStartReceiveByLookupId()
        req["LookupId"] = lookup_id
        return self._read2(req, h_queue, action, timeout, cursor, request_id, dw_queue, null_desc)

    def _read2(self, req, h_queue: int, action: int, timeout: int, cursor: int, request_id: int,
               dw_queue: int | None, null_desc: bool) -> Read:
        """Send an opnum 9 or 10 request carrying a REMOTEREADDESC2 and decode its read."""
        if null_desc:
            req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = NULL
        else:
            req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = self.desc(h_queue, action, timeout, cursor, request_id,
                                                                    dw_queue)
        req["lpRemoteReadDesc2"]["SequentialId"] = 0
        resp = self.request(req)
        desc2 = resp["lpRemoteReadDesc2"]
        desc = desc2["pRemoteReadDesc"] if not null_desc else {"lpBuffer": b"", "dwSize": 0, "dwArriveTime": 0,
                                                                "Reserved": 0}
        return self._read(resp, desc, request_id, desc2["SequentialId"])

    def end_receive(self, context: bytes, ack: int) -> tuple[int, bytes]:
        req = idl.RemoteQMEndReceive()
        req["pphContext"] = context
        req["dwAck"] = ack
        resp = self.request(req)
        return u32(resp["ErrorCode"]), handle_of(resp["pphContext"])

    def open_queue(self, h_queue: int, p_queue: int | None = None, dwp_context: int | None = None, *,
                   lic_guid: uuid.UUID | None = None, mqs: int = 0) -> tuple[int, bytes]:
        req = idl.RemoteQMOpenQueue()
        req["pLicGuid"] = (lic_guid or uuid.UUID(int=0x1234)).bytes_le
        req["dwMQS"] = mqs
        req["hQueue"] = h_queue
        req["pQueue"] = h_queue if p_queue is None else p_queue
        req["dwpContext"] = h_queue if dwp_context is None else dwp_context
        resp = self.request(req)
        return u32(resp["ErrorCode"]), handle_of(resp["phContext"])

    def close_queue(self, context: bytes) -> tuple[int, bytes]:
        req = idl.RemoteQMCloseQueue()
        req["pphContext"] = context
        resp = self.request(req)
        return u32(resp["ErrorCode"]), handle_of(resp["pphContext"])

    def close_cursor(self, h_queue: int, h_cursor: int) -> int:
        req = idl.RemoteQMCloseCursor()
        req["hQueue"] = h_queue
        req["hCursor"] = h_cursor
        return u32(self.request(req)["ErrorCode"])

    def cancel_receive(self, h_queue: int, request_id: int, p_queue: int | None = None) -> int:
        req = idl.RemoteQMCancelReceive()
        req["hQueue"] = h_queue
        req["pQueue"] = h_queue if p_queue is None else p_queue
        req["dwRequestID"] = request_id
        return u32(self.request(req)["ErrorCode"])

    def purge_queue(self, h_queue: int) -> int:
        req = idl.RemoteQMPurgeQueue()
        req["hQueue"] = h_queue
        return u32(self.request(req)["ErrorCode"])

    def get_qmqm_server_port(self, port_type: int) -> int:
        req = idl.RemoteQMGetQMQMServerPort()
        req["dwPortType"] = port_type
        return self.request(req)["ReturnValue"]

    def get_version(self) -> tuple[int, int, int]:
        resp = self.request(idl.RemoteQmGetVersion())
        return resp["pMajor"], resp["pMinor"], resp["pBuildNumber"]


@dataclass
class Env:
    """The server side of a test: QueueManager, qm2qm Service (private ADM), RpcServer, manual clock."""
    qm: QueueManager
    service: Any
    server: RpcServer
    scheduler: ManualScheduler
    queue: Any
    syntax: tuple
    clients: list = field(default_factory=list)

    @property
    def adm(self):
        return self.service.adm

    def open_descriptor(self, access: QueueAccessType = QueueAccessType.RECEIVE_ACCESS,
                        state: RemoteReadState = RemoteReadState.OPENED, format_name: str = FORMAT_NAME):
        """What qmcomm R_QMOpenRemoteQueue does (MS-MQMP 3.1.4.2): Open Queue with RemoteReadState Opened."""
        status, descriptor = self.qm.open_queue(format_name, access, QueueShareMode.DENY_NONE, state)
        assert status == 0, hex(status)
        return descriptor

    def enqueue(self, body: bytes = b"payload", *, label: str = "", priority: int = 3, queue=None,
                **attributes) -> Message:
        queue = self.queue if queue is None else queue
        message = Message(body=body, label=label, priority=priority, destination_queue_format_name=FORMAT_NAME,
                          **attributes)
        assert self.qm.enqueue_message(queue, message) == 0
        return message

    def positions(self, queue=None) -> dict[int, PositionState]:
        """LookupIdentifier → State of every message in the queue."""
        queue = self.queue if queue is None else queue
        return {p.lookup_identifier: p.state for p in queue.message_position_list}

    def bodies(self, queue=None) -> list[bytes]:
        queue = self.queue if queue is None else queue
        return [p.message.body for p in queue.message_position_list]

    async def connect(self) -> Client:
        client = await asyncio.to_thread(Client, self.server.port, self.syntax)
        self.clients.append(client)
        return client

    async def session(self, access: QueueAccessType = QueueAccessType.RECEIVE_ACCESS):
        """A client with a qm2qm session (RemoteQMOpenQueue) on a fresh remote-read descriptor."""
        client = await self.connect()
        descriptor = self.open_descriptor(access)
        status, context = await client.call(client.open_queue, descriptor.handle)
        assert status == 0, hex(status)
        return client, descriptor, context

    async def blocked(self, client: Client, fn: Callable, h_queue: int, *args, request_id: int, **kwargs):
        """Start a read that must wait (in a worker thread) and return its task once the server has it waiting."""
        task = asyncio.create_task(client.call(fn, h_queue, *args, request_id=request_id, **kwargs))

        def waiting() -> bool:
            if task.done():
                raise AssertionError(f"the read did not wait: {task.result()!r}")
            entry = self.adm.remote_read_entries.find(h_queue, request_id)
            return entry is not None and entry.waiting is not None

        await self.wait_until(waiting)
        return task

    async def kill(self, client: Client, pending: asyncio.Task | None = None) -> None:
        """Sever the client's connection and wait until the server has torn it down (rundown included);
        a call the client had in flight fails on the client side."""
        host, port = client.dce.get_rpc_transport().get_socket().getsockname()[:2]
        [connection] = [rc for rc in self.server.connections.values() if rc.peer == f"{host}:{port}"]
        await asyncio.to_thread(client.disconnect)
        if pending is not None:
            results = await asyncio.gather(pending, return_exceptions=True)
            assert isinstance(results[0], Exception), results[0]
        await asyncio.wait_for(asyncio.shield(connection.finished), HANG_GUARD_S)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Let the loop run until predicate() holds (checked between loop iterations)."""
        async def poll():
            while not predicate():
                await asyncio.sleep(0.005)
        await asyncio.wait_for(poll(), HANG_GUARD_S)


@pytest.fixture(params=[NDR, NDR64], ids=["ndr", "ndr64"])
def syntax(request):
    return request.param


@pytest.fixture
async def make_env(syntax):
    """Factory: an Env over a fresh QueueManager (optionally on a given Store); torn down at the end."""
    envs: list[Env] = []

    async def make(store=None) -> Env:
        scheduler = ManualScheduler()
        qm = QueueManager(store=store, scheduler=scheduler)
        qm.initialize()
        status, queue = qm.create_queue(".\\" + QUEUE_PATH)
        assert status == 0
        config = MqqpConfig(qmcomm_port=QMCOMM_PORT)
        service = build_service(qm, config)
        server = RpcServer([service_interface(service)], host="127.0.0.1", port=0, idle_timeout_s=None)
        await server.start()
        config.bound_port = server.port
        env = Env(qm, service, server, scheduler, queue, syntax)
        envs.append(env)
        return env

    yield make
    for env in envs:
        for client in env.clients:
            await asyncio.to_thread(client.disconnect)
        await env.server.close()


@pytest.fixture
async def env(make_env):
    return await make_env()


from shared_adm.store.base import MemoryStore, StoreError  # noqa: E402


class FullDiskStore(MemoryStore):
    """A store whose commits fail while ``full`` is set, as SqliteStore's do on a full or read-only disk."""

    full = False

    async def durable(self) -> None:
        await asyncio.sleep(0)
        if self.full:
            raise StoreError("qm2qm.sqlite3: commit failed: database or disk is full")
