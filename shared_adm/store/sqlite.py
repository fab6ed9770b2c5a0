"""SqliteStore: the Store contract (base.py) on stdlib SQLite in WAL mode with group commit (MS-MQDMPR 3.1.1).

Durability choice: ``journal_mode=WAL`` with ``synchronous=NORMAL`` (the default here). A commit
appends the transaction's pages to the -wal file with write(2) before COMMIT returns; once that
returns the bytes are in the kernel page cache, so a kill -9 of this process (or any crash of the
process alone) cannot lose them, and the next open replays the WAL. What NORMAL does not promise
is survival of the last commits across a power loss or kernel crash, because the WAL is fsynced
only at checkpoints; pass ``synchronous="FULL"`` to fsync the WAL on every commit (one fsync per
group commit, not per message) when that matters.

Group commit: mutations are recorded on the caller's thread into an in-memory pending batch,
coalesced per key (cheap, no I/O), and committed whole in one SQLite transaction. ``await durable()`` /
``flush()`` wait for the batch holding every mutation recorded before the call; a commit failure is logged
and raised to those waiters, and the batch is kept and retried (in order, before newer batches) by the
writer thread after a back-off. Who commits: under NORMAL a commit is write(2)s, so the event loop's thread
commits what durable() waits for itself, at the end of the loop turn (every ACK of the turn in one commit),
or -- while a message Locked in the last ``group_wait_ms`` is not yet deleted, its ACK on its way -- when
that ACK came or ``group_wait_ms`` passed; no thread hand-off per commit. The writer thread commits under
FULL (an fsync per commit), for flush(), what nobody awaits (after ``commit_interval_ms``) and failed
batches, and checkpoints the WAL (``wal_autocheckpoint`` is off on the connection, so no checkpoint
runs inside a commit on the event loop).

The delete journal (delete_journal.py, schema 3): under NORMAL, a batch that holds deletions alone -- the ACKs of
received recoverable messages -- is made durable by one pwrite(2) of its keys to ``<database>-deletes`` instead of a
SQLite transaction (a few µs against ~40-60 µs for eight WAL pages). The writer thread moves journaled deletions
into the database within ``_APPLY_AFTER_S``, hundreds per transaction; every transaction applies them before its own
batches (a later put of the same key wins) and records in ``meta`` how far into which journal generation it got.
Opening the store replays the rest, in the opening transaction. load() and close() move them first.

Rows (schema 2 and 3): a message row holds the compact form its MessagePosition holds (shared_adm/compact.py), so a
start-up reads it as it is; ``compact.check_stored`` proves each one unpacks to plain data before it is used (the
data directory is a trust boundary: a pickled form is never stored, and marshal builds objects without running
code). A message whose compact form would need pickle, or whose own LookupIdentifier is not its row's, is stored
as record.py's JSON instead. ``meta.compact_layout`` names the Message field table the forms were packed under; a
version with another one re-packs them when it opens the store. A schema-1 store (JSON only) is upgraded once, in
the opening transaction.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from itertools import repeat
from operator import sub
from pathlib import Path

from shared_adm.collector import collector_paused
from shared_adm.message import Message
from shared_adm.store.base import PackedStoredMessage, Snapshot, StoredMessage, StoredQueue, StoreError
from shared_adm.compact import (CompactError, check_stored, check_stored_header, is_pickled, layout, pack, pack_fields,
                                relayout, unpack)
from shared_adm.store.delete_journal import MAGIC as DELETE_JOURNAL_MAGIC
from shared_adm.store.delete_journal import HEADER_SIZE, JOURNAL_SUFFIX, DeleteJournal, encode_keys
from shared_adm.store.parallel_check import BATCH_ROWS, MESSAGE_ROWS, ParallelCheck, checked_by_loader
from shared_adm.store.record import (RecordError, decode_message_fields, decode_value, encode_message, encode_value,
                                     message_from_fields)

__all__ = ["SqliteStore", "SCHEMA_VERSION", "DB_FILE_NAME"]

log = logging.getLogger(__name__)

# 1: attributes as JSON only; 2: a message's compact form (compact.py) as it is; 3: deletions may wait in the delete
# journal (delete_journal.py), which a version-2 reader would not replay
SCHEMA_VERSION = 3
DB_FILE_NAME = "qm2qm.sqlite3"
_FILE_SUFFIXES = (".sqlite3", ".sqlite", ".db")

# PositionState (MS-MQDMPR 3.1.1.11) names <-> the small integers stored in messages.state
_STATE_CODES = {"Available": 0, "Locked": 1, "PurgePending": 2, "Deleted": 3}
_STATE_NAMES = {code: name for name, code in _STATE_CODES.items()}
_LOCKED = _STATE_CODES["Locked"]
_CHECKPOINT_BYTES = 1000 * 4096     # SQLite's default wal_autocheckpoint (pages) at the default page size
_CHECK_EVERY = 64                   # loop-thread commits between two looks at the WAL's size
_RETRY_S = 0.001                    # the loop thread found the writer holding the connection: it tries again then
_AWAKE_AFTER_WRITES_S = 1.0         # the writer looks every commit interval this long after a batch's first mutation
_APPLY_AFTER_S = 0.05               # journaled deletions wait at most this long for the writer to move them into SQLite
_KEYS_PER_DELETE = 900              # under SQLite's oldest limit of 999 parameters per statement
_RESTART_JOURNAL_BYTES = 1 << 20    # a journal this long, all of it applied, begins a new generation (empty)
# meta keys: the delete journal's generation and the offset up to which its deletions are in the database
_JOURNAL_GENERATION_KEY = "delete_journal_generation"
_JOURNAL_APPLIED_KEY = "delete_journal_applied"

# LookupIdentifier and the sequential id are 64-bit unsigned; SQLite INTEGER is signed. Shifting by
# 2**63 maps [0, 2**64) onto the signed range and keeps the order, so ORDER BY stays enqueue order.
_BIAS = 1 << 63
_JSON = json.JSONEncoder(separators=(",", ":"))

# A message row holds its compact form (shared_adm/compact.py, checked by check_stored when read), or -- when that
# form would need pickle, or its LookupIdentifier is not the row's -- its attributes as record.py's JSON and its body.
_MESSAGES_TABLE = ("CREATE TABLE {name} (queue_identifier TEXT NOT NULL, lookup_identifier INTEGER NOT NULL,"
                   " state INTEGER NOT NULL, compact BLOB, attributes TEXT, body BLOB,"
                   " PRIMARY KEY (queue_identifier, lookup_identifier))")
_SCHEMA = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    "CREATE TABLE queues (identifier TEXT PRIMARY KEY, attributes TEXT NOT NULL) WITHOUT ROWID",
    _MESSAGES_TABLE.format(name="messages"),
)
# meta key: the field table (compact.layout()) the stored compact forms were packed under
_LAYOUT_KEY = "compact_layout"
_LAYOUT = _JSON.encode(layout())


_DELETE_OP = ("delete",)        # one pending delete shared by a bulk delete's keys: a delete op is never changed


def _u64(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__qualname__}")
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{what} {value} is outside the 64-bit unsigned range")
    return int(value) - _BIAS


def _check_identifier(identifier: str, what: str = "queue identifier") -> None:
    # Checked when recorded: a value SQLite cannot bind would otherwise fail every later commit.
    if not isinstance(identifier, str):
        raise TypeError(f"{what} must be a str (the GUID string), got {type(identifier).__qualname__}")
    try:
        identifier.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {identifier!r} is not valid Unicode (lone surrogate)") from None


def _state_code(state: str) -> int:
    try:
        return _STATE_CODES[state]
    except (KeyError, TypeError):
        raise ValueError(f"unknown MessagePosition state {state!r}; expected one of "
                         f"{', '.join(_STATE_CODES)}") from None


def _resolve_path(data_dir_or_file: str | os.PathLike) -> Path:
    path = Path(data_dir_or_file)
    if path.is_dir():
        return path / DB_FILE_NAME
    if path.exists() or path.suffix in _FILE_SUFFIXES:
        return path
    return path / DB_FILE_NAME


@dataclass(slots=True)
class _QueueOp:
    purge_messages: bool = False        # delete_queue seen: delete every stored message of the queue
    attributes: str | None = None       # encoded attributes to store, or None: delete the queue row


@dataclass(slots=True)
class _Batch:
    """Mutations recorded between two commits, coalesced to one operation per key."""
    queue_manager_identifier: str | None = None
    sequential_id: int | None = None
    queues: dict[str, _QueueOp] = field(default_factory=dict)
    # (queue, lookup) -> ["put", state, compact, attrs, body] | ["state", state] | ["delete"]
    messages: dict[tuple[str, int], list] = field(default_factory=dict)


class _LoadedMessage(PackedStoredMessage):
    """A StoredMessage read by load_stream: ``packed`` is its compact form (shared_adm/compact.py, LookupIdentifier
    = the row's), checked but not unpacked; ``message`` is built only when asked for (TTBR, tools)."""
    __slots__ = ("_fields",)

    def __init__(self, queue_identifier: str, lookup_identifier: int, state: str, packed: bytes,
                 fields: dict | None = None) -> None:
        super().__init__(queue_identifier, lookup_identifier, state, packed)
        self._fields = fields               # a JSON row's decoded attributes: its Message keeps its own LookupIdentifier

    @property
    def message(self) -> Message:
        if self._fields is None:
            return unpack(self.packed)
        return message_from_fields(self._fields)

    def __reduce__(self):
        return type(self), (self.queue_identifier, self.lookup_identifier, self.state, self.packed, self._fields)

    def plain(self) -> StoredMessage:
        """The same as a plain StoredMessage (what load() returns)."""
        return StoredMessage(self.queue_identifier, self.lookup_identifier, self.state, self.message)


def _loaded_messages(batches):
    """load_packed's batches as _LoadedMessages (load_stream); closing this closes them (the read transaction)."""
    try:
        for batch in batches:
            for key, lookup, state, packed, _, fields in batch:
                yield _LoadedMessage(key, lookup, state, packed, fields)
    finally:
        batches.close()


def _row_of_fields(queue_identifier: str, lookup_identifier: int, state: str, fields: dict) -> tuple:
    """load_packed's row of a message stored as JSON attributes (record.py): packed from its decoded fields."""
    packed_fields = fields
    if fields.get("lookup_identifier") != lookup_identifier:
        packed_fields = {**fields, "lookup_identifier": lookup_identifier}
    return (queue_identifier, lookup_identifier, state, pack_fields(packed_fields), "time_to_be_received" in fields,
            fields)


def _message_row(stored: StoredMessage) -> tuple[bytes | None, str | None, bytes | None]:
    """(compact, attributes, body) of a row: the compact form when a load can take it as it is, else JSON."""
    packed = getattr(stored, "packed", None)    # the queue manager's own compact form: not packed again
    if packed is None:
        packed = pack(stored.message)
    if type(packed) is bytes and not is_pickled(packed):
        try:
            check_stored(packed, stored.lookup_identifier)     # what a load will check: it must pass
            return packed, None, None
        except CompactError:
            pass
    attributes, body = encode_message(stored.message, stored.lookup_identifier)
    return None, attributes, body


class _Waiter:
    """One durable()/when_durable()/flush() caller waiting for the batch numbered ``target`` to commit."""
    __slots__ = ("target", "loop", "future", "event", "error", "then")

    def __init__(self, target: int, loop: asyncio.AbstractEventLoop | None) -> None:
        self.target = target
        self.loop = loop
        self.future = loop.create_future() if loop is not None else None
        self.event = threading.Event() if loop is None else None
        self.error: BaseException | None = None
        self.then = None            # when_durable(): the future's result is then(None) or then(StoreError)

    def resolve(self, error: BaseException | None) -> None:
        if self.loop is None:
            self.error = error
            self.event.set()
            return
        try:
            self.loop.call_soon_threadsafe(self._settle, error)
        except RuntimeError:        # the loop is closed: nobody is awaiting any more
            pass

    def _settle(self, error: BaseException | None) -> None:
        if self.future.done():      # cancelled by its awaiter
            return
        if self.then is not None:
            try:
                result = self.then(error)
            except BaseException as exc:        # the future's awaiter gets it; the other waiters are settled
                self.future.set_exception(exc)
            else:
                self.future.set_result(result)
            return
        if error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(error)


def _resolve_all(waiters: list[_Waiter], error: str | None,
                 here: asyncio.AbstractEventLoop | None = None) -> None:
    """Settle every waiter of one commit: those of ``here`` (the loop running this) at once, the others with one
    call_soon_threadsafe (one wake-up) per event loop, not per waiter."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Waiter]] = {}
    for waiter in waiters:
        if waiter.loop is None:
            waiter.resolve(None if error is None else StoreError(error))
        else:
            by_loop.setdefault(waiter.loop, []).append(waiter)
    for loop, group in by_loop.items():
        if loop is here:
            _settle_all(group, error)
            continue
        try:
            loop.call_soon_threadsafe(_settle_all, group, error)
        except RuntimeError:        # the loop is closed: nobody is awaiting any more
            pass


def _settle_all(group: list[_Waiter], error: str | None) -> None:
    for waiter in group:
        waiter._settle(None if error is None else StoreError(error))


class SqliteStore:
    """The Store contract (base.py) on SQLite WAL with group commit; see the module docstring.

    ``data_dir_or_file_path``: a directory (created if missing; the database is
    ``<dir>/qm2qm.sqlite3``) or a file path ending in .sqlite3/.sqlite/.db.
    ``commit_interval_ms``: the longest a mutation nobody awaits stays uncommitted; a
    durable()/flush() starts a commit at the end of the caller's loop turn (flush(): at once), or, while a
    message Locked in the last ``group_wait_ms`` is not yet deleted (its ACK is on its way), when the last
    such is or ``group_wait_ms`` after the first waiter, whichever is first.
    ``synchronous``: "NORMAL" (durable against kill -9) or "FULL" (also against power loss).
    Raises StoreError naming the file when it cannot be opened, is not a qm2qm store, is corrupt,
    has a newer schema, or is already open in another process.
    """

    def __init__(self, data_dir_or_file_path: str | os.PathLike, *, commit_interval_ms: float = 10.0,
                 synchronous: str = "NORMAL", group_wait_ms: float = 1.0) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if not commit_interval_ms >= 0:
            raise ValueError(f"commit_interval_ms must be >= 0, not {commit_interval_ms!r}")
        self.path = _resolve_path(data_dir_or_file_path)
        self._wal_path = self.path.with_name(self.path.name + "-wal")
        if not group_wait_ms >= 0:
            raise ValueError(f"group_wait_ms must be >= 0, not {group_wait_ms!r}")
        self._interval = commit_interval_ms / 1000.0
        self._group_wait = group_wait_ms / 1000.0
        self.options = {"synchronous": synchronous, "group_wait_ms": group_wait_ms,
                        "commit_interval_ms": commit_interval_ms}       # as opened (serve --store-*)
        self._lock_file = None
        self._conn: sqlite3.Connection | None = None
        self._journal = DeleteJournal(self.path.with_name(self.path.name + JOURNAL_SUFFIX))
        self._open(synchronous)
        self._db_lock = threading.Lock()            # the connection: writer thread vs load()
        self._lock = threading.Lock()               # pending batch, counters, waiters
        self._wake = threading.Condition(self._lock)
        self._pending = _Batch()
        self._pending_seq = 1                       # number of the batch being recorded
        self._committed_seq = 0                     # every batch up to this one is committed
        self._failed: list[tuple[int, _Batch]] = []  # taken batches whose commit failed, oldest first
        self._dirty = False                         # the pending batch holds something
        self._demand = False                        # a waiter wants a commit now
        # the loop on which a call_soon/call_later of _ask_at_turn_end is pending (it commits at the end of the turn)
        self._asking: asyncio.AbstractEventLoop | None = None
        # (queue, lookup) -> monotonic time its Locked state was recorded, oldest first, until it is deleted or
        # changes state: a recent one's ACK is probably on its way, and a commit held for it carries it too.
        self._locked: dict[tuple[str, int], float] = {}
        self._hold: asyncio.TimerHandle | None = None  # waiters held for those ACKs until this fires
        self._hold_loop: asyncio.AbstractEventLoop | None = None
        # NORMAL: a commit is write(2)s into the WAL, no fsync, so the loop thread commits an awaited batch itself
        # (no writer wake-up, GIL hand-off or call_soon_threadsafe per commit); FULL fsyncs: the writer thread.
        self._inline = synchronous == "NORMAL"
        self._checkpoint_due = False                # the writer checkpoints the WAL when it has grown
        # the writer waits with no deadline (no batch came for _AWAKE_AFTER_WRITES_S): a first mutation wakes it
        self._writer_idle = False
        self._dirty_since = 0.0                     # monotonic time of the pending batch's first mutation
        self._unchecked = 0                         # commits on the loop thread since the WAL's size was looked at
        self._retry_delay = 0.0                     # > 0 after a failed commit: back-off before retrying
        self._waiters: list[_Waiter] = []
        # Deletions made durable by the journal (a batch of deletions alone, under NORMAL) and not yet in SQLite: every
        # SQLite transaction applies them first, the writer within _APPLY_AFTER_S.
        self._stash: list[tuple[str, int]] = []
        self._stash_end = HEADER_SIZE               # journal offset after the last of them
        self._stash_since = 0.0                     # monotonic time the oldest was journaled
        self._in_flight = False                     # the writer took batches it has not committed: no journal append
        self.journaled = 0                          # of the commits, those made by a journal append
        self._closed = False
        self._broken: BaseException | None = None  # the commit path died of this (_die)
        self._broken_where = ""
        self.commits = 0                            # group commits: transactions, journal appends (benchmarks, tests)
        self.on_commit = None                       # callable(seconds) after each commit, on the writer thread
        self._writer = threading.Thread(target=self._run_writer, name=f"SqliteStore writer {self.path}",
                                        daemon=True)
        self._writer.start()

    # ---- opening and validation -------------------------------------------------------------

    def _fail(self, what: str) -> StoreError:
        return StoreError(f"{self.path}: {what}")

    def _open(self, synchronous: str) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._fail(f"cannot create the data directory {directory}: {exc.strerror or exc}") from None
        if self.path.exists() and not self.path.is_file():
            raise self._fail("exists but is not a regular file")
        self._lock_file = self._acquire_process_lock()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            self._release_process_lock()
            raise self._fail(self._describe(exc)) from None
        try:
            self._check_truncation()
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                raise self._fail(f"cannot switch to WAL journal mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            # Checkpoints (a write of the WAL's pages into the database and, under NORMAL, two fsyncs) are the
            # writer thread's, never inside a commit the event loop's thread makes (_maybe_checkpoint).
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.execute("PRAGMA cache_size=-65536")        # 64 MiB: load() and large batches
            conn.execute("BEGIN IMMEDIATE")                  # proves the file and directory are writable
            try:
                rewritten = self._check_or_create_schema(conn)
                generation = self._replay_deletes(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if rewritten:       # the upgrade went through the WAL: give its disk space back now, not at close
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            try:
                self._journal.start(generation)
            except OSError as exc:
                self._journal.close()
                raise self._fail(f"cannot write its delete journal {self._journal.path}: "
                                 f"{exc.strerror or exc}") from None
        except StoreError:
            conn.close()
            self._release_process_lock()
            raise
        except sqlite3.Error as exc:
            conn.close()
            self._release_process_lock()
            raise self._fail(self._describe(exc)) from None
        except OSError as exc:
            conn.close()
            self._release_process_lock()
            raise self._fail(f"cannot read: {exc.strerror or exc}") from None
        self._conn = conn

    def _replay_deletes(self, conn: sqlite3.Connection) -> int:
        """Apply the journaled deletions the database does not hold yet (inside the opening transaction) and return
        the generation the journal begins next: after a crash between this commit and the journal's restart, the
        file's older generation is replayed again, which deletes nothing more."""
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?)",
                                 (_JOURNAL_GENERATION_KEY, _JOURNAL_APPLIED_KEY)))
        applied_generation = meta.get(_JOURNAL_GENERATION_KEY, 0)
        applied_offset = meta.get(_JOURNAL_APPLIED_KEY, HEADER_SIZE)
        if type(applied_generation) is not int or type(applied_offset) is not int:
            raise self._fail(f"corrupt delete journal position in its meta table ({meta!r:.80})")
        try:
            keys, found_generation = self._journal.read_unapplied(applied_generation, applied_offset)
        except ValueError as exc:
            raise self._fail(str(exc)) from None
        except OSError as exc:
            raise self._fail(f"cannot read its delete journal {self._journal.path}: {exc.strerror or exc}") from None
        if keys:
            _delete_keys(conn, keys)
            log.info("%s: applied %d journaled deletions", self.path, len(keys))
        generation = max(applied_generation, found_generation) + 1
        _set_journal_position(conn, generation, HEADER_SIZE)
        return generation

    def _describe(self, exc: sqlite3.Error) -> str:
        text = str(exc)
        if "not a database" in text:
            return f"not an SQLite database or corrupt header ({text})"
        if "malformed" in text or "corrupt" in text:
            return f"the database is corrupt ({text})"
        if "unable to open" in text or "readonly" in text or "read-only" in text:
            return (f"cannot open for reading and writing ({text}); check the permissions of the file "
                    f"and of the directory {self.path.parent}")
        return text

    def _acquire_process_lock(self):
        """Refuse a data directory another live process has open (the lock dies with the process)."""
        try:
            import fcntl
        except ImportError:         # not POSIX: no cross-process guard
            return None
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            try:
                handle = open(lock_path, "a+b")
            except PermissionError:
                handle = open(lock_path, "rb")      # flock needs no write access to an existing file
        except OSError as exc:
            raise self._fail(f"cannot create the lock file {lock_path}: {exc.strerror or exc}; "
                             f"check that {self.path.parent} is writable") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise self._fail("is in use by another process or SqliteStore (lock file "
                             f"{lock_path} is held)") from None
        return handle

    def _release_process_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _check_truncation(self) -> None:
        """A database file shorter than its header's page count lost pages (SQLite file format 1.3.7); an empty one
        beside the files only a store leaves (its delete journal, a WAL) lost all of them."""
        wal = self.path.with_name(self.path.name + "-wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
        size = self.path.stat().st_size if self.path.exists() else 0
        if size == 0:
            self._check_not_emptied(wal if wal_size else None)
            return
        if wal_size:
            return      # pages may legitimately live only in the WAL until the next checkpoint
        with open(self.path, "rb") as handle:
            header = handle.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise self._fail(f"not an SQLite database (bad header, file is {size} bytes)")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        page_count = int.from_bytes(header[28:32], "big")
        change_counter = header[24:28]
        valid_for = header[92:96]
        if page_count and change_counter == valid_for and size < page_count * page_size:
            raise self._fail(f"truncated: the header says {page_count} pages of {page_size} bytes "
                             f"({page_count * page_size} bytes) but the file has {size} bytes")

    def _check_not_emptied(self, wal: Path | None) -> None:
        """An empty (or missing: connect made it) database is a new store, unless a store's own files say one was
        here: the delete journal (written at every start) or a WAL (SQLite writes the database header before any
        WAL frame). Starting on it would silently drop every queue and message."""
        journal = self.path.with_name(self.path.name + JOURNAL_SUFFIX)
        evidence = [wal.name] if wal is not None else []
        try:
            with open(journal, "rb") as handle:
                if handle.read(len(DELETE_JOURNAL_MAGIC)) == DELETE_JOURNAL_MAGIC:
                    evidence.append(journal.name)
        except FileNotFoundError:
            pass
        if evidence:
            files = " and ".join(evidence)
            raise self._fail(f"is empty, but a store was here ({files} beside it): its queues and messages are not "
                             f"in the file. Restore {self.path.name} from a backup, or remove {files} to start an "
                             "empty store")

    def _check_or_create_schema(self, conn: sqlite3.Connection) -> bool:
        """Create, check or upgrade the schema; True when every message row was rewritten (upgrade, re-pack)."""
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (_LAYOUT_KEY, _LAYOUT))
            return False
        if "schema_version" not in tables:
            raise self._fail(f"an SQLite database but not a qm2qm store (tables: {', '.join(sorted(tables))})")
        rows = conn.execute("SELECT version FROM schema_version").fetchall()
        if len(rows) != 1 or type(rows[0][0]) is not int:
            raise self._fail(f"corrupt schema_version table ({rows!r:.80})")
        version = rows[0][0]
        if version > SCHEMA_VERSION:
            raise self._fail(f"schema version {version} was written by a newer qm2qm; this one reads "
                             f"up to version {SCHEMA_VERSION}")
        if version < 1:
            raise self._fail(f"invalid schema version {version}")
        missing = {"meta", "queues", "messages"} - tables
        if missing:
            raise self._fail(f"corrupt store: missing tables {', '.join(sorted(missing))}")
        if version == 1:
            self._migrate_from_1(conn)
            return True
        if version == 2:        # nothing to rewrite: from now on deletions may wait in the delete journal
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        stored_layout = conn.execute("SELECT value FROM meta WHERE key = ?", (_LAYOUT_KEY,)).fetchone()
        if stored_layout is None or type(stored_layout[0]) is not str:
            raise self._fail(f"corrupt store: no {_LAYOUT_KEY} in its meta table")
        if stored_layout[0] != _LAYOUT:
            self._relayout(conn, stored_layout[0])
            return True
        return False

    # Both run inside _open's transaction: a crash or an error part-way leaves the store as it was.

    def _migrate_from_1(self, conn: sqlite3.Connection) -> None:
        """Schema 1 -> 2, once, in place: each row's JSON attributes become its compact form (rows that cannot, kept
        as they are: the load decodes or reports them as schema 1 did)."""
        started = time.monotonic()
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        log.warning("%s: upgrading the store from schema version 1 to %d (%d messages; about half a minute per "
                    "million) ...", self.path, SCHEMA_VERSION, total)
        conn.execute(_MESSAGES_TABLE.format(name="messages_v2"))
        count = 0
        # Each batch of old rows is deleted as its new rows are written: the pages freed are reused at once, so the
        # file does not grow by a second copy of every message.
        while batch := conn.execute("SELECT rowid, queue_identifier, lookup_identifier, state, attributes, body"
                                    " FROM messages ORDER BY rowid LIMIT 4096").fetchall():
            conn.executemany("INSERT INTO messages_v2 (queue_identifier, lookup_identifier, state, compact,"
                             " attributes, body) VALUES (?, ?, ?, ?, ?, ?)", map(_row_from_1, batch))
            conn.execute("DELETE FROM messages WHERE rowid <= ?", (batch[-1][0],))
            count += len(batch)
        conn.execute("DROP TABLE messages")
        conn.execute("ALTER TABLE messages_v2 RENAME TO messages")
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_LAYOUT_KEY, _LAYOUT))
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        log.warning("%s: upgraded the store from schema version 1 to %d (%d messages, %.1f s)", self.path,
                    SCHEMA_VERSION, count, time.monotonic() - started)

    def _relayout(self, conn: sqlite3.Connection, stored_layout: str) -> None:
        """Re-pack every compact form written under another Message field table (another qm2qm version)."""
        started = time.monotonic()
        try:
            old_layout = json.loads(stored_layout)
            if type(old_layout) is not list or not all(type(entry) is list and len(entry) >= 2
                                                         and all(type(item) is str for item in entry)
                                                         for entry in old_layout):
                raise ValueError("not a list of [name, kind, ...]")
        except ValueError as exc:
            raise self._fail(f"corrupt {_LAYOUT_KEY} in its meta table: {exc}") from None
        gone = sorted({entry[0] for entry in old_layout} - {entry[0] for entry in layout()})
        if gone:
            log.warning("%s: stored Message attributes %s are unknown to this version; dropped", self.path,
                        ", ".join(gone))
        last, count = None, 0
        while True:
            batch = conn.execute("SELECT rowid, lookup_identifier, compact FROM messages WHERE compact IS NOT NULL"
                                 + ("" if last is None else " AND rowid > ?") + " ORDER BY rowid LIMIT 4096",
                                 () if last is None else (last,)).fetchall()
            if not batch:
                break
            last = batch[-1][0]
            updates = []
            for rowid, lookup, compact in batch:
                try:
                    if type(lookup) is not int:
                        raise TypeError("its lookup identifier is not an integer")
                    message = unpack(relayout(compact, old_layout))
                    updates.append((*_message_row(StoredMessage("", lookup + _BIAS, "", message)), rowid))
                except (CompactError, TypeError, ValueError) as exc:
                    raise self._fail(f"corrupt message in row {rowid}: {exc}") from None
            conn.executemany("UPDATE messages SET compact = ?, attributes = ?, body = ? WHERE rowid = ?", updates)
            count += len(batch)
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (_LAYOUT, _LAYOUT_KEY))
        log.warning("%s: re-packed %d stored messages for this version's Message attributes (%.1f s)", self.path,
                    count, time.monotonic() - started)

    # ---- recording (caller's thread) ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")

    def set_queue_manager_identifier(self, identifier: str) -> None:
        """Record LocalQueueManager.Identifier (3.1.1.1)."""
        _check_identifier(identifier, "queue manager identifier")
        with self._lock:
            self._check_open()
            self._pending.queue_manager_identifier = identifier
            self._nudge()

    def set_sequential_id(self, value: int) -> None:
        """Record the last allocated sequential (lookup) identifier; only the last value is written."""
        stored = _u64(value, "sequential id")
        with self._lock:
            self._check_open()
            self._pending.sequential_id = stored
            self._nudge()

    def put_queue(self, queue: StoredQueue) -> None:
        """Record a Queue's Persistent attributes (3.1.1.2), replacing any stored ones."""
        if not isinstance(queue, StoredQueue):
            raise TypeError(f"put_queue needs a StoredQueue, got {type(queue).__qualname__}")
        _check_identifier(queue.identifier)
        if not isinstance(queue.attributes, dict):
            raise TypeError(f"queue attributes must be a dict, got {type(queue.attributes).__qualname__}")
        attributes = _JSON.encode(encode_value(queue.attributes))
        with self._lock:
            self._check_open()
            op = self._pending.queues.get(queue.identifier)
            if op is None:
                self._pending.queues[queue.identifier] = _QueueOp(False, attributes)
            else:
                op.attributes = attributes
            self._nudge()

    def delete_queue(self, identifier: str) -> None:
        """Record the deletion of a Queue (3.1.7.1.4) and of every message stored in it."""
        _check_identifier(identifier)
        with self._lock:
            self._check_open()
            messages = self._pending.messages
            for key in [key for key in messages if key[0] == identifier]:
                del messages[key]
            gone = [key for key in self._locked if key[0] == identifier]
            for key in gone:
                del self._locked[key]
            if gone:
                self._unlocked()
            self._pending.queues[identifier] = _QueueOp(True, None)
            self._nudge()

    def put_message(self, stored: StoredMessage) -> None:
        """Record a MessagePosition (3.1.1.11) with its Message, replacing any stored one."""
        if not isinstance(stored, StoredMessage):
            raise TypeError(f"put_message needs a StoredMessage, got {type(stored).__qualname__}")
        _check_identifier(stored.queue_identifier)
        if not isinstance(stored, PackedStoredMessage) and not isinstance(stored.message, Message):
            raise TypeError(f"StoredMessage.message must be a Message, got {type(stored.message).__qualname__}")
        lookup = _u64(stored.lookup_identifier, "lookup identifier")
        state = _state_code(stored.state)
        compact, attributes, body = _message_row(stored)
        with self._lock:
            self._check_open()
            self._pending.messages[(stored.queue_identifier, lookup)] = ["put", state, compact, attributes, body]
            if self._locked.pop((stored.queue_identifier, lookup), None) is not None:
                self._unlocked()
            self._nudge()

    def set_message_state(self, queue_identifier: str, lookup_identifier: int, state: str) -> None:
        """Record a new MessagePosition.State (3.1.1.11) of a stored message."""
        _check_identifier(queue_identifier)
        key = (queue_identifier, _u64(lookup_identifier, "lookup identifier"))
        code = _state_code(state)
        with self._lock:
            self._check_open()
            op = self._pending.messages.get(key)
            if op is None:
                self._pending.messages[key] = ["state", code]
            elif op[0] == "delete":
                pass                    # like MemoryStore: a state change of a deleted message is a no-op
            else:
                op[1] = code
            if code == _LOCKED:
                self._locked.pop(key, None)
                self._locked[key] = time.monotonic()
            elif self._locked.pop(key, None) is not None:
                self._unlocked()
            self._nudge()

    def note_locked(self, queue_identifier: str, lookup_identifier: int) -> None:
        """A stored message became Locked (MS-MQDMPR 3.1.1.11) and its row is left as it is: Initialization makes every
        Locked position Available (3.1.3), so the row's Available state is what a restart would make of Locked. Only
        the group commit notes it (its ACK is probably on its way: _recent_lock)."""
        key = (queue_identifier, _u64(lookup_identifier, "lookup identifier"))
        with self._lock:
            self._check_open()
            self._locked.pop(key, None)
            self._locked[key] = time.monotonic()

    def delete_message(self, queue_identifier: str, lookup_identifier: int) -> None:
        """Record the deletion of a stored MessagePosition (3.1.1.11)."""
        _check_identifier(queue_identifier)
        key = (queue_identifier, _u64(lookup_identifier, "lookup identifier"))
        with self._lock:
            self._check_open()
            # A put earlier in this batch is dropped: the DELETE then finds no row (no page written)
            # unless an older commit stored one, which it must remove.
            self._pending.messages[key] = _DELETE_OP
            if self._locked.pop(key, None) is not None:
                self._unlocked()
            self._nudge()

    def delete_messages(self, queue_identifier: str, lookup_identifiers: list[int]) -> None:
        """delete_message() of each, under one lock (Purge Queue deletes a queue's Available messages at once)."""
        _check_identifier(queue_identifier)
        ids = lookup_identifiers
        with collector_paused():        # hundreds of thousands of new keys, none of them garbage
            if not ids:
                keys = []
            elif set(map(type, ids)) == {int} and min(ids) >= 0 and max(ids) < 1 << 64:
                keys = list(zip(repeat(queue_identifier), map(sub, ids, repeat(_BIAS))))    # _u64 of each
            else:
                keys = [(queue_identifier, _u64(i, "lookup identifier")) for i in ids]
            with self._lock:
                self._check_open()
                if not keys:
                    return
                self._pending.messages.update(zip(keys, repeat(_DELETE_OP)))
                locked = self._locked
                if locked and not locked.keys().isdisjoint(keys):
                    for key in keys:
                        locked.pop(key, None)
                    self._unlocked()
                self._nudge()

    def _nudge(self) -> None:
        # Wake the writer only on the first mutation of a batch and only when it sleeps with no deadline, to start
        # its commit_interval_ms clock (woken once per loop-thread commit otherwise: a futex wake and a GIL hand-off
        # each); a waiter (durable/flush) wakes it at once through _demand.
        if not self._dirty:
            self._dirty = True
            self._dirty_since = time.monotonic()
            if self._writer_idle:
                self._wake.notify()

    # ---- waiting -----------------------------------------------------------------------------

    def _register(self, loop: asyncio.AbstractEventLoop | None, then=None) -> _Waiter | None:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the store is closed")
            if self._broken is not None:
                raise StoreError(f"{self.path}: the store {self._broken_where} died: {self._broken!r}")
            target = self._pending_seq if self._dirty else self._pending_seq - 1
            if target <= self._committed_seq:
                return None
            waiter = _Waiter(target, loop)
            waiter.then = then
            self._waiters.append(waiter)
            if loop is None:
                self._ask()
            elif self._idle_for(loop):
                # Telling the writer at once commits the first ACK alone and leaves the others on their way to
                # the next commit (1.3 messages per commit at 4 clients, measured). So: wait for the ACKs of
                # recently Locked messages (bounded), else ask at the end of this loop turn.
                if self._recent_lock():
                    self._hold = loop.call_later(self._group_wait, self._end_hold, loop)
                    self._hold_loop = loop
                else:
                    self._asking = loop
                    loop.call_soon(self._ask_at_turn_end, loop)
            return waiter

    def _idle_for(self, loop: asyncio.AbstractEventLoop) -> bool:
        """No commit is asked for or scheduled yet (one scheduled on a loop since closed never runs: forgotten)."""
        if self._asking is not None and self._asking.is_closed():
            self._asking = None
        if self._hold is not None and self._hold_loop.is_closed():
            self._hold = None
        return self._asking is None and not self._demand and self._hold is None

    def _recent_lock(self) -> bool:
        """A message Locked within group_wait_ms is not yet deleted (the newest is the last one recorded)."""
        return bool(self._locked) and time.monotonic() - next(reversed(self._locked.values())) < self._group_wait

    def _unlocked(self) -> None:
        # A Locked message was deleted or changed state: if it was the last recent one, the held waiters go now.
        if self._hold is not None and not self._recent_lock():
            self._hold.cancel()
            self._hold = None
            if self._asking is None:
                self._asking = self._hold_loop
                self._hold_loop.call_soon(self._ask_at_turn_end, self._hold_loop)

    def _end_hold(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._hold = None
        self._commit_here(loop)

    def _ask(self) -> None:
        if not self._demand:                # the writer is told once; later waiters join the same commit
            self._demand = True
            self._wake.notify()

    def _ask_at_turn_end(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._asking = None
        self._commit_here(loop)

    def _commit_here(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit what the waiters wait for on this (the event loop's) thread; while the writer thread holds the
        connection (a checkpoint, a commit nobody awaited) it is retried _RETRY_S later (handing it to the writer
        instead made the writer commit every batch that followed, measured). It is the writer's under FULL and while
        a failed batch waits for its retry."""
        batches = None
        if self._inline:
            try:
                with self._lock:
                    ready = None
                    if self._waiters and self._dirty and not (self._closed or self._broken is not None):
                        started = time.perf_counter()
                        ready = self._journal_pending()
                        seconds = time.perf_counter() - started
            except BaseException as exc:    # a defect (append errors fall back to SQLite): fail, never hang
                self._die(exc, "delete journal append")
                return
            if ready is not None:
                if self.on_commit is not None:
                    self.on_commit(seconds)
                if ready:
                    _resolve_all(ready, None, loop)
                return
        if self._inline and self._db_lock.acquire(blocking=False):
            try:
                with self._lock:
                    if self._waiters and not (self._closed or self._failed or self._broken is not None):
                        batches = self._take() or None
                        if batches:
                            stash, mark = self._take_stash()
                if batches:
                    ready, error = self._commit_taken(batches, stash, mark)
            except BaseException as exc:    # a defect, not a commit error (those are returned): fail, never hang
                self._db_lock.release()
                self._die(exc, "commit on the event loop")
                return
            self._db_lock.release()
        elif self._inline:
            with self._lock:
                if not self._waiters:
                    return
                if not self._closed and self._broken is None:
                    if self._asking is None:
                        self._asking = loop
                        loop.call_later(_RETRY_S, self._ask_at_turn_end, loop)
                    return
        if batches is None:
            with self._lock:
                if self._waiters:
                    self._ask()
            return
        self._unchecked += 1
        if self._unchecked >= _CHECK_EVERY:
            self._unchecked = 0
            self._check_wal()
        if ready:
            _resolve_all(ready, error, loop)

    def _check_wal(self) -> None:
        """Hand the writer thread a checkpoint once the WAL holds about SQLite's default autocheckpoint (1,000
        pages): a checkpoint writes pages into the database and, under NORMAL, fsyncs twice -- never on the loop."""
        try:
            grown = os.stat(self._wal_path).st_size >= _CHECKPOINT_BYTES
        except OSError:
            grown = True                    # let the writer find out
        if grown:
            with self._lock:
                self._checkpoint_due = True
                self._wake.notify()

    async def durable(self) -> None:
        """Return once every mutation recorded before the call is committed (group commit)."""
        waiter = self._register(asyncio.get_running_loop())
        if waiter is None:
            return
        await waiter.future

    def when_durable(self, then, loop: asyncio.AbstractEventLoop | None = None):
        """durable() without a coroutine: None when nothing recorded is uncommitted, else a Future of the running loop
        that the commit resolves to ``then(None)``, or to ``then(StoreError)`` when it fails. Raises StoreError when the
        store is closed or its commit path died. ``loop``: the running loop, when the caller knows it (asking asyncio
        costs a getpid(2) per call)."""
        waiter = self._register(loop or asyncio.get_running_loop(), then)
        return None if waiter is None else waiter.future

    def journal_backlog(self) -> int:
        """Deletions durable in the delete journal and not yet moved into the database."""
        return len(self._stash)

    def flush(self) -> None:
        """Blocking durable(): commit every recorded mutation before returning, journaled deletions into the
        database too (what load() reads)."""
        waiter = self._register(None)
        if waiter is not None:
            waiter.event.wait()
            if waiter.error is not None:
                raise waiter.error
        self._apply_journaled()

    def _apply_journaled(self) -> None:
        """Move the journaled deletions into the database now (caller's thread)."""
        with self._db_lock:
            with self._lock:
                if not self._stash or self._conn is None:
                    return
                stash, mark = self._take_stash()
            _, error = self._commit_taken([], stash, mark)
        if error is not None:
            raise StoreError(error)

    def close(self) -> None:
        """Flush, stop the writer thread and close the database; a flush failure is raised after closing."""
        with self._lock:
            if self._closed:
                return
        error = None
        try:
            self.flush()
        except BaseException as exc:    # still stop the writer and release the file
            error = exc
        with self._lock:
            self._closed = True
            self._wake.notify()
        self._writer.join()
        with self._db_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._lock:
            self._journal.close()
        self._release_process_lock()
        if error is not None:
            raise error

    # ---- the writer thread -------------------------------------------------------------------

    def _run_writer(self) -> None:
        try:
            self._writer_loop()
        except BaseException as exc:        # a bug here must not leave durable() callers hanging
            self._die(exc, "writer thread")

    def _die(self, exc: BaseException, where: str) -> None:
        """A defect in the commit path (not a commit error): every waiter, and every later call, gets a StoreError
        naming it; nothing is committed any more (a lost batch must not be passed by newer ones)."""
        log.critical("%s: the store %s died", self.path, where, exc_info=(type(exc), exc, exc.__traceback__))
        with self._lock:
            if self._broken is None:
                self._broken = exc
                self._broken_where = where
            waiters, self._waiters = self._waiters, []
            self._wake.notify()
        for waiter in waiters:
            waiter.resolve(StoreError(f"{self.path}: the store {where} died: {exc!r}"))

    def _writer_loop(self) -> None:
        closed = False
        while not closed:
            with self._lock:
                retry_at = None
                while not self._closed and not self._demand and not self._checkpoint_due:
                    if not self._dirty and not self._failed and not self._stash:
                        retry_at = None
                        if self._interval and time.monotonic() - self._dirty_since < _AWAKE_AFTER_WRITES_S:
                            # Busy: look again after one interval instead of being woken by the next batch's first
                            # mutation (a futex wake and a GIL hand-off per batch, measured; the loop thread commits
                            # most batches before the interval ends). An unawaited batch still waits at most one
                            # interval: a look finds it before its deadline.
                            self._wake.wait(self._interval)
                            continue
                        self._writer_idle = True
                        self._wake.wait()
                        self._writer_idle = False
                        continue
                    now = time.monotonic()
                    if self._failed:
                        if retry_at is None:
                            retry_at = now + self._retry_delay
                        deadline = retry_at
                    else:                   # the batch's own age: one the loop thread took is not waited for
                        deadline = self._dirty_since + self._interval if self._dirty else now + _APPLY_AFTER_S
                        if self._stash:
                            deadline = min(deadline, self._stash_since + _APPLY_AFTER_S)
                    if now >= deadline:
                        break
                    self._wake.wait(deadline - now)
                if self._broken is not None:
                    return
                closed = self._closed       # closing: commit what is left once, then stop
                now = time.monotonic()      # a wake for a checkpoint alone leaves the batch to the loop thread
                commit = self._demand or closed or (self._failed and (retry_at is None or now >= retry_at)) or (
                    self._dirty and now >= self._dirty_since + self._interval) or (
                    self._stash and now >= self._stash_since + _APPLY_AFTER_S)
                self._demand = False
                checkpoint, self._checkpoint_due = self._checkpoint_due, False
            ready = batches = stash = None
            if commit:
                with self._db_lock:         # taken before the batches: commits keep the order batches were taken
                    with self._lock:
                        batches = self._take()
                        stash, mark = self._take_stash()
                        self._in_flight = bool(batches)
                    if batches or stash:
                        ready, error = self._commit_taken(batches, stash, mark)
            if ready:                       # before a checkpoint: its page copy and fsyncs are not theirs to wait for
                _resolve_all(ready, error)
            if batches or stash or checkpoint:
                with self._db_lock:
                    self._maybe_checkpoint()

    def _take(self) -> list[tuple[int, _Batch]]:
        """The batches to commit now, oldest first (holding _lock): failed ones, then the pending one."""
        if self._dirty:
            self._failed.append((self._pending_seq, self._pending))
            self._pending = _Batch()
            self._pending_seq += 1
            self._dirty = False
        batches, self._failed = self._failed, []
        return batches

    def _take_stash(self) -> tuple[list[tuple[str, int]], tuple[int, int]]:
        """The journaled deletions to apply now and the journal position they reach (holding _lock)."""
        stash, self._stash = self._stash, []
        return stash, (self._journal.generation, self._stash_end)

    def _journal_pending(self) -> list[_Waiter] | None:
        """Make the pending batch durable by one journal append when it holds deletions alone (holding _lock, on
        the loop thread, no SQLite commit in flight); the waiters it settles, or None: commit it in SQLite."""
        batch = self._pending
        if (batch.queues or batch.queue_manager_identifier is not None or batch.sequential_id is not None
                or self._failed or self._in_flight or not self._journal.usable):
            return None
        messages = batch.messages
        for op in messages.values():
            if op[0] != "delete":
                return None
        try:
            end = self._journal.append(encode_keys(messages))
        except (OSError, ValueError) as exc:        # SQLite takes the batch (and reports a full disk itself)
            log.warning("%s: delete journal append failed (%s); committing in the database", self.path, exc)
            return None
        if not self._stash:
            self._stash_since = time.monotonic()
            if self._writer_idle or self._interval > _APPLY_AFTER_S:    # else a busy writer looks soon enough
                self._wake.notify()
        self._stash.extend(messages)
        self._stash_end = end
        [(self._committed_seq, _)] = self._take()      # the pending batch alone: nothing failed waits before it
        self.commits += 1
        self.journaled += 1
        return self._settled_waiters(self._committed_seq)

    def _settled_waiters(self, last: int) -> list[_Waiter]:
        """The waiters whose batches are committed now that batch ``last`` is, taken out of the list (holding
        _lock)."""
        ready = [w for w in self._waiters if w.target <= last]
        if ready:
            self._waiters = [w for w in self._waiters if w.target > last]
        return ready

    def _commit_taken(self, batches: list[tuple[int, _Batch]], stash: list[tuple[str, int]] = (),
                      mark: tuple[int, int] = (0, 0)) -> tuple[list[_Waiter], str | None]:
        """Commit taken batches after the journaled deletions taken with them (holding _db_lock); returns the waiters
        it settles and the failure, if any."""
        started = time.perf_counter()
        error = self._commit(batches, stash, mark)
        if error is None and self.on_commit is not None and batches:
            self.on_commit(time.perf_counter() - started)
        with self._lock:
            self._in_flight = False
            if error is None:
                if batches:
                    self._committed_seq = batches[-1][0]
                    self._retry_delay = 0.0
                    self.commits += 1
                self._restart_journal_if_applied(mark)
            else:
                self._retry_delay = min(2.0, max(0.05, self._retry_delay * 2))
                if stash:                   # durable in the journal already: a later transaction applies them
                    self._stash[:0] = stash
                    self._stash_since = time.monotonic() + self._retry_delay    # the writer's next try: backed off
                if batches:
                    self._failed = batches + self._failed
                self._wake.notify()         # the writer retries it after the back-off
            ready = self._settled_waiters(batches[-1][0]) if batches else []
        return ready, None if error is None else f"{self.path}: commit failed: {error}"

    def _restart_journal_if_applied(self, mark: tuple[int, int]) -> None:
        """Begin a new, empty journal generation once every record of a long one is in the database (holding
        _lock; a crash before the next apply replays the new generation's records from its start)."""
        generation, end = mark
        if (self._stash or not self._journal.usable or generation != self._journal.generation
                or end != self._journal.end or end < _RESTART_JOURNAL_BYTES):
            return
        try:
            self._journal.restart(generation + 1)
        except OSError as exc:              # deletions commit in the database from now on
            log.error("%s: cannot restart the delete journal (%s); committing deletions in the database",
                      self.path, exc)
            self._journal.close()

    def _maybe_checkpoint(self) -> None:
        """Checkpoint the WAL once it holds about 1,000 pages (writer thread, holding _db_lock). No commit may run
        meanwhile: the next one restarts the WAL from its start only if the checkpoint copied every frame (on a
        connection of its own, with commits going on, the WAL grew without end, measured)."""
        try:
            if os.stat(self._wal_path).st_size < _CHECKPOINT_BYTES:
                return
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except (OSError, sqlite3.Error) as exc:     # the next look tries again
            log.warning("%s: WAL checkpoint failed: %s", self.path, exc)

    def _commit(self, batches: list[tuple[int, _Batch]], stash: list[tuple[str, int]] = (),
                mark: tuple[int, int] = (0, 0)) -> BaseException | None:
        try:                                # (the caller holds _db_lock)
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if stash:                   # older than every batch taken with them
                    _delete_keys(conn, stash)
                    _set_journal_position(conn, *mark)
                for _, batch in batches:
                    self._apply(conn, batch)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:   # keep the first error; SQLite rolls back on its own
                        log.warning("%s: ROLLBACK after a failed commit failed", self.path, exc_info=True)
                raise
            return None
        except Exception as exc:
            # A full or read-only disk is the environment, not a defect: one line naming it, no traceback.
            # (SQLite reports a file that became unreadable or unwritable mid-transaction as plain DatabaseError.)
            environmental = isinstance(exc, (sqlite3.OperationalError, OSError)) or type(exc) is sqlite3.DatabaseError
            what = (f"group commit of batches {batches[0][0]}..{batches[-1][0]}" if batches else
                    f"move of {len(stash)} journaled deletions into the database")
            log.error("%s: %s failed%s; will retry on the next commit", self.path, what,
                      f": {exc}" if environmental else "", exc_info=not environmental)
            return exc

    @staticmethod
    def _apply(conn: sqlite3.Connection, batch: _Batch) -> None:
        if batch.queue_manager_identifier is not None:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('queue_manager_identifier', ?)",
                         (batch.queue_manager_identifier,))
        if batch.sequential_id is not None:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('sequential_id', ?)",
                         (batch.sequential_id,))
        for identifier, op in batch.queues.items():
            if op.purge_messages:
                conn.execute("DELETE FROM messages WHERE queue_identifier = ?", (identifier,))
            if op.attributes is None:
                conn.execute("DELETE FROM queues WHERE identifier = ?", (identifier,))
            else:
                conn.execute("INSERT OR REPLACE INTO queues (identifier, attributes) VALUES (?, ?)",
                             (identifier, op.attributes))
        puts, states, deletes = [], [], []
        for (queue, lookup), op in batch.messages.items():
            kind = op[0]
            if kind == "put":
                puts.append((queue, lookup, op[1], op[2], op[3], op[4]))
            elif kind == "state":
                states.append((op[1], queue, lookup))
            else:
                deletes.append((queue, lookup))
        if deletes:
            _delete_keys(conn, deletes)
        if states:
            conn.executemany("UPDATE messages SET state = ? WHERE queue_identifier = ? AND lookup_identifier = ?",
                             states)
        if puts:
            conn.executemany("INSERT OR REPLACE INTO messages (queue_identifier, lookup_identifier, state,"
                             " compact, attributes, body) VALUES (?, ?, ?, ?, ?, ?)", puts)

    # ---- loading -----------------------------------------------------------------------------

    def load(self) -> Snapshot:
        """Everything stored, after committing what is pending (3.1.3); states exactly as stored."""
        snapshot = self.load_stream()
        messages = snapshot.messages
        try:
            snapshot.messages = [stored.plain() for stored in messages]
        finally:
            messages.close()            # an error mid-way: the read transaction and _db_lock end now
        return snapshot

    def load_stream(self) -> Snapshot:
        """load() with the messages as a one-shot iterator in (queue, LookupIdentifier) order: a store of
        millions of messages starts without holding them all at once. Each also carries ``packed``, its compact
        form; its Message is built only when asked for.
        Until the iterator is exhausted (or closed) it holds the read transaction: recorded mutations wait."""
        snapshot = self._load_packed(parallel_rows=None)        # its rows unpack on demand: checked before
        snapshot.messages = _loaded_messages(snapshot.messages)
        return snapshot

    def load_packed(self) -> Snapshot:
        """load_stream() as QueueManager.initialize takes it: the messages are a one-shot iterator of lists (up to
        1,024 each) of (queue identifier, LookupIdentifier, state, compact form, TTBR set, _) tuples -- no object
        per message but the compact form read from its row. A store of ``parallel_check_rows`` messages or more
        checks the compact forms in a second process (parallel_check.py) while the rows stream: then a form is
        proven only once the iterator is exhausted (until then, keep it, do not unpack it), and which set a TTBR
        is told then, in the snapshot's ``expiring``."""
        return self._load_packed(self.parallel_check_rows)

    def _load_packed(self, parallel_rows: int | None) -> Snapshot:
        # The messages hold the read transaction and _db_lock while suspended: a caller that stops early closes them
        # (QueueManager.initialize does on any error), or the store's next commit and close() would wait forever.
        self.flush()
        expiring: list[tuple[str, int]] = []
        stream = self._stream(expiring, parallel_rows)
        identifier, sequential, queues = next(stream)
        return Snapshot(identifier, sequential, queues, stream, expiring)

    # Below this many stored messages the load checks them itself: starting a worker (a Python that imports the
    # check) takes about what checking 50,000 rows does (measured on a slow 2-vCPU VM: 0.14 s; 2.6 µs a row).
    parallel_check_rows = 100_000

    def _stream(self, expiring: list, parallel_rows: int | None):
        # Millions of new objects and no garbage: the cyclic collector would rescan the growing heap
        # again and again (measured: 1M messages load in about half the time with it paused).
        with collector_paused():
            with self._db_lock:
                if self._conn is None:
                    raise StoreError(f"{self.path}: the store is closed")
                conn = self._conn
                checker = None
                try:
                    conn.execute("BEGIN")
                    try:
                        head = self._read_head(conn)
                        if parallel_rows is not None and self._holds_messages(conn, parallel_rows):
                            checker = ParallelCheck(self.path, _BIAS)
                        yield head
                        yield from self._read_batches(conn, checked=checker is None)
                        if checker is not None:
                            yield []        # the rows end here; the loader links what it holds while the worker ends
                            late, failure = checker.verdict(conn)
                            if failure is not None:
                                raise self._corrupt_message(*failure)
                            expiring.extend(late)
                    finally:
                        if checker is not None:
                            checker.close()
                        conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    raise self._fail(f"cannot read: {self._describe(exc)}") from None

    def _corrupt_message(self, queue_id, lookup, reason) -> StoreError:
        """The refusal of a message row, found by the load or by its ParallelCheck (the same words either way)."""
        return self._fail(f"corrupt message {lookup!r:.30} of queue {queue_id!r:.60}: {reason}")

    @staticmethod
    def _holds_messages(conn: sqlite3.Connection, count: int) -> bool:
        """At least ``count`` message rows (counting no further)."""
        return conn.execute("SELECT count(*) FROM (SELECT 1 FROM messages LIMIT ?)", (count,)).fetchone()[0] >= count

    def _read_head(self, conn: sqlite3.Connection) -> tuple[str | None, int, list[StoredQueue]]:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        identifier = meta.get("queue_manager_identifier")
        if identifier is not None and type(identifier) is not str:
            raise self._fail(f"corrupt queue manager identifier {identifier!r:.60}")
        sequential = meta.get("sequential_id", -_BIAS)
        if type(sequential) is not int:
            raise self._fail(f"corrupt sequential id {sequential!r:.60}")
        queues = []
        for queue_id, text in conn.execute("SELECT identifier, attributes FROM queues"):
            try:
                if type(queue_id) is not str or type(text) is not str:
                    raise RecordError("a column holds a value of the wrong type")
                attributes = decode_value(json.loads(text))
                if type(attributes) is not dict:
                    raise RecordError("queue attributes are not a dict")
            except RecursionError:
                raise self._fail(f"corrupt attributes of queue {queue_id!r:.60}: nested too deeply") from None
            except (RecordError, ValueError, TypeError) as exc:
                raise self._fail(f"corrupt attributes of queue {queue_id!r:.60}: {exc}") from None
            queues.append(StoredQueue(queue_id, attributes))
        return identifier, sequential + _BIAS, queues

    def _read_batches(self, conn: sqlite3.Connection, checked: bool = True):
        # checked=False: a ParallelCheck proves the compact forms of the batches it is given; in those each row says
        # "no TTBR" and its verdict tells.
        names = _STATE_NAMES
        interned: dict[str, str] = {}
        rows = conn.execute(MESSAGE_ROWS.format("queue_identifier, lookup_identifier, state, compact, attributes,"
                                                " body"))
        number = -1
        while batch := rows.fetchmany(BATCH_ROWS):
            number += 1
            check = check_stored if checked or checked_by_loader(number) else check_stored_header
            loaded = []
            for queue_id, lookup, state, compact, attributes, body in batch:
                try:
                    if type(queue_id) is not str or type(lookup) is not int:
                        raise RecordError("a column holds a value of the wrong type")
                    queue_id = interned.setdefault(queue_id, queue_id)
                    lookup += _BIAS
                    if compact is not None:
                        if attributes is not None or body is not None:
                            raise RecordError("both a compact form and JSON attributes")
                        loaded.append((queue_id, lookup, names[state], compact, check(compact, lookup), None))
                    else:
                        if type(attributes) is not str:
                            raise RecordError("a column holds a value of the wrong type")
                        loaded.append(_row_of_fields(queue_id, lookup, names[state],
                                                     decode_message_fields(attributes, body, lookup)))
                except (RecordError, CompactError, KeyError, TypeError, RecursionError) as exc:
                    reason = ("unknown state " + repr(state) if isinstance(exc, KeyError) else
                              "nested too deeply" if isinstance(exc, RecursionError) else exc)
                    raise self._corrupt_message(queue_id, lookup, reason) from None
            yield loaded


def _set_journal_position(conn: sqlite3.Connection, generation: int, offset: int) -> None:
    """Record in meta that the database holds the delete journal's deletions of ``generation`` up to ``offset``."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?), (?, ?)",
                 (_JOURNAL_GENERATION_KEY, generation, _JOURNAL_APPLIED_KEY, offset))


def _delete_keys(conn: sqlite3.Connection, keys: list[tuple[str, int]]) -> None:
    """DELETE the rows of ``keys`` with one statement per queue and 900 keys, not one per key: the sqlite3 module lets
    go of the GIL around each step, and on the writer thread each step meant two hand-offs with the event loop (per-key
    statements: 61 against 47-55 µs of server CPU per call, receive + ACK of recoverable messages at 16 clients)."""
    by_queue: dict[str, list[int]] = {}
    for queue_id, lookup in keys:
        by_queue.setdefault(queue_id, []).append(lookup)
    for queue_id, lookups in by_queue.items():
        for at in range(0, len(lookups), _KEYS_PER_DELETE):
            chunk = lookups[at:at + _KEYS_PER_DELETE]
            conn.execute(f"DELETE FROM messages WHERE queue_identifier = ? AND lookup_identifier IN"
                         f" ({','.join('?' * len(chunk))})", (queue_id, *chunk))


_ROW_ERRORS = (RecordError, CompactError, KeyError, TypeError, ValueError, RecursionError)


def _row_from_1(row: tuple) -> tuple:
    """A schema-1 message row as a schema-2 one: its compact form when it decodes and its own LookupIdentifier is
    the row's; otherwise the row as it is (the load decodes it, or reports it, exactly as schema 1's did)."""
    _, queue_id, lookup, state, attributes, body = row
    if type(attributes) is str and type(lookup) is int:
        try:
            fields = decode_message_fields(attributes, body, lookup + _BIAS)
            if fields["lookup_identifier"] == lookup + _BIAS:
                packed = pack_fields(fields)
                if not is_pickled(packed):
                    check_stored(packed, lookup + _BIAS)
                    return queue_id, lookup, state, packed, None, None
        except _ROW_ERRORS:
            pass
    return queue_id, lookup, state, None, attributes, body
