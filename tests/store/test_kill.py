"""kill -9 of a process using SqliteStore loses nothing it acknowledged (MS-MQDMPR 3.1.1 Persistent attributes)."""
import os
import signal
import subprocess
import sys
import tempfile
import threading

from shared_adm.clock import ManualScheduler
from shared_adm.enums import PositionState
from shared_adm.queue_manager import QueueManager
from shared_adm.store import SqliteStore
from shared_adm.store.sqlite import DB_FILE_NAME
from tests.store import kill_qm_writer as qm_child
from tests.store import kill_store_writer as child
from tests.store.durable_rows import unapplied_deletions

SCRIPT = os.path.abspath(child.__file__)
QM_SCRIPT = os.path.abspath(qm_child.__file__)


def _run_until_killed(data_dir, acks_before_kill, script=SCRIPT, *args):
    """Start the child, read acknowledgements, SIGKILL it mid-load; return every complete ack line."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen([sys.executable, script, str(data_dir), *args], stdout=subprocess.PIPE,
                                stderr=stderr)
        watchdog = threading.Timer(60, proc.kill)       # only stops a hung child; not a speed check
        watchdog.start()
        lines = []
        try:
            while len(lines) < acks_before_kill:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
            proc.send_signal(signal.SIGKILL)
            # read through the same buffered reader: communicate() would skip what readline buffered
            rest = proc.stdout.read()
            proc.wait()
        finally:
            watchdog.cancel()
            proc.stdout.close()
        stderr.seek(0)
        err = stderr.read()
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
    lines += rest.splitlines(keepends=True)
    complete = [line.decode().split() for line in lines if line.endswith(b"\n")]
    assert complete and complete[0][0] == "start", err.decode(errors="replace")
    assert len(complete) > acks_before_kill // 2, "the child was killed before the load started"
    return complete


def _check(snapshot, acked):
    """acked: id -> number of plan steps acknowledged. Compare with what the reopened store holds."""
    stored = {m.lookup_identifier: m for m in snapshot.messages if m.queue_identifier == child.QUEUE}
    for lookup, done in acked.items():
        steps = child.plan(lookup)
        # what the store may hold: the state after the last acknowledged step, or after the one in flight
        allowed = {_outcome(steps[:done])}
        if done < len(steps):
            allowed.add(_outcome(steps[:done + 1]))
        got = stored[lookup].state if lookup in stored else "absent"
        assert got in allowed, f"message {lookup}: stored {got}, acknowledged steps {steps[:done]}"
        if lookup in stored:
            message = stored[lookup].message
            assert (message.body, message.label) == (child.body(lookup), f"m{lookup}")
    acked_puts = [lookup for lookup, done in acked.items() if done >= 1]
    assert snapshot.sequential_id >= max(acked_puts)
    for lookup, m in stored.items():
        if lookup not in acked:             # an unacknowledged put that made it: allowed, and intact
            assert m.state == "Available" and m.message.body == child.body(lookup)


def _outcome(steps):
    state = "absent"
    for op in steps:
        state = {"put": "Available", "del": "absent"}.get(op[0]) or op[1]
    return state


def test_kill_9_loses_no_acknowledged_mutation(tmp_path):
    data_dir = tmp_path / "data"
    acked: dict[int, int] = {}
    for round_number, acks in enumerate((400, 150, 700)):
        lines = _run_until_killed(data_dir, acks)
        if round_number:
            assert int(lines[0][1]) >= max(acked), "the restarted child reused acknowledged lookup identifiers"
        for line in lines[1:]:
            lookup = int(line[1])
            acked[lookup] = acked.get(lookup, 0) + 1
            assert tuple(line[:1] + line[2:]) == child.plan(lookup)[acked[lookup] - 1]
        store = SqliteStore(data_dir)
        try:
            _check(store.load(), acked)
        finally:
            store.close()
    assert any(child.plan(lookup)[-1] == ("del",) and done == len(child.plan(lookup))
               for lookup, done in acked.items()), "no delete was acknowledged: the test proved nothing"


def test_kill_9_through_the_queue_manager(tmp_path):
    """No acknowledged enqueue lost, no ACKed message back, every Locked message Available after initialize()."""
    _kill_rounds_through_the_queue_manager(tmp_path / "qm", (300, 120, 500))


def test_kill_9_while_acked_deletions_are_only_in_the_delete_journal(tmp_path):
    """The same, killed while the ACKs' deletions are journaled and not yet in the database: a restart replays them."""
    data_dir = tmp_path / "qm"
    _kill_rounds_through_the_queue_manager(data_dir, (1800, 1700), "drain")


def _kill_rounds_through_the_queue_manager(data_dir, rounds, *mode):
    enqueued: dict[int, bytes] = {}     # acknowledged Enqueue Message: lookup id -> body
    acked: set[int] = set()             # acknowledged Dequeue Message End with delete
    in_doubt: set[int] = set()          # read, then killed before its End was acknowledged: either outcome
    for round_number, acks in enumerate(rounds):
        lines = _run_until_killed(data_dir, acks, QM_SCRIPT, f"r{round_number}", *mode)
        got, held = set(), set()
        for line in lines[1:]:
            kind, lookup = line[0], int(line[1])
            if kind == "enq":
                assert lookup not in enqueued, f"lookup id {lookup:#x} reused"
                enqueued[lookup] = line[2].encode()
            elif kind == "got":
                got.add(lookup)
            elif kind == "ack":
                acked.add(lookup)
            else:
                held.add(lookup)
        in_doubt |= got - held - acked
        if mode:
            journaled = {lookup + (1 << 63) for _, lookup in unapplied_deletions(data_dir / DB_FILE_NAME)}
            assert journaled and journaled <= acked | in_doubt, "no ACKed deletion was left to replay"
        store = SqliteStore(data_dir)
        try:
            stored_states = {m.lookup_identifier: m.state for m in store.load().messages}
        finally:
            store.close()
        # A Locked state is not written (SqliteStore.note_locked: Initialization makes it Available, MS-MQDMPR
        # 3.1.3): a held message's row is Available. Held messages at the kill prove the recovery was exercised.
        assert any(lookup in stored_states for lookup in held), \
            "no held message was stored at the kill: recovery was not exercised"
        assert all(stored_states[lookup] == "Available" for lookup in held if lookup in stored_states)

        qm = QueueManager(store=SqliteStore(data_dir), scheduler=ManualScheduler(), computer_name="qm2qm")
        try:
            qm.initialize()
            queue = qm.queue_by_pathname(qm_child.PATHNAME)
            positions = {p.lookup_identifier: p for p in queue.message_position_list}
            for lookup, body in enqueued.items():
                if lookup in acked:
                    assert lookup not in positions, f"ACKed message {lookup:#x} is back"
                elif lookup not in in_doubt:
                    assert lookup in positions, f"acknowledged enqueue {lookup:#x} lost"
                if lookup in positions:
                    assert positions[lookup].message.body == body
            for lookup in held:
                assert lookup in positions, f"held (Locked, never ended) message {lookup:#x} lost"
            for lookup, position in positions.items():
                assert position.state is PositionState.AVAILABLE, f"{lookup:#x} is {position.state}"
        finally:
            qm.store.close()
