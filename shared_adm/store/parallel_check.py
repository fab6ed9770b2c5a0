"""The load check of stored compact forms (compact.check_stored, at 3.1.3 Initialization) run in a second process.

A start-up of a large store spends about 40% of its time proving each message row's compact form unpacks to plain
data. That proof needs nothing the load builds, so a worker process runs most of it on its own read-only connection
while this process scans and links the rows: the worker's read transaction begins while the loading one still holds
the store (its connection lock and read transaction), so both see the same rows. The worker answers with the
(queue, LookupIdentifier) of the forms that set a TimeToBeReceived (timers to start) and the first form, in key
order, that fails the check. A worker that cannot start or dies without an answer costs time, not safety: the
loading process then runs the whole check itself, in its own read transaction.
"""
from __future__ import annotations

import logging
import marshal
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from shared_adm.compact import CompactError, check_stored

log = logging.getLogger(__name__)

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # holds shared_adm/
_WORKER = "import sys; from shared_adm.store.parallel_check import worker_main; sys.exit(worker_main(sys.argv[1:]))"

Verdict = tuple[list[tuple[str, int]], "tuple[str, int, str] | None"]

# Both processes read the message rows in key order in batches of BATCH_ROWS, so batch n is the same rows in both. The
# loading process checks every LOADER_EVERY-th batch itself (batches 9, 19, ...) and the worker all others: the loader
# also builds and links every position, and with this share both end together (1M messages on a 2-vCPU VM: 3.6 s,
# against 3.8-4.0 s with the worker checking every batch, 3.8-3.9 s with the loader taking every fifth).
BATCH_ROWS = 1024
LOADER_EVERY = 10
MESSAGE_ROWS = "SELECT {} FROM messages ORDER BY queue_identifier, lookup_identifier"


def checked_by_loader(batch_number: int) -> bool:
    """The loading process checks this batch of message rows itself (while a worker checks the others)."""
    return batch_number % LOADER_EVERY == LOADER_EVERY - 1


def check_compact_rows(conn: sqlite3.Connection, bias: int, all_batches: bool,
                       abandoned: Callable[[], bool] | None = None) -> Verdict:
    """check_stored of the compact forms in the messages table (stored LookupIdentifier + ``bias`` = its own), of
    every batch or only those the loading process leaves to the worker: the keys of those that set a TTBR, and
    (queue, LookupIdentifier, why) of the first in key order that fails, or None. Rows whose key columns have the
    wrong type are left to the load, which names them. ``abandoned``, asked once a batch: SystemExit when it says so."""
    expiring: list[tuple[str, int]] = []
    rows = conn.execute(MESSAGE_ROWS.format("queue_identifier, lookup_identifier, compact"))
    number = -1
    while batch := rows.fetchmany(BATCH_ROWS):
        number += 1
        if abandoned is not None and abandoned():
            raise SystemExit(1)
        if not all_batches and checked_by_loader(number):
            continue
        for queue_id, lookup, compact in batch:
            if compact is None or type(queue_id) is not str or type(lookup) is not int:
                continue
            lookup += bias
            try:
                if check_stored(compact, lookup):
                    expiring.append((queue_id, lookup))
            except (CompactError, TypeError, RecursionError) as exc:
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                return expiring, (queue_id, lookup, why)
    return expiring, None


class ParallelCheck:
    """check_compact_rows of the store at ``path`` in a worker process, started now (see the module docstring)."""

    def __init__(self, path: os.PathLike | str, bias: int) -> None:
        self.bias = bias
        self.proc: subprocess.Popen | None = None
        if not sys.executable:
            return
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (_ROOT, os.environ.get("PYTHONPATH")))))
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, os.fspath(path), str(bias)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, cwd=_ROOT)
        except OSError as exc:
            log.warning("%s: cannot start the parallel load check (%s); this process checks the rows itself", path,
                        exc)

    def verdict(self, conn: sqlite3.Connection) -> Verdict:
        """The worker's answer; check_compact_rows on ``conn`` (the loading read transaction) if it gave none."""
        if self.proc is not None:
            out, err = self.proc.communicate()
            self.proc = None
            try:
                expiring, failure = marshal.loads(out)
                return list(expiring), failure
            except (EOFError, ValueError, TypeError):
                why = err.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
                log.warning("the parallel load check failed (%s); this process checks the rows itself", why[0])
        return check_compact_rows(conn, self.bias, all_batches=True)

    def close(self) -> None:
        """Stop the worker if it still runs (the load ended early: an error, or the iterator was closed)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate()
            self.proc = None


def worker_main(argv: list[str]) -> int:
    """The worker: ``<database path> <bias>``; writes marshal((expiring, failure)) to stdout."""
    import gc
    gc.disable()                        # a million new tuples and no garbage (as the load itself does)
    path, bias = argv[0], int(argv[1])
    parent = os.getppid()
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("BEGIN")
        # A loader killed mid-load (SIGKILL, or SIGTERM before the server's handlers are installed) leaves nobody to
        # answer: the worker, re-parented, stops within a batch instead of scanning on.
        answer = check_compact_rows(conn, bias, all_batches=False, abandoned=lambda: os.getppid() != parent)
        conn.execute("COMMIT")
    finally:
        conn.close()
    sys.stdout.buffer.write(marshal.dumps(answer))
    sys.stdout.buffer.flush()
    return 0
