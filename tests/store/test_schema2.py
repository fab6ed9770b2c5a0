"""SqliteStore schema 2: compact forms stored as they are, the upgrade of schema-1 stores, hostile compact rows, and
re-packing when Message's field table changes (MS-MQDMPR 3.1.1 Persistent attributes, 3.1.3 Initialization)."""
import contextlib
import dataclasses
import json
import logging
import marshal
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared_adm.clock import ManualScheduler
from shared_adm import compact as compact_module
from shared_adm.compact import CompactError, check_stored, layout, pack, unpack
from shared_adm.enums import MessageClass
from shared_adm.message import INFINITE, DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store import PackedStoredMessage, SqliteStore, StoredMessage, StoreError
from shared_adm.store.record import decode_message, encode_message
from shared_adm.store.sqlite import DB_FILE_NAME, SCHEMA_VERSION, _message_row
from tests.store.fixtures import make_v1_store as v1
from tests.store.test_record import _messages as _any_message

FIXTURE = Path(__file__).parent / "fixtures" / "v1-store.sqlite3"
Q = "6f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"
BIAS = 1 << 63
ROOT = Path(__file__).resolve().parents[2]


def _rows(path, sql, args=()):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, args).fetchall()


def _execute(path, sql, args=()):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(sql, args)
        conn.commit()


def _v1_store(data_dir):
    data_dir.mkdir()
    shutil.copyfile(FIXTURE, data_dir / DB_FILE_NAME)
    return data_dir / DB_FILE_NAME


def _loaded(data_dir):
    store = SqliteStore(data_dir)
    try:
        return store.load()
    finally:
        store.close()


def _check_fixture_contents(snapshot):
    assert snapshot.queue_manager_identifier == str(v1.QM)
    assert snapshot.sequential_id == v1.SEQUENTIAL_ID
    assert {q.identifier: q.attributes for q in snapshot.queues} == v1.QUEUES
    got = [(m.queue_identifier, m.lookup_identifier, m.state, m.message) for m in snapshot.messages]
    assert got == v1.expected()


# ---- the upgrade of a schema-1 store -----------------------------------------------------------

def test_a_version_1_store_is_upgraded_once_in_place_with_every_message(data_dir, caplog):
    path = _v1_store(data_dir)
    assert _rows(path, "SELECT version FROM schema_version") == [(1,)]
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.sqlite"):
        store = SqliteStore(data_dir)
        wal = path.with_name(path.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0       # the upgrade's WAL given back while open
        _check_fixture_contents(store.load())
        store.close()
    # said before it starts
    assert f"upgrading the store from schema version 1 to {SCHEMA_VERSION} (8 messages" in caplog.text
    assert f"upgraded the store from schema version 1 to {SCHEMA_VERSION} (8 messages" in caplog.text
    assert _rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert _rows(path, "SELECT value FROM meta WHERE key = 'compact_layout'") == [(json.dumps(layout(),
                                                                                            separators=(",", ":")),)]
    # the two messages the compact form cannot take as they are stay JSON rows, verbatim
    json_rows = _rows(path, "SELECT lookup_identifier FROM messages WHERE compact IS NULL ORDER BY lookup_identifier")
    assert [lookup + BIAS for (lookup,) in json_rows] == [v1.PREFIX + 6, v1.PREFIX + 7]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.sqlite"):
        _check_fixture_contents(_loaded(data_dir))
    assert "upgrad" not in caplog.text


def test_a_queue_manager_starts_from_an_upgraded_store_with_every_message_in_order(data_dir):
    _v1_store(data_dir)
    store = SqliteStore(data_dir)
    qm = QueueManager(store=store, scheduler=ManualScheduler())
    qm.initialize()
    by_store_id = {queue.store_identifier: queue for queue in qm.queue_collection.values()}
    for queue_id in (v1.QUEUE_A, v1.QUEUE_B):
        positions = list(by_store_id[queue_id].message_position_list)
        expected = [(key, message) for queue, key, state, message in v1.expected()
                    if queue == queue_id and state != "PurgePending"]
        assert [p.lookup_identifier for p in positions] == [key for key, _ in expected]
        for position, (key, message) in zip(positions, expected):
            assert position.state.value == "Available"
            message.lookup_identifier = key        # a position's Message carries the row key (3.1.3)
            assert position.message == message
    # the one message with a TimeToBeReceived got its timer (3.1.7.1.9), read from its compact form
    assert [lookup for _, lookup, _ in qm._ttbr_heap] == [v1.PREFIX + 1]
    store.close()
    assert [lookup + BIAS for (lookup,) in _rows(data_dir / DB_FILE_NAME, "SELECT lookup_identifier FROM messages"
                                                 " WHERE state = 2")] == []     # PurgePending deleted


_V1_SCHEMA = (       # schema 1 as 28833c8 created it
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    "CREATE TABLE queues (identifier TEXT PRIMARY KEY, attributes TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE messages (queue_identifier TEXT NOT NULL, lookup_identifier INTEGER NOT NULL,"
    " state INTEGER NOT NULL, attributes TEXT NOT NULL, body BLOB NOT NULL,"
    " PRIMARY KEY (queue_identifier, lookup_identifier))",
)


def test_the_upgrade_reuses_the_pages_of_the_rows_it_replaced(data_dir):
    data_dir.mkdir()
    path = data_dir / DB_FILE_NAME
    messages = [Message(lookup_identifier=n, identifier=(v1.QM, n), label="restart", body=b"r" * 100,
                        delivery_guarantee=DeliveryGuarantee.RECOVERABLE, destination_queue_format_name="DIRECT=OS:vm"
                        "\\private$\\restart", source_machine_identifier=v1.SOURCE) for n in range(1, 20_001)]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for statement in _V1_SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.executemany("INSERT INTO messages VALUES (?, ?, 0, ?, ?)",
                         [(Q, m.lookup_identifier - BIAS, *encode_message(m, m.lookup_identifier)) for m in messages])
        conn.commit()
    size = path.stat().st_size
    loaded = _loaded(data_dir).messages
    assert [m.message for m in loaded] == messages
    assert path.stat().st_size < 1.2 * size     # not the old rows plus a second copy of every message


_KILL_MID_UPGRADE = """
import os, signal, sys
sys.path.insert(0, {root!r})
from shared_adm.store import sqlite
convert, seen = sqlite._row_from_1, []
def dying(row):
    seen.append(row)
    if len(seen) == 4:          # half-way: rows written to the new table, nothing committed
        os.kill(os.getpid(), signal.SIGKILL)
    return convert(row)
sqlite._row_from_1 = dying
sqlite.SqliteStore({data_dir!r})
"""


def test_a_crash_mid_upgrade_leaves_a_version_1_store_that_opens_and_upgrades(data_dir):
    path = _v1_store(data_dir)
    child = subprocess.run([sys.executable, "-c", _KILL_MID_UPGRADE.format(root=str(ROOT), data_dir=str(data_dir))],
                           capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert _rows(path, "SELECT version FROM schema_version") == [(1,)]
    assert {name for (name,) in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")} == \
        {"schema_version", "meta", "queues", "messages"}
    _check_fixture_contents(_loaded(data_dir))
    assert _rows(path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


# ---- what schema 2 writes ----------------------------------------------------------------------

def test_a_message_is_stored_as_its_compact_form_and_a_packed_one_as_given(data_dir):
    message = Message(lookup_identifier=7, identifier=(v1.QM, 1), delivery_guarantee=DeliveryGuarantee.RECOVERABLE,
                      label="l", body=b"b" * 10)
    packed = pack(Message(lookup_identifier=8, label="given", body=b"g"))
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 7, "Available", message))
    store.put_message(PackedStoredMessage(Q, 8, "Locked", packed))
    store.close()
    assert _rows(data_dir / DB_FILE_NAME, "SELECT compact, attributes, body FROM messages ORDER BY lookup_identifier") \
        == [(pack(message), None, None), (packed, None, None)]
    loaded = _loaded(data_dir).messages
    assert [(m.lookup_identifier, m.state, m.message) for m in loaded] == \
        [(7, "Available", message), (8, "Locked", Message(lookup_identifier=8, label="given", body=b"g"))]


def test_a_message_the_compact_form_cannot_hold_as_it_is_is_stored_as_json(data_dir):
    odd = Message(lookup_identifier=3, extra={"class": MessageClass.ACK_RECEIVE}, body=b"x")      # pickle-only
    other_key = Message(lookup_identifier=99, body=b"y")                                         # not the row's
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 3, "Available", odd))
    store.put_message(StoredMessage(Q, 4, "Available", other_key))
    store.close()
    rows = _rows(data_dir / DB_FILE_NAME, "SELECT compact, attributes IS NOT NULL FROM messages")
    assert rows == [(None, 1), (None, 1)]
    loaded = _loaded(data_dir).messages
    assert [m.message for m in loaded] == [odd, other_key]
    assert type(loaded[0].message.extra["class"]) is MessageClass


# ---- hostile compact rows ----------------------------------------------------------------------

def _flags_then(flags, flat):
    return b"M" + bytes((flags,)) + marshal.dumps(flat)


_GOOD = Message(lookup_identifier=1, body=b"x" * 100)
_NUMBER = {entry[0]: index for index, entry in enumerate(layout())}
LOOKUP, IDENTIFIER, DELIVERY, LABEL, EXTRA, QM_ID = (_NUMBER[name] for name in (
    "lookup_identifier", "identifier", "delivery_guarantee", "label", "extra", "destination_queue_manager_identifier"))
_HOSTILE_COMPACT = [
    (b"P\x00" + pickle.dumps(_GOOD), "not a stored compact form"),
    ("M\x00 text", "not a stored compact form"),
    (b"M\x00\xff\xff", "not a compact form"),
    (_flags_then(0, [LOOKUP, 1]), "not a tuple"),
    (_flags_then(0, (LOOKUP, 1, LABEL)), "not a tuple"),
    (_flags_then(0, (LOOKUP, 1, 999, 5)), "out of range"),
    (_flags_then(0, (LABEL, "b", LOOKUP, 1)), "unordered"),
    (_flags_then(0, (LOOKUP, 1, LABEL, compile("1", "hostile", "eval"))), "not message data"),
    (_flags_then(0, (LOOKUP, 1, EXTRA, {"a": frozenset()})), "other than message data"),
    (_flags_then(0, (LOOKUP, 2)), "not the row's"),
    (_flags_then(0, (LOOKUP, 1, QM_ID, b"abc")), "not 16 bytes"),
    (_flags_then(0, (LOOKUP, 1, IDENTIFIER, (b"abc", 1))), "OBJECTID"),
    (_flags_then(0, (LOOKUP, 1, DELIVERY, 7)), "not a value of its enumeration"),
    (_flags_then(0, (LOOKUP, 1, DELIVERY, 1)), "flags byte"),
]


@pytest.mark.parametrize("compact, match", _HOSTILE_COMPACT)
def test_hostile_compact_rows_are_refused_naming_the_message(data_dir, compact, match):
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 1, "Available", _GOOD))
    store.close()
    _execute(data_dir / DB_FILE_NAME, "UPDATE messages SET compact = ?", (compact,))
    with pytest.raises(StoreError, match=f"corrupt message 1 of queue '{Q}': .*{match}"):
        _loaded(data_dir)


def test_a_row_with_both_a_compact_form_and_json_attributes_is_refused(data_dir):
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 1, "Available", _GOOD))
    store.close()
    _execute(data_dir / DB_FILE_NAME, "UPDATE messages SET attributes = '{}'")
    with pytest.raises(StoreError, match="corrupt message 1 .*both a compact form and JSON attributes"):
        _loaded(data_dir)


def test_every_compact_form_pack_writes_passes_the_load_check():
    for _, key, _, message in v1.expected():
        packed = pack(message)
        if packed[:1] == b"M" and message.lookup_identifier == key:
            assert check_stored(packed, key) == (message.time_to_be_received != INFINITE)


# ---- a Message field table of another version --------------------------------------------------

def _relabel(blob, old_index_of):
    """``blob`` (packed under this version's layout) as the version with ``old_index_of`` would have packed it."""
    flat = marshal.loads(blob[2:])
    pairs = sorted((old_index_of[flat[i]], flat[i + 1]) for i in range(0, len(flat), 2))
    return blob[:2] + marshal.dumps(tuple(item for pair in pairs for item in pair))


def test_compact_forms_of_another_field_table_are_repacked_once_on_open(data_dir, caplog):
    messages = [Message(lookup_identifier=n, identifier=(v1.QM, n), label=f"m{n}", priority=n % 8,
                        delivery_guarantee=DeliveryGuarantee.RECOVERABLE, source_machine_identifier=v1.SOURCE,
                        body=bytes([n]) * n) for n in range(1, 6)]
    store = SqliteStore(data_dir)
    for message in messages:
        store.put_message(StoredMessage(Q, message.lookup_identifier, "Available", message))
    store.close()
    current = layout()
    # the older version: fields in the reverse order, and one this version no longer has
    old = [["retired_attribute", "plain", "0"]] + current[::-1]
    old_index_of = {index: len(current) - index for index in range(len(current))}
    path = data_dir / DB_FILE_NAME
    for lookup, compact in _rows(path, "SELECT lookup_identifier, compact FROM messages"):
        relabelled = _relabel(compact, old_index_of)
        if lookup + BIAS == 3:      # carries the retired attribute (old field 0)
            relabelled = relabelled[:2] + marshal.dumps((0, 42) + marshal.loads(relabelled[2:]))
        _execute(path, "UPDATE messages SET compact = ? WHERE lookup_identifier = ?", (relabelled, lookup))
    _execute(path, "UPDATE meta SET value = ? WHERE key = 'compact_layout'", (json.dumps(old),))
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.sqlite"):
        loaded = _loaded(data_dir).messages
    assert [m.message for m in loaded] == messages
    assert "retired_attribute" in caplog.text and "re-packed 5 stored messages" in caplog.text
    assert [m.packed for m in SqliteStore(data_dir).load_stream().messages] == [pack(m) for m in messages]


@pytest.mark.parametrize("value, match", [(None, "no compact_layout"), ("{not json", "corrupt compact_layout"),
                                          ('[["a", 1]]', "corrupt compact_layout")])
def test_a_missing_or_corrupt_field_table_is_refused(data_dir, value, match):
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 1, "Available", _GOOD))
    store.close()
    path = data_dir / DB_FILE_NAME
    if value is None:
        _execute(path, "DELETE FROM meta WHERE key = 'compact_layout'")
    else:
        _execute(path, "UPDATE meta SET value = ? WHERE key = 'compact_layout'", (value,))
    with pytest.raises(StoreError, match=match):
        SqliteStore(data_dir)


# ---- any message round-trips through its row -------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(message=_any_message, key=st.integers(0, 2**64 - 1), own_key=st.booleans())
def test_any_message_round_trips_through_its_schema_2_row(message, key, own_key):
    if own_key:
        message.lookup_identifier = key
    compact, attributes, body = _message_row(StoredMessage(Q, key, "Available", message))
    if compact is not None:
        assert (attributes, body) == (None, None)
        check_stored(compact, key)
        loaded = unpack(compact)
    else:
        loaded = decode_message(attributes, body, key)
    assert loaded == message
    for f in dataclasses.fields(Message):
        assert type(getattr(loaded, f.name)) is type(getattr(message, f.name)), f.name


def _refusal(blob, key):
    """The CompactError check_stored raises for ``blob``, or None."""
    try:
        check_stored(blob, key)
    except CompactError as exc:
        return str(exc)
    return None


def test_a_form_after_a_good_one_of_the_same_fields_is_refused_as_a_first_check_refuses_it():
    # check_stored remembers, per set of field numbers, the last shape (layout of value types) it accepted;
    # a form with those numbers but another type, or a bad value, must still be refused, naming the same fault
    message = Message(lookup_identifier=7, identifier=(v1.QM, 7), destination_queue_manager_identifier=v1.QM,
                      delivery_guarantee=DeliveryGuarantee.RECOVERABLE, label="m", body=b"x" * 10,
                      time_to_be_received=60)
    good = pack(message)
    flat = marshal.loads(good[2:])
    at = {flat[i]: i + 1 for i in range(0, len(flat), 2)}

    def variant(index, value, flags=good[1]):
        changed = list(flat)
        changed[at[index]] = value
        return b"M" + bytes((flags,)) + marshal.dumps(tuple(changed))

    hostile = [(variant(QM_ID, "not a GUID"), 7), (variant(QM_ID, b"abc"), 7), (good, 8),
               (variant(IDENTIFIER, (b"abc", 7)), 7), (variant(IDENTIFIER, [v1.QM.bytes_le, 7]), 7),
               (variant(DELIVERY, 9), 7), (variant(DELIVERY, None), 7), (good[:1] + b"\x00" + good[2:], 7),
               (variant(LABEL, {"a": frozenset()}), 7)]
    compact_module._LAST_SHAPE.clear()
    compact_module._SHAPES.clear()
    first = [_refusal(blob, key) for blob, key in hostile]
    assert all(first), first
    assert check_stored(good, 7) is True             # remembered now: TimeToBeReceived set, a timer to start
    assert [_refusal(blob, key) for blob, key in hostile] == first
    assert check_stored(good, 7) is True
