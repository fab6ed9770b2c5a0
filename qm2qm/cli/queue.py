"""`qm2qm queue ...`: create, delete, list and show queues over the admin API (MS-MQDMPR 3.1.7.1.3–5)."""
from __future__ import annotations


import click

from qm2qm.cli._common import (QUEUE_COLUMNS, _admin,
                               _call_admin, _emit, _kv, _table, admin_options, main)


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
    """List every queue, each followed by its subqueues."""
    data = _call_admin(lambda: _admin(admin_url).list_queues())
    _emit(data, as_json, lambda d: _table(_with_subqueue_rows(d), QUEUE_COLUMNS))


def _with_subqueue_rows(queues: list[dict]) -> list[dict]:
    """The queue rows, each followed by one row per subqueue (a queue's view lists them in "subqueues")."""
    rows = []
    for view in queues:
        rows.append(view)
        rows.extend({"pathname": f"{view['pathname']};{sub['name']}", "type": "subqueue",
                     "messages": sub["messages"]} for sub in view.get("subqueues", ()))
    return rows


@queue.command("show")
@click.argument("pathname")
@admin_options
def queue_show(pathname, admin_url, as_json) -> None:
    """Show one queue's attributes."""
    data = _call_admin(lambda: _admin(admin_url).show_queue(pathname))
    _emit(data, as_json, _kv)


def _show_permissions(data: dict) -> None:
    click.echo(f"owner {data['owner']}  allow_anonymous_read={str(data['allow_anonymous_read']).lower()}")
    for ace in data["aces"]:
        click.echo(f"  {ace['sid']:<16} {','.join(ace['names']) or '-'}  (0x{ace['rights']:X})")


def _change_command(verb: str, doc: str):
    """`qm2qm queue grant|revoke PATHNAME PRINCIPAL RIGHT` (POST /v1/queues/{q}/permissions)."""
    @queue.command(verb, help=doc)
    @click.argument("pathname")
    @click.argument("principal")
    @click.argument("right", type=click.Choice(["receive", "peek", "delete"], case_sensitive=False))
    @admin_options
    def command(pathname, principal, right, admin_url, as_json) -> None:
        data = _call_admin(lambda: _admin(admin_url).change_permissions(pathname, verb, principal, right))
        _emit(data, as_json, _show_permissions)
    return command


queue_grant = _change_command(
    "grant", "Let PRINCIPAL (a SID, Everyone, 'ANONYMOUS LOGON', ...) RIGHT on PATHNAME (MS-MQMQ 2.2.24).")
queue_revoke = _change_command("revoke", "Take RIGHT on PATHNAME away from PRINCIPAL.")


@queue.command("permissions")
@click.argument("pathname")
@admin_options
def queue_permissions(pathname, admin_url, as_json) -> None:
    """Show PATHNAME's owner and who may peek, receive or delete."""
    data = _call_admin(lambda: _admin(admin_url).permissions(pathname))
    _emit(data, as_json, _show_permissions)
