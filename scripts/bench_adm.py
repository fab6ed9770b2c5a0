#!/usr/bin/env python
"""Benchmark of the MS-MQDMPR queue-manager model (shared_adm): per-op cost at two queue depths, memory per
queued message (tracemalloc), durable enqueue rate through SqliteStore. A benchmark, not a test.

    .venv/bin/python scripts/bench_adm.py                       # 1k and 1M, memory at 1M, sqlite 20k
    .venv/bin/python scripts/bench_adm.py --sizes 1000,100000 --mem-n 100000 --durable-n 5000
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import random
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from argtypes import whole_number, whole_numbers  # noqa: E402
from shared_adm import status as st  # noqa: E402
from shared_adm.clock import ManualScheduler  # noqa: E402
from shared_adm.enums import MessageSeekAction, QueueAccessType, QueueShareMode  # noqa: E402
from shared_adm.message import DeliveryGuarantee, Message  # noqa: E402
from shared_adm.queue_manager import QueueManager  # noqa: E402
from shared_adm.store.base import MemoryStore  # noqa: E402

QNAME = r"DIRECT=OS:.\private$\bench"
UNLIMITED_KB = 1 << 40
ROUNDS = 3


def _setup(store=None) -> tuple[QueueManager, object, object]:
    qm = QueueManager(store=store or MemoryStore(), scheduler=ManualScheduler(), queue_manager_quota_kb=UNLIMITED_KB)
    qm.initialize()
    queue = qm.queue_by_pathname(r".\private$\bench") or qm.create_queue(r".\private$\bench")[1]
    desc = qm.open_queue(QNAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)[1]
    return qm, queue, desc


def _message(i: int, body: bytes, recoverable: bool = False) -> Message:
    return Message(body=body, priority=i % 8, label="bench",
                   delivery_guarantee=DeliveryGuarantee.RECOVERABLE if recoverable else DeliveryGuarantee.EXPRESS)


def _fill(qm, queue, n: int, body: bytes) -> None:
    enqueue = qm.enqueue_message
    for i in range(n):
        enqueue(queue, _message(i, body))


def _per_op(n: int, ops: int, body: bytes) -> dict[str, float]:
    """Microseconds per operation with ``n`` messages queued."""
    qm, queue, desc = _setup()
    _fill(qm, queue, n, body)
    ids = [p.lookup_identifier for p in queue.message_position_list]
    rng = random.Random(1)
    sample = [rng.choice(ids) for _ in range(ops)]
    results = {}

    def timed(name, fn):
        # CPU time of this process, best of ROUNDS rounds: the machine is shared, wall time is not ours.
        best = float("inf")
        for _ in range(ROUNDS):
            gc.collect()
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
        results[name] = best / ops * 1e6

    def enqueue():
        for i in range(ops):
            qm.enqueue_message(queue, _message(i, body))

    def peek_head():
        for _ in range(ops):
            r = qm.peek_message(desc, 0)
        assert r.status == st.MQ_OK

    def receive_ack():
        for _ in range(ops):
            r = qm.dequeue_message_begin(desc, 0)
            qm.dequeue_message_end(desc, r.position, True)

    def lookup():
        for lookup_id in sample:
            r = qm.read_message_by_lookup_identifier(desc, lookup_id, MessageSeekAction.SEEK_CURRENT, True)
        assert r.status == st.MQ_OK

    def seek_next():
        for lookup_id in sample:
            qm.read_message_by_lookup_identifier(desc, lookup_id, MessageSeekAction.SEEK_NEXT, True)

    timed("enqueue", enqueue)
    timed("peek head", peek_head)
    timed("lookup by id", lookup)
    timed("SeekNext by id", seek_next)
    timed("receive+ACK (begin/end)", receive_ack)
    return results


def _memory(n: int, body: bytes) -> tuple[float, float]:
    """(bytes per queued message beyond its body, total MiB) measured with tracemalloc."""
    gc.collect()
    qm, queue, desc = _setup()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _fill(qm, queue, n, body)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    total = after - before
    return total / n - len(body), total / 2 ** 20


async def _durable(n: int, batch: int, body: bytes, directory: str) -> float | None:
    try:
        from shared_adm.store.sqlite import SqliteStore
    except ImportError as exc:
        print(f"durable enqueue: SKIPPED (shared_adm.store.sqlite not importable: {exc})")
        return None
    store = SqliteStore(directory)
    try:
        qm = QueueManager(store=store, scheduler=ManualScheduler(), queue_manager_quota_kb=UNLIMITED_KB)
        qm.initialize()
        queue = qm.queue_by_pathname(r".\private$\bench") or qm.create_queue(r".\private$\bench")[1]
        await qm.durable()
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            for i in range(start, min(n, start + batch)):
                qm.enqueue_message(queue, _message(i, body, recoverable=True))
            await qm.durable()
        elapsed = time.perf_counter() - t0
        assert len(store.load().messages) == n
        return n / elapsed
    finally:
        store.close()


def _sizes(text: str) -> list[int]:
    """argparse type: comma-separated queue depths, at least one."""
    sizes = whole_numbers(text)
    if not sizes:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more depths, each at least 1")
    return sizes


def main(argv=None) -> int:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default="1000,1000000", help="queue depths for the per-op table")
    parser.add_argument("--ops", type=functools.partial(whole_number, least=ROUNDS, why=" (one operation per round)"),
                        default=20000,
                        help="operations timed per row (at least one per round)")
    parser.add_argument("--body", type=int, default=100, help="message body size in bytes")
    parser.add_argument("--mem-n", type=int, default=1_000_000, help="messages for the memory measurement (0: skip)")
    parser.add_argument("--durable-n", type=int, default=20000, help="messages for the SqliteStore rate (0: skip)")
    parser.add_argument("--durable-batch", type=int, default=256, help="enqueues per await durable()")
    args = parser.parse_args(argv)
    body = b"x" * args.body
    sizes = args.sizes

    rows = {n: _per_op(n, args.ops // ROUNDS, body) for n in sizes}
    names = list(next(iter(rows.values())))
    print(f"\nper-operation cost, CPU microseconds (best of {ROUNDS} rounds of {args.ops // ROUNDS} ops, "
          f"{args.body}-byte bodies)")
    header = f"{'operation':<26}" + "".join(f"{n:>14,}" for n in sizes)
    if len(sizes) > 1:
        header += f"{'ratio':>9}"
    print(header)
    for name in names:
        line = f"{name:<26}" + "".join(f"{rows[n][name]:>14.2f}" for n in sizes)
        if len(sizes) > 1:
            line += f"{rows[sizes[-1]][name] / rows[sizes[0]][name]:>9.2f}"
        print(line)

    if args.mem_n:
        per, total = _memory(args.mem_n, body)
        print(f"\nmemory: {per:.0f} bytes per queued message beyond its {args.body}-byte body "
              f"({args.mem_n:,} messages, {total:.0f} MiB traced)")
    if args.durable_n:
        with tempfile.TemporaryDirectory() as directory:
            rate = asyncio.run(_durable(args.durable_n, args.durable_batch, body, directory))
        if rate is not None:
            print(f"\ndurable enqueue through SqliteStore: {rate:,.0f} messages/s "
                  f"({args.durable_n:,} Recoverable messages, await durable() every {args.durable_batch})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
