"""`qm2qm transaction list|commit|abort`: the queue manager's transactions (MS-MQDMPR 3.1.1.14) and, standing in for
the DTC this server does not have, their outcome (3.1.4.4 Transaction Commit, 3.1.4.5 Transaction Abort)."""
from __future__ import annotations

import click

from qm2qm.cli._common import _admin, _call_admin, _emit, _table, admin_options, main


@main.group()
def transaction() -> None:
    """List transactions and commit or abort one (admin API): an MS-MQRR transactional receive's message stays
    Locked until its transaction ends, and without a DTC only an operator can end it."""


@transaction.command("list")
@admin_options
def transaction_list(admin_url, as_json) -> None:
    """Every transaction with the messages it holds."""
    data = _call_admin(lambda: _admin(admin_url).list_transactions())

    def human(rows):
        """One line per operation, the transaction's identifier on each."""
        _table([{"identifier": t["identifier"], **op} for t in rows for op in t["operations"] or [{}]],
               [("identifier", "TRANSACTION"), ("operation", "OPERATION"), ("queue", "QUEUE"),
                ("lookup_id", "LOOKUP ID")])
    _emit(data, as_json, human)


@transaction.command("commit")
@click.argument("identifier")
@admin_options
def transaction_commit(identifier, admin_url, as_json) -> None:
    """Commit IDENTIFIER (as `transaction list` shows it): its received messages are deleted."""
    _end(identifier, "commit", "committed", admin_url, as_json)


@transaction.command("abort")
@click.argument("identifier")
@admin_options
def transaction_abort(identifier, admin_url, as_json) -> None:
    """Abort IDENTIFIER: its received messages become Available again."""
    _end(identifier, "abort", "aborted", admin_url, as_json)


def _end(identifier: str, outcome: str, done: str, admin_url: str, as_json: bool) -> None:
    data = _call_admin(lambda: _admin(admin_url).end_transaction(identifier, outcome))
    _emit(data, as_json, lambda d: click.echo(f"{done} {d[done]}"))
