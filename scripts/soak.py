#!/usr/bin/env python3
"""Soak and fuzz the real `qm2qm serve` (issue 14): one line per check, then `N passed, M failed`.

  .venv/bin/python scripts/soak.py --quick        # a few minutes (CI)
  .venv/bin/python scripts/soak.py                # 30-45 minutes: >= 1,000,000 fuzz cases, 100 SIGKILL rounds
  .venv/bin/python scripts/soak.py --only fuzz,leaks

Loopback only; every loop is bounded in count and in time. Crashing inputs are saved under tests/fuzz/corpus,
which tests/fuzz/test_corpus_replay.py replays.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import harness  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ("fuzz", "leaks", "crash", "pressure", "storage", "admin", "interleave", "coverage")


def _module(name: str):
    import importlib
    return importlib.import_module(f"soak.check_{name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the reduced CI run (a few minutes)")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(CHECKS)}")
    p.add_argument("--seed", type=int, default=None, help="random seed (printed; reuse it to reproduce a run)")
    p.add_argument("--fuzz-cases", type=int, help="override the fuzz case target")
    p.add_argument("--fuzz-seconds", type=float, help="override the fuzz time budget")
    p.add_argument("--crash-rounds", type=int, help="override the SIGKILL rounds")
    p.add_argument("--corpus", default=str(ROOT / "tests" / "fuzz" / "corpus"), help="where crashing inputs go")
    p.add_argument("--keep", action="store_true", help="keep the work directory (server logs, data dirs)")
    args = p.parse_args(argv)
    budget = harness.QUICK if args.quick else harness.DEFAULT
    overrides = {k: v for k, v in (("fuzz_cases", args.fuzz_cases), ("fuzz_seconds", args.fuzz_seconds),
                                   ("crash_rounds", args.crash_rounds)) if v is not None}
    if overrides:
        from dataclasses import replace
        budget = replace(budget, **overrides)
    selected = [c.strip() for c in args.only.split(",") if c.strip()] if args.only is not None else list(CHECKS)
    if not selected:        # --only "$EMPTY" is a selection of nothing, not the whole run
        p.error(f"argument --only: names no check; choose from {', '.join(CHECKS)}")
    unknown = [c for c in selected if c not in CHECKS]
    if unknown:
        p.error(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    report = harness.Report()
    workdir = Path(tempfile.mkdtemp(prefix="qm2qm-soak-"))
    print(f"soak: {'quick' if args.quick else 'default'} run, seed {seed}, work dir {workdir}", flush=True)
    started = time.monotonic()
    run = harness.Run(workdir, budget, report, Path(args.corpus), seed)
    for name in selected:
        t0 = time.monotonic()
        try:
            _module(name).run(run)
        except Exception as exc:          # a harness or server failure is a failed check, not a stack dump
            report.check(f"{name} (harness)", False, f"{type(exc).__name__}: {exc}")
        print(f"  [{name}: {time.monotonic() - t0:.0f} s]", flush=True)
    print(f"{report.summary()} in {time.monotonic() - started:.0f} s", flush=True)
    if not args.keep and not report.failed:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
