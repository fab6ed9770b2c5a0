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


def _worker_dirs(driver_pid: int) -> set[Path]:
    """The work dirs of the local-cluster apps a driver process started: its executors hold the code zip named after
    its pid (spark_jobs._code_zip). Workers log under $SPARK_HOME/work (not configurable for this master), shared by
    every Spark run on the machine: removing every app dir that appeared during the test removed other runs'
    executors' working directories under them."""
    import pyspark
    work = Path(pyspark.__file__).parent / "work"
    return {app for app in work.glob("app-*") if any(app.glob(f"*/qm2qm-pyfiles-{driver_pid}.zip"))}


def test_ingest_job_runs_on_local_cluster_executors(recorded, tmp_path):
    pids: list[int] = []
    try:
        _run_on_local_cluster(recorded, tmp_path, pids)
    finally:
        import shutil
        for leftover in (_worker_dirs(pids[0]) if pids else ()):
            shutil.rmtree(leftover, ignore_errors=True)


def _run_on_local_cluster(recorded, tmp_path, pids):
    path, _ = recorded
    second = tmp_path / "copy.pcap"
    second.write_bytes(path.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "out"
    with subprocess.Popen([sys.executable, "-m", "qm2qm.cli.pipeline", "ingest", str(path), str(second),
                           "--out", str(out), "--master", "local-cluster[2,1,1024]"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp_path)) as popen:
        pids.append(popen.pid)
        try:
            stdout, stderr = popen.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            raise
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, stdout, stderr)
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
