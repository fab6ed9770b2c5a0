"""What every `qm2qm` command shares: the root group, error and output helpers, the admin API options."""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable

import click

from qm2qm.config import DEFAULT_ADMIN_PORT
from qm2qm.logfmt import printable

DEFAULT_ADMIN_URL = f"http://127.0.0.1:{DEFAULT_ADMIN_PORT}"
INFINITE = 0xFFFFFFFF


def _fail(message: str, code: int = 1) -> None:
    """One line on stderr, no traceback, then exit."""
    click.echo(f"qm2qm: error: {message}", err=True)
    sys.exit(code)


def seconds_above_zero(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """click callback of a time-out option: a finite number of seconds above 0, at most a day."""
    if not (math.isfinite(value) and 0 < value <= 86400):
        raise click.BadParameter(f"expected seconds more than 0 and at most 86400, got {value!r}")
    return value


def _emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        human(data)


def _table(rows: list[dict], columns: list[tuple[str, str]]) -> None:
    """Print rows as an aligned text table; ``columns`` are (key, heading) pairs."""
    cells = [[h for _, h in columns]] + [["" if r.get(k) is None else printable(str(r.get(k))) for k, _ in columns]
                                         for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _kv(data: dict) -> None:
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        click.echo(printable(f"{key.ljust(width)}  {value}"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="qm2qm", prog_name="qm2qm", message="%(prog)s %(version)s")
def main() -> None:
    """qm2qm: an MSMQ queue manager serving the qm2qm remote-read interface (MS-MQQP)."""


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
    except (KeyError, TypeError, ValueError) as exc:     # an object of another shape than the admin API's
        _fail(f"unexpected answer from the admin API ({type(exc).__name__}: {exc}): is --admin the qm2qm admin API?")


QUEUE_COLUMNS = [("pathname", "PATHNAME"), ("type", "TYPE"), ("messages", "MSGS"),
                 ("transactional", "XACT"), ("journal", "JOURNAL"), ("quota", "QUOTA"), ("label", "LABEL")]
MESSAGE_COLUMNS = [("lookup_id", "LOOKUP ID"), ("state", "STATE"), ("priority", "PRI"), ("body_size", "SIZE"),
                   ("label", "LABEL")]
HANDLE_COLUMNS = [("hRemoteQueue", "HANDLE"), ("context_value", "CONTEXT"), ("queue", "QUEUE"), ("access", "ACCESS"),
                  ("share_mode", "SHARE"), ("remote_read_state", "STATE"), ("cursors", "CURSORS")]

