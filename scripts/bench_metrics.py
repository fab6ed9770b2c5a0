#!/usr/bin/env python3
"""The cost of the metrics observer on the hot path: scripts/bench.py's peek scenario against the server of a
baseline git ref (before) and of this tree (after, metrics on; and metrics = false), interleaved in one run.

    .venv/bin/python scripts/bench_metrics.py --baseline fadd417 --clients 1 4 --duration 3 --repeat 3

Each server is a `qm2qm serve` subprocess of its own tree (PYTHONPATH) on a fresh data directory; the load
generator is bench.py's (one connection and one remote-read handle per client, closed loop). Best of
``--repeat`` runs per variant is kept, as bench.py does on a shared machine, for calls/s and for the server's
CPU time per call (the steadier figure when other processes compete for the cores).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import io

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import bench  # noqa: E402  (scripts/bench.py: PDUs, load generator)


class TreeServer(bench.Server):
    """bench.Server, run from another source tree."""

    def __init__(self, root: str, *extra: str) -> None:   # noqa: D401  (replaces bench.Server.__init__)
        from qm2qm.client import AdminClient
        self.tmp = tempfile.TemporaryDirectory(prefix="qm2qm-bench-metrics-")
        env = dict(os.environ, PYTHONPATH=root)
        self.proc = subprocess.Popen([sys.executable, "-m", "qm2qm", "serve", "--data-dir", self.tmp.name + "/data",
                                      "--port", "0", "--admin-port", "0", "--epm-port", "0", *extra],
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=self.tmp.name)
        line = self.proc.stdout.readline().strip()
        match = bench.READY.match(line)
        if not match:
            raise SystemExit(f"qm2qm serve ({root}) did not start: {line!r}")
        self.port = int(match["port"])
        self.admin = AdminClient(match["admin"], timeout=120)


def export_tree(ref: str, into: str) -> str:
    """`git archive ref` unpacked into a directory; returns it."""
    data = subprocess.run(["git", "-C", ROOT, "archive", ref], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def peek_rate(server: TreeServer, queue: str, clients: int, duration: float, processes: int) -> tuple[float, float]:
    """(calls/s, server CPU µs per call) of one closed-loop peek run."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    specs = []
    for _ in range(clients):
        h = server.admin.open_queue(queue, access="peek")["hRemoteQueue"]
        specs.append(bench.ConnSpec([bench.request_pdu(9, bench.start_receive2_stub(h, MQ_ACTION_PEEK_CURRENT))],
                                    handles=[h]))
    result = bench.run_load(server.port, specs, duration, processes, server.proc.pid)
    if result["errors"]:
        raise SystemExit(f"{result['errors']} peeks did not return MQ_OK")
    return result["rate"], result["cpu_us_per_call"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="fadd417", help="git ref of the 'before' server")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    print(f"cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} baseline={args.baseline}", flush=True)
    with tempfile.TemporaryDirectory(prefix="qm2qm-baseline-") as tree:
        export_tree(args.baseline, tree)
        servers = {"before": TreeServer(tree), "after": TreeServer(ROOT),
                   "after, metrics off": TreeServer(ROOT, "--no-metrics")}
        try:
            queues = {name: s.queue("peek", bytes(range(100)), 1) for name, s in servers.items()}
            for clients in args.clients:
                rates: dict[str, list[float]] = {name: [] for name in servers}
                cpus: dict[str, list[float]] = {name: [] for name in servers}
                for _ in range(args.repeat):
                    for name, server in servers.items():
                        rate, cpu = peek_rate(server, queues[name], clients, args.duration, args.processes)
                        rates[name].append(rate)
                        cpus[name].append(cpu)
                best = {name: max(r) for name, r in rates.items()}
                least = {name: min(c) for name, c in cpus.items()}
                change = (best["after"] / best["before"] - 1) * 100
                cpu_change = (least["after"] / least["before"] - 1) * 100
                print(f"  peek {clients:2d} clients, best calls/s: " + "  ".join(
                    f"{name} {rate:7.0f}" for name, rate in best.items()) + f"  after vs before {change:+.1f}%",
                    flush=True)
                print(f"  peek {clients:2d} clients, least server CPU µs/call: " + "  ".join(
                    f"{name} {cpu:6.1f}" for name, cpu in least.items()) + f"  after vs before {cpu_change:+.1f}%",
                    flush=True)
                print("    runs: " + "; ".join(f"{n} {' '.join(f'{x:.0f}' for x in r)}" for n, r in rates.items()),
                      flush=True)
        finally:
            for server in servers.values():
                server.proc.send_signal(signal.SIGINT)
                server.proc.wait(timeout=60)
                server.tmp.cleanup()


if __name__ == "__main__":
    main()
