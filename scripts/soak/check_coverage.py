"""Check: coverage-guided fuzzing of the stub decoders and the UserMessage parser (issue 14), atheris when it is
installed (`pip install atheris`), else hypothesis with a large example count. The corpus is kept in
tests/fuzz/coverage/<target>/ (tests/fuzz/test_decoders.py replays it)."""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

from soak import targets
from soak.harness import Run

MAX_CORPUS_FILES = 300          # per target: what the repository keeps (smallest first)


def corpus_dir(r: Run, target: str) -> Path:
    return r.corpus.parent / "coverage" / target


def _seed(directory: Path, target: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    current = {f"seed-{hashlib.sha1(data).hexdigest()[:16]}": data for data in targets.seed_inputs(target)}
    for old in directory.glob("seed-*"):
        if old.name not in current:
            old.unlink()
    for name, data in current.items():
        (directory / name).write_bytes(data)


def _trim(directory: Path) -> None:
    files = sorted(directory.iterdir(), key=lambda p: (not p.name.startswith("seed-"), p.stat().st_size, p.name))
    for p in files[MAX_CORPUS_FILES:]:
        p.unlink()


def _atheris(r: Run, target: str, seconds: float) -> tuple[bool, str]:
    directory = corpus_dir(r, target)
    _seed(directory, target)
    work = r.workdir / f"atheris-{target}"
    work.mkdir(exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).with_name("atheris_main.py")), target, str(directory),
           f"-max_total_time={int(seconds)}", "-max_len=8192", "-rss_limit_mb=2048", "-timeout=10",
           f"-artifact_prefix={work}/", "-print_final_stats=1", f"-seed={r.seed % (1 << 31) or 1}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=work)
    out = proc.stdout + proc.stderr
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", out)
    crashes = sorted(work.glob("crash-*")) + sorted(work.glob("timeout-*")) + sorted(work.glob("oom-*"))
    saved = []
    for c in crashes:
        dest = directory / f"crash-{c.name.split('-', 1)[1][:16]}"
        dest.write_bytes(c.read_bytes())
        saved.append(dest.name)
    _trim(directory)
    ok = proc.returncode == 0 and not crashes
    tail = ""
    if not ok:
        lines = [line for line in out.splitlines() if "Error" in line or "Traceback" in line or "==" in line]
        tail = f"; exit {proc.returncode}: {' | '.join(lines[:3])[:300]}"
    return ok, (f"atheris {int(seconds)} s: {runs[-1] if runs else '?'} executions, "
                f"cov {cov[-1][0] if cov else '?'} ft {cov[-1][1] if cov else '?'}, corpus "
                f"{len(list(directory.iterdir()))} files in {directory.relative_to(r.corpus.parent.parent.parent)}"
                + (f", crashes saved: {', '.join(saved)}" if saved else "") + tail)


def _hypothesis(r: Run, target: str, examples: int) -> tuple[bool, str]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    fn = targets.TARGETS[target]
    seeds_ = targets.seed_inputs(target)
    failures: list[bytes] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=4096),
                     st.tuples(st.sampled_from(seeds_), st.integers(0, 4096), st.binary(max_size=16))
                     .map(lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + len(t[2]):])))
    def prop(data: bytes) -> None:
        try:
            fn(data)
        except Exception:
            failures.append(data)
            raise
    start = time.monotonic()
    try:
        prop()
        ok = True
    except Exception as exc:
        ok = False
        directory = corpus_dir(r, target)
        directory.mkdir(parents=True, exist_ok=True)
        for data in failures[-1:]:
            (directory / f"crash-{hashlib.sha1(data).hexdigest()[:16]}").write_bytes(data)
        return ok, f"hypothesis: {type(exc).__name__}: {str(exc)[:200]}"
    return ok, f"hypothesis (atheris not installed): {examples} examples in {time.monotonic() - start:.0f} s"


def run(r: Run) -> None:
    try:
        import atheris  # noqa: F401
        have_atheris = True
    except ImportError:
        have_atheris = False
    for target in targets.TARGETS:
        if have_atheris:
            ok, detail = _atheris(r, target, r.budget.coverage_seconds)
        else:
            ok, detail = _hypothesis(r, target, r.budget.coverage_examples)
        r.report.check(f"coverage-guided fuzz of the {targets.NAMES[target]}", ok, detail)
