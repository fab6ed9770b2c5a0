"""The ingest job on Spark's local-cluster master: two worker JVMs whose executors run the Python tasks in their
own processes, so the job cannot depend on state of the driver process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from qm2qm.pipeline.ingest import ingest_file

REPO = Path(__file__).resolve().parents[2]
# A hang guard for the subprocess, not a speed assertion.
HANG_GUARD_S = 600


def _worker_dirs() -> set[Path]:
    """local-cluster workers log under $SPARK_HOME/work (not configurable for this master)."""
    import pyspark
    work = Path(pyspark.__file__).parent / "work"
    return set(work.glob("app-*")) if work.is_dir() else set()


def test_ingest_job_runs_on_local_cluster_executors(recorded, tmp_path):
    before = _worker_dirs()
    try:
        _run_on_local_cluster(recorded, tmp_path)
    finally:
        import shutil
        for leftover in _worker_dirs() - before:
            shutil.rmtree(leftover, ignore_errors=True)


def _run_on_local_cluster(recorded, tmp_path):
    path, _ = recorded
    second = tmp_path / "copy.pcap"
    second.write_bytes(path.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "qm2qm.cli.pipeline", "ingest", str(path), str(second),
                           "--out", str(out), "--master", "local-cluster[2,1,1024]"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 file(s): 26 calls, 4 capture sessions, 0 problem(s)" in proc.stdout
    calls = pq.read_table(out / "calls").to_pylist()
    expected = ingest_file(path).calls
    for source in (str(path), str(second)):
        got = sorted((c for c in calls if c["source_file"] == source), key=lambda c: (c["session_seq"],
                                                                                     c["call_index"]))
        assert [(c["op_name"], c["hresult"], c["request_stub"], c["response_stub"]) for c in got] == \
               [(c["op_name"], c["hresult"], c["request_stub"], c["response_stub"]) for c in expected]
    # the tasks ran in two executor JVMs launched by the local-cluster workers, not in the driver
    assert "(master local-cluster[2,1,1024], 2 executor JVM(s))" in proc.stdout
