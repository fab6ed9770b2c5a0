"""Log output of `qm2qm serve`: text (one line per record) or JSON (one object per line) with the call's identifiers.

Only the fields named in ``FIELDS`` ever reach a JSON line: the identifiers the RPC runtime attaches (connection,
peer, association group, call, interface, opnum, fault, handle) -- never message bodies, labels or credentials,
whatever a record's ``extra`` carries.
"""
from __future__ import annotations

import json
import logging
import sys
import time

FIELDS = ("conn_id", "peer", "assoc_group", "call_id", "interface", "opnum", "fault", "handle", "handle_type",
          "handle_event")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, identifiers, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        fields = record.__dict__
        for key in FIELDS:
            if key in fields:
                out[key] = fields[key]
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def printable(text: str) -> str:
    """``text`` with each character a terminal or a log line would not show as itself escaped as Python writes it
    ("\\n", "\\x1b", "\\ud800"): names and labels come from peers and may hold control characters or, from a
    UTF-16 peer or an older store, a lone surrogate, which no output encoding can carry."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class Refusals:
    """Counts the refusals of one kind and lets the first of each second be logged, so that a peer looping on
    refusals is one log line a second, not one each."""

    __slots__ = ("count", "_next_log")

    def __init__(self) -> None:
        self.count = 0
        self._next_log = 0.0        # monotonic time the next refusal may be logged

    def note(self) -> bool:
        """Count one refusal; True when it should be logged."""
        self.count += 1
        now = time.monotonic()
        if now < self._next_log:
            return False
        self._next_log = now + 1.0
        return True


def configure(level: str, fmt: str, stream=None) -> None:
    """Set the root logger's level and the one handler's format ("text" or "json") for `qm2qm serve`."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
