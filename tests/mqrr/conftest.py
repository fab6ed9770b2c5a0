"""Fixtures for the MS-MQRR handler tests: one QueueManager served by qm2qm (MS-MQQP) and RemoteRead (MS-MQRR)
on one RpcServer on 127.0.0.1, reached through impacket (qm2qm.mqrr.client.MqrrClient and the qm2qm test
client), over NDR and NDR64. Time is a ManualScheduler; impacket calls run in worker threads."""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from qm2qm.mqqp.interface import build_service as build_mqqp, service_interface as mqqp_interface
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.mqrr.client import MqrrClient, MqrrFault
from qm2qm.mqrr.interface import build_service, service_interface
from qm2qm.rpc.server import RpcServer
from shared_adm.clock import ManualScheduler
from shared_adm.enums import QueueAccessType, QueueShareMode, RemoteReadState
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager

from ..mqqp.conftest import NDR, NDR64, Client as MqqpClient, Env as MqqpEnv

QUEUE_PATH = "private$\\orders"
FORMAT_NAME = "DIRECT=OS:qm2qm\\" + QUEUE_PATH


@dataclass
class Env(MqqpEnv):
    """The qm2qm test Env (QueueManager, RpcServer, manual clock) whose ``service`` is the RemoteRead service and
    whose ``mqqp`` is the qm2qm service on the same QueueManager and server."""
    mqqp: Any = None

    @property
    def ndr64(self) -> bool:
        return self.syntax is NDR64

    def enqueue(self, body: bytes = b"payload", *, label: str = "", queue=None, **attributes) -> Message:
        queue = self.queue if queue is None else queue
        message = Message(body=body, label=label, destination_queue_format_name=FORMAT_NAME, **attributes)
        assert self.qm.enqueue_message(queue, message) == 0
        return message

    async def connect(self) -> MqrrClient:
        client = await asyncio.to_thread(MqrrClient, "127.0.0.1", self.server.port, ndr64=self.ndr64)
        self.clients.append(client)
        return client

    async def mqqp_client(self) -> MqqpClient:
        client = await asyncio.to_thread(MqqpClient, self.server.port, NDR64 if self.ndr64 else NDR)
        self.clients.append(client)
        return client

    async def mqqp_session(self):
        """A qm2qm client with a session on a descriptor qmcomm would have opened (MS-MQMP 3.1.4.2)."""
        status, descriptor = self.qm.open_queue(FORMAT_NAME, QueueAccessType.RECEIVE_ACCESS,
                                                QueueShareMode.DENY_NONE, RemoteReadState.OPENED)
        assert status == 0
        client = await self.mqqp_client()
        status, _ = await asyncio.to_thread(client.open_queue, descriptor.handle)
        assert status == 0
        return client, descriptor

    async def call(self, fn: Callable, *args, **kwargs):
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def fault(self, fn: Callable, *args, **kwargs) -> int:
        """Call expecting a fault PDU; its status."""
        try:
            await asyncio.to_thread(fn, *args, **kwargs)
        except MqrrFault as fault:
            return fault.status
        raise AssertionError("the call was answered, not faulted")

    async def stub_fault(self, opnum: int, stub: bytes) -> int:
        """Send a raw stub as ``opnum`` on a new connection; the status of the fault it must get. The connection
        must still be served afterwards."""
        client = await self.connect()
        status = await self.fault(client.call_stub, opnum, stub)
        assert await self.call(client.get_server_port) == self.server.port
        return status

    async def opened(self, access: int = 1, format_name: str = FORMAT_NAME):
        """A client and a queue context handle from R_OpenQueue."""
        client = await self.connect()
        return client, await self.call(client.open, format_name, access)

    async def blocked(self, fn: Callable, *args, **kwargs) -> asyncio.Task:
        """Start a read that must wait; return its task once the server has it waiting."""
        before = sum(len(d.waiting_message_read_operation_collection) for d in self._descriptors())
        task = asyncio.create_task(asyncio.to_thread(fn, *args, **kwargs))

        def waiting() -> bool:
            if task.done():
                raise AssertionError(f"the read did not wait: {task.result()!r}")
            return sum(len(d.waiting_message_read_operation_collection) for d in self._descriptors()) > before

        await self.wait_until(waiting)
        return task

    def _descriptors(self):
        return [d for q in self.qm.queue_collection.values() for d in q.open_queue_descriptor_collection]


class FakeCall:
    """A CallContext for handler-level tests (no wire): numbered handles, the anonymous caller."""

    def __init__(self, ndr64: bool = False) -> None:
        from qm2qm.rpc.interface import ANONYMOUS
        self.call_id, self.opnum, self.ndr64 = 1, 0, ndr64
        self.connection_id = self.association_group_id = 1
        self.peer_host = "127.0.0.1"
        self.principal, self.auth_level, self.answer_now = ANONYMOUS, 1, False
        self.handles: dict[bytes, object] = {}

    def new_handle(self, handle_type, obj) -> bytes:
        wire = struct.pack("<I", len(self.handles) + 1) + bytes(16)
        self.handles[wire] = obj
        return wire

    def lookup_handle(self, wire: bytes, handle_type):
        return self.handles.get(bytes(wire))

    def close_handle(self, wire: bytes) -> bytes:
        self.handles.pop(bytes(wire), None)
        return bytes(20)


@pytest.fixture(params=[NDR, NDR64], ids=["ndr", "ndr64"])
def syntax(request):
    return request.param


@pytest.fixture
async def env(syntax):
    scheduler = ManualScheduler()
    qm = QueueManager(scheduler=scheduler)
    qm.initialize()
    qm.allow_anonymous_read = True      # the wire tests read unauthenticated; test_op02 checks the refusal
    status, queue = qm.create_queue(".\\" + QUEUE_PATH)
    assert status == 0
    mqqp = build_mqqp(qm, MqqpConfig(qmcomm_port=2103))
    service = build_service(qm)
    server = RpcServer([mqqp_interface(mqqp), service_interface(service)], host="127.0.0.1", port=0,
                       idle_timeout_s=None)
    await server.start()
    service.port = server.port
    env = Env(qm, service, server, scheduler, queue, syntax, mqqp=mqqp)
    yield env
    for client in env.clients:
        await asyncio.to_thread(client.disconnect)
    await server.close()
