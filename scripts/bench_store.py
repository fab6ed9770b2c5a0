#!/usr/bin/env python3
"""Benchmark SqliteStore (shared_adm/store/sqlite.py): durable put rate with group commit vs one commit per message, load() time.

Not a test. Example:
    .venv/bin/python scripts/bench_store.py --messages 50000 --producers 64 --load-sizes 100000,1000000
    .venv/bin/python scripts/bench_store.py --acks 1,4,16 --producers '' --load-sizes ''   # the recoverable ACK path
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from argtypes import whole_number, whole_numbers  # noqa: E402
from shared_adm.message import DeliveryGuarantee, Message  # noqa: E402
from shared_adm.store import SqliteStore, StoredMessage, StoredQueue  # noqa: E402

QUEUE = str(uuid.UUID(int=0x51))
SOURCE = uuid.UUID(int=0x5AFE)


def _message(lookup: int, body: bytes) -> StoredMessage:
    """A message as the queue manager would store it: identity, times, destination, recoverable."""
    return StoredMessage(QUEUE, lookup, "Available", Message(
        lookup_identifier=lookup, identifier=(SOURCE, lookup), arrival_time=1_700_000_000,
        sent_time=1_700_000_000, delivery_guarantee=DeliveryGuarantee.RECOVERABLE, body=body,
        destination_queue_format_name="DIRECT=OS:bench\\private$\\q", source_machine_identifier=SOURCE))


async def _durable_puts(store: SqliteStore, messages: int, producers: int, body: bytes) -> float:
    """``producers`` coroutines, each: put one message, await durable(), repeat. Returns seconds."""
    next_id = 1

    async def producer() -> None:
        nonlocal next_id
        while next_id <= messages:
            lookup = next_id
            next_id += 1
            store.put_message(_message(lookup, body))
            await store.durable()

    start = time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(producers)))
    return time.perf_counter() - start


def bench_group_commit(root: str, messages: int, producers: int, body_size: int, interval: float,
                       synchronous: str) -> tuple[float, int]:
    store = SqliteStore(os.path.join(root, f"gc-{producers}-{synchronous}"), commit_interval_ms=interval,
                        synchronous=synchronous)
    store.put_queue(StoredQueue(QUEUE, {"pathname": "bench\\private$\\q"}))
    store.flush()
    commits_before = store.commits
    seconds = asyncio.run(_durable_puts(store, messages, producers, b"b" * body_size))
    commits = store.commits - commits_before
    store.close()
    return seconds, commits


def bench_acks(root: str, messages: int, consumers: int, body_size: int, interval: float,
               synchronous: str) -> tuple[float, float, int]:
    """The recoverable receive + ACK as the queue manager records it: ``consumers`` coroutines, each: Lock a stored
    message (note_locked, or set_message_state in a tree without it), yield once (the RECEIVE answered, the ACK on its
    way), delete it, await durable(); then flush() (what is left in the delete journal into the database).
    Returns (seconds, process CPU seconds, commits)."""
    store = SqliteStore(os.path.join(root, f"ack-{consumers}-{synchronous}"), commit_interval_ms=interval,
                        synchronous=synchronous)
    store.put_queue(StoredQueue(QUEUE, {"pathname": "bench\\private$\\q"}))
    body = b"a" * body_size
    for lookup in range(1, messages + 1):
        store.put_message(_message(lookup, body))
    store.flush()
    lookups = iter(range(1, messages + 1))

    lock = getattr(store, "note_locked", None)     # what the queue manager calls (a Locked state is not written)

    async def consumer() -> None:
        for lookup in lookups:
            if lock is not None:
                lock(QUEUE, lookup)
            else:
                store.set_message_state(QUEUE, lookup, "Locked")
            await asyncio.sleep(0)
            store.delete_message(QUEUE, lookup)
            await store.durable()

    async def run() -> None:
        await asyncio.gather(*(consumer() for _ in range(consumers)))

    commits_before = store.commits
    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(run())
    store.flush()               # the deletions the delete journal still holds, moved into the database: timed too
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    commits = store.commits - commits_before
    store.close()
    return seconds, cpu, commits


def bench_load(root: str, count: int, body_size: int) -> tuple[float, float, int]:
    """Write ``count`` messages (batches of 10k), reopen, time load(). Returns (write s, load s, file bytes)."""
    path = os.path.join(root, f"load-{count}")
    store = SqliteStore(path, commit_interval_ms=1000)
    store.put_queue(StoredQueue(QUEUE, {"pathname": "bench\\private$\\q"}))
    body = b"l" * body_size
    start = time.perf_counter()
    for lookup in range(1, count + 1):
        store.put_message(_message(lookup, body))
        if lookup % 10_000 == 0:
            store.flush()
    store.close()
    written = time.perf_counter() - start
    size = os.path.getsize(store.path)
    store = SqliteStore(path)
    start = time.perf_counter()
    snapshot = store.load()
    loaded = time.perf_counter() - start
    store.close()
    assert len(snapshot.messages) == count
    return written, loaded, size


def _synchronous(text: str) -> list[str]:
    """argparse type: comma-separated SqliteStore synchronous settings."""
    modes = [part for part in text.split(",") if part]
    wrong = [mode for mode in modes if mode not in ("NORMAL", "FULL")]
    if wrong:
        raise argparse.ArgumentTypeError(f"{wrong[0]!r} is not NORMAL or FULL")
    return modes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=whole_number, default=20_000, help="durable puts per group-commit run")
    parser.add_argument("--producers", type=whole_numbers, default="1,8,64", help="comma-separated producer counts")
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--interval-ms", type=float, default=10.0, help="SqliteStore commit_interval_ms")
    parser.add_argument("--synchronous", type=_synchronous, default="NORMAL,FULL", help="comma-separated: NORMAL, FULL")
    parser.add_argument("--load-sizes", type=whole_numbers, default="100000,1000000",
                        help="comma-separated message counts; '' skips")
    parser.add_argument("--acks", type=whole_numbers, default="", help="comma-separated consumer counts of the Lock + "
                        "delete + durable() run (the recoverable ACK path); '' skips")
    parser.add_argument("--dir", default=None, help="where to create stores (default: a temp dir, removed)")
    args = parser.parse_args()

    root = args.dir or tempfile.mkdtemp(prefix="bench-store-")
    try:
        if args.producers:
            print(f"durable put_message, {args.body_size}-byte bodies, {args.messages} messages per run")
            print("(1 producer = one commit per message: the baseline group commit is measured against)")
            print(f"{'synchronous':>11} {'producers':>9} {'msgs/s':>10} {'commits':>8} {'msgs/commit':>11}")
        for synchronous in args.synchronous:
            for producers in args.producers:
                # one producer awaiting each put is exactly one commit per message: the baseline
                seconds, commits = bench_group_commit(root, args.messages, producers, args.body_size,
                                                      args.interval_ms, synchronous)
                print(f"{synchronous:>11} {producers:>9} {args.messages / seconds:>10.0f} {commits:>8} "
                      f"{args.messages / max(commits, 1):>11.1f}", flush=True)
        acks = args.acks
        if acks:
            print(f"\nLock + delete + durable(), {args.body_size}-byte bodies, {args.messages} messages per run")
            print(f"{'synchronous':>11} {'consumers':>9} {'msgs/s':>10} {'CPU us/msg':>10} {'commits':>8} "
                  f"{'msgs/commit':>11}")
            for synchronous in args.synchronous:
                for consumers in acks:
                    seconds, cpu, commits = bench_acks(root, args.messages, consumers, args.body_size,
                                                       args.interval_ms, synchronous)
                    print(f"{synchronous:>11} {consumers:>9} {args.messages / seconds:>10.0f} "
                          f"{cpu / args.messages * 1e6:>10.1f} {commits:>8} {args.messages / max(commits, 1):>11.1f}",
                          flush=True)
        sizes = args.load_sizes
        if sizes:
            print(f"\nload(), {args.body_size}-byte bodies")
            print(f"{'messages':>9} {'write s':>8} {'load s':>7} {'msgs/s':>10} {'MiB':>7}")
            for count in sizes:
                written, loaded, size = bench_load(root, count, args.body_size)
                print(f"{count:>9} {written:>8.1f} {loaded:>7.2f} {count / loaded:>10.0f} "
                      f"{size / 2**20:>7.1f}", flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
