"""The load check of a large store's compact forms in a second process (shared_adm/store/parallel_check.py): the same
verdicts, TTBR timers (MS-MQDMPR 3.1.3 Initialization, 3.1.7.1.9) and refusals as the check in the loading process."""
import contextlib
import logging
import marshal
import sqlite3

import pytest

from shared_adm.clock import ManualScheduler
from shared_adm.compact import pack
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store import SqliteStore, StoredMessage, StoreError
from shared_adm.store import parallel_check
from shared_adm.store.sqlite import DB_FILE_NAME
from tests.store.test_schema2 import _HOSTILE_COMPACT, _flags_then, LOOKUP

Q = "6f1d3c52-0b7e-4f4e-9a51-2d3c4b5a6978"
BIAS = 1 << 63
_REAL_WORKER = parallel_check._WORKER
REC = DeliveryGuarantee.RECOVERABLE


@pytest.fixture
def workers(monkeypatch):
    """Every store checks in a worker (from one message on); yields the ParallelChecks started."""
    started = []
    original = parallel_check.ParallelCheck.__init__

    def spy(self, *args):
        original(self, *args)
        started.append(self)
    monkeypatch.setattr(SqliteStore, "parallel_check_rows", 1)
    monkeypatch.setattr(parallel_check.ParallelCheck, "__init__", spy)
    return started


def _execute(path, sql, args=()):
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(sql, args)
        conn.commit()


def _store_of(data_dir, *lookups):
    store = SqliteStore(data_dir)
    for lookup in lookups:
        store.put_message(StoredMessage(Q, lookup, "Available", Message(lookup_identifier=lookup, body=b"x" * 100)))
    store.close()
    return data_dir / DB_FILE_NAME


def _load(data_dir):
    """QueueManager.initialize's read of the store (load_packed): its rows and its late TTBR keys."""
    store = SqliteStore(data_dir)
    try:
        snapshot = store.load_packed()
        rows = [row for batch in snapshot.messages for row in batch]
        return rows, snapshot.expiring
    finally:
        store.close()


def _restart(data_dir, sched):
    qm = QueueManager(store=SqliteStore(data_dir), scheduler=sched)
    qm.initialize()
    return qm


def test_a_store_of_parallel_check_rows_messages_or_more_is_checked_by_a_worker_with_the_same_result(
        data_dir, workers, monkeypatch, caplog):
    _store_of(data_dir, 1, 2, 3)
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.parallel_check"):
        in_worker, late = _load(data_dir)
    assert len(workers) == 1 and workers[0].proc is None          # started, answered, reaped
    assert caplog.text == ""                                        # the worker's answer, not the fallback
    monkeypatch.setattr(SqliteStore, "parallel_check_rows", 4)
    in_process, none = _load(data_dir)
    assert len(workers) == 1                                        # 3 < 4: checked in the loading process
    assert [row[:4] for row in in_worker] == [row[:4] for row in in_process]
    assert [row[1] for row in in_worker] == [1, 2, 3] and late == none == []


def test_the_worker_names_the_messages_whose_stored_form_sets_a_ttbr(data_dir, workers):
    store = SqliteStore(data_dir)
    for lookup, ttbr in ((1, 5), (2, None), (3, 7)):
        fields = {"time_to_be_received": ttbr} if ttbr else {}
        store.put_message(StoredMessage(Q, lookup, "Available", Message(lookup_identifier=lookup, **fields)))
    store.close()
    rows, late = _load(data_dir)
    assert [row[4] for row in rows] == [False] * 3 and late == [(Q, 1), (Q, 3)]


def test_ttbr_timers_start_for_the_messages_the_worker_names(data_dir, workers):
    qm = QueueManager(store=SqliteStore(data_dir), scheduler=ManualScheduler())
    qm.initialize()
    _, queue = qm.create_queue(r".\private$\q")
    for body, ttbr in ((b"short", 5), (b"forever", None), (b"long", 50)):
        fields = {"time_to_be_received": ttbr} if ttbr else {}
        assert qm.enqueue_message(queue, Message(body=body, delivery_guarantee=REC, **fields)) == 0
    qm.store.close()
    sched = ManualScheduler()
    again = _restart(data_dir, sched)
    assert len(workers) == 1                    # the first start found no message: no worker
    q = again.queue_by_pathname(r".\private$\q")
    assert [p.message.body for p in q.message_position_list] == [b"short", b"forever", b"long"]
    sched.advance(5000)
    assert [p.message.body for p in q.message_position_list] == [b"forever", b"long"]
    sched.advance(45000)
    assert [p.message.body for p in q.message_position_list] == [b"forever"]
    again.store.close()


def test_a_message_the_load_deletes_gets_no_timer_from_the_worker(data_dir, workers):
    store = SqliteStore(data_dir)
    store.put_message(StoredMessage(Q, 1, "Available", Message(lookup_identifier=1, time_to_be_received=5)))
    store.close()
    qm = _restart(data_dir, ManualScheduler())        # the queue is unknown: the row is an orphan, deleted
    qm.store.close()
    assert qm._ttbr_heap == [] and _load(data_dir)[0] == []


@pytest.mark.parametrize("compact, match", _HOSTILE_COMPACT)
def test_hostile_compact_rows_are_refused_by_the_worker_naming_the_message(data_dir, workers, compact, match):
    path = _store_of(data_dir, 1)
    _execute(path, "UPDATE messages SET compact = ?", (compact,))
    with pytest.raises(StoreError, match=f"corrupt message 1 of queue '{Q}': .*{match}"):
        _load(data_dir)
    assert workers and all(w.proc is None for w in workers)


def test_the_worker_names_the_first_corrupt_row_in_key_order_not_in_row_order(data_dir, workers):
    path = _store_of(data_dir, 9, 2, 5)           # rowids 1, 2, 3: key order is 2, 5, 9
    for lookup in (9, 5):
        _execute(path, "UPDATE messages SET compact = ? WHERE lookup_identifier = ?",
                 (_flags_then(0, (LOOKUP, lookup + 1)), lookup - BIAS))
    with pytest.raises(StoreError, match="corrupt message 5 .*not the row's"):
        _load(data_dir)


def test_a_worker_that_cannot_start_leaves_the_check_to_the_loading_process(data_dir, workers, monkeypatch, caplog):
    path = _store_of(data_dir, 1, 2)
    monkeypatch.setattr(parallel_check.sys, "executable", str(data_dir / "no-such-python"))
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.parallel_check"):
        assert [row[1] for row in _load(data_dir)[0]] == [1, 2]
    assert "cannot start the parallel load check" in caplog.text
    _execute(path, "UPDATE messages SET compact = ? WHERE lookup_identifier = ?", (b"M\x00\xff\xff", 2 - BIAS))
    with pytest.raises(StoreError, match="corrupt message 2 .*not a compact form"):
        _load(data_dir)


def test_a_worker_that_dies_without_an_answer_leaves_the_check_to_the_loading_process(
        data_dir, workers, monkeypatch, caplog):
    path = _store_of(data_dir, 1, 2)
    _execute(path, "UPDATE messages SET compact = ? WHERE lookup_identifier = ?", (b"M\x00\xff\xff", 2 - BIAS))
    monkeypatch.setattr(parallel_check, "_WORKER", "import sys; sys.stderr.write('worker fell over'); sys.exit(3)")
    with caplog.at_level(logging.WARNING, logger="shared_adm.store.parallel_check"):
        with pytest.raises(StoreError, match="corrupt message 2 .*not a compact form"):
            _load(data_dir)
    assert "the parallel load check failed (worker fell over)" in caplog.text


def test_a_load_that_fails_before_the_verdict_stops_the_worker(data_dir, workers):
    path = _store_of(data_dir, 1, 2)
    _execute(path, "UPDATE messages SET state = 9 WHERE lookup_identifier = ?", (1 - BIAS,))
    with pytest.raises(StoreError, match="corrupt message 1 .*unknown state 9"):
        _load(data_dir)
    (worker,) = workers
    assert worker.proc is None


def test_a_stream_closed_early_stops_the_worker(data_dir, workers):
    _store_of(data_dir, *range(1, 3000))
    store = SqliteStore(data_dir)
    messages = store.load_packed().messages
    next(messages)
    (worker,) = workers
    proc = worker.proc
    messages.close()
    assert worker.proc is None and proc.returncode is not None
    store.close()


def _rows_of_batch(number):
    first = number * parallel_check.BATCH_ROWS + 1
    return range(first, first + parallel_check.BATCH_ROWS)


def test_the_loading_process_checks_every_tenth_batch_itself(data_dir, workers, monkeypatch):
    # a worker that finds nothing wrong: what is refused and timed in batch 9 the loading process found itself
    fine = marshal.dumps(([], None))
    monkeypatch.setattr(parallel_check, "_WORKER", f"import sys; sys.stdout.buffer.write({fine!r})")
    assert [n for n in range(20) if parallel_check.checked_by_loader(n)] == [9, 19]
    store = SqliteStore(data_dir)
    for lookup in range(1, 10 * parallel_check.BATCH_ROWS + 1):
        fields = {"time_to_be_received": 5} if lookup in (_rows_of_batch(9)[0], _rows_of_batch(3)[0]) else {}
        store.put_message(StoredMessage(Q, lookup, "Available", Message(lookup_identifier=lookup, **fields)))
    store.close()
    rows, late = _load(data_dir)
    assert [row[1] for row in rows if row[4]] == [_rows_of_batch(9)[0]] and late == []

    def corrupt(batch, form=None):
        lookup = _rows_of_batch(batch)[5]
        form = form or _flags_then(0, (LOOKUP, lookup + 1))
        _execute(data_dir / DB_FILE_NAME, "UPDATE messages SET compact = ? WHERE lookup_identifier = ?",
                 (form, lookup - BIAS))
    corrupt(9)
    with pytest.raises(StoreError, match=f"corrupt message {_rows_of_batch(9)[5]} .*not the row's"):
        _load(data_dir)
    corrupt(9, pack(Message(lookup_identifier=_rows_of_batch(9)[5])))
    corrupt(3)
    assert len(_load(data_dir)[0]) == 10 * parallel_check.BATCH_ROWS      # batch 3 is the worker's to check
    monkeypatch.setattr(parallel_check, "_WORKER", _REAL_WORKER)
    with pytest.raises(StoreError, match=f"corrupt message {_rows_of_batch(3)[5]} .*not the row's"):
        _load(data_dir)


@pytest.mark.parametrize("threshold, frozen", [(3, True), (4, False)])
def test_a_large_store_s_positions_are_frozen_out_of_the_collector_and_it_is_back_on_after_the_load(
        data_dir, workers, monkeypatch, threshold, frozen):
    import gc
    from shared_adm import queue_manager
    qm = QueueManager(store=SqliteStore(data_dir), scheduler=ManualScheduler())
    qm.initialize()
    _, queue = qm.create_queue(r".\private$\q")
    for body in (b"a", b"b", b"c"):
        assert qm.enqueue_message(queue, Message(body=body, delivery_guarantee=REC)) == 0
    qm.store.close()
    monkeypatch.setattr(queue_manager, "FREEZE_AFTER_LOADING", threshold)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    try:
        again = _restart(data_dir, ManualScheduler())
        positions = list(again.queue_by_pathname(r".\private$\q").message_position_list)
        assert len(positions) == 3 and gc.isenabled()
        assert (gc.get_freeze_count() > 0) is frozen
        again.store.close()
    finally:
        gc.unfreeze()


def test_a_worker_whose_loader_is_gone_stops_within_a_batch(data_dir):
    path = _store_of(data_dir, 1, 2)
    asked = []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert parallel_check.check_compact_rows(conn, BIAS, False, abandoned=lambda: asked.append(1) or False) \
            == ([], None) and asked == [1]
        with pytest.raises(SystemExit):
            parallel_check.check_compact_rows(conn, BIAS, False, abandoned=lambda: True)
