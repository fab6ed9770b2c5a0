"""`qm2qm send`, `messages`, `message`, `move`: put, inspect and move messages over the admin API."""
from __future__ import annotations

import base64
from typing import Any

import click

from qm2qm.cli._common import (MESSAGE_COLUMNS, _admin,
                               _call_admin, _emit, _kv, _table, admin_options, main)

ACK_CHOICES = ["pos-arrival", "pos-receive", "neg-arrival", "neg-receive", "nack-reach-queue", "full-reach-queue",
               "nack-receive", "full-receive"]


@main.command()
@click.argument("pathname")
@click.option("--body", help="Message body text (sent as UTF-8).")
@click.option("--body-file", type=click.File("rb"),
              help="Read the body from a file ('-' = stdin); at most 4 MiB, reading stops past that.")
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
        from qm2qm.admin import MAX_BODY
        data = body_file.read(MAX_BODY + 1)         # no further: /dev/zero or a FIFO would never end
        if len(data) > MAX_BODY:
            raise click.BadParameter(f"{body_file.name!r} holds more than the {MAX_BODY}-byte (4 MiB) body limit",
                                     param_hint="--body-file")
        fields["body_base64"] = base64.b64encode(data).decode("ascii")
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
@click.option("--body", "with_body", is_flag=True,
              help="Include bodies (base64 and text; the table's BODY column: the text, else '(binary) BASE64').")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="List at most this many.")
@admin_options
def messages(pathname, with_body, limit, admin_url, as_json) -> None:
    """List the messages of PATHNAME with their lookup ids and position states."""
    data = _call_admin(lambda: _admin(admin_url).list_messages(pathname, body=with_body, limit=limit))
    if not with_body:
        _emit(data, as_json, lambda d: _table(d, MESSAGE_COLUMNS))
        return
    # the body as text when it is UTF-8, else its base64 (as peek prints it)
    rows = [{**m, "body": m["body_text"] if m.get("body_text") is not None else f"(binary) {m.get('body_base64', '')}"}
            for m in data]
    _emit(data, as_json, lambda d: _table(rows, [*MESSAGE_COLUMNS, ("body", "BODY")]))


@main.command()
@click.argument("pathname")
@click.argument("lookup_id", type=int)
@click.option("--delete", is_flag=True, help="Delete it instead (an Available message only; as a purge does).")
@admin_options
def message(pathname, lookup_id, delete, admin_url, as_json) -> None:
    """Show one message of PATHNAME by lookup id, body included; or, with --delete, delete it."""
    if delete:
        data = _call_admin(lambda: _admin(admin_url).delete_message(pathname, lookup_id))
        _emit(data, as_json, lambda d: click.echo(f"deleted lookup_id={d['deleted']} from {d['queue']}"))
        return
    data = _call_admin(lambda: _admin(admin_url).show_message(pathname, lookup_id))
    _emit(data, as_json, _kv)


@main.command()
@click.argument("pathname")
@click.argument("lookup_id", type=int)
@click.argument("subqueue", required=False, default="")
@admin_options
def move(pathname, lookup_id, subqueue, admin_url, as_json) -> None:
    """Move message LOOKUP_ID of PATHNAME to SUBQUEUE of its queue, or without SUBQUEUE back to the queue itself
    (MS-MQDMPR 3.1.7.1.16 Move Message; e.g. `move .\\private$\\orders;poison 72057594037927937` to retry)."""
    data = _call_admin(lambda: _admin(admin_url).move_message(pathname, lookup_id, subqueue))
    _emit(data, as_json, lambda d: click.echo(f"moved lookup_id={d['moved']} from {d['from']} to {d['to']}"))
