"""`qm2qm serve` and `qm2qm info`: run the queue manager, and ask a running one about itself."""
from __future__ import annotations

import sys

import click

from qm2qm.cli._common import (_admin,
                               _call_admin, _emit, _fail, _kv, admin_options, main)
from qm2qm.config import DEFAULT_ADMIN_PORT
from qm2qm.config import ConfigError, load_config
from shared_adm.store.base import StoreError


@main.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML file with the same keys.")
@click.option("--data-dir", help="Directory of the SQLite store [./qm2qm-data]; ':memory:' for a volatile one.")
@click.option("--host", help="Address the qm2qm RPC listener binds [127.0.0.1; use 0.0.0.0 for Windows peers].")
@click.option("--port", type=int, help="qm2qm TCP port [2105; +11 while busy, MS-MQQP 3.1.4.8]; 0 = ephemeral.")
@click.option("--qmcomm-port", type=int,
              help="qmcomm/qmcomm2 TCP port [2103; +11 while busy, MS-MQMP 3.1.4.24]; 0 = ephemeral. The port "
                   "queries (IP_HANDSHAKE) answer the port bound.")
@click.option("--admin-port", type=int, help=f"Admin API port on 127.0.0.1 [{DEFAULT_ADMIN_PORT}]; 0 = ephemeral.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level [warning].")
@click.option("--computer-name", help="Computer part of local path names and DIRECT=OS: names [host name].")
@click.option("--max-connections", type=int, help="Most RPC connections open at once, over the qm2qm, qmcomm and endpoint mapper listeners [1024].")
@click.option("--max-context-handles", type=int,
              help="Most context handles (open queues, sessions, receives awaiting their ACK) one client's association "
                   "may hold; past it opens answer MQ_ERROR_INSUFFICIENT_RESOURCES [4096].")
@click.option("--max-open-queues", type=int,
              help="Most queue handles open at once for remote readers, over every caller [262144]; past it opens "
                   "answer MQ_ERROR_INSUFFICIENT_RESOURCES.")
@click.option("--max-cursors", type=int,
              help="Most cursors open at once over every caller [1048576]; past it cursor creation answers "
                   "MQ_ERROR_INSUFFICIENT_RESOURCES.")
@click.option("--max-subqueues", type=int,
              help="Most subqueues (MSMQ 4.0's orders;poison) at once over every queue [65536]; past it an open or "
                   "move that would make one answers MQ_ERROR_INSUFFICIENT_RESOURCES.")
@click.option("--max-reassembly-mib", type=int,
              help="MiB of unfinished fragmented requests held at once over every connection [256]; a fragment past "
                   "it is faulted nca_s_server_too_busy (the call did not execute; the connection stays).")
@click.option("--max-unread-mib", type=int,
              help="MiB of answers left unread at once by peers that stopped reading, over every connection [1024]; "
                   "past it the connection leaving the most is closed and its handles run down.")
@click.option("--idle-timeout", type=float,
              help="Seconds an unbound or half-sent connection may stay silent before it is closed [60].")
@click.option("--keepalive", type=int,
              help="Seconds of silence before TCP keep-alives probe a connection, once a second; 10 unanswered "
                   "close it and run its handles down (MS-RPCE 3.3.3.2.1) [720, as Windows; 0 = off].")
@click.option("--epm-port", type=int, help="Endpoint mapper TCP port [135]; 0 = off (ept_map still answers on --port).")
@click.option("--trace", type=click.Path(dir_okay=False), help="Record every RPC call (.parquet or .jsonl).")
@click.option("--mqsd-port", type=int, help="MS-MQSD discovery responder UDP port [off; the spec's is 1801]; 0 = off.")
@click.option("--mqrr/--no-mqrr", default=None,
              help="Also serve MS-MQRR RemoteRead on --port and register it at the endpoint mapper [off: a "
                   "Windows client then finds it not registered and reads through qmcomm + qm2qm].")
@click.option("--allow-anonymous-read", is_flag=True, default=None,
              help="Let ANONYMOUS LOGON peek and receive every queue (unauthenticated remote readers); "
                   "see docs/windows-clients.md.")
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log lines as text or one JSON object [text].")
@click.option("--metrics/--no-metrics", default=None, help="Per-call RPC counters for /metrics and the web view [on].")
@click.option("--users", "users_file", type=click.Path(dir_okay=False),
              help="User file for NTLM / SPNEGO callers (docs/authentication.md) [none: authenticated binds are "
                   "refused].")
@click.option("--auth", "auth_mode", type=click.Choice(["none", "optional", "required"]),
              help="Authentication policy [optional]; required: unauthenticated qm2qm calls get "
                   "MQ_ERROR_ACCESS_DENIED (except GetQMQMServerPort).")
@click.option("--min-auth-level", type=click.IntRange(2, 6),
              help="Lowest authentication level accepted for qm2qm calls, 2 connect .. 6 privacy [2].")
@click.option("--allow-anonymous-ntlm", is_flag=True, default=None,
              help="Accept anonymous NTLM logons (as ANONYMOUS LOGON, levels 2-4 only).")
@click.option("--keytab", type=click.Path(dir_okay=False), help="Kerberos keytab of the service principal (needs pip install 'qm2qm[kerberos]'; docs/authentication.md).")
@click.option("--loop", "event_loop", type=click.Choice(["auto", "asyncio", "uvloop"]),
              help="Event loop [auto: uvloop when installed, else asyncio].")
@click.option("--store-synchronous", type=click.Choice(["normal", "full"]),
              help="Store durability [normal: survives kill -9; full: also power loss, an fsync per commit].")
@click.option("--store-group-wait-ms", type=float,
              help="Longest an ACK's commit waits for other recently Locked messages' ACKs to share it [1].")
@click.option("--store-commit-interval-ms", type=float,
              help="Longest a change nobody waits for stays uncommitted [10].")
def serve(config_file, data_dir, host, port, qmcomm_port, admin_port, log_level, computer_name,
          max_connections, max_context_handles, max_open_queues, max_cursors, max_subqueues, max_reassembly_mib,
          max_unread_mib, idle_timeout, keepalive, epm_port, trace,
          mqsd_port, mqrr, allow_anonymous_read, log_format, metrics,
          users_file, auth_mode, min_auth_level, allow_anonymous_ntlm, keytab, event_loop, store_synchronous,
          store_group_wait_ms, store_commit_interval_ms) -> None:
    """Run the queue manager until Ctrl-C / SIGTERM; prints one line with the bound addresses."""
    from qm2qm.app import StartupError, serve as run
    from qm2qm.eventloop import EventLoopError, clear_gc, run as run_on_loop, settle_gc

    try:
        config = load_config(config_file, {"data_dir": data_dir, "host": host, "port": port,
                                           "qmcomm_port": qmcomm_port, "admin_port": admin_port,
                                           "log_level": log_level, "computer_name": computer_name,
                                           "max_connections": max_connections, "idle_timeout": idle_timeout,
                                           "keepalive": keepalive,
                                           "max_context_handles": max_context_handles,
                                           "max_open_queues": max_open_queues, "max_cursors": max_cursors,
                                           "max_subqueues": max_subqueues,
                                           "max_reassembly_mib": max_reassembly_mib,
                                           "max_unread_mib": max_unread_mib,
                                           "epm_port": epm_port,
                                           "trace": trace, "mqsd_port": mqsd_port, "mqrr": mqrr,
                                           "allow_anonymous_read": allow_anonymous_read, "log_format": log_format,
                                           "metrics": metrics, "users": users_file, "auth": auth_mode,
                                           "min_auth_level": min_auth_level,
                                           "allow_anonymous_ntlm": allow_anonymous_ntlm, "keytab": keytab,
                                           "loop": event_loop, "store_synchronous": store_synchronous,
                                           "store_group_wait_ms": store_group_wait_ms,
                                           "store_commit_interval_ms": store_commit_interval_ms})
    except ConfigError as exc:
        _fail(str(exc), 2)
    from qm2qm.logfmt import configure
    configure(config.log_level, config.log_format, sys.stderr)

    def ready(app) -> None:
        """Print the ready line once both listeners are bound (the collector settled first)."""
        settle_gc()
        click.echo(app.ready_line())
        sys.stdout.flush()

    clear_gc()
    try:
        run_on_loop(run(config, on_ready=ready), config.loop)
    except (StartupError, EventLoopError) as exc:
        _fail(str(exc), 2)
    except StoreError as exc:          # the last changes could not be committed at shutdown (disk full, read-only)
        _fail(f"stopped, but the store could not commit its last changes: {exc}", 1)
    except KeyboardInterrupt:   # Ctrl-C before the signal handlers are installed
        _fail("interrupted", 130)



@main.command()
@admin_options
def info(admin_url, as_json) -> None:
    """What the running server reports about itself (addresses, ports, version)."""
    data = _call_admin(lambda: _admin(admin_url).info())
    _emit(data, as_json, _kv)
