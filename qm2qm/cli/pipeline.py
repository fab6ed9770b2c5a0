"""`qm2qm replay | ingest | stats | diff | report | record`: the conformance pipeline commands (docs/pipeline.md)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

import click

from qm2qm.cli._common import seconds_above_zero
from qm2qm.logfmt import printable

MASTER_HELP = ("Spark master (local[*], local-cluster[2,1,1024], spark://host:7077 ...); "
               "default: spark-submit's, else local[*].")


MAX_BUCKET_S = 366 * 86400      # a time bucket of a year; Spark's bucket arithmetic is in int64 microseconds


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"qm2qm: error: {message}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def _spark(master: str | None, conf: dict[str, str] | None = None):
    """A SparkSession for one command; stopped afterwards unless it was already running (embedded use)."""
    from qm2qm.pipeline.spark_jobs import PipelineSetupError, spark_session
    try:
        from pyspark.sql import SparkSession
        existing = SparkSession.getActiveSession()
        spark = spark_session(master, conf=conf)
    except (ImportError, PipelineSetupError):
        _fail("the Spark jobs need PySpark: pip install 'qm2qm[pipeline]'")
    except Exception as exc:        # noqa: BLE001 - a bad --master ends Spark's JVM (PySparkRuntimeError, Py4J)
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _fail(f"cannot start Spark with master {master or 'local[*]'!r}: {why}")
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()


def _check_call_table(path: str) -> None:
    """Refuse a directory that is not ingest output before Spark starts."""
    from qm2qm.pipeline.spark_jobs import call_table_dir
    try:
        call_table_dir(path)
    except ValueError as exc:
        _fail(str(exc))


def _host_port(value: str) -> tuple[str, int]:
    from qm2qm.ready import split_host_port
    address = split_host_port(value)
    if address is None or not 0 < address[1] < 65536:
        _fail(f"--target must be HOST:PORT, got {value!r} (an IPv6 host in brackets: [::1]:2105)")
    return address


def _is_this_host(host: str) -> bool:
    """Whether HOST reaches the address the recorder listens on, 127.0.0.1 (itself, or a wildcard)."""
    import socket
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        return False
    return bool(addresses & {"127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "::"})


def _queue_map(queue_map_file: str | None, pairs: tuple[str, ...]) -> dict[int, str]:
    out: dict[int, str] = {}
    if queue_map_file:
        try:
            data = json.loads(Path(queue_map_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            _fail(f"--queue-map {queue_map_file}: {exc}")
        if not isinstance(data, dict):
            _fail(f"--queue-map {queue_map_file}: expected a JSON object {{\"handle\": \"pathname\"}}")
        for key, value in data.items():
            if not str(key).isdigit() or not isinstance(value, str):
                _fail(f"--queue-map {queue_map_file}: entry {key!r}: expected a handle number and a path name")
            out[int(key)] = value
    for pair in pairs:
        handle, sep, name = pair.partition("=")
        if not sep or not handle.isdigit() or not name:
            _fail(f"--queue expects HANDLE=PATHNAME, got {pair!r}")
        out[int(handle)] = name
    return out


@click.command()
@click.argument("recording", type=click.Path(dir_okay=False))
@click.option("--target", required=True, help="HOST:PORT of the live qm2qm server.")
@click.option("--admin", "admin_url", envvar="QM2QM_ADMIN", help="Admin API URL of the live server (opens the "
              "mapped queues and cursors); `qm2qm serve` prints it.")
@click.option("--queue-map", "queue_map_file", type=click.Path(dir_okay=False),
              help="JSON file {\"recorded hQueue\": \"queue path name\"}; traces carry it, captures need it.")
@click.option("--queue", "queue_pairs", multiple=True, metavar="HANDLE=PATHNAME", help="One mapping (repeatable).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Trace to write (.parquet or .jsonl) [RECORDING.replay.parquet].")
@click.option("--timeout", "call_timeout", type=float, default=30.0, show_default=True, callback=seconds_above_zero,
              help="Seconds to wait for one live answer before recording no_response (more than 0).")
@click.option("--progress/--no-progress", default=None, help="Progress bar [on a terminal].")
def replay(recording, target, admin_url, queue_map_file, queue_pairs, out_path, call_timeout, progress) -> None:
    """Re-issue the client side of RECORDING (pcap, pcapng or trace) against a live server."""
    from qm2qm.pipeline.replay import ReplayError, load_recording, replay as run

    host, port = _host_port(target)
    mapping = _queue_map(queue_map_file, queue_pairs)
    out_path = out_path or str(Path(recording).with_suffix("")) + ".replay.parquet"
    if Path(out_path).resolve() == Path(recording).resolve():
        _fail(f"--out {out_path} is the recording itself; give another file")
    try:
        rows, problems = load_recording(recording)
    except ReplayError as exc:
        _fail(str(exc))
    for message in problems:
        click.echo(f"qm2qm: warning: {message}", err=True)
    admin = None
    if admin_url:
        from qm2qm.client import AdminClient
        admin = AdminClient(admin_url)
    from tqdm import tqdm

    from qm2qm.pipeline.decode import QM2QM_UUID_STR
    total = sum(1 for r in rows if r.get("interface_uuid") == QM2QM_UUID_STR)
    bar = tqdm(total=total, unit="call", disable=not (sys.stderr.isatty() if progress is None else progress))
    try:
        result = asyncio.run(run(rows, host, port, out_path, admin=admin, queue_map=mapping,
                                 call_timeout=call_timeout, on_progress=bar.update))
    except ReplayError as exc:
        _fail(str(exc))
    finally:
        bar.close()
    for message in result.problems:
        click.echo(f"qm2qm: warning: {message}", err=True)
    click.echo(f"replayed {result.sent} of {result.calls} calls ({result.failed} failed, {result.skipped} not "
               f"qm2qm) -> {out_path}")


@click.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--master", default=None, help=MASTER_HELP)
def ingest(inputs, out_dir, master) -> None:
    """Ingest captures and traces (files or directories) into OUT/calls, OUT/sessions, OUT/problems."""
    from qm2qm.pipeline.spark_jobs import INGEST_CONF, ingest as run

    with _spark(master, INGEST_CONF) as spark:
        summary = run(spark, inputs, out_dir)
    totals = summary["totals"]
    click.echo(f"{summary['files']} file(s): {totals.get('calls', 0)} calls, {totals.get('rpc_sessions', 0)} capture "
               f"sessions, {len(summary['problems'])} problem(s) -> {out_dir} (master {summary['master']}, "
               f"{summary['executors']} executor JVM(s))")
    for p in summary["problems"]:
        click.echo(f"qm2qm: problem: [{p['kind']}] {p['message']}", err=True)


@click.command()
@click.argument("calls")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--bucket", "bucket_seconds", type=click.IntRange(1, MAX_BUCKET_S), default=60, show_default=True,
              help="Seconds per time bucket (at most a year).")
@click.option("--master", default=None, help=MASTER_HELP)
def stats(calls, out_dir, bucket_seconds, master) -> None:
    """Per-opnum calls, status codes, latency percentiles and bytes of a call table (ingest output or trace)."""
    from qm2qm.pipeline.spark_jobs import stats as run

    _check_call_table(calls)
    with _spark(master) as spark:
        try:
            result = run(spark, calls, out_dir, bucket_seconds)
        except ValueError as exc:
            _fail(str(exc))
    click.echo(f"{'OPNUM':<6}{'NAME':<32}{'CALLS':>8}{'FAULTS':>8}{'ERRORS':>8}{'P50ms':>9}{'P99ms':>9}")
    for r in result["by_opnum"]:
        click.echo(f"{r['opnum']!s:<6}{printable(r['op_name'] or '?'):<32}{r['calls']:>8}{r['faults'] or 0:>8}"
                   f"{r['errors'] or 0:>8}"
                   f"{(r['latency_p50_ms'] or 0):>9.3f}{(r['latency_p99_ms'] or 0):>9.3f}")


@click.command()
@click.argument("left")
@click.argument("right")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the HTML report here.")
@click.option("--master", default=None, help=MASTER_HELP)
def diff(left, right, out_dir, report_path, master) -> None:
    """Conformance diff of two call tables; exit status 1 when they differ."""
    from qm2qm.pipeline.spark_jobs import diff as run

    _check_call_table(left)
    _check_call_table(right)
    with _spark(master) as spark:
        try:
            summary = run(spark, left, right, out_dir)
        except ValueError as exc:
            _fail(str(exc))
    if report_path:
        from qm2qm.pipeline.report import build_report
        try:
            build_report(report_path, diff_dir=out_dir)
        except OSError as exc:
            _fail(f"cannot write {report_path}: {exc.strerror or exc}")
    click.echo(f"{summary['mismatches']} mismatch(es) over {summary['aligned_calls']} aligned calls -> {out_dir}")
    for m in summary["first"][:20]:
        # a trace's op_name is the trace writer's text: escaped, as the other commands print names (printable)
        click.echo(printable(f"  session {m['session_seq']} call {m['call_index']} {m['op_name']}: {m['kind']} "
                             f"{m['field']}: {m['left']} != {m['right']}"))
    sys.exit(1 if summary["mismatches"] else 0)


@click.command()
@click.option("--stats", "stats_dir", type=click.Path(file_okay=False, exists=True), help="A `qm2qm stats` output.")
@click.option("--diff", "diff_dir", type=click.Path(file_okay=False, exists=True), help="A `qm2qm diff` output.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="HTML file to write.")
def report(stats_dir, diff_dir, out_path) -> None:
    """One HTML page with plots of a stats and/or diff output."""
    from qm2qm.pipeline.report import ReportError, build_report

    if not stats_dir and not diff_dir:
        _fail("give --stats DIR, --diff DIR or both")
    try:
        page = build_report(out_path, stats_dir=stats_dir, diff_dir=diff_dir)
    except ReportError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write {out_path}: {exc.strerror or exc}")
    click.echo(str(page))


@click.command()
@click.option("--target", required=True, help="HOST:PORT to forward to.")
@click.option("--listen", "listen_port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Local port (0 = ephemeral).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help=".pcap or .pcapng to write.")
def record(target, listen_port, out_path) -> None:
    """Forward 127.0.0.1:LISTEN to TARGET and record both directions as a capture until Ctrl-C (or SIGTERM,
    SIGHUP)."""
    import signal
    import threading

    from qm2qm.pipeline.recorder import PcapSink, RecordingProxy

    host, port = _host_port(target)
    try:
        sink = PcapSink(out_path, pcapng=out_path.lower().endswith(".pcapng"))
    except OSError as exc:
        _fail(f"cannot write {out_path}: {exc.strerror or exc}")
    try:
        proxy = RecordingProxy((host, port), sink, listen_port=listen_port)
    except OSError as exc:
        sink.close()
        _fail(f"cannot listen on 127.0.0.1:{listen_port}: {exc.strerror or exc}")
    if port == proxy.port and _is_this_host(host):
        proxy.close()
        sink.close()
        _fail(f"--target {target} is this recorder's own listening address: it would forward to itself")
    click.echo(f"recording 127.0.0.1:{proxy.port} -> {host}:{port} into {out_path}")
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    proxy.close()
    sink.close()
    click.echo(f"{sink.frames} frames written")


pipeline_commands = [replay, ingest, stats, diff, report, record]

# `python -m qm2qm.cli.pipeline ...` runs these commands on their own (e.g. under spark-submit).
main = click.Group(name="qm2qm-pipeline", commands={c.name: c for c in pipeline_commands},
                   help="qm2qm conformance pipeline commands (docs/pipeline.md).")

if __name__ == "__main__":
    main()
