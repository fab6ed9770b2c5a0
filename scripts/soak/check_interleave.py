"""Check: clients of the admin API, qmcomm, qm2qm and MS-MQRR interleaving at random on a few queues (sends, some
expiring into the dead-letter queues, opens, receives plain, through cursors and by lookup id with ACK and NACK,
transactional receives and their outcomes, moves between a queue and its subqueues over MS-MQRR and the admin API,
reads from subqueues, cursors, cancels, closes, disconnects) get no 5xx and no unexplained error, the log stays clean,
and no message is lost or duplicated: sent - acknowledged - committed = left (in the queues, their subqueues and the
dead-letter queues), every one Available, nothing open afterwards and no empty subqueue left. The server runs with a
small --max-context-handles so that the refusals past it are part of the mix."""
from __future__ import annotations

import os
import random
import threading
import time

from qm2qm.client import AdminClient, AdminError, Qm2qmClient, RpcCallError
from qm2qm.mqmp.client import QmcommClient
from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                  MQ_LOOKUP_RECEIVE_CURRENT, RR_ACK, RR_NACK)
from qm2qm.mqrr.client import MqrrClient, MqrrFault
from qm2qm.mqrr.constants import MQ_MOVE_ACCESS, RECEIVE_ACCESS
from soak.harness import LogWatch, Run

QUEUES = (r".\private$\mix0", r".\private$\mix1", r".\private$\xmix0", r".\private$\xmix1")   # x: transactional
DEAD_LETTER = (".\\system$;deadletter", ".\\system$;deadxact")     # where an expired message that asked for it goes
SUBQUEUES = ("poison", "retry")
TTBR_S = 1
THREADS = 4
HANDLES_PER_ASSOCIATION = 6
OPERATIONS = ("send", "qmcomm_open", "qm2qm_open", "receive", "receive", "receive_cursor", "lookup_receive", "end",
              "end", "end", "close", "close_session", "cursor", "close_cursor", "rr_open", "rr_read", "rr_txread",
              "rr_txread", "rr_end", "rr_end", "rr_close", "rr_move", "rr_move", "admin_move", "rr_cancel", "tx_end",
              "reconnect")


class Tally:
    """What the clients know happened to messages; the queues must agree at the end."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = self.acknowledged = self.committed = 0
        self.unexpected: list[str] = []
        self.operations = 0

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)


class Client:
    """One thread's connections and what it holds open; every operation is one random step."""

    def __init__(self, server, tally: Tally, rng: random.Random, computer: str) -> None:
        self.server, self.tally, self.rng, self.computer = server, tally, rng, computer
        self.admin = AdminClient(server.admin)
        self.qmcomm = self.qm2qm = self.mqrr = None
        self.forget()

    def forget(self) -> None:
        self.opened, self.sessions, self.queue_handles, self.received, self.rr_received = [], [], [], [], []
        self.cursors: list[tuple[object, int]] = []         # (qmcomm open, hCursor)
        self.queue_of: dict[int, str] = {}                    # id(qmcomm open) -> its queue

    def format_name(self, queue: str) -> str:
        return f"DIRECT=OS:{self.computer}\\{queue[2:]}"

    def member(self, queue: str) -> str:
        """The queue itself or one of its subqueues, at random."""
        return queue if self.rng.random() < 0.6 else f"{queue};{self.rng.choice(SUBQUEUES)}"

    def step(self) -> None:
        op, queue = self.rng.choice(OPERATIONS), self.rng.choice(QUEUES)
        try:
            getattr(self, "op_" + op)(queue)
        except AdminError as exc:
            if exc.status not in (404, 409):            # a queue or transaction another thread just ended
                self.tally.unexpected.append(f"{op}: admin {exc.status}: {exc}")
        except (RpcCallError, MqrrFault):
            pass                                        # an MSMQ status thrown by design (MS-MQRR), or a fault
        except Exception as exc:                        # a dropped connection or a malformed answer
            self.tally.unexpected.append(f"{op}: {type(exc).__name__}: {exc}")
            self.disconnect()
        self.tally.add("operations")

    def disconnect(self) -> None:
        for client in (self.qmcomm, self.qm2qm):
            if client is not None:
                client.close()
        if self.mqrr is not None:
            self.mqrr.disconnect()
        self.qmcomm = self.qm2qm = self.mqrr = None
        self.forget()

    def op_send(self, queue: str) -> None:
        count = self.rng.randint(1, 4)
        expiring = {"time_to_be_received": TTBR_S, "dead_letter": True} if self.rng.random() < 0.2 else {}
        self.admin.send(queue, body="m" * self.rng.randint(0, 2000), count=count,
                        delivery=self.rng.choice(("express", "recoverable")), **expiring)
        self.tally.add("sent", count)

    def op_qmcomm_open(self, queue: str) -> None:
        self.qmcomm = self.qmcomm or QmcommClient("127.0.0.1", self.server.qmcomm_port).connect()
        queue = self.member(queue)
        opened = self.qmcomm.open_remote_queue(self.format_name(queue), access=self.rng.choice((1, 32)))
        if opened.status == 0:
            self.queue_of[id(opened)] = queue
            self.opened.append(opened)

    def op_qm2qm_open(self, queue: str) -> None:
        if self.opened:
            self.qm2qm = self.qm2qm or Qm2qmClient("127.0.0.1", self.server.port).connect()
            opened = self.rng.choice(self.opened)
            status, session = self.qm2qm.open_queue(opened.h_queue)
            if status == 0:
                self.sessions.append((opened, session))

    def op_receive(self, queue: str) -> None:
        if self.sessions and self.qm2qm is not None:
            read = self.qm2qm.start_receive2(self.rng.choice(self.sessions)[0].h_queue,
                                             action=self.rng.choice((MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_CURRENT)),
                                             timeout_ms=self.rng.choice((0, 0, 20)))
            self._hold(read)

    def _hold(self, read) -> None:
        if read.ok and read.context != bytes(20):
            self.received.append(read.context)

    def op_receive_cursor(self, queue: str) -> None:
        sessions = {id(opened) for opened, _ in self.sessions}
        cursors = [(opened, cursor) for opened, cursor in self.cursors if id(opened) in sessions]
        if cursors and self.qm2qm is not None:
            opened, cursor = self.rng.choice(cursors)
            self._hold(self.qm2qm.start_receive2(opened.h_queue, cursor=cursor, timeout_ms=self.rng.choice((0, 20)),
                                                 action=self.rng.choice((MQ_ACTION_RECEIVE, MQ_ACTION_PEEK_NEXT))))

    def op_lookup_receive(self, queue: str) -> None:
        if self.sessions and self.qm2qm is not None:
            opened, _ = self.rng.choice(self.sessions)
            ids = [m["lookup_id"] for m in self.admin.list_messages(self.queue_of[id(opened)], limit=20)]
            if ids:
                self._hold(self.qm2qm.start_receive_by_lookup_id(opened.h_queue, self.rng.choice(ids),
                                                                 action=MQ_LOOKUP_RECEIVE_CURRENT))

    def op_close_session(self, queue: str) -> None:
        if self.sessions and self.qm2qm is not None:
            _, session = self.sessions.pop(self.rng.randrange(len(self.sessions)))
            self.qm2qm.close_queue(session)

    def op_close_cursor(self, queue: str) -> None:
        if self.cursors and self.qm2qm is not None:
            opened, cursor = self.cursors.pop(self.rng.randrange(len(self.cursors)))
            self.qm2qm.close_cursor(opened.h_queue, cursor)

    def op_end(self, queue: str) -> None:
        if self.received and self.qm2qm is not None:
            ack = self.rng.choice((RR_ACK, RR_NACK))
            if self.qm2qm.end_receive(self.received.pop(self.rng.randrange(len(self.received))), ack)[0] == 0 \
                    and ack == RR_ACK:
                self.tally.add("acknowledged")

    def op_cursor(self, queue: str) -> None:
        if self.opened and self.qmcomm is not None:
            opened = self.rng.choice(self.opened)
            status, cursor = self.qmcomm.create_remote_cursor(opened.h_queue)
            if status == 0:
                self.cursors.append((opened, cursor))

    def op_close(self, queue: str) -> None:
        if self.opened and self.qmcomm is not None:
            opened = self.opened.pop(self.rng.randrange(len(self.opened)))
            self.sessions = [s for s in self.sessions if s[0] is not opened]
            self.cursors = [c for c in self.cursors if c[0] is not opened]
            self.qmcomm.close_remote_queue_context(opened.context)

    def op_rr_open(self, queue: str) -> None:
        self.mqrr = self.mqrr or MqrrClient("127.0.0.1", self.server.port)
        queue = self.member(queue)
        self.queue_handles.append((queue, self.mqrr.open(self.format_name(queue), RECEIVE_ACCESS)))

    def _rr_read(self, transaction: bytes | None) -> None:
        if self.queue_handles and self.mqrr is not None:
            _, handle = self.rng.choice(self.queue_handles)
            request_id = self.rng.randrange(1, 1 << 30)
            read = self.mqrr.read(handle, MQ_ACTION_RECEIVE, request_id=request_id,
                                  timeout=self.rng.choice((0, 20)), transaction=transaction)
            if read.status == 0:
                self.rr_received.append((handle, request_id, transaction is not None))

    def op_rr_read(self, queue: str) -> None:
        self._rr_read(None)

    def op_rr_txread(self, queue: str) -> None:
        self._rr_read(os.urandom(16))

    def op_rr_end(self, queue: str) -> None:
        if self.rr_received and self.mqrr is not None:
            handle, request_id, transactional = self.rr_received.pop(self.rng.randrange(len(self.rr_received)))
            ack = self.rng.choice((RR_ACK, RR_NACK))
            if self.mqrr.end(handle, request_id, ack, transactional=transactional) == 0 and ack == RR_ACK \
                    and not transactional:          # a transaction's message waits for its outcome
                self.tally.add("acknowledged")

    def op_rr_move(self, queue: str) -> None:
        if self.queue_handles and self.mqrr is not None:
            source, handle = self.rng.choice(self.queue_handles)
            destination = self.member(source.partition(";")[0])       # the queue itself, a subqueue, or the source
            move_context, _ = self.mqrr.open(self.format_name(destination), MQ_MOVE_ACCESS, for_move=True)
            ids = [m["lookup_id"] for m in self.admin.list_messages(source, limit=20)]
            if ids:
                self.mqrr.move(handle, move_context, self.rng.choice(ids),
                               os.urandom(16) if self.rng.random() < 0.3 else bytes(16))

    def op_admin_move(self, queue: str) -> None:
        source = self.member(queue)
        to = self.rng.choice([""] + [name for name in SUBQUEUES if not source.endswith(";" + name)])
        ids = [m["lookup_id"] for m in self.admin.list_messages(source, limit=20) if m["state"] == "Available"]
        if ids and (to or source != queue):
            self.admin.move_message(source, self.rng.choice(ids), to)

    def op_rr_cancel(self, queue: str) -> None:
        if self.queue_handles and self.mqrr is not None:
            self.mqrr.cancel(self.rng.choice(self.queue_handles)[1], self.rng.randrange(1, 1 << 30))

    def op_rr_close(self, queue: str) -> None:
        if self.queue_handles and self.mqrr is not None:
            _, handle = self.queue_handles.pop(self.rng.randrange(len(self.queue_handles)))
            self.rr_received = [r for r in self.rr_received if r[0] != handle]
            self.mqrr.close(handle)

    def op_tx_end(self, queue: str) -> None:
        transactions = self.admin.list_transactions()
        if transactions:
            transaction = self.rng.choice(transactions)
            outcome = self.rng.choice(("commit", "abort"))
            ended = self.admin.end_transaction(transaction["identifier"], outcome)
            if outcome == "commit":     # what the commit applied to: a receive ended after the listing too
                self.tally.add("committed", sum(o["operation"] == "Dequeue" for o in ended["operations"]))

    def op_reconnect(self, queue: str) -> None:
        self.disconnect()


def run(r: Run) -> None:
    server = r.server("interleave", extra=["--max-context-handles", str(HANDLES_PER_ASSOCIATION)]).start()
    watch = LogWatch(server)
    admin = AdminClient(server.admin)
    tally = Tally()
    try:
        computer = admin.info()["computer_name"]
        for queue in QUEUES:
            admin.create_queue(queue, transactional="\\x" in queue)
        end = time.monotonic() + r.budget.interleave_seconds

        def work(n: int) -> None:
            client = Client(server, tally, random.Random(r.seed * 100 + n), computer)
            while time.monotonic() < end:
                client.step()
            client.disconnect()

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(TTBR_S + 1.0)                        # the last disconnects' rundown, the last expiries
        for transaction in admin.list_transactions():
            admin.end_transaction(transaction["identifier"], "abort")
        states: dict[str, int] = {}
        dead = 0
        subqueues = [f"{queue};{sub['name']}" for queue in QUEUES for sub in admin.show_queue(queue)["subqueues"]]
        empty = [name for name in subqueues if not admin.show_queue(name)["messages"]]
        for queue in QUEUES + DEAD_LETTER + tuple(subqueues):
            for message in admin.list_messages(queue, limit=None):
                states[message["state"]] = states.get(message["state"], 0) + 1
                dead += queue in DEAD_LETTER
        left, expected = sum(states.values()), tally.sent - tally.acknowledged - tally.committed
        handles, reads = admin.list_handles(), admin.list_reads()
        problems = watch.new_problems()
        ok = (not tally.unexpected and not problems and server.alive() and left == expected
              and set(states) <= {"Available"} and not handles and not reads["reads"] and not reads["waiting"]
              and not empty)
        r.report.check(
            "interleaved admin, qmcomm, qm2qm and MS-MQRR clients lose and duplicate no message",
            ok, f"{tally.operations} operations in {r.budget.interleave_seconds:.0f} s by {THREADS} clients: "
                f"{tally.sent} sent - {tally.acknowledged} acknowledged - {tally.committed} committed = {expected}; "
                f"left {left} {states}, {dead} of them dead-lettered, in {len(subqueues)} subqueues "
                f"({len(empty)} empty); "
                f"open afterwards: {len(handles)} handles, {len(reads['reads'])} reads"
                + (f"; {len(tally.unexpected)} unexpected, first: {tally.unexpected[0][:150]}" if tally.unexpected
                   else "")
                + (f"; server log: {problems[0][:150]}" if problems else ""))
    finally:
        server.stop()
