"""PySpark jobs over call tables (docs/pipeline.md): ingest many captures/traces in parallel, per-opnum stats,
and the conformance diff of two call tables. Runs embedded (local[*]) or on any cluster via --master/spark-submit."""
from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa

from qm2qm.pipeline import schema

REPO = Path(__file__).resolve().parents[2]
SHIPPED_PACKAGES = ("qm2qm", "shared_adm")


# --------------------------------------------------------------------------------------------------- session

def _code_zip() -> str:
    """A zip of the qm2qm and shared_adm packages for executors (sc.addPyFile), built once per process."""
    target = Path(tempfile.gettempdir()) / f"qm2qm-pyfiles-{os.getpid()}.zip"
    if not target.exists():
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            for package in SHIPPED_PACKAGES:
                for path in (REPO / package).rglob("*.py"):
                    zf.write(path, path.relative_to(REPO).as_posix())
        atexit.register(target.unlink, missing_ok=True)        # one per process; not left behind in /tmp
    return str(target)


# The ingest job's JVMs only schedule tasks and pass small Arrow batches: their CPU per job is mostly C2 JIT
# compilation (driver JVM 0.66-0.77 s per ingest job at local[2], 0.15-0.23 s with C1 only: BENCHMARKS.md).
# Default options, so a user's spark.driver/executor.extraJavaOptions still come after them and win; stats and
# diff, whose JVM work is long aggregations and joins, keep the full JIT.
INGEST_JVM_OPTIONS = "-XX:+IgnoreUnrecognizedVMOptions -XX:TieredStopAtLevel=1"
INGEST_CONF = {"spark.driver.defaultJavaOptions": INGEST_JVM_OPTIONS,
               "spark.executor.defaultJavaOptions": INGEST_JVM_OPTIONS}


class PipelineSetupError(RuntimeError):
    """A pipeline job cannot start because an optional dependency is missing."""


def spark_session(master: str | None = None, app_name: str = "qm2qm-pipeline",
                  conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on ``master``; None means what spark-submit set, else local[*]. Ships the project code
    (qm2qm, shared_adm) to executors with addPyFile, so any cluster whose Python has pyarrow can run the jobs."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise PipelineSetupError("the Spark jobs need PySpark: pip install 'qm2qm[pipeline]'") from None

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:     # not launched by spark-submit
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
    settings = {"spark.sql.execution.arrow.pyspark.enabled": "true", "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": "8", "spark.pyspark.python": sys.executable}
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.addPyFile(_code_zip())
    return spark


# ---------------------------------------------------------------------------------------------------- ingest

def _records(path: str, part_json: str | None, calls_file: str) -> list[dict]:
    """Ingest one file or part: its calls go straight to ``calls_file`` (Parquet, written by the executor);
    the small records (sessions, problems, connections, counters; each a dict naming its ``record`` kind) go
    back to the driver."""
    import pyarrow.parquet as pq
    from qm2qm.pipeline.ingest import ingest_file
    result = ingest_file(path) if part_json is None else _ingest_part(path, json.loads(part_json))
    pq.write_table(schema.table(result.calls, schema.CALL_SCHEMA), calls_file)
    rows: list[dict] = []
    rows.extend(dict(r, record="session") for r in result.sessions)
    rows.extend(dict(r, record="problem") for r in result.problems)
    if part_json is not None and not result.numbered:           # the first pass's numbering did not hold
        rows.append({"record": "unnumbered", "source_file": result.path})
    if part_json is not None:                                   # what split.renumber needs, one row a connection
        rows.extend({"record": "connection", "source_file": result.path, "session_id": c["session_id"],
                     "offset": c["first_offset"], "request_time_us": None if c["first_call"] is None else
                     c["first_call"][0], "call_id": None if c["first_call"] is None else c["first_call"][1]}
                    for c in result.connections)
    rows.append({"record": "file", "source_file": result.path, "counters": json.dumps(result.counters,
                                                                                      sort_keys=True)})
    return rows


def _ingest_part(path: str, spec: dict) -> Any:
    """One part of a capture split by session; part 0 carries the first pass's own findings (split.plan)."""
    from qm2qm.pipeline.split import Part, ingest_part
    keys = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in spec["keys"]]
    expect = spec.get("expect")                 # [session_id, first_offset, first_call, connection_id, session_seq]
    result = ingest_part(path, Part(keys, spec["start"], spec["stop"], 0,
                                    None if expect is None else [e[:3] for e in expect],
                                    None if expect is None else {e[0]: (e[3], e[4]) for e in expect},
                                    exclusive=spec.get("exclusive", False)))
    head = spec.get("head")
    if head is not None:
        result.problems[:0] = head["problems"]
        for key, value in head["counters"].items():
            result.count(key, value)
    return result


def ingest_partition(calls_dir: str, bundles: list[str], partition: Iterator[int]) -> Iterator[dict]:
    """mapPartitions function (bound to the calls directory and the bundles, bundle_tasks): each element is the
    index of one bundle, a JSON list of [index, path, part] tasks (a file, or one part of a split capture); yields
    each task's small records (_records)."""
    for bundle in partition:
        for index, path, part in json.loads(bundles[bundle]):
            yield from _records(path, part, os.path.join(calls_dir, f"part-{index:05d}.parquet"))
    _forget_zip_package_finders()
    _freeze_long_lived_objects()


def _forget_zip_package_finders() -> None:
    """Drop every cached zipimporter (pyspark.zip, py4j's, the shipped code, and the packages inside them). PySpark
    calls importlib.invalidate_caches() at the start of every task, and each cached zipimporter re-reads its whole
    archive's directory there: 20 of them (pyspark.zip/pyspark/sql, …) cost 0.074 s CPU a task, the three sys.path
    zips alone 0.022 s. A dropped finder is rebuilt on the next import below it, from zipimport's directory cache
    (the archives do not change while a worker lives); a task of a warm worker imports nothing new."""
    import zipimport
    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[path]


_frozen = False


def _freeze_long_lived_objects() -> None:
    """Once per worker process, after its first task: collect, then move every object left (the modules imported,
    pyarrow's and this package's state) out of the collector's reach (gc.freeze). PySpark's daemon runs a full
    gc.collect() after every task of a reused worker; over those ~100,000 objects it took 30-100 ms, which a
    worker's next task waited out (a job of two small files: 0.169 s, 0.141 s with the heap frozen)."""
    global _frozen
    if not _frozen:
        import gc
        gc.collect()
        gc.freeze()
        _frozen = True


# Above this many input bytes per core, bundles stay at about this size so that a slow executor does not hold up
# the job (Spark hands the next bundle to whichever executor is free).
BUNDLE_BYTES = 256 * 1024 * 1024


def bundle_tasks(tasks: list[tuple[str, str | None, int]], parallelism: int,
                 bundle_bytes: int = BUNDLE_BYTES) -> list[list[int]]:
    """Task indices grouped into Spark tasks of about equal bytes (largest first onto the lightest bundle): one
    per core for a small input, so it runs in one wave with one task launch per core instead of one per file."""
    total = sum(size for _, _, size in tasks)
    count = min(len(tasks), max(parallelism, -(-total // bundle_bytes)))
    bundles: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for index in sorted(range(len(tasks)), key=lambda i: -tasks[i][2]):
        lightest = loads.index(min(loads))
        bundles[lightest].append(index)
        loads[lightest] += max(1, tasks[index][2])
    return [sorted(b) for b in bundles if b]


def _renumber_file(job: tuple[str, str]) -> None:
    """Rewrite connection_id and session_seq of one calls part file of a split capture (split.renumber)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    calls_file, numbers_json = job
    numbers = json.loads(numbers_json)
    table = pq.read_table(calls_file, schema=schema.CALL_SCHEMA)
    index = pc.index_in(table.column("session_id"), value_set=pa.array(list(numbers), pa.string()))
    for name, at in (("connection_id", 0), ("session_seq", 1)):
        field = schema.CALL_SCHEMA.field(name)
        known = pa.array([n[at] for n in numbers.values()], field.type).take(index)
        table = table.set_column(table.schema.get_field_index(name), field,
                                 pc.coalesce(known, table.column(name)))
    pq.write_table(table, calls_file)


# A capture above this size, and above its fair share of the input, is split by TCP session (split.py).
SPLIT_MIN_BYTES = 4 * 1024 * 1024


def plan_tasks(paths: list[str], parallelism: int, split_min_bytes: int = SPLIT_MIN_BYTES
               ) -> list[tuple[str, str | None, int]]:
    """(path, part spec JSON or None, bytes) per task, largest first. A capture bigger than its share of the
    input (total / parallelism, at least ``split_min_bytes``) is split by TCP session into parts of about that
    share, so one huge capture is spread over the executors instead of landing on one."""
    from qm2qm.pipeline.ingest import file_kind
    from qm2qm.pipeline.split import plan

    sizes = [(p, os.path.getsize(p) if os.path.exists(p) else 0) for p in paths]
    share = max(split_min_bytes, sum(size for _, size in sizes) / max(1, parallelism))
    tasks: list[tuple[str, str | None, int]] = []
    for path, size in sizes:
        parts = -(-size // int(share))
        if parts < 2 or file_kind(path) not in ("pcap", "pcapng"):
            tasks.append((path, None, size))
            continue
        head, planned = plan(path, parts)
        head.count("file_bytes", size)
        for index, part in enumerate(planned):
            spec = {"keys": [[a.hex(), b.hex()] for a, b in part.keys], "start": part.start, "stop": part.stop,
                    "exclusive": part.exclusive, "expect": [[*e, *part.numbers[e[0]]] for e in part.expect]}
            if index == 0:
                spec["head"] = {"problems": head.problems, "counters": head.counters}
            tasks.append((path, json.dumps(spec), part.bytes))
        if not planned:
            spec = {"keys": [], "start": 0, "stop": 0, "head": {"problems": head.problems,
                                                                "counters": head.counters}}
            tasks.append((path, json.dumps(spec), 0))
    tasks.sort(key=lambda task: -task[2])           # big tasks first: they bound the job's length
    return tasks


def expand_inputs(inputs: Iterable[str], skip: str | Path | None = None) -> list[str]:
    """Files named, plus the files inside named directories (sorted) but not under ``skip`` (the output directory:
    an earlier run's tables are not input); missing paths are kept to be reported."""
    out: list[str] = []
    skipped = Path(skip).resolve() if skip is not None else None
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.rglob("*")) if f.is_file() and not f.name.startswith(".")
                       and (skipped is None or not f.resolve().is_relative_to(skipped)))
        else:
            out.append(str(p))
    return out


def ingest(spark: Any, inputs: Iterable[str], out_dir: str | Path, split_min_bytes: int | None = None) -> dict:
    """Ingest captures and traces in parallel (one task per file, or per part of a capture split by TCP session:
    plan_tasks; bundled into about one Spark task per core: bundle_tasks) into OUT/calls, OUT/sessions,
    OUT/problems (Parquet); returns the summary also written to OUT/summary.json. Executors write the calls
    themselves (OUT must be visible to them); only sessions, problems and counters travel back to the driver."""
    import functools
    import shutil

    import pyarrow.parquet as pq

    paths = expand_inputs(inputs, skip=out_dir)
    out = Path(out_dir)
    parallelism = spark.sparkContext.defaultParallelism
    tasks = plan_tasks(paths, parallelism,
                       SPLIT_MIN_BYTES if split_min_bytes is None else split_min_bytes)
    calls_dir = out / "calls"
    for name in ("calls", "sessions", "problems"):
        shutil.rmtree(out / name, ignore_errors=True)
    calls_dir.mkdir(parents=True)
    bundles = [json.dumps([[i, *tasks[i][:2]] for i in bundle])
               for bundle in bundle_tasks(tasks, parallelism, BUNDLE_BYTES)]
    # One bundle index a partition, in a plain RDD: a DataFrame's mapInArrow job cost the JVM twice the CPU (128-145
    # against 62-74 ms a job: SQL planning, Arrow to rows and back) for a few hundred records (BENCHMARKS.md,
    # fourteenth pass); a DataFrame made from a Python list adds a second Python worker (fourth pass).
    records = spark.sparkContext.parallelize(range(len(bundles)), max(1, len(bundles))).mapPartitions(
        functools.partial(ingest_partition, str(calls_dir.resolve()), bundles)).collect()
    if not tasks:                                   # still a readable (empty) calls table
        pq.write_table(schema.table([], schema.CALL_SCHEMA), calls_dir / "part-00000.parquet")
    kinds: dict[str, list[dict]] = {}
    for row in records:
        kinds.setdefault(row["record"], []).append(row)
    sessions, problems = kinds.get("session", []), kinds.get("problem", [])
    split_files = {p for p, part, _ in tasks if part}
    # parts whose first-pass numbering held wrote their calls numbered file-wide; the others are renumbered here
    unnumbered = {str(Path(r["source_file"])) for r in kinds.get("unnumbered", [])}
    if split_files:
        _renumber_split(spark, tasks, kinds, calls_dir, sessions, unnumbered)
    problems += _split_file_problems(split_files, kinds)
    (out / "sessions").mkdir()
    (out / "problems").mkdir()
    pq.write_table(schema.table(sessions, schema.SESSION_SCHEMA), out / "sessions" / "part-00000.parquet")
    pq.write_table(schema.table(problems, schema.PROBLEM_SCHEMA), out / "problems" / "part-00000.parquet")
    summary = {"files": len(paths), "per_file": {}, "totals": {}, "master": spark.sparkContext.master,
               "executors": executor_count(spark), "tasks": len(tasks), "spark_tasks": len(bundles),
               "split_files": len(split_files), "renumbered_files": len(unnumbered)}
    for row in kinds.get("file", []):
        per_file = summary["per_file"].setdefault(row["source_file"], {})
        for key, value in json.loads(row["counters"]).items():
            per_file[key] = per_file.get(key, 0) + value
            summary["totals"][key] = summary["totals"].get(key, 0) + value
    summary["problems"] = [{c: p.get(c) for c in schema.PROBLEM_COLUMNS} for p in problems]
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    return summary


def _renumber_split(spark: Any, tasks: list, kinds: dict[str, list[dict]], calls_dir: Path,
                    sessions: list[dict], unnumbered: set[str]) -> None:
    """Number the sessions of split captures file-wide (split.renumber): session rows here, and the calls part
    files of the ``unnumbered`` captures (whose first-pass numbering did not hold) in parallel tasks. (A barrier
    stage exchanging the connections with allGather saves this job's CPU but waits up to a second more: Spark
    polls the barrier each second; measured slower on a 100,000-call capture.)"""
    from qm2qm.pipeline.split import renumber

    by_file: dict[str, list[dict]] = {}
    for r in kinds.get("connection", []):
        first = None if r["request_time_us"] is None else (r["request_time_us"], r["call_id"])
        by_file.setdefault(r["source_file"], []).append({"session_id": r["session_id"], "first_offset": r["offset"],
                                                         "first_call": first})
    numbers = {path: renumber(conns) for path, conns in by_file.items()}
    for row in sessions:                                     # session ids can repeat across files
        known = numbers.get(row["source_file"], {}).get(row["session_id"])
        if known is not None:
            row["connection_id"], row["session_seq"] = known
    jobs = [(str(calls_dir / f"part-{i:05d}.parquet"), json.dumps(numbers.get(path, {})))
            for i, (path, part, _) in enumerate(tasks) if part and str(Path(path)) in unnumbered]
    if jobs:
        spark.sparkContext.parallelize(jobs, len(jobs)).foreach(_renumber_file)


def _split_file_problems(split_files: set[str], kinds: dict[str, list[dict]]) -> list[dict]:
    """The per-file problem rows the parts of a split capture could not write alone (unknown interfaces)."""
    from qm2qm.pipeline.capture import IngestResult, report_unknown_interfaces

    problems = []
    for path in sorted({str(Path(p)) for p in split_files}):        # as the parts name it (IngestResult.path)
        result = IngestResult(path)
        for row in kinds.get("file", []):
            if row["source_file"] == path:
                for key, value in json.loads(row["counters"]).items():
                    result.count(key, value)
        report_unknown_interfaces(path, result)
        problems.extend(result.problems)
    return problems


def executor_count(spark: Any) -> int:
    """Executor JVMs other than the driver (0 in local mode, where tasks run inside the driver JVM)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return max(0, status.size() - 1)


def _spark_schema(arrow_schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(arrow_schema)


def call_table_dir(path: str | Path) -> Path | None:
    """The Parquet directory of an ingest output given as OUT or OUT/calls; None for a file (ingest_file reads
    it). Raises ValueError naming a directory that is not ingest output, before Spark fails on it with a
    schema-inference error."""
    p = Path(path)
    if not p.is_dir():
        return None
    calls_dir = p / "calls" if (p / "calls").is_dir() else p
    parts = sorted(f for f in calls_dir.glob("*.parquet") if not f.name.startswith((".", "_")))
    if not parts:
        raise ValueError(f"{p}: not ingest output: no call table (no Parquet files in {calls_dir}); "
                         f"give a `qm2qm ingest` output directory or a trace or capture file")
    import pyarrow.parquet as pq
    try:
        columns = pq.read_schema(parts[0]).names
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{p}: not ingest output: {parts[0]} is not a readable Parquet file: {exc}") from None
    missing = [c for c in schema.CALL_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"{p}: not ingest output: {parts[0]} is not a call table (lacks {', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''})")
    return calls_dir


def read_calls(spark: Any, path: str | Path) -> Any:
    """A call table as a DataFrame: an ingest output directory (OUT or OUT/calls) or a trace file."""
    calls_dir = call_table_dir(path)
    if calls_dir is not None:
        return spark.read.parquet(str(calls_dir))
    p = Path(path)
    from qm2qm.pipeline.ingest import ingest_file
    result = ingest_file(p)
    if result.problems and not result.calls:
        raise ValueError(result.problems[0]["message"])
    return spark.createDataFrame(schema.table(result.calls, schema.CALL_SCHEMA).to_pandas(),
                                 _spark_schema(schema.CALL_SCHEMA))


# ----------------------------------------------------------------------------------------------------- stats

def stats(spark: Any, calls_path: str | Path, out_dir: str | Path, bucket_seconds: int = 60) -> dict:
    """Per opnum: calls, faults, errors, bytes, latency p50/p90/p99; the same per time bucket; error codes.
    Writes OUT/by_opnum, OUT/over_time, OUT/error_codes (Parquet) and returns them as lists of dicts."""
    from pyspark.sql import functions as F

    calls = read_calls(spark, calls_path)
    out = Path(out_dir)
    latency_ms = F.col("latency_us") / 1000.0
    measures = [
        F.count(F.lit(1)).alias("calls"),
        F.sum((F.col("status_kind") == "fault").cast("long")).alias("faults"),
        F.coalesce(F.sum((F.col("hresult") >= schema.HRESULT_SEVERITY_ERROR).cast("long")),
                   F.lit(0)).alias("errors"),
        F.sum("request_bytes").alias("request_bytes"),
        F.sum("response_bytes").alias("response_bytes"),
        F.percentile_approx(latency_ms, 0.5).alias("latency_p50_ms"),
        F.percentile_approx(latency_ms, 0.9).alias("latency_p90_ms"),
        F.percentile_approx(latency_ms, 0.99).alias("latency_p99_ms"),
        F.max(latency_ms).alias("latency_max_ms"),
    ]
    by_opnum = calls.groupBy("opnum", "op_name").agg(*measures).orderBy("opnum")
    bucket = (F.floor(F.col("request_time_us") / (bucket_seconds * 1_000_000)) * bucket_seconds).alias("bucket_s")
    over_time = calls.groupBy(bucket, "opnum", "op_name").agg(*measures).orderBy("bucket_s", "opnum")
    code = (F.when(F.col("status_kind") == "fault", F.format_string("fault 0x%08x", F.col("fault_status")))
            .when(F.col("hresult").isNotNull(), F.format_string("0x%08x", F.col("hresult")))
            .otherwise(F.col("status_kind")))
    error_codes = (calls.withColumn("code", code).groupBy("opnum", "op_name", "code")
                   .agg(F.count(F.lit(1)).alias("calls")).orderBy("opnum", "code"))
    result = {}
    for name, frame in (("by_opnum", by_opnum), ("over_time", over_time), ("error_codes", error_codes)):
        frame.write.mode("overwrite").parquet(str(out / name))
        result[name] = [r.asDict() for r in spark.read.parquet(str(out / name)).orderBy(*frame.columns[:2]).collect()]
    return result


# ------------------------------------------------------------------------------------------------------ diff

_NORM_SCHEMA = pa.schema([pa.field("file_rank", pa.int32()), pa.field("session_seq", pa.int32()),
                          pa.field("call_index", pa.int32()), pa.field("opnum", pa.int32()),
                          pa.field("op_name", pa.string()), pa.field("status", pa.string()),
                          pa.field("request", pa.string()), pa.field("response", pa.string()),
                          pa.field("message", pa.string())])
MISMATCH_SCHEMA = pa.schema([pa.field("file_rank", pa.int32()), pa.field("session_seq", pa.int32()),
                             pa.field("call_index", pa.int32()), pa.field("opnum", pa.int32()),
                             pa.field("op_name", pa.string()), pa.field("field", pa.string()),
                             pa.field("kind", pa.string()), pa.field("left", pa.string()),
                             pa.field("right", pa.string())])
_NORM_INPUT = ["file_rank", "session_seq", "call_index", "opnum", "op_name", "status_kind", "hresult",
               "return_value", "fault_status", "request_fields", "response_fields", "message_fields"]


def _normalize_group(pdf: Any) -> Any:
    import pandas as pd
    from qm2qm.pipeline.normalize import normalize_session
    rows = pdf.astype(object).where(pdf.notna(), None).to_dict("records")
    out = normalize_session(rows)
    rank = int(rows[0]["file_rank"]) if rows else 0
    for r in out:
        r["file_rank"] = rank
    return pd.DataFrame(out, columns=_NORM_SCHEMA.names)


def _compare_batches(batches: Iterator[Any]) -> Iterator[Any]:
    import pandas as pd
    from qm2qm.pipeline.normalize import compare
    cols = ["opnum", "op_name", "status", "request", "response", "message"]
    for pdf in batches:
        out = []
        for rec in pdf.astype(object).where(pdf.notna(), None).to_dict("records"):
            left = None if rec["l_opnum"] is None else {c: rec["l_" + c] for c in cols}
            right = None if rec["r_opnum"] is None else {c: rec["r_" + c] for c in cols}
            side = left or right
            for m in compare(left, right):
                out.append({"file_rank": rec["file_rank"], "session_seq": rec["session_seq"],
                            "call_index": rec["call_index"], "opnum": side["opnum"], "op_name": side["op_name"], **m})
        yield pd.DataFrame(out, columns=MISMATCH_SCHEMA.names)


def _normalized(spark: Any, calls: Any) -> Any:
    from pyspark.sql import Window, functions as F
    files = calls.select("source_file").distinct()
    files = files.withColumn("file_rank", (F.dense_rank().over(Window.orderBy(F.coalesce("source_file",
                                                                                         F.lit(""))))
                                           - 1).cast("int"))
    calls = calls.join(files, on="source_file", how="left").na.fill({"file_rank": 0})
    return (calls.select(*_NORM_INPUT, "session_id")
            .groupBy("file_rank", "session_id")
            .applyInPandas(_normalize_group, _spark_schema(_NORM_SCHEMA)))


def diff(spark: Any, left_path: str | Path, right_path: str | Path, out_dir: str | Path) -> dict:
    """Align two call tables by (file order, session order, call order), normalize, and write OUT/mismatches
    (Parquet, one row per differing field or missing call); returns counts and the first mismatches."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    key = ["file_rank", "session_seq", "call_index"]
    sides = []
    for prefix, path in (("l_", left_path), ("r_", right_path)):
        norm = _normalized(spark, read_calls(spark, path))
        sides.append(norm.select(*key, *[F.col(c).alias(prefix + c) for c in _NORM_SCHEMA.names if c not in key]))
    # kept on local disk: counting the aligned calls must not normalize both sides a second time (the costliest
    # step of a 10-million-call diff, BENCHMARKS.md)
    joined = sides[0].join(sides[1], on=key, how="full_outer").persist(StorageLevel.DISK_ONLY)
    try:
        mismatches = joined.mapInPandas(_compare_batches, _spark_schema(MISMATCH_SCHEMA))
        out = Path(out_dir)
        mismatches.write.mode("overwrite").parquet(str(out / "mismatches"))
        aligned = joined.count()
    finally:
        joined.unpersist()
    written = spark.read.parquet(str(out / "mismatches"))
    rows = [r.asDict() for r in written.orderBy(*key, "field").limit(1000).collect()]
    summary = {"left": str(left_path), "right": str(right_path), "aligned_calls": aligned,
               "mismatches": written.count(), "first": rows}
    (out / "diff_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
