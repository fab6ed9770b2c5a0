"""qmcomm client on impacket's DCERPC_v5 (MS-MQMP 3.2.4: the calls a remote reader makes before and after its qm2qm
session): R_QMGetRTQMServerPort, R_QMOpenRemoteQueue, R_QMCreateRemoteCursor, R_QMCloseRemoteQueueContext."""
from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.ndr import NDRPOINTER, NULL
from impacket.dcerpc.v5.rpcrt import (RPC_C_AUTHN_LEVEL_CALL, RPC_C_AUTHN_LEVEL_PKT, RPC_C_AUTHN_WINNT,
                                      DCERPCException, rpc_status_codes)

from qm2qm.mqmp import codec, idl
from qm2qm.mqmp.codec import wire_handle
from qm2qm.mqmp.constants import MQ_DENY_NONE, MQ_RECEIVE_ACCESS

NDR20_SYNTAX = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64_SYNTAX = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
# MS-MQMP 3.1.4.2 dwMQS 0x400: "Windows servers and Windows Vista and later clients" (<24>); what qm2qm declares.
DWMQS_SERVER = 0x00000400
_FAULT_CODES = {name: code for code, name in rpc_status_codes.items()}


class RpcCallError(Exception):
    """The call did not complete: a fault PDU (``status`` is its code when known) or a broken connection."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Credentials:
    """What impacket authenticates a binding with (MS-RPCE 2.2.1.1.7: NTLM = RPC_C_AUTHN_WINNT by default);
    ``user`` None or empty = an unauthenticated binding. ``nthash`` (hex) replaces the password."""
    user: str | None = ""
    domain: str = ""
    password: str = field(default="", repr=False)
    auth_level: int | None = None       # RPC_C_AUTHN_LEVEL_*; impacket's default when None
    nthash: str = field(default="", repr=False)
    auth_type: int = RPC_C_AUTHN_WINNT

    @property
    def effective_level(self) -> int | None:
        """MS-RPCE 2.2.1.1.8: a client MUST upgrade level call (3) to packet (4)."""
        return RPC_C_AUTHN_LEVEL_PKT if self.auth_level == RPC_C_AUTHN_LEVEL_CALL else self.auth_level


def bind(host: str, port: int, interface: bytes, *, ndr64: bool, connect_timeout: float = 10.0,
         call_timeout: float | None = None, credentials: Credentials | None = None, name: str = "") -> Any:
    """Connect over ncacn_ip_tcp and bind ``interface`` (named ``name`` in errors; NDR or NDR64); the impacket
    DCERPC_v5 object. With credentials, impacket authenticates the bind with NTLM (RPC_C_AUTHN_WINNT)."""
    rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:{host}[{port}]")
    rpc.set_connect_timeout(connect_timeout)
    dce = rpc.get_dce_rpc()
    if credentials is not None and credentials.user:
        dce.set_credentials(credentials.user, credentials.password, credentials.domain, nthash=credentials.nthash)
        dce.set_auth_type(credentials.auth_type)
        if credentials.effective_level is not None:
            dce.set_auth_level(credentials.effective_level)
    try:
        dce.connect()
    except (DCERPCException, OSError) as exc:
        raise RpcCallError(f"cannot reach {host}:{port}: {exc}") from None
    try:
        sock = rpc.get_socket()
        sock.settimeout(call_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        dce.bind(interface, transfer_syntax=NDR64_SYNTAX if ndr64 else NDR20_SYNTAX)
    except (DCERPCException, OSError) as exc:
        dce.disconnect()
        raise RpcCallError(f"cannot bind {name or 'the interface'} at {host}:{port}: {exc}") from None
    return dce


def _status_name(status: int) -> str:
    """MQ_ERROR_* name of a status (shared_adm.status), or 'status' when it has none."""
    from shared_adm import status as names
    return next((n for n in dir(names) if n.startswith("MQ_") and getattr(names, n) == status), "status")


def fault_status(exc: DCERPCException) -> tuple[int | None, str]:
    """The fault status impacket's exception stands for (by code, by name, or an MQ status it does not know,
    MS-MQMQ 2.4), and the text to show."""
    text = str(exc)
    status = exc.get_error_code()
    if status is None:
        status = next((code for name, code in _FAULT_CODES.items() if name in text), None)
    unknown = re.search(r"fault status code: ([0-9a-fA-F]{8})", text)
    if unknown:
        status = int(unknown[1], 16)
        text = f"fault {_status_name(status)} (0x{status:08X})"
    return status, text


def call(dce: Any, request: Any) -> Any:
    """One request; faults and lost connections as RpcCallError."""
    try:
        return dce.request(request, checkError=False)
    except DCERPCException as exc:
        status, text = fault_status(exc)
        raise RpcCallError(f"{type(request).__name__} failed: {text}", status) from None
    except (OSError, EOFError) as exc:
        raise RpcCallError(f"{type(request).__name__}: connection lost: {exc}") from None


@dataclass(frozen=True)
class OpenedQueue:
    """R_QMOpenRemoteQueue's answer: HRESULT, the PCTX_OPENREMOTE_HANDLE_TYPE and the three DWORDs."""
    status: int
    context: bytes
    pdw_context: int
    dwp_queue: int
    h_queue: int


def create_remote_cursor_request(h_queue: int, ndr64: bool = False) -> Any:
    """R_QMCreateRemoteCursor (3.1.4.4) with the zeroed CACTransferBufferV1 Windows sends (<29>): every field 0 and
    every pointer NULL (impacket would otherwise marshal a referent and a pointee for each pointer left unset)."""
    req = idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    tb = req["ptb1"]
    for name, _ in tb.structure:
        if name != "u":
            tb[name] = NULL if isinstance(tb.fields[name], NDRPOINTER) else 0
    tb["uTransferType"] = 0
    tb["u"]["tag"] = 0
    tb["u"]["Send"]["pAdminQueueFormat"] = NULL
    tb["u"]["Send"]["pResponseQueueFormat"] = NULL
    req["hQueue"] = h_queue
    return req


class QmcommClient:
    """A qmcomm client bound to one endpoint (the IP_HANDSHAKE port, 2103 by default). Blocking (impacket)."""

    def __init__(self, host: str, port: int, *, ndr64: bool = False, connect_timeout: float = 10.0,
                 call_timeout: float | None = None, credentials: Credentials | None = None) -> None:
        self.host, self.port, self.ndr64 = host, port, ndr64
        self._options = dict(ndr64=ndr64, connect_timeout=connect_timeout, call_timeout=call_timeout,
                             credentials=credentials)
        self.dce = None

    def connect(self) -> "QmcommClient":
        self.dce = bind(self.host, self.port, idl.MSRPC_UUID_QMCOMM, name="qmcomm", **self._options)
        return self

    def close(self) -> None:
        """Disconnect (the server runs this association's PCTX_OPENREMOTE handles down)."""
        if self.dce is not None:
            dce, self.dce = self.dce, None
            try:
                dce.disconnect()
            except Exception:
                pass

    def __enter__(self) -> "QmcommClient":
        return self.connect() if self.dce is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, request: Any) -> Any:
        if self.dce is None:
            self.connect()
        return call(self.dce, request)

    def get_rtqm_server_port(self, f_ip: int) -> int:
        """Opnum 31 (3.1.4.24): the port of qmcomm (0) or qm2qm (1); 0 when unknown."""
        req = idl.R_QMGetRTQMServerPort()
        req["fIP"] = f_ip
        return self._call(req)["ReturnValue"]

    def open_remote_queue(self, format_name: str | None, *, access: int = MQ_RECEIVE_ACCESS,
                          share_mode: int = MQ_DENY_NONE, lic_guid: uuid.UUID | None = None,
                          mqs: int = DWMQS_SERVER, process_id: int | None = None) -> OpenedQueue:
        """Opnum 2 (3.1.4.2); ``format_name`` None sends a NULL pQueueFormat."""
        req = idl.R_QMOpenRemoteQueue()
        if format_name is None:
            req["pQueueFormat"] = NULL
        else:
            codec.fill_queue_format(req["pQueueFormat"], format_name)
        req["dwCallingProcessID"] = os.getpid() if process_id is None else process_id
        req["dwDesiredAccess"] = access
        req["dwShareMode"] = share_mode
        req["pLicGuid"] = (lic_guid or uuid.uuid4()).bytes_le
        req["dwMQS"] = mqs
        resp = self._call(req)
        return OpenedQueue(resp["ErrorCode"] & 0xFFFFFFFF, wire_handle(resp["pphContext"]), resp["pdwContext"],
                           resp["dwpQueue"], resp["phQueue"])

    def create_remote_cursor(self, h_queue: int) -> tuple[int, int]:
        """Opnum 4 (3.1.4.4), with the zeroed CACTransferBufferV1 Windows sends (<29>); (HRESULT, phCursor)."""
        resp = self._call(create_remote_cursor_request(h_queue))
        return resp["ErrorCode"] & 0xFFFFFFFF, resp["phCursor"]

    def close_remote_queue_context(self, context: bytes) -> bytes:
        """Opnum 3 (3.1.4.3); returns the handle sent back (NULL)."""
        req = idl.R_QMCloseRemoteQueueContext()
        req["pphContext"] = context
        return wire_handle(self._call(req)["pphContext"])
