"""The `qm2qm` command: serve, admin commands over the admin API, and remote reads over qm2qm (MS-MQQP 3.2.4)."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
import uuid
from typing import Any, Callable

import click

from qm2qm.config import DEFAULT_ADMIN_PORT, ConfigError, load_config

DEFAULT_ADMIN_URL = f"http://127.0.0.1:{DEFAULT_ADMIN_PORT}"
INFINITE = 0xFFFFFFFF


def _fail(message: str, code: int = 1) -> None:
    """One line on stderr, no traceback, then exit."""
    click.echo(f"qm2qm: error: {message}", err=True)
    sys.exit(code)


def _emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        human(data)


def _table(rows: list[dict], columns: list[tuple[str, str]]) -> None:
    """Print rows as an aligned text table; ``columns`` are (key, heading) pairs."""
    cells = [[h for _, h in columns]] + [["" if r.get(k) is None else str(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _kv(data: dict) -> None:
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        click.echo(f"{key.ljust(width)}  {value}")


# --------------------------------------------------------------------------------------------- serve

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """qm2qm: an MSMQ queue manager serving the qm2qm remote-read interface (MS-MQQP)."""


@main.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML file with the same keys.")
@click.option("--data-dir", help="Directory of the SQLite store [./qm2qm-data]; ':memory:' for a volatile one.")
@click.option("--host", help="Address the qm2qm RPC listener binds [127.0.0.1; use 0.0.0.0 for Windows peers].")
@click.option("--port", type=int, help="qm2qm TCP port [2105; +11 while busy, MS-MQQP 3.1.4.8]; 0 = ephemeral.")
@click.option("--qmcomm-port", type=int, help="Port RemoteQMGetQMQMServerPort(IP_HANDSHAKE) answers [2103].")
@click.option("--admin-port", type=int, help=f"Admin API port on 127.0.0.1 [{DEFAULT_ADMIN_PORT}]; 0 = ephemeral.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level [warning].")
@click.option("--computer-name", help="Computer part of local path names and DIRECT=OS: names [host name].")
@click.option("--max-connections", type=int, help="Most RPC connections open at once [1024].")
@click.option("--epm-port", type=int, help="Endpoint mapper TCP port [135]; 0 = off (ept_map still answers on --port).")
@click.option("--trace", type=click.Path(dir_okay=False), help="Record every RPC call (.parquet or .jsonl).")
@click.option("--mqsd-port", type=int, help="MS-MQSD discovery responder UDP port [off; the spec's is 1801].")
def serve(config_file, data_dir, host, port, qmcomm_port, admin_port, log_level, computer_name,
          max_connections, epm_port, trace, mqsd_port) -> None:
    """Run the queue manager until Ctrl-C / SIGTERM; prints one line with the bound addresses."""
    from qm2qm.app import StartupError, serve as run

    try:
        config = load_config(config_file, {"data_dir": data_dir, "host": host, "port": port,
                                           "qmcomm_port": qmcomm_port, "admin_port": admin_port,
                                           "log_level": log_level, "computer_name": computer_name,
                                           "max_connections": max_connections, "epm_port": epm_port,
                                           "trace": trace, "mqsd_port": mqsd_port})
    except ConfigError as exc:
        _fail(str(exc), 2)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def ready(app) -> None:
        """Print the ready line once both listeners are bound."""
        click.echo(app.ready_line())
        sys.stdout.flush()

    try:
        asyncio.run(run(config, on_ready=ready))
    except StartupError as exc:
        _fail(str(exc), 2)
    except KeyboardInterrupt:   # Ctrl-C before the signal handlers are installed
        _fail("interrupted", 130)


# --------------------------------------------------------------------------------------------- admin

def admin_options(fn):
    """--admin URL and --json on every command that talks to the admin API."""
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)
    fn = click.option("--admin", "admin_url", envvar="QM2QM_ADMIN", default=DEFAULT_ADMIN_URL, show_default=True,
                      help="Admin API base URL (env QM2QM_ADMIN); `qm2qm serve` prints it.")(fn)
    return fn


def _admin(url: str):
    from qm2qm.client import AdminClient
    return AdminClient(url)


def _call_admin(fn: Callable[[], Any]) -> Any:
    from qm2qm.client import AdminError
    try:
        return fn()
    except AdminError as exc:
        status = f" (HTTP {exc.status})" if exc.status else ""
        _fail(f"{exc}{status}")


QUEUE_COLUMNS = [("pathname", "PATHNAME"), ("type", "TYPE"), ("messages", "MSGS"),
                 ("transactional", "XACT"), ("journal", "JOURNAL"), ("quota", "QUOTA"), ("label", "LABEL")]
MESSAGE_COLUMNS = [("lookup_id", "LOOKUP ID"), ("state", "STATE"), ("priority", "PRI"), ("body_size", "SIZE"),
                   ("label", "LABEL")]
HANDLE_COLUMNS = [("hRemoteQueue", "HANDLE"), ("context_value", "CONTEXT"), ("queue", "QUEUE"), ("access", "ACCESS"),
                  ("share_mode", "SHARE"), ("remote_read_state", "STATE"), ("cursors", "CURSORS")]


@main.group()
def queue() -> None:
    """Create, delete, list and show queues (admin API)."""


@queue.command("create")
@click.argument("pathname")
@click.option("--label", default="", help="Queue label.")
@click.option("--transactional", is_flag=True, help="Transactional queue.")
@click.option("--journal", is_flag=True, help="Enable the queue journal.")
@click.option("--quota", type=int, help="Quota in KB [unlimited].")
@click.option("--journal-quota", type=int, help="Journal quota in KB [unlimited].")
@admin_options
def queue_create(pathname, label, transactional, journal, quota, journal_quota, admin_url, as_json) -> None:
    """Create PATHNAME (Computer\\QueueName or Computer\\private$\\QueueName; '.' is this computer)."""
    attrs = {"label": label, "transactional": transactional, "journal": journal}
    if quota is not None:
        attrs["quota"] = quota
    if journal_quota is not None:
        attrs["journal_quota"] = journal_quota
    data = _call_admin(lambda: _admin(admin_url).create_queue(pathname, **attrs))
    _emit(data, as_json, lambda d: click.echo(f"created {d['pathname']}  {d.get('format_name', '')}".rstrip()))


@queue.command("delete")
@click.argument("pathname")
@admin_options
def queue_delete(pathname, admin_url, as_json) -> None:
    """Delete PATHNAME and its messages."""
    data = _call_admin(lambda: _admin(admin_url).delete_queue(pathname))
    _emit(data, as_json, lambda d: click.echo(f"deleted {d['deleted']}"))


@queue.command("list")
@admin_options
def queue_list(admin_url, as_json) -> None:
    """List every queue."""
    data = _call_admin(lambda: _admin(admin_url).list_queues())
    _emit(data, as_json, lambda d: _table(d, QUEUE_COLUMNS))


@queue.command("show")
@click.argument("pathname")
@admin_options
def queue_show(pathname, admin_url, as_json) -> None:
    """Show one queue's attributes."""
    data = _call_admin(lambda: _admin(admin_url).show_queue(pathname))
    _emit(data, as_json, _kv)


ACK_CHOICES = ["pos-arrival", "pos-receive", "neg-arrival", "neg-receive", "nack-reach-queue", "full-reach-queue",
               "nack-receive", "full-receive"]


@main.command()
@click.argument("pathname")
@click.option("--body", help="Message body text (sent as UTF-8).")
@click.option("--body-file", type=click.File("rb"), help="Read the body from a file ('-' = stdin).")
@click.option("--label", help="Label (at most 249 characters).")
@click.option("--priority", type=int, help="Priority 0..7 [3].")
@click.option("--ttbr", "time_to_be_received", type=int, help="Time-to-be-received, seconds [infinite].")
@click.option("--ttrq", "time_to_reach_queue", type=int, help="Time-to-reach-queue, seconds.")
@click.option("--correlation-id", help="Correlation id: 40 hex digits (20 bytes).")
@click.option("--app-specific", type=int, help="Application-specific DWORD.")
@click.option("--body-type", type=int, help="Body type (a VARTYPE, e.g. 8 = VT_BSTR).")
@click.option("--delivery", type=click.Choice(["express", "recoverable"]), help="Delivery guarantee [express].")
@click.option("--ack", "acks", multiple=True, type=click.Choice(ACK_CHOICES), help="Acknowledgement (repeatable).")
@click.option("--admin-queue", help="Administration queue format name (needed with --ack).")
@click.option("--response-queue", help="Response queue format name.")
@click.option("--journal", "journal_msg", is_flag=True, help="Request positive source journaling.")
@click.option("--dead-letter", is_flag=True, help="Request negative source journaling (dead-letter).")
@click.option("--count", type=int, default=1, show_default=True, help="Send this many copies.")
@admin_options
def send(pathname, body, body_file, label, priority, time_to_be_received, time_to_reach_queue, correlation_id,
         app_specific, body_type, delivery, acks, admin_queue, response_queue, journal_msg, dead_letter, count,
         admin_url, as_json) -> None:
    """Put a message on PATHNAME (admin API; MS-MQDMPR 3.1.7.1.9 Enqueue Message)."""
    if body is not None and body_file is not None:
        raise click.UsageError("give --body or --body-file, not both")
    fields: dict[str, Any] = {}
    if body_file is not None:
        fields["body_base64"] = base64.b64encode(body_file.read()).decode("ascii")
    elif body is not None:
        fields["body"] = body
    for key, value in (("label", label), ("priority", priority), ("time_to_be_received", time_to_be_received),
                       ("time_to_reach_queue", time_to_reach_queue), ("correlation_id", correlation_id),
                       ("app_specific", app_specific), ("body_type", body_type), ("delivery", delivery),
                       ("admin_queue", admin_queue), ("response_queue", response_queue)):
        if value is not None:
            fields[key] = value
    if acks:
        fields["acknowledgement"] = [a.replace("-", "_") for a in acks]
    if journal_msg:
        fields["journal"] = True
    if dead_letter:
        fields["dead_letter"] = True
    if count != 1:
        fields["count"] = count
    data = _call_admin(lambda: _admin(admin_url).send(pathname, **fields))
    _emit(data, as_json, lambda d: click.echo(
        f"sent lookup_id={d['lookup_id']} to {pathname}" if "count" not in d else
        f"sent {d['count']} messages to {pathname}: lookup_id {d['lookup_id']}..{d['last_lookup_id']}"))


@main.command()
@click.argument("pathname")
@click.option("--body", "with_body", is_flag=True, help="Include bodies (base64 and text).")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="List at most this many.")
@admin_options
def messages(pathname, with_body, limit, admin_url, as_json) -> None:
    """List the messages of PATHNAME with their lookup ids and position states."""
    data = _call_admin(lambda: _admin(admin_url).list_messages(pathname, body=with_body, limit=limit))
    _emit(data, as_json, lambda d: _table(d, MESSAGE_COLUMNS))


@main.command()
@click.argument("pathname")
@click.argument("lookup_id", type=int)
@admin_options
def message(pathname, lookup_id, admin_url, as_json) -> None:
    """Show one message of PATHNAME by lookup id, body included."""
    data = _call_admin(lambda: _admin(admin_url).show_message(pathname, lookup_id))
    _emit(data, as_json, _kv)


@main.command("open")
@click.argument("pathname")
@click.option("--access", type=click.Choice(["receive", "peek"]), default="receive", show_default=True)
@click.option("--share", "share_mode", type=click.Choice(["deny-none", "deny-receive"]), default="deny-none",
              show_default=True)
@admin_options
def open_(pathname, access, share_mode, admin_url, as_json) -> None:
    """Open PATHNAME for remote read (as MS-MQMP R_QMOpenRemoteQueue): prints hRemoteQueue / dwQueue."""
    data = _call_admin(lambda: _admin(admin_url).open_queue(pathname, access=access, share_mode=share_mode))
    _emit(data, as_json, _kv)


@main.command()
@click.argument("handle", type=int)
@admin_options
def cursor(handle, admin_url, as_json) -> None:
    """Create a cursor on an open handle (as MS-MQMP R_QMCreateRemoteCursor): prints hCursor."""
    data = _call_admin(lambda: _admin(admin_url).open_cursor(handle))
    _emit(data, as_json, _kv)


@main.command()
@admin_options
def handles(admin_url, as_json) -> None:
    """List open queue descriptors and their cursors."""
    data = _call_admin(lambda: _admin(admin_url).list_handles())
    _emit(data, as_json, lambda d: _table(d, HANDLE_COLUMNS))


@main.command()
@click.argument("handle", type=int)
@admin_options
def close(handle, admin_url, as_json) -> None:
    """Close an open queue descriptor (MS-MQDMPR 3.1.7.1.6 Close Queue)."""
    data = _call_admin(lambda: _admin(admin_url).close_handle(handle))
    _emit(data, as_json, lambda d: click.echo(f"closed {d['closed']}"))


@main.command()
@admin_options
def reads(admin_url, as_json) -> None:
    """List pending remote reads (MS-MQQP RemoteReadEntry) and waiting read operations."""
    data = _call_admin(lambda: _admin(admin_url).list_reads())

    def human(d):
        """The reads as a table."""
        _table(d.get("reads", []), [("hRemoteQueue", "HANDLE"), ("request_id", "REQUEST"), ("action", "ACTION"),
                                    ("timeout", "TIMEOUT"), ("state", "STATE")])
    _emit(data, as_json, human)


# --------------------------------------------------------------------------------------------- remote read

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


def rpc_options(fn):
    """Options of the commands that call the qm2qm interface over RPC."""
    fn = click.option("--ndr64", is_flag=True, help="Negotiate NDR64 instead of NDR (MS-MQQP 2.2).")(fn)
    fn = click.option("--rpc", "rpc_addr", envvar="QM2QM_RPC",
                      help="qm2qm address HOST:PORT (env QM2QM_RPC) [asked from the admin API].")(fn)
    return admin_options(fn)


def _rpc_address(rpc_addr: str | None, admin_url: str) -> tuple[str, int]:
    if rpc_addr is None:
        info = _call_admin(lambda: _admin(admin_url).info())
        host = info["rpc"]["host"]
        return ("127.0.0.1" if host in ("0.0.0.0", "::") else host), int(info["rpc"]["port"])
    host, sep, port = rpc_addr.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"{rpc_addr!r} is not HOST:PORT", param_hint="--rpc")
    return host, int(port)


def _client(rpc_addr, admin_url, ndr64):
    from qm2qm.client import Qm2qmClient, RpcCallError
    host, port = _rpc_address(rpc_addr, admin_url)
    try:
        return Qm2qmClient(host, port, ndr64=ndr64).connect()
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
    click.echo(f"  label:    {m['label']}".rstrip())
    click.echo(f"  priority: {m['priority']}  app_specific: {m['app_specific']}  delivery: {m['delivery']}")
    click.echo(f"  body:     {m['body_text'] if m['body_text'] is not None else '(binary) ' + m['body_base64']}")


class RemoteSession:
    """One remote-read session as a supporting server runs it (MS-MQQP 3.2.4.1–3.2.4.9), handles from the admin API."""

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


def _read_loop(pathname, count, timeout, use_cursor, receive, ack, legacy, rpc_addr, ndr64, admin_url, as_json):
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE
    rs = RemoteSession(admin_url, rpc_addr, ndr64, pathname, "receive" if receive else "peek")
    results = []
    failed = False
    try:
        h_cursor = 0
        if use_cursor:
            h_cursor = int(_call_admin(lambda: rs.admin.open_cursor(rs.handle))["hCursor"])
        start = rs.client.start_receive if legacy or not _remote_call(rs.client.uses_start_receive2) \
            else rs.client.start_receive2
        for i in range(count):
            if receive:
                action = MQ_ACTION_RECEIVE
            else:
                action = MQ_ACTION_PEEK_NEXT if use_cursor and i > 0 else MQ_ACTION_PEEK_CURRENT
            result = _remote_call(lambda: start(rs.handle, action=action, timeout_ms=timeout, cursor=h_cursor,
                                                dw_queue=rs.dw_queue))
            entry = _message_json(result)
            if result.ok and receive:
                hr, _ = _remote_call(lambda: rs.client.end_receive(result.context, ack))
                entry["end_receive"] = _hr(hr)
            results.append(entry)
            if not result.ok:
                failed = True
                break
        if h_cursor:
            _remote_call(lambda: rs.client.close_cursor(rs.handle, h_cursor))
    finally:
        rs.close()
    _emit(results if count != 1 else results[0], as_json,
          lambda d: [_print_read(x) for x in (d if isinstance(d, list) else [d])])
    if failed:
        sys.exit(1)


@main.command()
@click.argument("pathname")
@click.option("--timeout", type=TimeoutMs(), default=0, show_default=True, help="ulTimeout in ms, or 'infinite'.")
@click.option("--count", type=int, default=1, show_default=True, help="How many messages to peek.")
@click.option("--cursor", "use_cursor", is_flag=True, help="Walk with a cursor (PEEK_CURRENT, then PEEK_NEXT).")
@click.option("--legacy", is_flag=True, help="Use RemoteQMStartReceive (opnum 0) instead of opnum 9.")
@rpc_options
def peek(pathname, timeout, count, use_cursor, legacy, rpc_addr, ndr64, admin_url, as_json) -> None:
    """Peek PATHNAME over qm2qm: open (admin), RemoteQMOpenQueue, StartReceive(2), CloseQueue."""
    _read_loop(pathname, count, timeout, use_cursor, False, 2, legacy, rpc_addr, ndr64, admin_url, as_json)


@main.command()
@click.argument("pathname")
@click.option("--timeout", type=TimeoutMs(), default=0, show_default=True, help="ulTimeout in ms, or 'infinite'.")
@click.option("--count", type=int, default=1, show_default=True, help="How many messages to receive.")
@click.option("--cursor", "use_cursor", is_flag=True, help="Receive through a cursor.")
@click.option("--nack", is_flag=True, help="End with RR_NACK (message stays) instead of RR_ACK.")
@click.option("--legacy", is_flag=True, help="Use RemoteQMStartReceive (opnum 0) instead of opnum 9.")
@rpc_options
def receive(pathname, timeout, count, use_cursor, nack, legacy, rpc_addr, ndr64, admin_url, as_json) -> None:
    """Receive from PATHNAME over qm2qm: StartReceive(2) then EndReceive(RR_ACK) (MS-MQQP 3.2.4.3)."""
    _read_loop(pathname, count, timeout, use_cursor, True, 1 if nack else 2, legacy, rpc_addr, ndr64,
               admin_url, as_json)


LOOKUP_ACTIONS = {
    "peek-current": 0x40000010, "peek-next": 0x40000011, "peek-prev": 0x40000012,
    "receive-current": 0x40000020, "receive-next": 0x40000021, "receive-prev": 0x40000022,
}


@main.command()
@click.argument("pathname")
@click.argument("lookup_id", type=int)
@click.option("--action", type=click.Choice(list(LOOKUP_ACTIONS)), default="peek-current", show_default=True)
@click.option("--nack", is_flag=True, help="For receive-*: end with RR_NACK instead of RR_ACK.")
@rpc_options
def lookup(pathname, lookup_id, action, nack, rpc_addr, ndr64, admin_url, as_json) -> None:
    """Read by lookup id over qm2qm (RemoteQMStartReceiveByLookupId, MS-MQQP 3.1.4.11)."""
    receive = action.startswith("receive")
    rs = RemoteSession(admin_url, rpc_addr, ndr64, pathname, "receive" if receive else "peek")
    try:
        result = _remote_call(lambda: rs.client.start_receive_by_lookup_id(
            rs.handle, lookup_id, action=LOOKUP_ACTIONS[action], dw_queue=rs.dw_queue))
        entry = _message_json(result)
        if result.ok and receive:
            hr, _ = _remote_call(lambda: rs.client.end_receive(result.context, 1 if nack else 2))
            entry["end_receive"] = _hr(hr)
    finally:
        rs.close()
    _emit(entry, as_json, _print_read)
    if not result.ok:
        sys.exit(1)


@main.command()
@click.argument("pathname")
@rpc_options
def purge(pathname, rpc_addr, ndr64, admin_url, as_json) -> None:
    """Purge PATHNAME over qm2qm (RemoteQMPurgeQueue, MS-MQQP 3.1.4.7)."""
    rs = RemoteSession(admin_url, rpc_addr, ndr64, pathname, "receive")
    try:
        hr = _remote_call(lambda: rs.client.purge_queue(rs.handle))
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


@main.command()
@admin_options
def info(admin_url, as_json) -> None:
    """What the running server reports about itself (addresses, ports, version)."""
    data = _call_admin(lambda: _admin(admin_url).info())
    _emit(data, as_json, _kv)


def _attach_protocol_commands() -> None:
    """Commands that live beside their protocol: rpcdump (MS-RPCE epm), discover/directory (MS-MQSD, MS-MQCN),
    and the conformance pipeline (trace ingest, stats, diff, report, replay)."""
    from qm2qm.cli_mqcn import directory_group, discover_command
    from qm2qm.cli_pipeline import pipeline_commands
    from qm2qm.cli_rpcdump import rpcdump_command
    for command in (rpcdump_command, discover_command, directory_group, *pipeline_commands):
        main.add_command(command)


_attach_protocol_commands()


if __name__ == "__main__":   # pragma: no cover
    main()
