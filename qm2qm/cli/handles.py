"""`qm2qm open`, `cursor`, `handles`, `close`, `reads`: descriptors and pending reads over the admin API."""
from __future__ import annotations


import click

from qm2qm.cli._common import (HANDLE_COLUMNS, _admin,
                               _call_admin, _emit, _kv, _table, admin_options, main)


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
