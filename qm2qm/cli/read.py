"""Remote reads (MS-MQMP 4.2 + MS-MQQP 3.2.4): peek, receive, lookup, purge, version, port.

By default a read does the whole Windows sequence (qm2qm.client.RemoteReader: qmcomm R_QMOpenRemoteQueue, qm2qm
RemoteQMOpenQueue, reads, RemoteQMCloseQueue, R_QMCloseRemoteQueueContext). ``--via-admin`` is the scripting
shortcut that opens the descriptor through the loopback admin API instead of qmcomm (no access check).
``--protocol mqrr`` reads over MS-MQRR RemoteRead instead (R_OpenQueue, R_StartReceive, R_EndReceive, R_CloseQueue;
the server needs ``serve --mqrr``); ``--protocol auto`` tries MS-MQRR first and falls back to qmcomm + qm2qm when
the endpoint mapper answers EPT_S_NOT_REGISTERED, as Windows Server 2003+ clients do (MS-MQRR 3.2.4.1)."""
from __future__ import annotations

import base64
import sys
import uuid
from typing import Any, Callable

import click

from qm2qm.cli._common import (INFINITE, _admin,
                               _call_admin, _emit, _fail, admin_options, main, seconds_above_zero)
from qm2qm.logfmt import printable


class TimeoutMs(click.ParamType):
    """ulTimeout in milliseconds (MS-MQQP 2.2.2.1): 0..4294967295, or 'infinite' for 0xFFFFFFFF."""
    name = "MS"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        if str(value).lower() in ("infinite", "inf"):
            return INFINITE
        try:
            number = int(value, 0)
        except ValueError:
            self.fail(f"{value!r} is not a number of milliseconds or 'infinite'", param, ctx)
        if not 0 <= number <= INFINITE:
            self.fail(f"{number} is outside 0..4294967295", param, ctx)
        return number


PORT = click.IntRange(1, 65535)


def read_options(fn):
    """Options of the commands that open a queue for remote read."""
    fn = click.option("--mqrr-port", type=PORT,
                      help="MS-MQRR RemoteRead port (with --protocol mqrr|auto) [from the endpoint mapper].")(fn)
    fn = click.option("--protocol", type=click.Choice(["qm2qm", "mqrr", "auto"]), default="qm2qm",
                      show_default=True,
                      help="qm2qm: qmcomm + qm2qm (MS-MQMP, MS-MQQP); mqrr: MS-MQRR RemoteRead (serve --mqrr); "
                           "auto: MS-MQRR, else qm2qm when it is not registered (as Windows does).")(fn)
    fn = click.option("--via-admin", is_flag=True,
                      help="Shortcut: open through the admin API instead of qmcomm R_QMOpenRemoteQueue.")(fn)
    fn = click.option("--epm-port", type=PORT,
                      help="Find qmcomm and qm2qm through the endpoint mapper on this port (as Windows does).")(fn)
    fn = click.option("--qmcomm-port", type=PORT, help="qmcomm port on the --rpc host [asked from the admin API].")(fn)
    return rpc_options(fn)


def _keep_credential(ctx, param, value):
    """--user / --auth-level land in ctx.meta (not in each command's signature); _client reads them."""
    ctx.meta[f"qm2qm.{param.name}"] = value
    return value


DEFAULT_CALL_TIMEOUT = 60.0


def rpc_options(fn):
    """Options of the commands that call the qm2qm interface over RPC."""
    fn = click.option("--call-timeout", "call_timeout", type=float,
                      default=DEFAULT_CALL_TIMEOUT, show_default=True, expose_value=False,
                      callback=lambda ctx, param, value: _keep_credential(ctx, param,
                                                                          seconds_above_zero(ctx, param, value)),
                      help="Seconds to wait for the server's answer to the bind and each call before giving up; "
                           "a read waits its --timeout on top of this (infinite: without limit).")(fn)
    fn = click.option("--user", "user", expose_value=False, callback=_keep_credential, envvar="QM2QM_USER",
                      help="Authenticate with NTLM as DOMAIN\\user (env QM2QM_USER); the password comes from "
                           "QM2QM_PASSWORD (or an NT hash from QM2QM_NTHASH) or a prompt.")(fn)
    fn = click.option("--auth-level", "auth_level", type=click.IntRange(2, 6), expose_value=False,
                      callback=_keep_credential,
                      help="RPC authentication level with --user: 2 connect, 4 packet, 5 integrity, 6 privacy [6]."
                      )(fn)
    fn = click.option("--ndr64", is_flag=True, help="Negotiate NDR64 instead of NDR (MS-MQQP 2.2).")(fn)
    fn = click.option("--rpc", "rpc_addr", envvar="QM2QM_RPC",
                      help="qm2qm address HOST:PORT (env QM2QM_RPC) [asked from the admin API].")(fn)
    return admin_options(fn)


def _listener(info: dict) -> tuple[str, int]:
    return str(info["rpc"]["host"]), int(info["rpc"]["port"])


def _rpc_address(rpc_addr: str | None, admin_url: str) -> tuple[str, int]:
    if rpc_addr is None:
        host, port = _call_admin(lambda: _listener(_admin(admin_url).info()))
        return ("127.0.0.1" if host in ("0.0.0.0", "::") else host), port
    from qm2qm.ready import split_host_port
    address = split_host_port(rpc_addr)
    if address is None or not 1 <= address[1] <= 65535:
        raise click.BadParameter(f"{rpc_addr!r} is not HOST:PORT (an IPv6 host in brackets: [::1]:2105)",
                                 param_hint="--rpc")
    return address


def _credentials() -> dict:
    """Qm2qmClient keyword arguments from --user / --auth-level / QM2QM_PASSWORD / QM2QM_NTHASH (or a prompt)."""
    import os
    import re
    meta = click.get_current_context().meta
    user = meta.get("qm2qm.user")
    if not user:
        if meta.get("qm2qm.auth_level") is not None:
            raise click.UsageError("--auth-level needs --user")
        return {}
    domain, sep, name = user.partition("\\")
    if not sep:
        domain, name = "", user
    nthash = os.environ.get("QM2QM_NTHASH", "")
    if nthash and not re.fullmatch(r"[0-9A-Fa-f]{32}", nthash):
        raise click.UsageError(f"QM2QM_NTHASH must be an NT hash, 32 hex digits; it holds {len(nthash)} characters"
                               + ("" if re.fullmatch(r"[0-9A-Fa-f]*", nthash) else " that are not all hex digits"))
    password = os.environ.get("QM2QM_PASSWORD")
    if password is None and not nthash:
        password = click.prompt(f"Password for {user}", hide_input=True, err=True)
    level = meta.get("qm2qm.auth_level")
    return {"user": name, "domain": domain, "password": password or "", "nthash": nthash,
            "auth_level": 6 if level is None else level}


def _call_timeout() -> float:
    """--call-timeout: how long the bind and each call may go unanswered (seconds)."""
    value = click.get_current_context().meta.get("qm2qm.call_timeout")
    return DEFAULT_CALL_TIMEOUT if value is None else value


def _waiting(rs, timeout_ms: int, fn: Callable[[], Any]) -> Any:
    """fn() (a read) with the connection waiting the read's ulTimeout on top of --call-timeout (for ever for
    INFINITE): a read blocks by design, a bind or an open does not."""
    path = _mqrr(rs)
    dce = path.client.dce if path is not None else rs.client._dce
    sock = dce.get_rpc_transport().get_socket()
    sock.settimeout(None if timeout_ms == INFINITE else _call_timeout() + timeout_ms / 1000)
    try:
        return fn()
    finally:
        if sock.fileno() != -1:
            sock.settimeout(_call_timeout())


def _client(rpc_addr, admin_url, ndr64):
    from qm2qm.client import Qm2qmClient, RpcCallError
    host, port = _rpc_address(rpc_addr, admin_url)
    try:
        return Qm2qmClient(host, port, ndr64=ndr64, call_timeout=_call_timeout(), **_credentials()).connect()
    except RpcCallError as exc:
        _fail(str(exc))


def _hr(value: int) -> str:
    from shared_adm.status import status_name
    return f"{status_name(value)} (0x{value:08X})"


def _message_json(result) -> dict:
    """A read result as JSON: HRESULT, REMOTEREADDESC outputs and the decoded message."""
    out: dict[str, Any] = {"hresult": f"0x{result.hresult:08X}", "status": _hr(result.hresult),
                           "request_id": result.request_id, "size": result.size, "arrive_time": result.arrive_time}
    if result.sequential_id is not None:
        out["sequential_id"] = result.sequential_id
    if result.ok and result.buffer:
        try:
            msg = result.message()
        except Exception as exc:     # a malformed packet is reported, not a crash
            out["decode_error"] = str(exc)
            out["buffer_base64"] = base64.b64encode(result.buffer).decode("ascii")
            return out
        try:
            text = msg.body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        out["message"] = {
            "label": msg.label, "priority": msg.priority, "body_text": text,
            "body_base64": base64.b64encode(msg.body).decode("ascii"), "body_size": len(msg.body),
            "body_type": msg.body_type, "app_specific": msg.application_tag,
            "correlation_id": msg.correlation_identifier.hex(),
            "identifier": f"{{{msg.identifier[0]}}}\\{msg.identifier[1]}",
            "delivery": "recoverable" if int(msg.delivery_guarantee) == 1 else "express",
            "sent_time": msg.sent_time, "time_to_be_received": msg.time_to_be_received,
            "response_queue": msg.response_queue_format_name, "admin_queue": msg.administration_queue_format_name,
            "acknowledgement": msg.acknowledgements_requested, "class": msg.class_,
        }
    return out


def _print_read(d: dict) -> None:
    if "message" not in d:
        click.echo(f"{d['status']}" + (f"  decode error: {d['decode_error']}" if "decode_error" in d else ""))
        return
    m = d["message"]
    seq = f" sequential_id={d['sequential_id']}" if "sequential_id" in d else ""
    click.echo(f"message request_id={d['request_id']}{seq} size={d['size']} arrived={d['arrive_time']}")
    click.echo(f"  label:    {printable(m['label'])}".rstrip())
    click.echo(f"  priority: {m['priority']}  app_specific: {m['app_specific']}  delivery: {m['delivery']}")
    body = printable(m['body_text']) if m['body_text'] is not None else '(binary) ' + m['body_base64']
    click.echo(f"  body:     {body}")


def _format_name(pathname: str, host: str) -> str:
    """A format name as given, or DIRECT=TCP:host\\<queue> for a path name (MS-MQMQ 2.1.2)."""
    if "=" in pathname:
        return pathname
    parts = pathname.split("\\")
    local = pathname if len(parts) < 3 and parts[0].lower() == "private$" or len(parts) == 1 \
        else "\\".join(parts[1:])
    return f"DIRECT=TCP:{host}\\{local}"


class SequenceSession:
    """A remote-read session opened the way Windows opens one (qm2qm.client.RemoteReader)."""

    def __init__(self, admin_url: str, rpc_addr: str | None, ndr64: bool, pathname: str, access: str,
                 cursor: bool, qmcomm_port: int | None, epm_port: int | None, protocol: str = "qm2qm",
                 mqrr_port: int | None = None) -> None:
        from qm2qm.client import RemoteReader, RpcCallError
        from shared_adm.status import status_name
        listener = None
        if protocol != "qm2qm" and not epm_port and not mqrr_port:
            # the qm2qm listener answers ept_map itself (MS-RPCE 2.2.1.2): look RemoteRead up there
            listener = _rpc_address(rpc_addr, admin_url)
            epm_port = listener[1]
            if protocol == "auto" and qmcomm_port is None:
                qmcomm_port = _call_admin(lambda: int(_admin(admin_url).info()["qmcomm_port"]))
        if epm_port:
            # without --rpc, the host `qm2qm info` reports; qm2qm's port then comes from the endpoint mapper
            host, qm2qm_port = listener or _rpc_address(rpc_addr, admin_url)
            qm2qm_port = qm2qm_port if rpc_addr else None
        else:
            host, qm2qm_port = _rpc_address(rpc_addr, admin_url)
            if qmcomm_port is None:
                qmcomm_port = _call_admin(lambda: int(_admin(admin_url).info()["qmcomm_port"]))
        self.reader = RemoteReader(host, _format_name(pathname, host), access=access, cursor=cursor,
                                   epm_port=epm_port or 135, qmcomm_port=qmcomm_port, qm2qm_port=qm2qm_port,
                                   ndr64=ndr64, protocol=protocol, mqrr_port=mqrr_port,
                                   call_timeout=_call_timeout(), **_credentials())
        try:
            self.reader.open()
        except RpcCallError as exc:
            name = f" ({status_name(exc.status)})" if exc.status else ""
            _fail(f"{exc}{name}")
        except ValueError as exc:           # a format name a QUEUE_FORMAT cannot carry (MS-MQMQ 2.2.7)
            self.reader.close()
            _fail(str(exc))
        self.client = self.reader.qm2qm
        self.handle = self.dw_queue = self.reader.handle

    def open_cursor(self) -> int:
        """The cursor R_QMCreateRemoteCursor made at open."""
        return self.reader.cursor

    def close_cursor(self, h_cursor: int) -> None:
        _remote_call(lambda: self.client.close_cursor(self.handle, h_cursor))
        self.reader.cursor = 0

    def close(self) -> None:
        self.reader.close()


def open_session(pathname: str, access: str, *, cursor: bool, via_admin: bool, rpc_addr, ndr64, admin_url,
                 qmcomm_port=None, epm_port=None, protocol="qm2qm", mqrr_port=None):
    """The Windows sequence by default; the admin-API shortcut with --via-admin."""
    if via_admin:
        if protocol != "qm2qm":
            raise click.UsageError(f"--via-admin opens a qm2qm session: it cannot be used with --protocol {protocol}")
        return RemoteSession(admin_url, rpc_addr, ndr64, pathname, access)
    return SequenceSession(admin_url, rpc_addr, ndr64, pathname, access, cursor, qmcomm_port, epm_port, protocol,
                           mqrr_port)


def _mqrr(rs):
    """The MS-MQRR read path of a session opened over RemoteRead (--protocol mqrr, or auto finding it), else None."""
    reader = getattr(rs, "reader", None)
    return None if reader is None else reader.mqrr


class RemoteSession:
    """One remote-read session as a supporting server runs it (MS-MQQP 3.2.4.1–3.2.4.9), handles from the admin API
    (the --via-admin shortcut: no qmcomm, no access check)."""

    def __init__(self, admin_url: str, rpc_addr: str | None, ndr64: bool, pathname: str, access: str) -> None:
        self.admin = _admin(admin_url)
        self.opened = _call_admin(lambda: self.admin.open_queue(pathname, access=access))
        self.handle = int(self.opened["hRemoteQueue"])
        self.dw_queue = int(self.opened["dwQueue"])
        self.client = None
        self.session = None
        try:
            self.client = _client(rpc_addr, admin_url, ndr64)
            hr, self.session = _remote_call(lambda: self.client.open_queue(
                self.handle, self.dw_queue, int(self.opened["pdwContext"]), lic_guid=uuid.uuid4()))
        except BaseException:
            self.close()
            raise
        if hr != 0:
            self.session = None
            self.close()
            _fail(f"RemoteQMOpenQueue: {_hr(hr)}")

    def open_cursor(self) -> int:
        """A cursor opened through the admin API."""
        return int(_call_admin(lambda: self.admin.open_cursor(self.handle))["hCursor"])

    def close_cursor(self, h_cursor: int) -> None:
        _remote_call(lambda: self.client.close_cursor(self.handle, h_cursor))

    def close(self) -> None:
        """RemoteQMCloseQueue (MS-MQQP 3.2.4.9), or Close Queue through the admin API if no session was opened."""
        from qm2qm.client import AdminError, RpcCallError
        try:
            if self.session is not None:
                self.client.close_queue(self.session)
            else:
                self.admin.close_handle(self.handle)      # never reached the qm2qm session: Close Queue by hand
        except (AdminError, RpcCallError):
            pass
        finally:
            self.session = None
            if self.client is not None:
                self.client.close()


def _remote_call(fn: Callable[[], Any]) -> Any:
    from qm2qm.client import RpcCallError
    try:
        return fn()
    except RpcCallError as exc:
        _fail(str(exc))


def _read_loop(pathname, count, timeout, use_cursor, receive, ack, legacy, rpc_addr, ndr64, admin_url, as_json,
               via):
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
    rs = open_session(pathname, "receive" if receive else "peek", cursor=use_cursor, rpc_addr=rpc_addr, ndr64=ndr64,
                      admin_url=admin_url, **via)
    results = []
    failed = False
    if _mqrr(rs) is not None:
        if legacy:
            rs.close()
            raise click.UsageError("--legacy selects qm2qm's RemoteQMStartReceive: MS-MQRR has no such choice")
        _mqrr_loop(rs, count, timeout, use_cursor, receive, ack, results)
        failed = bool(results) and results[-1]["hresult"] != "0x00000000"
        _emit(results if count != 1 else results[0], as_json,
              lambda d: [_print_read(x) for x in (d if isinstance(d, list) else [d])])
        if failed:
            sys.exit(1)
        return
    try:
        h_cursor = 0
        if use_cursor:
            h_cursor = rs.open_cursor()
        start = rs.client.start_receive if legacy or not _remote_call(rs.client.uses_start_receive2) \
            else rs.client.start_receive2
        for i in range(count):
            if receive:
                action = MQ_ACTION_RECEIVE
            else:
                action = MQ_ACTION_PEEK_NEXT if use_cursor and i > 0 else MQ_ACTION_PEEK_CURRENT
            result = _remote_call(lambda: _waiting(rs, timeout, lambda: start(
                rs.handle, action=action, timeout_ms=timeout, cursor=h_cursor, dw_queue=rs.dw_queue)))
            entry = _message_json(result)
            if result.ok and receive:
                hr, _ = _remote_call(lambda: rs.client.end_receive(result.context, ack))
                entry["end_receive"] = _hr(hr)
            results.append(entry)
            if not result.ok:
                failed = True
                break
        if h_cursor:
            rs.close_cursor(h_cursor)
    finally:
        rs.close()
    _emit(results if count != 1 else results[0], as_json,
          lambda d: [_print_read(x) for x in (d if isinstance(d, list) else [d])])
    if failed:
        sys.exit(1)


def _mqrr_loop(rs, count, timeout, use_cursor, receive, ack, results) -> None:
    """The read loop over MS-MQRR: R_StartReceive (then R_EndReceive for a receive), MS-MQRR 3.2.4.3–3.2.4.10."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
    path = rs.reader.mqrr
    try:
        for i in range(count):
            if receive:
                action = MQ_ACTION_RECEIVE
            else:
                action = MQ_ACTION_PEEK_NEXT if use_cursor and i > 0 else MQ_ACTION_PEEK_CURRENT
            result = _remote_call(lambda: _waiting(rs, timeout, lambda: path.start(action, timeout)))
            entry = {**_message_json(result), "protocol": "mqrr"}
            if result.ok and receive:
                entry["end_receive"] = _hr(_remote_call(lambda: path.end(result.request_id, ack)))
            results.append(entry)
            if not result.ok:
                break
    finally:
        rs.close()


@main.command()
@click.argument("pathname")
@click.option("--timeout", type=TimeoutMs(), default=0, show_default=True, help="ulTimeout in ms, or 'infinite'.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many messages to peek (more than 1 needs --cursor).")
@click.option("--cursor", "use_cursor", is_flag=True, help="Walk with a cursor (PEEK_CURRENT, then PEEK_NEXT).")
@click.option("--legacy", is_flag=True, help="Use RemoteQMStartReceive (opnum 0) instead of opnum 9.")
@read_options
def peek(pathname, timeout, count, use_cursor, legacy, via_admin, epm_port, qmcomm_port, rpc_addr, ndr64, admin_url,
         as_json, protocol, mqrr_port) -> None:
    """Peek PATHNAME (a path name or format name): R_QMOpenRemoteQueue, RemoteQMOpenQueue, StartReceive(2), close
    (or, with --protocol mqrr, R_OpenQueue, R_StartReceive, R_CloseQueue)."""
    if count > 1 and not use_cursor:
        raise click.UsageError(f"--count {count} needs --cursor: without a cursor every peek is PEEK_CURRENT, "
                               "the same head message")
    _read_loop(pathname, count, timeout, use_cursor, False, 2, legacy, rpc_addr, ndr64, admin_url, as_json,
               _via(via_admin, epm_port, qmcomm_port, protocol, mqrr_port))


def _via(via_admin, epm_port, qmcomm_port, protocol="qm2qm", mqrr_port=None) -> dict:
    return {"via_admin": via_admin, "epm_port": epm_port, "qmcomm_port": qmcomm_port, "protocol": protocol,
            "mqrr_port": mqrr_port}


@main.command()
@click.argument("pathname")
@click.option("--timeout", type=TimeoutMs(), default=0, show_default=True, help="ulTimeout in ms, or 'infinite'.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many messages to receive.")
@click.option("--cursor", "use_cursor", is_flag=True, help="Receive through a cursor.")
@click.option("--nack", is_flag=True, help="End with RR_NACK (message stays) instead of RR_ACK.")
@click.option("--legacy", is_flag=True, help="Use RemoteQMStartReceive (opnum 0) instead of opnum 9.")
@read_options
def receive(pathname, timeout, count, use_cursor, nack, legacy, via_admin, epm_port, qmcomm_port, rpc_addr, ndr64,
            admin_url, as_json, protocol, mqrr_port) -> None:
    """Receive from PATHNAME: the Windows sequence, StartReceive(2) then EndReceive(RR_ACK) (MS-MQQP 3.2.4.3), or
    R_StartReceive then R_EndReceive with --protocol mqrr (MS-MQRR 3.2.4.4.1)."""
    _read_loop(pathname, count, timeout, use_cursor, True, 1 if nack else 2, legacy, rpc_addr, ndr64,
               admin_url, as_json, _via(via_admin, epm_port, qmcomm_port, protocol, mqrr_port))


LOOKUP_ACTIONS = {
    "peek-current": 0x40000010, "peek-next": 0x40000011, "peek-prev": 0x40000012,
    "receive-current": 0x40000020, "receive-next": 0x40000021, "receive-prev": 0x40000022,
}


@main.command()
@click.argument("pathname")
@click.argument("lookup_id", type=click.IntRange(0, (1 << 64) - 1))
@click.option("--action", type=click.Choice(list(LOOKUP_ACTIONS)), default="peek-current", show_default=True)
@click.option("--nack", is_flag=True, help="For receive-*: end with RR_NACK instead of RR_ACK.")
@read_options
def lookup(pathname, lookup_id, action, nack, via_admin, epm_port, qmcomm_port, rpc_addr, ndr64, admin_url,
           as_json, protocol, mqrr_port) -> None:
    """Read by lookup id over qm2qm (RemoteQMStartReceiveByLookupId, MS-MQQP 3.1.4.11), or over MS-MQRR
    (R_StartReceive with LookupId, MS-MQRR 3.1.4.7) with --protocol mqrr."""
    receive = action.startswith("receive")
    rs = open_session(pathname, "receive" if receive else "peek", cursor=False, rpc_addr=rpc_addr, ndr64=ndr64,
                      admin_url=admin_url, **_via(via_admin, epm_port, qmcomm_port, protocol, mqrr_port))
    path = _mqrr(rs)
    try:
        if path is not None:
            result = _remote_call(lambda: path.start(LOOKUP_ACTIONS[action], 0, lookup_id=lookup_id))
            entry = {**_message_json(result), "protocol": "mqrr"}
        else:
            result = _remote_call(lambda: rs.client.start_receive_by_lookup_id(
                rs.handle, lookup_id, action=LOOKUP_ACTIONS[action], dw_queue=rs.dw_queue))
            entry = _message_json(result)
        if result.ok and receive and path is not None:
            entry["end_receive"] = _hr(_remote_call(lambda: path.end(result.request_id, 1 if nack else 2)))
        elif result.ok and receive:
            hr, _ = _remote_call(lambda: rs.client.end_receive(result.context, 1 if nack else 2))
            entry["end_receive"] = _hr(hr)
    finally:
        rs.close()
    _emit(entry, as_json, _print_read)
    if not result.ok:
        sys.exit(1)


@main.command()
@click.argument("pathname")
@read_options
def purge(pathname, via_admin, epm_port, qmcomm_port, rpc_addr, ndr64, admin_url, as_json, protocol,
          mqrr_port) -> None:
    """Purge PATHNAME over qm2qm (RemoteQMPurgeQueue, MS-MQQP 3.1.4.7) or MS-MQRR (R_PurgeQueue, 3.1.4.6)."""
    rs = open_session(pathname, "receive", cursor=False, rpc_addr=rpc_addr, ndr64=ndr64, admin_url=admin_url,
                      **_via(via_admin, epm_port, qmcomm_port, protocol, mqrr_port))
    try:
        hr = _remote_call(rs.reader.purge if _mqrr(rs) is not None else lambda: rs.client.purge_queue(rs.handle))
    finally:
        rs.close()
    _emit({"hresult": f"0x{hr:08X}", "status": _hr(hr)}, as_json, lambda d: click.echo(f"purge: {d['status']}"))
    if hr != 0:
        sys.exit(1)


@main.command()
@rpc_options
def version(rpc_addr, ndr64, admin_url, as_json) -> None:
    """RemoteQmGetVersion (MS-MQQP 3.1.4.9)."""
    client = _client(rpc_addr, admin_url, ndr64)
    try:
        major, minor, build = _remote_call(client.get_version)
    finally:
        client.close()
    _emit({"major": major, "minor": minor, "build": build}, as_json,
          lambda d: click.echo(f"{d['major']}.{d['minor']}.{d['build']}"))


PORT_TYPES = {"ip-handshake": 0, "ip-read": 1, "ipx-handshake": 2, "ipx-read": 3}


@main.command()
@click.option("--type", "port_type", type=click.Choice(list(PORT_TYPES)), default="ip-read", show_default=True)
@rpc_options
def port(port_type, rpc_addr, ndr64, admin_url, as_json) -> None:
    """RemoteQMGetQMQMServerPort (MS-MQQP 3.1.4.8)."""
    client = _client(rpc_addr, admin_url, ndr64)
    try:
        value = _remote_call(lambda: client.get_qmqm_server_port(PORT_TYPES[port_type]))
    finally:
        client.close()
    _emit({"port_type": port_type, "port": value}, as_json, lambda d: click.echo(str(d["port"])))
