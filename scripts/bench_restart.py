#!/usr/bin/env python3
"""Restart of a SQLite store of N recoverable messages (MS-MQDMPR 3.1.3 Initialization): time and peak memory.

Builds the store once through `qm2qm serve` and its admin API (recoverable 100-byte messages in one queue, sent
with ``count``: each has its own identity, times and destination, as a user's would), then restarts it twice
over: (1) a fresh process opens the store and runs QueueManager.initialize() — wall and CPU time, peak RSS
(ru_maxrss), steady RSS (VmRSS after a full collection); (2) `qm2qm serve` itself — time from spawn to its ready
line, peak (VmHWM) and steady (VmRSS) memory of the server process. A store of an older schema (e.g. one built
by a version with schema 1) is first upgraded once in a fresh process, timed on its own. Targets (issue 13):
1,000,000 messages in <= 5 s with peak <= 1.5 x steady. A benchmark, not a test.

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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proc_cpu import status_kib  # noqa: E402


def rss_mib() -> float:
    """This process's resident set now (VmRSS)."""
    return proc_status_mib(os.getpid(), "VmRSS")


def build(data_dir: str, messages: int, body_size: int) -> float:
    """A store with ``messages`` recoverable messages in one private queue, sent through the admin API."""
    import base64
    start = time.perf_counter()
    server = start_server(data_dir)
    try:
        server.admin.create_queue(QUEUE)
        body = base64.b64encode(b"r" * body_size).decode()
        for done in range(0, messages, 100_000):
            server.admin.send(QUEUE, body_base64=body, count=min(100_000, messages - done), delivery="recoverable",
                              label="restart")
            print(f"  built {done + min(100_000, messages - done)}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return time.perf_counter() - start


QUEUE = r".\private$\restart"


class _Server:
    def __init__(self, proc, admin_url: str) -> None:
        from qm2qm.client import AdminClient
        self.proc = proc
        self.admin = AdminClient(admin_url, timeout=600)

    def stop(self) -> None:
        import signal
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=600)


def start_server(data_dir: str) -> _Server:
    """`qm2qm serve` on ephemeral ports; returns once it printed its ready line."""
    proc = subprocess.Popen([sys.executable, "-m", "qm2qm", "serve", "--data-dir", data_dir, "--port", "0",
                             "--admin-port", "0", "--epm-port", "0"], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)   # not the caller's checkout (-m)
    line = proc.stdout.readline()
    if "admin=" not in line:
        proc.kill()
        raise SystemExit(f"qm2qm serve did not start: {line!r}")
    return _Server(proc, line.split("admin=")[1].split()[0])


def proc_status_mib(pid: int, key: str) -> float:
    kib = status_kib(pid, key)
    return float("nan") if kib is None else kib / 1024


def restart_server(data_dir: str) -> dict:
    """`qm2qm serve` on the store: seconds to the ready line, peak and steady memory."""
    start = time.perf_counter()
    server = start_server(data_dir)
    seconds = time.perf_counter() - start
    try:
        count = server.admin.show_queue(QUEUE).get("messages")
        time.sleep(1.0)
        steady = proc_status_mib(server.proc.pid, "VmRSS")
        peak = proc_status_mib(server.proc.pid, "VmHWM")
    finally:
        server.stop()
    return {"messages": count, "seconds": round(seconds, 3), "steady_rss_mib": round(steady, 1),
            "peak_rss_mib": round(peak, 1), "peak_over_steady": round(peak / steady, 3)}


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
    queue = qm.queue_by_pathname(QUEUE)
    count = len(queue.message_position_list) if queue else 0
    gc.collect()
    steady = rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store.close()
    return {"messages": count, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "rss_before_mib": round(before, 1),
            "steady_rss_mib": round(steady, 1), "peak_rss_mib": round(peak, 1),
            "peak_over_steady": round(peak / steady, 3)}


def upgrade(path: str) -> dict:
    """In this (fresh) process: open a store of an older schema, which upgrades it in place (SqliteStore)."""
    from shared_adm.store import SqliteStore
    cpu = time.process_time()
    start = time.perf_counter()
    SqliteStore(path).close()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "file_mib": round(os.path.getsize(path) / 2**20, 1)}


def schema_version(path: str) -> int:
    import contextlib
    import sqlite3
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT version FROM schema_version").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--dir", help="store directory (default: a temp dir); an existing store is reused")
    parser.add_argument("--keep", action="store_true", help="keep the store directory")
    parser.add_argument("--repeat", type=int, default=3, help="restarts (each in a fresh process)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-upgrade", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(restart(args.child)))
        return
    if args.child_upgrade:
        print(json.dumps(upgrade(args.child_upgrade)))
        return
    root = args.dir or tempfile.mkdtemp(prefix="bench-restart-")
    data_dir = os.path.join(root, "data")
    path = os.path.join(data_dir, "qm2qm.sqlite3")
    try:
        print(f"cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}", flush=True)
        if not os.path.exists(path):
            print(f"building {args.messages} recoverable {args.body_size}-byte messages: "
                  f"{build(data_dir, args.messages, args.body_size):.1f} s", flush=True)
        from shared_adm.store.sqlite import SCHEMA_VERSION
        upgraded = None
        version = schema_version(path)
        if version < SCHEMA_VERSION:
            out = subprocess.run([sys.executable, __file__, "--child-upgrade", path], capture_output=True, text=True,
                                 check=True).stdout
            upgraded = {"from_schema": version, **json.loads(out.strip().splitlines()[-1])}
            print(f"upgrade of the store from schema {version} to {SCHEMA_VERSION} (once): {upgraded['seconds']:.2f} s "
                  f"({upgraded['cpu_seconds']:.2f} s CPU), peak RSS {upgraded['peak_rss_mib']:.0f} MiB, file now "
                  f"{upgraded['file_mib']:.0f} MiB", flush=True)
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--child", path], capture_output=True, text=True,
                                 check=True).stdout
            runs.append({"loadavg_start": os.getloadavg(), **json.loads(out.strip().splitlines()[-1])})
            r = runs[-1]
            print(f"restart of {r['messages']} messages: {r['seconds']:.2f} s ({r['cpu_seconds']:.2f} s CPU); RSS before {r['rss_before_mib']:.0f} "
                  f"MiB, steady {r['steady_rss_mib']:.0f} MiB, peak {r['peak_rss_mib']:.0f} MiB "
                  f"(peak/steady {r['peak_over_steady']:.2f})", flush=True)
            r = restart_server(data_dir)
            runs[-1]["serve"] = r
            print(f"  qm2qm serve on it: ready after {r['seconds']:.2f} s, {r['messages']} messages; RSS steady "
                  f"{r['steady_rss_mib']:.0f} MiB, peak {r['peak_rss_mib']:.0f} MiB "
                  f"(peak/steady {r['peak_over_steady']:.2f})", flush=True)
        print(f"loadavg end {os.getloadavg()[0]:.2f}; file {os.path.getsize(path) / 2**20:.0f} MiB")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"command": " ".join(sys.argv), "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                           "schema_version": SCHEMA_VERSION, "upgrade": upgraded, "runs": runs}, fh, indent=1)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
