"""The runnable tools of scripts/ (benchmarks, load generators) run to the end on tiny inputs and print or write the
figures they promise: a script nobody runs in CI rots (bench_metrics.py kept calling run_load with tuples after
run_load took ConnSpecs).
Sizes here are far too small for the figures to mean anything; BENCHMARKS.md has the real runs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def run_script_process(name: str, *args: str, cwd: Path, timeout: float) -> tuple[int, str, str]:
    """Run scripts/<name> with this Python from ``cwd``: (exit status, stdout, stderr); a hang guard of ``timeout``
    seconds fails the test."""
    # a session of its own: a script that hangs is killed with the servers and load processes it started
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / name), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{name} {args} still running after {timeout} s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    return proc.returncode, stdout, stderr


def run_script(name: str, *args: str, cwd: Path, timeout: float = 240) -> str:
    """Run scripts/<name> with this Python from ``cwd`` (outside the checkout, as the Spark A/Bs must); its stdout,
    after checking it exited 0."""
    returncode, stdout, stderr = run_script_process(name, *args, cwd=cwd, timeout=timeout)
    assert returncode == 0, f"{name} exited {returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return stdout


@pytest.mark.slow
def test_bench_keeps_the_best_of_repeat_runs_for_every_ratio_scenario_as_for_echo(tmp_path):
    out = tmp_path / "bench.json"
    scenarios = ["floor", "peek-memo", "receive-express", "receive-cursor", "mqrr-receive", "session"]
    run_script("bench.py", *(a for s in scenarios for a in ("--only", s)), "--loop", "asyncio", "--clients", "2",
               "--duration", "0.3", "--repeat", "2", "--receive-messages", "1500", "--json", str(out), cwd=tmp_path)
    rows = json.loads(out.read_text())["rows"]
    assert sorted({r["scenario"] for r in rows}) == sorted(scenarios)
    for row in rows:
        assert row["errors"] == 0, row
        assert len(row["runs"]) == 2, row                  # each scenario ran as often as its echo baseline
        assert abs(row["rate"] - max(row["runs"])) <= 1, row  # and kept its best run (runs are rounded)
        assert 0 < row["ratio"] and row["echo_calls_per_s"] > 0, row


@pytest.mark.slow
def test_bench_echo_per_scenario_measures_the_baseline_beside_each_scenario(tmp_path):
    out = tmp_path / "bench.json"
    stdout = run_script("bench.py", "--only", "floor", "--only", "peek-memo", "--loop", "asyncio", "--clients", "2",
                        "--duration", "0.3", "--repeat", "1", "--echo-per-scenario", "--json", str(out), cwd=tmp_path)
    assert stdout.count("echo  2 clients on asyncio") == 2, stdout      # one echo per scenario, not one per run
    rows = json.loads(out.read_text())["rows"]
    assert [r["scenario"] for r in rows] == ["floor", "peek-memo"] and all(r["ratio"] > 0 for r in rows)


@pytest.mark.slow
def test_bench_session_cursor_counts_a_queue_emptied_at_a_session_boundary_as_the_end_not_an_error(tmp_path):
    # 200 messages per client, 10 per session: each client's queue runs out just as a session ends, so its next
    # session's first read (the cursor's PEEK_CURRENT) meets the empty queue
    out = tmp_path / "bench.json"
    run_script("bench.py", "--only", "session-cursor", "--loop", "asyncio", "--clients", "2", "--duration", "5",
               "--repeat", "1", "--receive-messages", "400", "--session-receives", "10", "--json", str(out),
               cwd=tmp_path)
    [row] = json.loads(out.read_text())["rows"]
    assert row["messages"] == 400, row                  # drained: the case this test is about happened
    assert row["errors"] == 0, row


def test_bench_large_reports_per_read_the_cpu_of_the_server_and_of_the_client(tmp_path):
    out = tmp_path / "bench.json"
    run_script("bench.py", "--only", "large", "--loop", "asyncio", "--large-repeats", "3", "--json", str(out),
               cwd=tmp_path)
    rows = json.loads(out.read_text())["rows"]
    assert sorted(r["kind"] for r in rows) == ["peek", "receive"]
    for row in rows:
        assert row["n"] == 3 and len(row["server_cpu_ms"]) == len(row["client_cpu_ms"]) == 3, row
        # serializing and fragmenting 4 MiB takes the server a measurable time per read, and reassembling it the
        # client (the server's clock is read by clock id: a /proc tick count would read 0 for most reads)
        assert all(c >= 0.1 for c in row["server_cpu_ms"]), row
        assert all(c >= 0.1 for c in row["client_cpu_ms"]), row


@pytest.mark.slow
def test_bench_metrics_compares_a_baseline_tree_with_this_one(tmp_path):
    text = run_script("bench_metrics.py", "--baseline", "HEAD", "--clients", "1", "--duration", "0.3",
                      "--repeat", "1", cwd=tmp_path)
    assert "best calls/s: before" in text and "after, metrics off" in text, text


def test_bench_dispatch_measures_peeks_and_receives_without_sockets(tmp_path):
    for scenario in ("peek-next", "receive-ack"):
        text = run_script("bench_dispatch.py", "--scenario", scenario, "--calls", "100", "--rounds", "2",
                          cwd=tmp_path)
        assert f"{scenario}:  observer off" in text and "µs/call" in text, text


def test_bench_adm_store_restart_packet_and_rpc_run_to_the_end(tmp_path):
    assert "durable enqueue" in run_script("bench_adm.py", "--sizes", "100", "--ops", "50", "--mem-n", "0",
                                           "--durable-n", "50", cwd=tmp_path)
    assert "msgs/s" in run_script("bench_store.py", "--messages", "200", "--load-sizes", "500", "--acks", "1",
                                  cwd=tmp_path)
    assert "restart of 500 messages" in run_script("bench_restart.py", "--messages", "500", "--repeat", "1",
                                                   cwd=tmp_path)
    assert "serialize_compact" in run_script("bench_packet.py", cwd=tmp_path)
    assert "in-process, no sockets" in run_script("bench_rpc.py", "--clients", "1", "--duration", "0.2",
                                                  "--rounds", "1", "--no-impacket", cwd=tmp_path)


def test_bench_churn_samples_the_servers_memory_and_finds_every_cycle_leaving_the_queue_empty(tmp_path):
    out = tmp_path / "churn.json"
    text = run_script("bench_churn.py", "--cycles", "2", "--warm", "1", "--every", "1", "--json", str(out),
                      cwd=tmp_path)
    assert "RSS growth" in text and "bytes a cycle" in text, text
    result = json.loads(out.read_text())
    assert [s["cycle"] for s in result["samples"]] == [1, 2, 3]
    assert all(s["queued"] == 0 and s["rss_kib"] > 0 for s in result["samples"])
    # every cycle: one wrong password refused; R_QMGetRemoteQueueName and three transaction opnums refused
    assert result["counts"] == {"cycles": 3, "refused_logons": 3, "refused_calls": 12}
    assert result["server_exit"] == 0 and result["failure"] is None and "bytes_per_cycle" in result


def test_bench_churn_names_a_bad_argument():
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_churn.py"), "--every", "0"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--every must be at least 1" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_bench_pipeline_and_the_ingest_job_harness_run_spark_on_a_small_capture(tmp_path):
    out = tmp_path / "pipeline.json"
    text = run_script("bench_pipeline.py", "--skip-tshark", "--masters", "local[1]", "--seconds", "0.3",
                      "--big-calls", "1000", "--calls-per-file", "300", "--files", "2", "--rounds", "1",
                      "--reference-runs", "1", "--spark-runs", "1", "--json", str(out), cwd=tmp_path)
    assert "trace overhead" in text and "spark ingest local[1]" in text, text
    assert json.loads(out.read_text())
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_pipeline
    finally:
        sys.path.remove(str(SCRIPTS))
    capture = tmp_path / "small.pcap"
    bench_pipeline.make_capture(capture, 300, sessions=3)
    lines = run_script("bench_ingest_jobs.py", "local[1]", str(capture), "1", cwd=tmp_path).strip().splitlines()
    job = json.loads(lines[-1])
    assert job["calls"] == 300 and job["wall"] > 0 and job["cpu"] > 0, job


def _bench_pipeline():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_pipeline
    finally:
        sys.path.remove(str(SCRIPTS))
    return bench_pipeline


def test_bench_pipeline_re_measures_a_reference_that_disagrees_with_the_other_workloads():
    bench_pipeline = _bench_pipeline()

    def runs(*rates, calls=20_000):                 # (wall s, cpu s, calls, …), fastest first as measured
        return sorted(((calls / r, calls / r, calls, 0.0, 0.0) for r in rates), key=lambda run: run[0])

    measured = []

    def measure(name):
        measured.append(name)
        return (20_000 / 17_000, 1.0, 20_000, 0.0, 0.0)   # the machine quiet again: 17,000 calls/s

    references = {"4 x 20000": runs(16_849, 10_171, 10_000), "4 x 100000": runs(18_056, 17_741, 17_734),
                  "1 x 100000": runs(18_026, 17_943, 17_481)}
    agreed, again = bench_pipeline.agreed_references(references, measure, 3)
    assert again == ["4 x 20000"] and measured == ["4 x 20000"] * 3
    assert len(agreed["4 x 20000"]) == 6 and agreed["4 x 100000"] == references["4 x 100000"]
    median = agreed["4 x 20000"][len(agreed["4 x 20000"]) // 2]
    assert round(median[2] / median[0]) == 16_849            # the median of six, no longer the slow 10,171

    alone = {"1 x 100000": runs(10_000, 9_000, 8_000)}
    assert bench_pipeline.agreed_references(alone, measure, 3) == (alone, [])
    close = {"a": runs(17_000, 16_500, 16_000), "b": runs(18_000, 17_500, 17_900)}
    assert bench_pipeline.agreed_references(close, measure, 3) == (close, [])
    assert measured == ["4 x 20000"] * 3


@pytest.mark.parametrize("args, says", [
    ((), "the following arguments are required: master, paths"),
    (("local[1]", "/no/such.pcap"), "no such file: /no/such.pcap"),
])
def test_bench_ingest_jobs_names_what_is_wrong_with_its_arguments(tmp_path, args, says):
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_ingest_jobs.py"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
