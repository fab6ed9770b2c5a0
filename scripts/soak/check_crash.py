"""Check: SIGKILL at a random moment under mixed load loses no acknowledged message (issue 14; MS-MQDMPR 3.1.7.1.9,
MS-MQQP 3.1.4.2 / 3.1.4.7: an acknowledged recoverable enqueue, ACK or purge is durable before its answer)."""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from qm2qm.mqrr.client import MqrrClient
from qm2qm.mqrr.constants import RECEIVE_ACCESS
from soak import qm2qm_calls as q
from soak import wire
from soak.admin import Admin
from soak.harness import Run

QUEUE = r".\private$\soak-durable"
XQUEUE = r".\private$\soak-durable-x"     # transactional: MS-MQRR transactional receives, ended by the operator
SEQ_MASK = (1 << 56) - 1


@dataclass
class Ledger:
    """What the clients were told, by sequential id (the low 7 bytes of the lookup id, MS-MQDMPR 3.1.7.1.9)."""
    recoverable: set[int] = field(default_factory=set)   # enqueue acknowledged (201), not yet known gone
    express: set[int] = field(default_factory=set)       # acknowledged express enqueues (may die with the server)
    gone: set[int] = field(default_factory=set)          # receive ACKed or purge acknowledged: must never return
    maybe_gone: set[int] = field(default_factory=set)    # ACK / purge sent, answer lost in the crash
    lock: threading.Lock = field(default_factory=threading.Lock)
    purge_epoch: int = 0                                 # +1 when a purge starts and again when it ends
    purging: int = 0                                     # purges in flight
    in_xqueue: set[int] = field(default_factory=set)     # sent to XQUEUE: no purge (of QUEUE) touches them
    ops: dict[str, int] = field(default_factory=dict)

    def count(self, op: str) -> None:
        self.ops[op] = self.ops.get(op, 0) + 1


def _enqueuer(server, ledger: Ledger, stop: threading.Event, rng: random.Random) -> None:
    admin = Admin(server.admin, timeout=5)
    try:
        while not stop.is_set():
            recoverable = rng.random() < 0.7
            with ledger.lock:
                epoch, purging = ledger.purge_epoch, ledger.purging
            queue = rng.choice((QUEUE, QUEUE, XQUEUE))
            try:
                status, data = admin.json("POST", f"/v1/queues/{Admin.q(queue)}/messages",
                                          {"body": f"t{rng.getrandbits(48)}",
                                           "delivery": "recoverable" if recoverable else "express"})
            except OSError:
                return
            if status != 201:
                continue
            seq = data["lookup_id"] & SEQ_MASK
            with ledger.lock:
                (ledger.recoverable if recoverable else ledger.express).add(seq)
                if queue == XQUEUE:
                    ledger.in_xqueue.add(seq)
                elif ledger.purge_epoch != epoch or purging or ledger.purging:
                    ledger.maybe_gone.add(seq)          # a purge overlapped this enqueue: it may have removed it
                ledger.count("enqueue recoverable" if recoverable else "enqueue express")
    finally:
        admin.close()


def _receiver(server, ledger: Ledger, stop: threading.Event, rng: random.Random) -> None:
    admin = Admin(server.admin, timeout=5)
    try:
        handle = admin.ok("POST", f"/v1/queues/{Admin.q(QUEUE)}/open", {})["hRemoteQueue"]
        s = q.Session(server.host, server.port, handle, timeout=5)
        c = s.client
        while not stop.is_set():
            roll = rng.random()
            if roll < 0.01:
                with ledger.lock:
                    snapshot = (set(ledger.recoverable) | set(ledger.express)) - ledger.in_xqueue
                    ledger.maybe_gone |= snapshot
                    ledger.purging += 1
                    ledger.purge_epoch += 1
                try:
                    _, stub = c.call(q.PURGE, q.purge(handle))
                finally:
                    with ledger.lock:
                        ledger.purging -= 1
                        ledger.purge_epoch += 1
                if q.hresult_at_end(stub) == 0:
                    with ledger.lock:
                        ledger.gone |= snapshot
                        ledger.recoverable -= snapshot
                        ledger.express -= snapshot
                        ledger.count("purge")
                continue
            if roll < 0.08:
                cursor = admin.ok("POST", f"/v1/handles/{handle}/cursors", {})["hCursor"]
                c.call(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_PEEK_CURRENT, 0, cursor))
                c.call(q.CLOSE_CURSOR, q.close_cursor(handle, cursor))
                with ledger.lock:
                    ledger.count("cursor")
                continue
            _, stub = c.call(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_RECEIVE, rng.choice((0, 50))))
            status, context, seq = q.receive_result(stub)
            if status != 0:
                continue
            ack = q.RR_ACK if rng.random() < 0.6 else q.RR_NACK
            if ack == q.RR_ACK:
                with ledger.lock:
                    ledger.maybe_gone.add(seq)
            _, stub = c.call(q.END_RECEIVE, q.end_receive(context, ack))
            if ack == q.RR_ACK and q.hresult_at_end(stub) == 0:
                with ledger.lock:
                    ledger.gone.add(seq)
                    ledger.recoverable.discard(seq)
                    ledger.express.discard(seq)
            with ledger.lock:
                ledger.count("receive+ACK" if ack == q.RR_ACK else "receive+NACK")
    except (OSError, wire.WireError, RuntimeError, ValueError):
        return                                  # the server died under us: expected
    finally:
        admin.close()


def _transactions(server, ledger: Ledger, stop: threading.Event, rng: random.Random) -> None:
    """MS-MQRR transactional receives on XQUEUE, then the outcome through the admin API (this server has no DTC): a
    commit, once answered, must have deleted its messages durably; an abort, or none, leaves them to come back."""
    admin = Admin(server.admin, timeout=5)
    client = None
    try:
        computer = admin.ok("GET", "/v1/info")["computer_name"]
        client = MqrrClient(server.host, server.port, timeout=5)
        handle = client.open(f"DIRECT=OS:{computer}\\{XQUEUE[2:]}", RECEIVE_ACCESS)
        while not stop.is_set():
            uow = rng.randbytes(16)
            received = []
            for request_id in range(1, rng.randint(1, 4)):
                read = client.read(handle, request_id=request_id, timeout=rng.choice((0, 50)), transaction=uow)
                if read.status == 0:
                    received.append(read.sequence_id & SEQ_MASK)
            if not received:
                continue
            commit = rng.random() < 0.6
            if commit:
                with ledger.lock:
                    ledger.maybe_gone.update(received)
            status, _ = admin.json("POST", f"/v1/transactions/{uow.hex()}/{'commit' if commit else 'abort'}", None)
            if commit and status == 200:
                with ledger.lock:
                    ledger.gone.update(received)
                    ledger.recoverable.difference_update(received)
                    ledger.express.difference_update(received)
            with ledger.lock:
                ledger.count("transaction commit" if commit else "transaction abort")
    except Exception:                           # noqa: BLE001 - the server died under us: expected
        return
    finally:
        if client is not None:
            client.disconnect()
        admin.close()


def _verify(server, ledger: Ledger) -> list[str]:
    """The invariants after a restart; also folds what was ambiguous back into the ledger."""
    admin = Admin(server.admin)
    try:
        messages = [m for queue in (QUEUE, XQUEUE)
                    for m in admin.messages(queue, body=True)]
    finally:
        admin.close()
    data = {"messages": messages}
    seqs = [m["lookup_id"] & SEQ_MASK for m in data["messages"]]
    present = set(seqs)
    bodies = [m.get("body_text") for m in data["messages"]]
    bad = []
    lost = ledger.recoverable - present - ledger.maybe_gone
    if lost:
        bad.append(f"{len(lost)} acknowledged recoverable message(s) lost, e.g. {sorted(lost)[:3]}")
    back = ledger.gone & present
    if back:
        bad.append(f"{len(back)} ACKed/purged message(s) came back, e.g. {sorted(back)[:3]}")
    if len(seqs) != len(present) or len(bodies) != len(set(bodies)):
        bad.append(f"duplicates: {len(seqs) - len(present)} lookup ids, {len(bodies) - len(set(bodies))} bodies")
    locked = [m["lookup_id"] for m in data["messages"] if m["state"] != "Available"]
    if locked:
        bad.append(f"{len(locked)} message(s) not Available after restart")
    # resolve the ambiguous: what is present stays expected, what is absent is gone
    maybe = ledger.maybe_gone
    ledger.gone |= maybe - present
    ledger.recoverable = ((ledger.recoverable - maybe) | (ledger.recoverable & maybe & present)) - ledger.gone
    ledger.express &= present
    ledger.maybe_gone = set()
    return bad


def _durability(round_index: int) -> list[str]:
    """Every other round serves on --store-synchronous full: its ACKs and sends are answered after the writer
    thread's commit (an fsync each), the others' after the event loop's; both must survive SIGKILL."""
    return ["--store-synchronous", "full"] if round_index % 2 else []


def run(r: Run) -> None:
    rounds = r.budget.crash_rounds
    rng = random.Random(r.seed)
    ledger = Ledger()
    data_dir = r.workdir / "crash-data"
    failures: list[str] = []
    open_failures = 0
    start = time.monotonic()
    server = r.server("crash", data_dir=data_dir).start()
    Admin(server.admin).ok("POST", "/v1/queues", {"pathname": QUEUE})
    Admin(server.admin).ok("POST", "/v1/queues", {"pathname": XQUEUE, "transactional": True})
    done = 0
    for i in range(rounds):
        stop = threading.Event()
        threads = [threading.Thread(target=_enqueuer, args=(server, ledger, stop, random.Random(rng.random())))
                   for _ in range(2)]
        threads += [threading.Thread(target=_receiver, args=(server, ledger, stop, random.Random(rng.random())))
                    for _ in range(2)]
        threads.append(threading.Thread(target=_transactions, args=(server, ledger, stop, random.Random(rng.random()))))
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 1.2))
        server.kill()
        stop.set()
        for t in threads:
            t.join(10)
        try:
            server = r.server("crash", data_dir=data_dir, extra=_durability(i + 1)).start()
        except RuntimeError as exc:
            open_failures += 1
            failures.append(f"round {i + 1}: store did not open: {exc}")
            break
        bad = _verify(server, ledger)
        failures += [f"round {i + 1}: {b}" for b in bad]
        done += 1
        if i < rounds - 1:
            continue
    server.stop()
    elapsed = time.monotonic() - start
    ops = ", ".join(f"{k} {v}" for k, v in sorted(ledger.ops.items()))
    r.report.check(f"{rounds} rounds of SIGKILL under mixed load (every other one on --store-synchronous full): "
                   "no acknowledged message lost, none back, no duplicate, nothing Locked, the store opens",
                   not failures and done == rounds,
                   f"{done} rounds in {elapsed:.0f} s; {ops}; {len(ledger.recoverable)} recoverable in the queue"
                   + (f"; {len(failures)} failures: {'; '.join(failures[:4])}" if failures else ""))
