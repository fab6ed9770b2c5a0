#!/usr/bin/env python3
"""Restart of a SQLite store of N recoverable messages (MS-MQDMPR 3.1.3 Initialization): time and peak memory.

Builds the store once through a QueueManager (recoverable 100-byte messages in one queue), then in a fresh
process opens it and runs QueueManager.initialize(), reporting the wall time, the peak RSS (ru_maxrss) and the
steady RSS after the load (VmRSS after a full collection). Targets (issue 13): 1,000,000 messages in <= 5 s with
peak <= 1.5 x steady. A benchmark, not a test.

    .venv/bin/python scripts/bench_restart.py --messages 1000000
    .venv/bin/python scripts/bench_restart.py --messages 1000000 --dir /tmp/store1m --keep   # reuse the store
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def rss_mib() -> float:
    """This process's resident set now (VmRSS)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build(path: str, messages: int, body_size: int) -> float:
    """A store with ``messages`` recoverable messages in one private queue; seconds taken."""
    from shared_adm.clock import ManualScheduler
    from shared_adm.message import DeliveryGuarantee, Message
    from shared_adm.queue_manager import QueueManager
    from shared_adm.store import SqliteStore
    start = time.perf_counter()
    store = SqliteStore(path, commit_interval_ms=1000)
    qm = QueueManager(store=store, scheduler=ManualScheduler(), queue_manager_quota_kb=1 << 40)
    qm.initialize()
    queue = qm.create_queue(r".\private$\restart")[1]
    body = b"r" * body_size
    for i in range(messages):
        qm.enqueue_message(queue, Message(body=body, label="restart", priority=i % 8,
                                          delivery_guarantee=DeliveryGuarantee.RECOVERABLE))
        if i % 50_000 == 49_999:
            store.flush()
            print(f"  built {i + 1}", file=sys.stderr, flush=True)
    store.close()
    return time.perf_counter() - start


def restart(path: str) -> dict:
    """In this (fresh) process: open the store and initialize a QueueManager from it."""
    import gc
    from shared_adm.clock import ManualScheduler
    from shared_adm.queue_manager import QueueManager
    from shared_adm.store import SqliteStore
    before = rss_mib()
    cpu = time.process_time()
    start = time.perf_counter()
    store = SqliteStore(path)
    qm = QueueManager(store=store, scheduler=ManualScheduler(), queue_manager_quota_kb=1 << 40)
    qm.initialize()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    queue = qm.queue_by_pathname(r".\private$\restart")
    count = len(queue.message_position_list) if queue else 0
    gc.collect()
    steady = rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store.close()
    return {"messages": count, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "rss_before_mib": round(before, 1),
            "steady_rss_mib": round(steady, 1), "peak_rss_mib": round(peak, 1),
            "peak_over_steady": round(peak / steady, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--dir", help="store directory (default: a temp dir); an existing store is reused")
    parser.add_argument("--keep", action="store_true", help="keep the store directory")
    parser.add_argument("--repeat", type=int, default=3, help="restarts (each in a fresh process)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(restart(args.child)))
        return
    root = args.dir or tempfile.mkdtemp(prefix="bench-restart-")
    path = os.path.join(root, "qm2qm.sqlite3")
    try:
        print(f"cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}", flush=True)
        if not os.path.exists(path):
            print(f"building {args.messages} recoverable {args.body_size}-byte messages: "
                  f"{build(path, args.messages, args.body_size):.1f} s", flush=True)
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--child", path], capture_output=True, text=True,
                                 check=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            r = runs[-1]
            print(f"restart of {r['messages']} messages: {r['seconds']:.2f} s ({r['cpu_seconds']:.2f} s CPU); RSS before {r['rss_before_mib']:.0f} "
                  f"MiB, steady {r['steady_rss_mib']:.0f} MiB, peak {r['peak_rss_mib']:.0f} MiB "
                  f"(peak/steady {r['peak_over_steady']:.2f})", flush=True)
        print(f"loadavg end {os.getloadavg()[0]:.2f}; file {os.path.getsize(path) / 2**20:.0f} MiB")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"command": " ".join(sys.argv), "loadavg": os.getloadavg(), "runs": runs}, fh, indent=1)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
