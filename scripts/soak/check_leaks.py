"""Check: abrupt disconnects mid-call leave no handle, pending read or Locked message (issue 14; MS-MQQP 3.1.6)."""
from __future__ import annotations

import random
import threading
import time

from soak import qm2qm_calls as q
from soak import wire
from soak.admin import Admin
from soak.check_fuzz import leftovers
from soak.harness import LogWatch, Run, wait_until

FULL = r".\private$\soak-leak-full"      # receives lock a message here
EMPTY = r".\private$\soak-leak-empty"    # receives wait (pending reads) here
THREADS = 12


def _round(server, admin: Admin, rng: random.Random) -> str:
    """One connection that dies mid-call: a pending read, a Locked message, a half-sent PDU or an unread reply."""
    kind = rng.choice(("pending", "locked", "half", "unread"))
    queue = EMPTY if kind == "pending" else FULL
    handle = admin.ok("POST", f"/v1/queues/{Admin.q(queue)}/open", {})["hRemoteQueue"]
    s = q.Session(server.host, server.port, handle)
    c = s.client
    if kind == "pending":
        c.send_request(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_RECEIVE, q.INFINITE))
        if rng.random() < 0.5:
            wait_until(lambda: False, 0.002)
    elif kind == "locked":
        c.call(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_RECEIVE, 0))
    elif kind == "half":
        pdu = wire.request(c.call_id + 1, 0, q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_RECEIVE, 0))
        c.sock.sendall(pdu[:rng.randrange(1, len(pdu))])
    else:
        c.send_request(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_PEEK_CURRENT, 0))
    c.abort()
    return kind


def run(r: Run) -> None:
    server = r.server("leaks").start()
    watch = LogWatch(server)
    admin = Admin(server.admin)
    try:
        for name in (FULL, EMPTY):
            admin.ok("POST", "/v1/queues", {"pathname": name})
        admin.ok("POST", f"/v1/queues/{Admin.q(FULL)}/messages", {"body": "locked?", "count": 200,
                                                                  "delivery": "recoverable"})
        total = r.budget.disconnects
        counts: dict[str, int] = {}
        errors: list[str] = []
        lock = threading.Lock()
        next_i = iter(range(total))

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            a = Admin(server.admin)
            try:
                while True:
                    with lock:
                        if next(next_i, None) is None:
                            return
                    try:
                        kind = _round(server, a, rng)
                    except (OSError, wire.WireError, RuntimeError) as exc:
                        with lock:
                            errors.append(str(exc))
                        continue
                    with lock:
                        counts[kind] = counts.get(kind, 0) + 1
            finally:
                a.close()
        start = time.monotonic()
        threads = [threading.Thread(target=worker, args=(r.seed + i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        left = wait_until(lambda: (lambda v: v if v == (0, 0, 0) else None)(leftovers(admin)), 15) \
            or leftovers(admin)
        status, full = admin.json("GET", f"/v1/queues/{Admin.q(FULL)}")
        problems = watch.new_problems()
        done = sum(counts.values())
        r.report.check(f"{total} abrupt disconnects mid-call leave 0 handles, 0 pending reads, 0 Locked messages",
                       left == (0, 0, 0) and done == total and not problems and full.get("messages") == 200,
                       f"{done} rounds in {elapsed:.0f} s ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))});"
                       f" handles={left[0]} reads={left[1]} locked={left[2]}, messages kept {full.get('messages')}/200"
                       + (f"; {len(errors)} rounds failed: {errors[0]}" if errors else "")
                       + (f"; server log: {problems[0]}" if problems else ""))
        try:
            wire.get_version_latency(server.host, server.port, 2.0)
            healthy = True
        except (OSError, wire.WireError):
            healthy = False
        r.report.check("server answers after the disconnect storm", healthy and server.alive(),
                       f"alive={server.alive()} GetVersion={'ok' if healthy else 'failed'}")
    finally:
        admin.close()
        server.stop()
