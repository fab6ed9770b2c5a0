"""qm2qm client on impacket's DCERPC_v5 (MS-MQQP 3.2: every opnum 0–10) and a client of the admin API."""
from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from impacket.dcerpc.v5.ndr import NULL
from impacket.dcerpc.v5.rpcrt import RPC_C_AUTHN_LEVEL_PKT_PRIVACY, RPC_C_AUTHN_WINNT

from qm2qm.mqmp.client import Credentials, RpcCallError, bind, call as rpc_call  # noqa: F401 (re-exported)
from qm2qm.mqqp import idl
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, RR_ACK,
                                  RR_UNKNOWN)

NDR20_SYNTAX = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64_SYNTAX = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
NULL_HANDLE = bytes(20)
MQ_OK = 0


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
                 call_timeout: float | None = None, credentials: Credentials | None = None,
                 user: str | None = None, domain: str = "", password: str = "", nthash: str = "",
                 auth_level: int = RPC_C_AUTHN_LEVEL_PKT_PRIVACY, auth_type: int = RPC_C_AUTHN_WINNT) -> None:
        """``user`` (with ``domain`` and ``password`` or ``nthash``, hex) binds with NTLM at ``auth_level``
        (MS-RPCE 2.2.1.1.8: 2 connect .. 6 privacy; 3 is sent as 4); None binds unauthenticated. ``credentials``
        gives the same as one object (qm2qm.mqmp.client.Credentials) and wins when both are given."""
        if credentials is None and user is not None:
            credentials = Credentials(user=user, domain=domain, password=password, nthash=nthash,
                                      auth_level=auth_level, auth_type=auth_type)
        self.credentials = credentials
        self.host = host
        self.port = port
        self.ndr64 = ndr64
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self._dce = None
        self._request_ids = itertools.count(1)

    # ------------------------------------------------------------------ connection

    def connect(self) -> "Qm2qmClient":
        """Connect over ncacn_ip_tcp and bind the qm2qm interface (NDR or NDR64, MS-MQQP 2.2)."""
        self._dce = bind(self.host, self.port, idl.MSRPC_UUID_QM2QM, ndr64=self.ndr64,
                         connect_timeout=self.connect_timeout, call_timeout=self.call_timeout,
                         credentials=self.credentials, name="qm2qm")
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
        return rpc_call(self._dce, request)

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
        self._check_url()
        try:
            req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data is not None else {})
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"message": raw.decode("utf-8", "replace").strip()}
            if not isinstance(payload, dict):
                payload = {}
            message = payload.get("message")
            if not isinstance(message, str) or not message:
                message = f"{method} {self.base_url}{path}: {exc.reason or 'error'}, with no error message"
            raise AdminError(message, exc.code, payload) from None
        except urllib.error.URLError as exc:
            raise AdminError(f"cannot reach the admin API at {self.base_url}: {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise AdminError(f"admin API at {self.base_url}: {exc}") from None
        if not isinstance(data, dict):      # every answer of the admin API is an object (docs/admin-api.md)
            kinds = {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}
            kind = kinds.get(type(data), "a number")
            raise AdminError(f"{method} {self.base_url}{path} answered {kind}, not a JSON object: is it the qm2qm "
                             "admin API?")
        return data

    def _check_url(self) -> None:
        """AdminError naming what is wrong with base_url (urllib would raise ValueError or InvalidURL from deep
        inside, or try FTP)."""
        try:
            parts = urllib.parse.urlsplit(self.base_url)
            parts.port                                  # ValueError: not a number, or out of range
        except ValueError as exc:
            raise AdminError(f"admin API URL {self.base_url!r} is not a URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AdminError(f"admin API URL {self.base_url!r} is not an http:// or https:// URL with a host")

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

    def list_messages(self, pathname: str, *, body: bool = False, limit: int | None = 1000,
                      after: int | None = None) -> list[dict]:
        """GET /v1/queues/{pathname}/messages: the first ``limit`` messages (None: all) in queue order past lookup id
        ``after``, fetched a page (at most 10,000) at a time."""
        out: list[dict] = []
        while limit is None or len(out) < limit:
            page = 10_000 if limit is None else min(10_000, limit - len(out))
            query = f"?limit={page}" + ("&body=1" if body else "") + ("" if after is None else f"&after={after}")
            data = self.request("GET", f"/v1/queues/{self.quote(pathname)}/messages{query}")
            out.extend(data["messages"])
            after = data.get("next_after")
            if after is None:
                break
        return out

    def show_message(self, pathname: str, lookup_id: int) -> dict:
        """GET /v1/queues/{pathname}/messages/{id}."""
        return self.request("GET", f"/v1/queues/{self.quote(pathname)}/messages/{lookup_id}")

    def delete_message(self, pathname: str, lookup_id: int) -> dict:
        """DELETE /v1/queues/{pathname}/messages/{id}: take one Available message away."""
        return self.request("DELETE", f"/v1/queues/{self.quote(pathname)}/messages/{lookup_id}")

    def move_message(self, pathname: str, lookup_id: int, to: str = "") -> dict:
        """POST /v1/queues/{pathname}/messages/{id}/move: to the subqueue ``to`` of its queue, or "" the queue."""
        return self.request("POST", f"/v1/queues/{self.quote(pathname)}/messages/{lookup_id}/move", {"to": to})

    def open_queue(self, pathname: str, *, access: str = "receive", share_mode: str = "deny-none") -> dict:
        """POST /v1/queues/{pathname}/open: hRemoteQueue / dwQueue for a remote read."""
        return self.request("POST", f"/v1/queues/{self.quote(pathname)}/open",
                            {"access": access, "share_mode": share_mode})

    def open_cursor(self, handle: int) -> dict:
        """POST /v1/handles/{handle}/cursors: hCursor."""
        return self.request("POST", f"/v1/handles/{handle}/cursors", {})

    def permissions(self, pathname: str) -> dict:
        """GET /v1/queues/{pathname}/permissions."""
        return self.request("GET", f"/v1/queues/{self.quote(pathname)}/permissions")

    def change_permissions(self, pathname: str, verb: str, principal: str, right: str) -> dict:
        """POST /v1/queues/{pathname}/permissions: verb is 'grant' or 'revoke'."""
        return self.request("POST", f"/v1/queues/{self.quote(pathname)}/permissions",
                            {verb: right, "principal": principal})

    def list_handles(self) -> list[dict]:
        """GET /v1/handles."""
        return self.request("GET", "/v1/handles")["handles"]

    def close_handle(self, handle: int) -> dict:
        """DELETE /v1/handles/{handle}."""
        return self.request("DELETE", f"/v1/handles/{handle}")

    def list_transactions(self) -> list[dict]:
        """GET /v1/transactions."""
        return self.request("GET", "/v1/transactions")["transactions"]

    def end_transaction(self, identifier: str, outcome: str) -> dict:
        """POST /v1/transactions/{identifier}/commit or /abort."""
        return self.request("POST", f"/v1/transactions/{self.quote(identifier)}/{outcome}")

    def list_reads(self) -> dict:
        """GET /v1/reads."""
        return self.request("GET", "/v1/reads")


__all__ = ["Qm2qmClient", "ReadResult", "RpcCallError", "AdminClient", "AdminError", "MQ_ACTION_RECEIVE",
           "MQ_ACTION_PEEK_CURRENT", "MQ_ACTION_PEEK_NEXT"]


# ---------------------------------------------------------------------------------------------- the Windows sequence

def ept_map_port(host: str, epm_port: int, interface: bytes, *, connect_timeout: float = 10.0) -> int:
    """ept_map (MS-RPCE 2.2.1.2.5) at host:epm_port: the TCP port ``interface`` (impacket uuidtup bytes) listens on."""
    from impacket.dcerpc.v5 import epm, transport
    dce = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:{host}[{epm_port}]")
    dce.set_connect_timeout(connect_timeout)
    dce = dce.get_dce_rpc()
    try:
        dce.connect()
        binding = epm.hept_map(host, interface, protocol="ncacn_ip_tcp", dce=dce)
    except Exception as exc:     # impacket raises DCERPCException (EPT_S_NOT_REGISTERED), OSError, ...
        raise RpcCallError(f"endpoint mapper at {host}:{epm_port}: {exc}",
                           getattr(exc, "error_code", None)) from None
    finally:
        try:
            dce.disconnect()
        except Exception:
            pass
    return int(binding.rsplit("[", 1)[1].rstrip("]"))


class RemoteReader:
    """A remote reader doing what a Windows reader does, end to end, for one queue (MS-MQMP 4.2 with MS-MQQP 4.1):

    endpoint-mapper lookup of qmcomm (or ``qmcomm_port``), R_QMGetRTQMServerPort(IP_HANDSHAKE), R_QMOpenRemoteQueue,
    R_QMCreateRemoteCursor when ``cursor``, endpoint-mapper lookup of qm2qm (or ``qm2qm_port``, else
    R_QMGetRTQMServerPort(IP_READ)), RemoteQMOpenQueue, RemoteQmGetVersion; then reads; ``close()`` sends
    RemoteQMCloseQueue and R_QMCloseRemoteQueueContext.

    The read API (peek / peek_next / receive / purge, ReadResult) names no protocol. ``protocol`` chooses the path:
    ``"qm2qm"`` (default) the qmcomm + qm2qm sequence above; ``"mqrr"`` MS-MQRR RemoteRead (qm2qm.mqrr.reader:
    endpoint-mapper lookup of 1a9134dd-7b39-45ba-ad88-44d01ca47f28 v1.0 or ``mqrr_port``, R_GetServerPort,
    R_OpenQueue, R_CreateCursor when ``cursor``, R_StartReceive / R_EndReceive, R_CloseQueue); ``"auto"`` what a
    Windows Server 2003+ client does (MS-MQRR 3.2.4.1): MS-MQRR first, and qmcomm + qm2qm when the endpoint mapper
    answers EPT_S_NOT_REGISTERED. After ``open()``, ``protocol`` is the path taken ("qm2qm" or "mqrr").
    Credentials (user, domain, password, auth_level) go to impacket's NTLM for every qmcomm/qm2qm binding; the
    MS-MQRR path binds unauthenticated (ValueError with protocol="mqrr"). Blocking; one reader per thread.
    """

    PROTOCOLS = ("qm2qm", "mqrr", "auto")
    protocol = "qm2qm"

    def __init__(self, host: str, format_name: str, *, access: str = "receive", share_mode: str = "deny-none",
                 cursor: bool = False, epm_port: int = 135, qmcomm_port: int | None = None,
                 qm2qm_port: int | None = None, ndr64: bool = False, user: str = "", domain: str = "",
                 password: str = "", auth_level: int | None = None, nthash: str = "",
                 connect_timeout: float = 10.0, call_timeout: float | None = None, protocol: str = "qm2qm",
                 mqrr_port: int | None = None) -> None:
        from qm2qm.mqmp.constants import MQ_DENY_NONE, MQ_DENY_RECEIVE_SHARE, MQ_PEEK_ACCESS, MQ_RECEIVE_ACCESS
        protocol = "qm2qm" if protocol == "mqqp" else protocol      # "mqqp": the name this attribute had before
        if protocol not in self.PROTOCOLS:
            raise ValueError(f"protocol: expected qm2qm, mqrr or auto, got {protocol!r}")
        self.requested_protocol, self.mqrr_port = protocol, mqrr_port
        self.mqrr = None                # qm2qm.mqrr.reader.MqrrReadPath once opened over MS-MQRR
        if access not in ("receive", "peek"):
            raise ValueError(f"access: expected receive or peek, got {access!r}")
        if share_mode not in ("deny-none", "deny-receive"):
            raise ValueError(f"share_mode: expected deny-none or deny-receive, got {share_mode!r}")
        self.host, self.format_name = host, format_name
        self.access = MQ_RECEIVE_ACCESS if access == "receive" else MQ_PEEK_ACCESS
        self.share_mode = MQ_DENY_RECEIVE_SHARE if share_mode == "deny-receive" else MQ_DENY_NONE
        self.want_cursor = cursor
        self.epm_port, self.qmcomm_port, self.qm2qm_port = epm_port, qmcomm_port, qm2qm_port
        self.ndr64 = ndr64
        self.credentials = (Credentials(user=user, domain=domain, password=password, auth_level=auth_level,
                                        nthash=nthash) if user else None)
        self._timeouts = dict(connect_timeout=connect_timeout, call_timeout=call_timeout)
        self.qmcomm = None              # QmcommClient
        self.qm2qm: Qm2qmClient | None = None
        self.context = NULL_HANDLE      # PCTX_OPENREMOTE_HANDLE_TYPE
        self.session = NULL_HANDLE      # PCTX_RRSESSION_HANDLE_TYPE
        self.handle = 0                 # OpenQueueDescriptor.Handle (hRemoteQueue = dwQueue = pdwContext)
        self.cursor = 0
        self.version: tuple[int, int, int] | None = None
        self.steps: list[str] = []      # the calls made, in order (what a capture of this reader shows)

    # ------------------------------------------------------------------ open / close

    def open(self) -> "RemoteReader":
        """The whole opening sequence; RpcCallError (with the HRESULT as ``status``) if any step fails."""
        from qm2qm.mqmp import idl as mqmp_idl
        from qm2qm.mqmp.client import QmcommClient
        from qm2qm.mqmp.constants import IP_HANDSHAKE, IP_READ
        if self.requested_protocol != "qm2qm" and self._open_mqrr():
            return self
        self.protocol = "qm2qm"
        try:
            port = self.qmcomm_port or self._ept_map(mqmp_idl.MSRPC_UUID_QMCOMM, "qmcomm")
            self.qmcomm = self._qmcomm_client(QmcommClient, port)
            advertised = self._step("R_QMGetRTQMServerPort", self.qmcomm.get_rtqm_server_port, IP_HANDSHAKE)
            # MS-MQMP 4.2 steps 3–5: from a mapper-found endpoint, rebind to the fixed port the server names; a port
            # the caller gave (e.g. a recording proxy's) is kept.
            if advertised and advertised != port and not self.qmcomm_port:
                self.qmcomm.close()
                self.qmcomm = self._qmcomm_client(QmcommClient, advertised)
            opened = self._step("R_QMOpenRemoteQueue", self.qmcomm.open_remote_queue, self.format_name,
                                access=self.access, share_mode=self.share_mode)
            if opened.status != MQ_OK:
                raise RpcCallError(f"R_QMOpenRemoteQueue({self.format_name}): 0x{opened.status:08X}", opened.status)
            self.context, self.handle = opened.context, opened.h_queue
            if self.want_cursor:
                status, self.cursor = self._step("R_QMCreateRemoteCursor", self.qmcomm.create_remote_cursor,
                                                 self.handle)
                if status != MQ_OK:
                    raise RpcCallError(f"R_QMCreateRemoteCursor: 0x{status:08X}", status)
            qm2qm_port = self.qm2qm_port or self._qm2qm_port(IP_READ)
            self.qm2qm = Qm2qmClient(self.host, qm2qm_port, ndr64=self.ndr64, credentials=self.credentials,
                                     **self._timeouts).connect()
            status, self.session = self._step("RemoteQMOpenQueue", self.qm2qm.open_queue, opened.h_queue,
                                              opened.dwp_queue, opened.pdw_context)
            if status != MQ_OK:
                raise RpcCallError(f"RemoteQMOpenQueue: 0x{status:08X}", status)
            self.version = self._step("RemoteQmGetVersion", self.qm2qm.get_version)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """RemoteQMCloseCursor (if a cursor), RemoteQMCloseQueue, R_QMCloseRemoteQueueContext; then disconnect.
        Over MS-MQRR: R_CloseCursor (if a cursor), R_CloseQueue."""
        if self.mqrr is not None:
            mqrr, self.mqrr = self.mqrr, None
            mqrr.close(self._quiet)
            self.cursor = 0
            return
        try:
            if self.qm2qm is not None and self.session != NULL_HANDLE:
                if self.cursor:
                    self._quiet("RemoteQMCloseCursor", self.qm2qm.close_cursor, self.handle, self.cursor)
                self._quiet("RemoteQMCloseQueue", self.qm2qm.close_queue, self.session)
            if self.qmcomm is not None and self.context != NULL_HANDLE:
                self._quiet("R_QMCloseRemoteQueueContext", self.qmcomm.close_remote_queue_context, self.context)
        finally:
            self.session = self.context = NULL_HANDLE
            self.cursor = 0
            for client in (self.qm2qm, self.qmcomm):
                if client is not None:
                    client.close()
            self.qm2qm = self.qmcomm = None

    def __enter__(self) -> "RemoteReader":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ reads (protocol-neutral)

    def peek(self, timeout_ms: int = 0) -> ReadResult:
        """The message at the cursor (PEEK_CURRENT; the first one without a cursor)."""
        return self._start(MQ_ACTION_PEEK_CURRENT, timeout_ms)

    def peek_next(self, timeout_ms: int = 0) -> ReadResult:
        """Move the cursor on and peek (needs ``cursor=True``)."""
        if not self.cursor:
            raise ValueError("peek_next needs a cursor: open the reader with cursor=True")
        return self._start(MQ_ACTION_PEEK_NEXT, timeout_ms)

    def receive(self, timeout_ms: int = 0, *, ack: bool = True) -> ReadResult:
        """Receive one message: StartReceive then EndReceive(RR_ACK) (or RR_NACK: it stays in the queue)."""
        result = self._start(MQ_ACTION_RECEIVE, timeout_ms)
        if result.ok and self.mqrr is not None:
            self.mqrr.end(result.request_id, RR_ACK if ack else 1)
        elif result.ok:
            self._step("RemoteQMEndReceive", self.qm2qm.end_receive, result.context, RR_ACK if ack else 1)
        return result

    def purge(self) -> int:
        """Purge the queue (needs receive access); the HRESULT."""
        if self.mqrr is not None:
            return self.mqrr.purge()
        return self._step("RemoteQMPurgeQueue", self.qm2qm.purge_queue, self.handle)

    # ------------------------------------------------------------------ helpers

    def _start(self, action: int, timeout_ms: int) -> ReadResult:
        if self.mqrr is not None:
            return self.mqrr.start(action, timeout_ms)
        if self.qm2qm is None:
            raise RpcCallError("the reader is not open")
        modern = self.version is None or (self.version[0], self.version[1]) >= (5, 1)
        name = "RemoteQMStartReceive2" if modern else "RemoteQMStartReceive"
        start = self.qm2qm.start_receive2 if modern else self.qm2qm.start_receive
        return self._step(name, start, self.handle, action=action, timeout_ms=timeout_ms, cursor=self.cursor,
                          dw_queue=self.handle)

    def _open_mqrr(self) -> bool:
        """Open over MS-MQRR; False when ``auto`` meets EPT_S_NOT_REGISTERED (then the qm2qm path runs)."""
        from qm2qm.mqrr import idl as mqrr_idl
        from qm2qm.mqrr.reader import EPT_S_NOT_REGISTERED, MqrrNotRegistered, MqrrReadPath
        # dwAccess / dwShareMode are the MS-MQMQ values both protocols share (MS-MQRR 3.1.4.2, MS-MQMP 3.1.4.2)
        path = MqrrReadPath(self.host, self.format_name, access=self.access, share_mode=self.share_mode,
                            cursor=self.want_cursor, ndr64=self.ndr64,
                            connect_timeout=self._timeouts["connect_timeout"], step=self._step,
                            credentials=self.credentials)
        try:
            port = self.mqrr_port or self._ept_map(mqrr_idl.MSRPC_UUID_REMOTEREAD, "RemoteRead")
            path.open(port, given=bool(self.mqrr_port))
        except RpcCallError as exc:
            path.close(self._quiet)
            if self.requested_protocol == "auto" and exc.status in EPT_S_NOT_REGISTERED:
                return False
            raise
        except MqrrNotRegistered:
            path.close(self._quiet)
            if self.requested_protocol == "auto":
                return False
            raise RpcCallError(f"RemoteRead (MS-MQRR) is not registered at {self.host}", 0x16C9A0D6) from None
        except BaseException:
            path.close(self._quiet)
            raise
        self.mqrr, self.protocol, self.cursor = path, "mqrr", path.cursor
        return True

    def _qmcomm_client(self, cls, port: int):
        return cls(self.host, port, ndr64=self.ndr64, credentials=self.credentials, **self._timeouts).connect()

    def _ept_map(self, interface: bytes, name: str) -> int:
        self.steps.append(f"ept_map({name})")
        return ept_map_port(self.host, self.epm_port, interface,
                            connect_timeout=self._timeouts["connect_timeout"])

    def _qm2qm_port(self, ip_read: int) -> int:
        """Windows after Server 2003 finds qm2qm through the endpoint mapper only (MS-MQQP 2.1 <5>); without one,
        ask qmcomm (R_QMGetRTQMServerPort(IP_READ))."""
        try:
            return self._ept_map(idl.MSRPC_UUID_QM2QM, "qm2qm")
        except RpcCallError:
            port = self._step("R_QMGetRTQMServerPort", self.qmcomm.get_rtqm_server_port, ip_read)
            if not port:
                raise RpcCallError(f"no qm2qm port: the endpoint mapper at {self.host}:{self.epm_port} did not "
                                   "answer and R_QMGetRTQMServerPort(IP_READ) returned 0") from None
            return port

    def _step(self, name: str, fn, *args, **kwargs):
        self.steps.append(name)
        return fn(*args, **kwargs)

    def _quiet(self, name: str, fn, *args) -> None:
        try:
            self._step(name, fn, *args)
        except RpcCallError:
            pass        # closing: the server runs the handle down anyway when the connection goes
