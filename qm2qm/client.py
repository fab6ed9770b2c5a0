"""qm2qm client on impacket's DCERPC_v5 (MS-MQQP 3.2: every opnum 0–10) and a client of the admin API."""
from __future__ import annotations

import itertools
import json
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.ndr import NULL
from impacket.dcerpc.v5.rpcrt import (RPC_C_AUTHN_LEVEL_CALL, RPC_C_AUTHN_LEVEL_PKT, RPC_C_AUTHN_LEVEL_PKT_PRIVACY,
                                      RPC_C_AUTHN_WINNT, DCERPCException, rpc_status_codes)

from qm2qm.mqqp import idl
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, RR_ACK,
                                  RR_UNKNOWN)

NDR20_SYNTAX = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64_SYNTAX = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
NULL_HANDLE = bytes(20)
MQ_OK = 0
_FAULT_CODES = {name: code for code, name in rpc_status_codes.items()}


def _status_name(status: int) -> str:
    """MQ_ERROR_* name of a status (shared_adm.status), or 'status' when it has none."""
    from shared_adm import status as names
    return next((n for n in dir(names) if n.startswith("MQ_") and getattr(names, n) == status), "status")


class RpcCallError(Exception):
    """The call did not complete: a fault PDU (``status`` is its code when known) or a broken connection."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _hresult(value: int) -> int:
    return value & 0xFFFFFFFF


def _handle(value: Any) -> bytes:
    """A decoded context handle field as its 20 wire bytes."""
    return bytes(value if isinstance(value, (bytes, bytearray)) else value["Data"])


@dataclass
class ReadResult:
    """The outcome of RemoteQMStartReceive / 2 / ByLookupId (MS-MQQP 3.1.4.1, 3.1.4.10, 3.1.4.11)."""
    hresult: int
    context: bytes                  # PCTX_REMOTEREAD_HANDLE_TYPE (20 bytes; NULL for peeks and failures)
    request_id: int
    size: int                       # REMOTEREADDESC.dwSize
    arrive_time: int                # REMOTEREADDESC.dwArriveTime
    reserved: int                   # REMOTEREADDESC.Reserved (1 when set by the server)
    buffer: bytes                   # the UserMessage packet (MS-MQMQ 2.2.20); b"" when none
    sequential_id: int | None       # REMOTEREADDESC2.SequentialId (None for opnum 0)

    @property
    def ok(self) -> bool:
        """True when the HRESULT is MQ_OK."""
        return self.hresult == MQ_OK

    def message(self):
        """The Message decoded from the buffer (MS-MQDMPR 3.1.7.1.31 Deserialize Message From Buffer)."""
        from shared_adm.packet import deserialize_message_from_buffer
        return deserialize_message_from_buffer(self.buffer)


class Qm2qmClient:
    """A qm2qm client bound to one server endpoint; each method is one opnum and returns decoded results.

    Blocking (impacket). A pending receive blocks the connection: cancel it from a second client.
    """

    def __init__(self, host: str, port: int, *, ndr64: bool = False, connect_timeout: float = 10.0,
                 call_timeout: float | None = None, user: str | None = None, domain: str = "",
                 password: str = "", nthash: str = "", auth_level: int = RPC_C_AUTHN_LEVEL_PKT_PRIVACY,
                 auth_type: int = RPC_C_AUTHN_WINNT) -> None:
        """``user`` (with ``domain`` and ``password`` or ``nthash``, hex) binds with NTLM at ``auth_level``
        (MS-RPCE 2.2.1.1.8: 2 connect .. 6 privacy); None binds unauthenticated."""
        self.host = host
        self.port = port
        self.ndr64 = ndr64
        self.user = user
        self.domain = domain
        self._password = password
        self._nthash = nthash
        # MS-RPCE 2.2.1.1.8: a client MUST upgrade level call (3) to packet (4)
        self.auth_level = RPC_C_AUTHN_LEVEL_PKT if auth_level == RPC_C_AUTHN_LEVEL_CALL else auth_level
        self.auth_type = auth_type
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self._dce = None
        self._request_ids = itertools.count(1)

    # ------------------------------------------------------------------ connection

    def connect(self) -> "Qm2qmClient":
        """Connect over ncacn_ip_tcp and bind the qm2qm interface (NDR or NDR64, MS-MQQP 2.2)."""
        rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:{self.host}[{self.port}]")
        rpc.set_connect_timeout(self.connect_timeout)
        dce = rpc.get_dce_rpc()
        if self.user is not None:
            dce.set_credentials(self.user, self._password, self.domain, nthash=self._nthash)
            dce.set_auth_type(self.auth_type)
            dce.set_auth_level(self.auth_level)
        try:
            dce.connect()
        except (DCERPCException, OSError) as exc:
            raise RpcCallError(f"cannot reach {self.host}:{self.port}: {exc}") from None
        try:
            sock = rpc.get_socket()
            sock.settimeout(self.call_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            dce.bind(idl.MSRPC_UUID_QM2QM, transfer_syntax=NDR64_SYNTAX if self.ndr64 else NDR20_SYNTAX)
        except DCERPCException as exc:
            dce.disconnect()
            raise RpcCallError(f"cannot bind qm2qm at {self.host}:{self.port}: {exc}") from None
        except OSError as exc:
            dce.disconnect()
            raise RpcCallError(f"cannot reach {self.host}:{self.port}: {exc}") from None
        self._dce = dce
        return self

    def close(self) -> None:
        """Disconnect (the server runs this association's handles down)."""
        if self._dce is not None:
            dce, self._dce = self._dce, None
            try:
                dce.disconnect()
            except Exception:
                pass

    def __enter__(self) -> "Qm2qmClient":
        return self.connect() if self._dce is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def next_request_id(self) -> int:
        """A dwRequestID unique among this client's pending reads (MS-MQQP 3.2.4.2)."""
        return next(self._request_ids) & 0xFFFFFFFF

    def _call(self, request: Any) -> Any:
        if self._dce is None:
            self.connect()
        try:
            return self._dce.request(request, checkError=False)
        except DCERPCException as exc:
            text = str(exc)
            status = exc.get_error_code()
            if status is None:
                status = next((code for name, code in _FAULT_CODES.items() if name in text), None)
            unknown = re.search(r"fault status code: ([0-9a-fA-F]{8})", text)
            if unknown:                                 # an MQ status impacket does not know (MS-MQMQ 2.4)
                status = int(unknown[1], 16)
                text = f"fault {_status_name(status)} (0x{status:08X})"
            raise RpcCallError(f"{type(request).__name__} failed: {text}", status) from None
        except (OSError, EOFError) as exc:
            raise RpcCallError(f"{type(request).__name__}: connection lost: {exc}") from None

    # ------------------------------------------------------------------ opnums

    @staticmethod
    def _desc(h_remote_queue: int, action: int, timeout_ms: int, cursor: int, request_id: int,
              dw_queue: int | None) -> Any:
        desc = idl.REMOTEREADDESC()
        desc["hRemoteQueue"] = h_remote_queue
        desc["hCursor"] = cursor
        desc["ulAction"] = action
        desc["ulTimeout"] = timeout_ms
        desc["dwSize"] = 0
        desc["dwQueue"] = h_remote_queue if dw_queue is None else dw_queue
        desc["dwRequestID"] = request_id
        desc["Reserved"] = 0
        desc["dwArriveTime"] = 0
        desc["eAckNack"] = RR_UNKNOWN
        desc["lpBuffer"] = NULL
        return desc

    @staticmethod
    def _read_result(resp: Any, desc: Any, request_id: int, sequential_id: int | None) -> ReadResult:
        data = desc["lpBuffer"]          # impacket: a list of 1-byte items, or b"" for a NULL pointer
        buffer = b"".join(data) if isinstance(data, list) else bytes(data or b"")
        return ReadResult(hresult=_hresult(resp["ErrorCode"]), context=_handle(resp["pphContext"]),
                          request_id=request_id, size=desc["dwSize"], arrive_time=desc["dwArriveTime"],
                          reserved=desc["Reserved"], buffer=buffer, sequential_id=sequential_id)

    def start_receive(self, h_remote_queue: int, *, action: int = MQ_ACTION_PEEK_CURRENT, timeout_ms: int = 0,
                      cursor: int = 0, request_id: int | None = None, dw_queue: int | None = None) -> ReadResult:
        """Opnum 0 RemoteQMStartReceive (3.1.4.1); ``dw_queue`` defaults to hRemoteQueue as 3.1.4.1 requires."""
        request_id = self.next_request_id() if request_id is None else request_id
        req = idl.RemoteQMStartReceive()
        req["lpRemoteReadDesc"] = self._desc(h_remote_queue, action, timeout_ms, cursor, request_id, dw_queue)
        resp = self._call(req)
        return self._read_result(resp, resp["lpRemoteReadDesc"], request_id, None)

    def start_receive2(self, h_remote_queue: int, *, action: int = MQ_ACTION_PEEK_CURRENT, timeout_ms: int = 0,
                       cursor: int = 0, request_id: int | None = None, dw_queue: int | None = None) -> ReadResult:
        """Opnum 9 RemoteQMStartReceive2 (3.1.4.10): as opnum 0, plus the message's SequentialId."""
        request_id = self.next_request_id() if request_id is None else request_id
        req = idl.RemoteQMStartReceive2()
        req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = self._desc(h_remote_queue, action, timeout_ms, cursor,
                                                                 request_id, dw_queue)
        req["lpRemoteReadDesc2"]["SequentialId"] = 0
        resp = self._call(req)
        desc2 = resp["lpRemoteReadDesc2"]
        return self._read_result(resp, desc2["pRemoteReadDesc"], request_id, desc2["SequentialId"])

    def start_receive_by_lookup_id(self, h_remote_queue: int, lookup_id: int, *, action: int,
                                   request_id: int | None = None, dw_queue: int | None = None,
                                   timeout_ms: int = 0, cursor: int = 0) -> ReadResult:
        """Opnum 10 RemoteQMStartReceiveByLookupId (3.1.4.11); timeout and cursor MUST be 0."""
        request_id = self.next_request_id() if request_id is None else request_id
        req = idl.RemoteQMStartReceiveByLookupId()
        req["LookupId"] = lookup_id
        req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = self._desc(h_remote_queue, action, timeout_ms, cursor,
                                                                 request_id, dw_queue)
        req["lpRemoteReadDesc2"]["SequentialId"] = 0
        resp = self._call(req)
        desc2 = resp["lpRemoteReadDesc2"]
        return self._read_result(resp, desc2["pRemoteReadDesc"], request_id, desc2["SequentialId"])

    def end_receive(self, context: bytes, ack: int = RR_ACK) -> tuple[int, bytes]:
        """Opnum 1 RemoteQMEndReceive (3.1.4.2): RR_ACK deletes, RR_NACK returns the message; (HRESULT, handle)."""
        req = idl.RemoteQMEndReceive()
        req["pphContext"] = context
        req["dwAck"] = ack
        resp = self._call(req)
        return _hresult(resp["ErrorCode"]), _handle(resp["pphContext"])

    def open_queue(self, h_queue: int, p_queue: int | None = None, dwp_context: int | None = None, *,
                   lic_guid: uuid.UUID | None = None, mqs: int = 0) -> tuple[int, bytes]:
        """Opnum 2 RemoteQMOpenQueue (3.1.4.3); pQueue and dwpContext default to hQueue (MS-MQMP 3.1.4.2 <28>)."""
        req = idl.RemoteQMOpenQueue()
        req["pLicGuid"] = (lic_guid or uuid.uuid4()).bytes_le
        req["dwMQS"] = mqs
        req["hQueue"] = h_queue
        req["pQueue"] = h_queue if p_queue is None else p_queue
        req["dwpContext"] = h_queue if dwp_context is None else dwp_context
        resp = self._call(req)
        return _hresult(resp["ErrorCode"]), _handle(resp["phContext"])

    def close_queue(self, session: bytes) -> tuple[int, bytes]:
        """Opnum 3 RemoteQMCloseQueue (3.1.4.4); returns (HRESULT, the handle sent back: NULL on success)."""
        req = idl.RemoteQMCloseQueue()
        req["pphContext"] = session
        resp = self._call(req)
        return _hresult(resp["ErrorCode"]), _handle(resp["pphContext"])

    def close_cursor(self, h_queue: int, h_cursor: int) -> int:
        """Opnum 4 RemoteQMCloseCursor (3.1.4.5)."""
        req = idl.RemoteQMCloseCursor()
        req["hQueue"] = h_queue
        req["hCursor"] = h_cursor
        return _hresult(self._call(req)["ErrorCode"])

    def cancel_receive(self, h_queue: int, request_id: int, p_queue: int | None = None) -> int:
        """Opnum 5 RemoteQMCancelReceive (3.1.4.6); pQueue defaults to hQueue."""
        req = idl.RemoteQMCancelReceive()
        req["hQueue"] = h_queue
        req["pQueue"] = h_queue if p_queue is None else p_queue
        req["dwRequestID"] = request_id
        return _hresult(self._call(req)["ErrorCode"])

    def purge_queue(self, h_queue: int) -> int:
        """Opnum 6 RemoteQMPurgeQueue (3.1.4.7)."""
        req = idl.RemoteQMPurgeQueue()
        req["hQueue"] = h_queue
        return _hresult(self._call(req)["ErrorCode"])

    def get_qmqm_server_port(self, port_type: int) -> int:
        """Opnum 7 RemoteQMGetQMQMServerPort (3.1.4.8): the port, or 0 for an unknown/unavailable type."""
        req = idl.RemoteQMGetQMQMServerPort()
        req["dwPortType"] = port_type
        return self._call(req)["ReturnValue"]

    def get_version(self) -> tuple[int, int, int]:
        """Opnum 8 RemoteQmGetVersion (3.1.4.9): (major, minor, build)."""
        resp = self._call(idl.RemoteQmGetVersion())
        return resp["pMajor"], resp["pMinor"], resp["pBuildNumber"]

    # ------------------------------------------------------------------ client rules (3.2.4)

    def uses_start_receive2(self) -> bool:
        """3.2.4.2: use opnum 9 unless the server reports a version below 5.1 (build 951)."""
        major, minor, build = self.get_version()
        old = major < 5 or (major == 5 and minor < 1) or (major == 5 and minor < 1 and build < 951)
        return not old


# ---------------------------------------------------------------------------------------------- admin API

class AdminError(Exception):
    """The admin API answered with an error (``status`` is the HTTP status; ``body`` its JSON)."""

    def __init__(self, message: str, status: int | None = None, body: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body or {}


class AdminClient:
    """A small blocking client of the admin API (docs/admin-api.md)."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    @staticmethod
    def quote(pathname: str) -> str:
        """A queue path name as one URL path segment (backslashes and $ escaped)."""
        return urllib.parse.quote(pathname, safe="")

    def request(self, method: str, path: str, body: dict | None = None) -> Any:
        """One admin request; raises AdminError with the API's message on a 4xx/5xx."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"message": raw.decode("utf-8", "replace")}
            raise AdminError(payload.get("message", str(exc)), exc.code, payload) from None
        except urllib.error.URLError as exc:
            raise AdminError(f"cannot reach the admin API at {self.base_url}: {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise AdminError(f"admin API at {self.base_url}: {exc}") from None

    def info(self) -> dict:
        """GET /v1/info."""
        return self.request("GET", "/v1/info")

    def list_queues(self) -> list[dict]:
        """GET /v1/queues."""
        return self.request("GET", "/v1/queues")["queues"]

    def create_queue(self, pathname: str, **attrs: Any) -> dict:
        """POST /v1/queues."""
        return self.request("POST", "/v1/queues", {"pathname": pathname, **attrs})

    def show_queue(self, pathname: str) -> dict:
        """GET /v1/queues/{pathname}."""
        return self.request("GET", f"/v1/queues/{self.quote(pathname)}")

    def delete_queue(self, pathname: str) -> dict:
        """DELETE /v1/queues/{pathname}."""
        return self.request("DELETE", f"/v1/queues/{self.quote(pathname)}")

    def send(self, pathname: str, **fields: Any) -> dict:
        """POST /v1/queues/{pathname}/messages (fields as in docs/admin-api.md)."""
        return self.request("POST", f"/v1/queues/{self.quote(pathname)}/messages", fields)

    def list_messages(self, pathname: str, *, body: bool = False, limit: int = 1000) -> list[dict]:
        """GET /v1/queues/{pathname}/messages: the first ``limit`` messages in queue order."""
        suffix = f"?limit={limit}" + ("&body=1" if body else "")
        return self.request("GET", f"/v1/queues/{self.quote(pathname)}/messages{suffix}")["messages"]

    def show_message(self, pathname: str, lookup_id: int) -> dict:
        """GET /v1/queues/{pathname}/messages/{id}."""
        return self.request("GET", f"/v1/queues/{self.quote(pathname)}/messages/{lookup_id}")

    def open_queue(self, pathname: str, *, access: str = "receive", share_mode: str = "deny-none") -> dict:
        """POST /v1/queues/{pathname}/open: hRemoteQueue / dwQueue for a remote read."""
        return self.request("POST", f"/v1/queues/{self.quote(pathname)}/open",
                            {"access": access, "share_mode": share_mode})

    def open_cursor(self, handle: int) -> dict:
        """POST /v1/handles/{handle}/cursors: hCursor."""
        return self.request("POST", f"/v1/handles/{handle}/cursors", {})

    def list_handles(self) -> list[dict]:
        """GET /v1/handles."""
        return self.request("GET", "/v1/handles")["handles"]

    def close_handle(self, handle: int) -> dict:
        """DELETE /v1/handles/{handle}."""
        return self.request("DELETE", f"/v1/handles/{handle}")

    def list_reads(self) -> dict:
        """GET /v1/reads."""
        return self.request("GET", "/v1/reads")


__all__ = ["Qm2qmClient", "ReadResult", "RpcCallError", "AdminClient", "AdminError", "MQ_ACTION_RECEIVE",
           "MQ_ACTION_PEEK_CURRENT", "MQ_ACTION_PEEK_NEXT"]
