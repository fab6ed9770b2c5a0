"""Fixtures for the RPC runtime tests: a server with the probe interface, raw-PDU clients (C706 12.6)."""
from __future__ import annotations

import asyncio
import faulthandler
import socket
import struct
import uuid
from dataclasses import dataclass

import pytest

from qm2qm.rpc.interface import NDR20, NDR64
from qm2qm.rpc.testing import PROBE_UUID, PROBE_VERSION, Probe

# PTYPEs (C706 12.6.4)
REQUEST, RESPONSE, FAULT, BIND, BIND_ACK, BIND_NAK, ALTER, ALTER_RESP = 0, 2, 3, 11, 12, 13, 14, 15
CO_CANCEL, ORPHANED = 18, 19
FIRST_LAST = 0x03
DID_NOT_EXECUTE = 0x20


def syntax_bytes(syntax_uuid: uuid.UUID, major: int, minor: int = 0) -> bytes:
    """A p_syntax_id_t: GUID in little-endian layout + u16 major + u16 minor."""
    return syntax_uuid.bytes_le + struct.pack("<HH", major, minor)


def header(ptype: int, flags: int, frag_len: int, call_id: int, auth_len: int = 0) -> bytes:
    return struct.pack("<BBBB4sHHI", 5, 0, ptype, flags, b"\x10\0\0\0", frag_len, auth_len, call_id)


def bind_pdu(call_id: int = 1, *, assoc_group: int = 0, syntaxes=(NDR20,), iface=PROBE_UUID,
             version=PROBE_VERSION, ctx_id: int = 0, alter: bool = False, max_frag: int = 5840) -> bytes:
    """A bind (or alter_context) with one context item offering the given transfer syntaxes."""
    item = struct.pack("<HBB", ctx_id, len(syntaxes), 0) + syntax_bytes(iface, *version)
    item += b"".join(syntax_bytes(u, v, 0) for u, v in syntaxes)
    body = struct.pack("<HHIB3x", max_frag, max_frag, assoc_group, 1) + item
    return header(ALTER if alter else BIND, FIRST_LAST, 16 + len(body), call_id) + body


def request_pdu(call_id: int, opnum: int, stub: bytes = b"", *, ctx_id: int = 0, flags: int = FIRST_LAST) -> bytes:
    body = struct.pack("<IHH", len(stub), ctx_id, opnum) + stub
    return header(REQUEST, flags, 16 + len(body), call_id) + body


def cancel_pdu(call_id: int) -> bytes:
    return header(CO_CANCEL, FIRST_LAST, 16, call_id)


def orphaned_pdu(call_id: int) -> bytes:
    return header(ORPHANED, FIRST_LAST, 16, call_id)


@dataclass
class Pdu:
    """A received PDU, split into the fields the tests look at."""
    ptype: int
    flags: int
    call_id: int
    body: bytes          # everything after the 16-byte header

    @property
    def stub(self) -> bytes:
        assert self.ptype == RESPONSE, f"expected a response, got PTYPE {self.ptype} {self.body.hex()}"
        return self.body[8:]

    @property
    def status(self) -> int:
        assert self.ptype == FAULT, f"expected a fault, got PTYPE {self.ptype}"
        return struct.unpack_from("<I", self.body, 8)[0]

    @property
    def assoc_group(self) -> int:
        assert self.ptype in (BIND_ACK, ALTER_RESP), f"expected a bind_ack, got PTYPE {self.ptype}"
        return struct.unpack_from("<I", self.body, 4)[0]

    @property
    def nak_reason(self) -> int:
        assert self.ptype == BIND_NAK, f"expected a bind_nak, got PTYPE {self.ptype}"
        return struct.unpack_from("<H", self.body, 0)[0]

    def results(self) -> list[tuple[int, int, bytes]]:
        """bind_ack / alter_context_resp p_result_list: (result, reason, transfer syntax)."""
        (sec_len,) = struct.unpack_from("<H", self.body, 8)
        off = 16 + 10 + sec_len
        off += (-off) % 4
        n = self.body[off - 16]
        off += 4
        out = []
        for _ in range(n):
            result, reason = struct.unpack_from("<HH", self.body, off - 16)
            out.append((result, reason, self.body[off - 16 + 4: off - 16 + 24]))
            off += 24
        return out


class RawClient:
    """An asyncio-streams DCE/RPC client speaking raw PDUs (several calls in flight are allowed)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ctx_id = 0
        self.assoc_group = 0

    @classmethod
    async def connect(cls, port: int) -> "RawClient":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    @property
    def local_port(self) -> int:
        return self.writer.get_extra_info("sockname")[1]

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def recv(self) -> Pdu | None:
        """The next PDU, or None at EOF / reset."""
        try:
            head = await self.reader.readexactly(16)
            (frag_len,) = struct.unpack_from("<H", head, 8)
            body = await self.reader.readexactly(frag_len - 16)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return Pdu(head[2], head[3], struct.unpack_from("<I", head, 12)[0], body)

    async def bind(self, *, assoc_group: int = 0, syntaxes=(NDR20,), **kw) -> Pdu:
        self.send(bind_pdu(assoc_group=assoc_group, syntaxes=syntaxes, **kw))
        pdu = await self.recv()
        assert pdu is not None, "connection closed instead of bind_ack"
        if pdu.ptype == BIND_ACK:
            self.assoc_group = pdu.assoc_group
        return pdu

    async def call(self, opnum: int, stub: bytes = b"", call_id: int = 7) -> Pdu:
        self.send(request_pdu(call_id, opnum, stub, ctx_id=self.ctx_id))
        pdu = await self.recv()
        assert pdu is not None, "connection closed instead of a reply"
        assert pdu.call_id == call_id
        return pdu

    async def at_eof(self) -> bool:
        """Read until the server closes; True if nothing but EOF came."""
        data = await self.reader.read()
        return data == b""

    async def close(self, *, reset: bool = False) -> None:
        if reset:
            sock = self.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.writer.transport.abort()
            return
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


def server_side(server, client: RawClient):
    """The server's RpcConnection for this client."""
    for rc in server.connections.values():
        if rc.peer.endswith(f":{client.local_port}"):
            return rc
    raise LookupError("no server connection for this client")


async def until(predicate, *, step: float = 0.002, limit: int = 5000) -> None:
    """Wait for a condition driven by the server (bounded; this asserts the condition, not the time)."""
    for _ in range(limit):
        if predicate():
            return
        await asyncio.sleep(step)
    raise AssertionError("condition never became true")


SERVER_TEST_MODULES = {"test_server", "test_server_future", "test_server_limits", "test_rundown", "test_impacket_client"}


@pytest.fixture(autouse=True)
def hang_guard(request):
    """A hung server test (a server that never answers or never closes) aborts the run with tracebacks."""
    if request.module.__name__.rsplit(".", 1)[-1] not in SERVER_TEST_MODULES:
        yield
        return
    faulthandler.dump_traceback_later(60, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
async def make_server(probe):
    """Factory: an RpcServer serving the probe on an ephemeral 127.0.0.1 port; closed at teardown."""
    from qm2qm.rpc.server import RpcServer
    servers = []

    async def make(**kw):
        kw.setdefault("idle_timeout_s", None)
        server = RpcServer([probe.interface], **kw)
        await server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.close()


@pytest.fixture
async def server(make_server):
    return await make_server()


@pytest.fixture
async def connect(server):
    """Factory: a RawClient connected to the server fixture (closed at teardown)."""
    clients = []

    async def make(port: int | None = None) -> RawClient:
        client = await RawClient.connect(port or server.port)
        clients.append(client)
        return client

    yield make
    for client in clients:
        if not client.writer.is_closing():
            await client.close()


@pytest.fixture
async def bound(connect):
    """A RawClient bound to the probe with NDR."""
    client = await connect()
    ack = await client.bind()
    assert ack.ptype == BIND_ACK
    return client


NDR64_SYNTAX = NDR64


@pytest.fixture
async def auth_env():
    """A qm2qm + whoami server authenticating against tests/rpc/auth_helpers.USERS_TEXT (NDR)."""
    from tests.mqqp.conftest import NDR
    from tests.rpc.auth_helpers import start_env, stop_env
    env = await start_env(NDR)
    yield env
    await stop_env(env)
