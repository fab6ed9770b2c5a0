"""Repeated Spark ingest jobs on one warm session, each job's wall time and CPU seconds by process kind (driver
Python, JVMs, Python daemon and workers): the figures behind the interleaved before/after pairs in BENCHMARKS.md.

    PYTHONPATH=$TREE .venv/bin/python scripts/bench_ingest_jobs.py 'local[2]' /abs/a.pcap,/abs/b.pcap [jobs]

(absolute paths: local-cluster executors run in their own working directories)."""
from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from pathlib import Path


def cpu_by_kind() -> collections.Counter:
    """CPU seconds of this process and its descendants, summed by kind: driver, jvm, daemon (PySpark workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu, kind = {}, {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields, pid = stat[stat.rindex(")") + 2:].split(), int(entry)
        parent[pid], cpu[pid] = int(fields[1]), sum(int(x) for x in fields[11:15]) / tick
        kind[pid] = ("driver" if pid == os.getpid() else "jvm" if b"java" in cmd else
                     "daemon" if b"pyspark.daemon" in cmd else "other")
    tree, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier and p not in tree]
        tree.update(frontier)
    out: collections.Counter = collections.Counter()
    for pid in tree:
        out[kind[pid]] += cpu[pid]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("master", help="Spark master, e.g. 'local[2]' or 'local-cluster[2,1,1024]'")
    parser.add_argument("paths", help="comma-separated absolute paths of the captures or traces ingested per job")
    parser.add_argument("jobs", nargs="?", type=int, default=4, help="timed jobs after the warm-up one")
    args = parser.parse_args()
    paths = args.paths.split(",")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    if args.jobs < 1:
        parser.error("jobs must be at least 1")
    from qm2qm.pipeline import spark_jobs
    spark = spark_jobs.spark_session(args.master, conf=spark_jobs.INGEST_CONF)
    with tempfile.TemporaryDirectory() as tmp:
        spark_jobs.ingest(spark, paths[:1], Path(tmp) / "warmup", split_min_bytes=1)    # as the bench warms up
        for _ in range(args.jobs):
            before, t0 = cpu_by_kind(), time.perf_counter()
            summary = spark_jobs.ingest(spark, paths, Path(tmp) / "out")
            wall, after = time.perf_counter() - t0, cpu_by_kind()
            print(json.dumps({"wall": round(wall, 3), "cpu": round(sum(after.values()) - sum(before.values()), 2),
                              **{k: round(after[k] - before[k], 2) for k in after},
                              "calls": summary["totals"].get("calls", 0)}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
