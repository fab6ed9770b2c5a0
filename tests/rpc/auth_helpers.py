"""Shared pieces of the authentication tests: a user file, a server with qm2qm + a "whoami" test interface, and
impacket clients that authenticate (NTLM through DCERPC_v5.set_credentials / set_auth_level / set_auth_type)."""
from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from typing import Callable

from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.rpcrt import RPC_C_AUTHN_WINNT
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp import idl
from qm2qm.mqqp.interface import build_service, service_interface
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.auth import AuthPolicy, UserStore
from qm2qm.rpc.interface import Interface, Operation
from qm2qm.rpc.server import RpcServer
from shared_adm.clock import ManualScheduler
from shared_adm.queue_manager import QueueManager
from tests.mqqp.conftest import HANG_GUARD_S, QMCOMM_PORT, QUEUE_PATH, Client, Env

DOMAIN = "QM2QM"
USER = "alice"
PASSWORD = "Secret-123"
ALICE_SID = "S-1-5-21-1004336348-1177238915-682003330-1001"
USERS_TEXT = f"# test accounts\n{DOMAIN}:{USER}:{PASSWORD}:{ALICE_SID}\n:bob:Bob-pass-2\n"

WHOAMI_UUID = uuid.UUID("8d1e3a7c-5c63-4c6e-9a51-3f6c0a6b2e01")
WHOAMI = uuidtup_to_bin((str(WHOAMI_UUID), "1.0"))
OP_WHOAMI = 0
OP_ECHO = 1
FAULT_PTYPE = 3


def whoami_interface() -> Interface:
    """A test interface: opnum 0 answers 'level|authenticated|DOMAIN\\user|sid'; opnum 1 echoes its stub reversed."""
    def whoami(ctx, stub: bytes) -> bytes:
        p = ctx.principal
        return f"{ctx.auth_level}|{int(p.authenticated)}|{p.name}|{p.sid}".encode()

    def echo(ctx, stub: bytes) -> bytes:
        return stub[::-1]
    return Interface(uuid=WHOAMI_UUID, version=(1, 0), name="whoami",
                     operations={OP_WHOAMI: Operation(OP_WHOAMI, "whoami", whoami),
                                 OP_ECHO: Operation(OP_ECHO, "echo", echo)})


async def start_env(syntax, users_text: str | None = USERS_TEXT, **policy) -> Env:
    """A qm2qm server (with the whoami interface) authenticating against ``users_text`` (None: no user file)."""
    scheduler = ManualScheduler()
    qm = QueueManager(scheduler=scheduler)
    qm.initialize()
    status, queue = qm.create_queue(".\\" + QUEUE_PATH)
    assert status == 0
    config = MqqpConfig(qmcomm_port=QMCOMM_PORT)
    service = build_service(qm, config)
    users = UserStore.parse(users_text) if users_text is not None else None
    auth = AuthPolicy(users=users, server_principal="QM2QM-TEST$", **policy)
    server = RpcServer([service_interface(service), whoami_interface()], host="127.0.0.1", port=0,
                       idle_timeout_s=None, auth=auth)
    await server.start()
    config.bound_port = server.port
    return Env(qm, service, server, scheduler, queue, syntax)


async def stop_env(env: Env) -> None:
    for client in env.clients:
        await asyncio.to_thread(client.disconnect)
    await env.server.close()
    if env.server.auth.users is not None:
        env.server.auth.users.close()


class Tap:
    """Wraps an impacket transport's send to record and rewrite outgoing PDUs (tampering tests)."""

    def __init__(self, rpc) -> None:
        self.sent: list[bytes] = []
        self.rewrite: Callable[[bytes], bytes] | None = None
        self.hold = False                   # record without sending (the test sends what it chooses)
        self._send = rpc.send
        rpc.send = self._tapped

    def _tapped(self, data, *args, **kwargs):
        data = bytes(data)
        if self.rewrite is not None:
            data = self.rewrite(data)
        self.sent.append(data)
        if self.hold:
            return None
        return self._send(data, *args, **kwargs)


class AuthClient(Client):
    """tests/mqqp's Client, but binding with NTLM credentials at ``level`` (None: no authentication)."""

    def __init__(self, port: int, syntax, *, level: int | None = 6, user: str = USER, password: str = PASSWORD,
                 domain: str = DOMAIN, interface=idl.MSRPC_UUID_QM2QM, header_sign: bool = False,
                 auth_type: int = RPC_C_AUTHN_WINNT, bind: bool = True) -> None:
        rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]")
        rpc.set_connect_timeout(HANG_GUARD_S)
        self.dce = rpc.get_dce_rpc()
        if level is not None:
            self.dce.set_credentials(user, password, domain)
            self.dce.set_auth_type(auth_type)
            self.dce.set_auth_level(level)
        self.dce.connect()
        self.rpc = self.dce.get_rpc_transport()
        self.tap = Tap(self.rpc)
        self.acks: list[bytes] = []
        recv = self.rpc.recv

        def recorded(*args, **kwargs):
            data = recv(*args, **kwargs)
            if data and len(data) >= 16 and data[2] in (12, 15):       # bind_ack, alter_context_resp
                self.acks.append(bytes(data))
            return data
        self.rpc.recv = recorded
        if header_sign:
            self.tap.rewrite = _set_header_sign_on_bind
        self._ids = iter(range(1, 1 << 32))
        self._expect_fault = False
        if bind:
            self.dce.bind(interface, transfer_syntax=syntax)
            self.tap.rewrite = None
            if interface == idl.MSRPC_UUID_QM2QM:
                assert self.dce.transfer_syntax == uuidtup_to_bin(syntax)

    def raw_call(self, opnum: int, stub: bytes) -> bytes:
        """Call opnum with a raw stub; the (verified, unsealed by impacket) response stub."""
        self.dce.call(opnum, stub)
        return self.dce.recv()

    def whoami(self) -> str:
        return self.raw_call(OP_WHOAMI, b"").decode()

    def read_pdu(self) -> bytes:
        """One whole PDU from the socket."""
        header = self.rpc.recv(count=16)
        return header + self.rpc.recv(count=struct.unpack_from("<H", header, 8)[0] - 16)

    def expect_fault_and_close(self) -> int:
        """Read a fault PDU, check the server then closed the connection; its status."""
        pdu = self.read_pdu()
        assert pdu[2] == FAULT_PTYPE, f"expected a fault, got PTYPE {pdu[2]}"
        sock = self.rpc.get_socket()
        sock.settimeout(HANG_GUARD_S)
        assert sock.recv(1) == b"", "the server did not close the connection"
        return struct.unpack_from("<I", pdu, 24)[0]

    def fault_context_id(self, pdu: bytes) -> int:
        return struct.unpack_from("<H", pdu, 20)[0]


def _set_header_sign_on_bind(data: bytes) -> bytes:
    if data[2] == 11:                                   # bind: PFC_SUPPORT_HEADER_SIGN (MS-RPCE 2.2.2.3)
        return data[:3] + bytes([data[3] | 0x04]) + data[4:]
    return data


async def connect(env: Env, **kwargs) -> AuthClient:
    client = await asyncio.to_thread(AuthClient, env.server.port, env.syntax, **kwargs)
    env.clients.append(client)
    return client


def peer_closed(sock: socket.socket) -> bool:
    sock.settimeout(HANG_GUARD_S)
    return sock.recv(1) == b""


def raw_client(env: Env, **kwargs):
    """A RawAuthClient (pyspnego initiator) for the whoami interface over NDR, as alice unless told otherwise."""
    import uuid as _uuid
    from tests.mqqp.conftest import NDR
    from tests.rpc.raw_auth_client import RawAuthClient
    kwargs.setdefault("user", f"{DOMAIN}\\{USER}")
    kwargs.setdefault("password", PASSWORD)
    return RawAuthClient(env.server.port, (WHOAMI_UUID, 1, 0), (_uuid.UUID(NDR[0]), 2, 0), **kwargs)
