"""Fixtures for the qmcomm tests (MS-MQMP 3.1.4): one QueueManager served by a qmcomm listener (qmcomm + qmcomm2) and
a qm2qm listener, as `qm2qm serve` runs them, reached with impacket over NDR and NDR64.

The servers live on the test's event loop; impacket is blocking, so every client call runs in a worker thread
(``await env.run(fn, ...)``). The QueueManager lets ANONYMOUS LOGON read (as `serve --allow-anonymous-read`), since
every caller is anonymous until authentication lands; the access-check tests turn it off.
"""
from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from qm2qm.mqmp.client import QmcommClient
from qm2qm.mqmp.handlers._service import QmcommConfig
from qm2qm.mqmp.interface import build_interfaces
from qm2qm.mqqp.interface import build_service as build_qm2qm_service, service_interface
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.server import RpcServer
from shared_adm.clock import ManualScheduler
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from tests.mqqp.conftest import NDR, NDR64, Client as Qm2qmTestClient

QUEUE_PATH = "private$\\orders"
FORMAT_NAME = "DIRECT=OS:qm2qm\\" + QUEUE_PATH
HANG_GUARD_S = 60
FAULT_PTYPE = 3


class Fault(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"fault 0x{status:08x}")
        self.status = status


def stub_fault(dce, opnum: int, stub) -> int:
    """Send ``stub`` (bytes or an NDR request) as opnum; return the status of the fault PDU answered."""
    if not isinstance(stub, (bytes, bytearray)) and dce.transfer_syntax == dce.NDR64Syntax:
        stub.changeTransferSyntax(dce.NDR64Syntax)
    dce.call(opnum, stub)
    rpc = dce.get_rpc_transport()
    header = rpc.recv(count=16)
    body = rpc.recv(count=struct.unpack_from("<H", header, 8)[0] - 16)
    if header[2] != FAULT_PTYPE:
        raise AssertionError(f"expected a fault PDU, got PTYPE {header[2]}")
    return struct.unpack_from("<I", body, 8)[0]


@dataclass
class Env:
    qm: QueueManager
    qmcomm: Any                 # QmcommService
    qm2qm: Any                  # qm2qm Service
    qmcomm_server: RpcServer
    qm2qm_server: RpcServer
    queue: Any
    syntax: tuple
    clients: list = field(default_factory=list)

    @property
    def ndr64(self) -> bool:
        return self.syntax == NDR64

    async def run(self, fn: Callable, *args, **kwargs):
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def qmcomm_client(self) -> QmcommClient:
        client = QmcommClient("127.0.0.1", self.qmcomm_server.port, ndr64=self.ndr64, connect_timeout=HANG_GUARD_S)
        await self.run(client.connect)
        self.clients.append(client)
        return client

    async def qm2qm_client(self) -> Qm2qmTestClient:
        client = await self.run(Qm2qmTestClient, self.qm2qm_server.port, self.syntax)
        self.clients.append(client)
        return client

    def enqueue(self, body: bytes = b"payload") -> Message:
        message = Message(body=body, destination_queue_format_name=FORMAT_NAME)
        assert self.qm.enqueue_message(self.queue, message) == 0
        return message

    def descriptors(self) -> list:
        return list(self.queue.open_queue_descriptor_collection)

    async def kill(self, server: RpcServer, client) -> None:
        """Sever the client's connection and wait until the server has run its handles down."""
        dce = client.dce
        host, port = dce.get_rpc_transport().get_socket().getsockname()[:2]
        [connection] = [rc for rc in server.connections.values() if rc.peer == f"{host}:{port}"]
        try:
            dce.get_rpc_transport().get_socket().shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        await self.run(_quiet_disconnect, dce)
        await asyncio.wait_for(asyncio.shield(connection.finished), HANG_GUARD_S)


def _quiet_disconnect(dce) -> None:
    try:
        dce.disconnect()
    except Exception:
        pass


@pytest.fixture(params=[NDR, NDR64], ids=["ndr", "ndr64"])
def syntax(request):
    return request.param


@pytest.fixture
async def env(syntax):
    qm = QueueManager(scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    qm.allow_anonymous_read = True
    status, queue = qm.create_queue(".\\" + QUEUE_PATH)
    assert status == 0
    qm2qm_config = MqqpConfig()
    qm2qm_service = build_qm2qm_service(qm, qm2qm_config)
    qm2qm_server = RpcServer([service_interface(qm2qm_service)], port=0, idle_timeout_s=None)
    await qm2qm_server.start()
    qmcomm_service, interfaces = build_interfaces(qm, QmcommConfig())
    qmcomm_server = RpcServer(interfaces, port=0, idle_timeout_s=None)
    await qmcomm_server.start()
    qmcomm_service.config.qmcomm_port = qm2qm_config.qmcomm_port = qmcomm_server.port
    qmcomm_service.config.qm2qm_port = qm2qm_config.bound_port = qm2qm_server.port
    e = Env(qm, qmcomm_service, qm2qm_service, qmcomm_server, qm2qm_server, queue, syntax)
    yield e
    for client in e.clients:
        dce = getattr(client, "dce", None)
        if dce is not None:
            await asyncio.to_thread(_quiet_disconnect, dce)
    await qmcomm_server.close()
    await qm2qm_server.close()
