"""Check bookkeeping, budgets and the shared server of a soak run (issue 14)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from soak.server import ServerProcess, log_problems


@dataclass(frozen=True)
class Budget:
    """Counts and time limits of one run profile; every loop is bounded by both."""
    fuzz_cases: int
    fuzz_seconds: float
    batch_conversations: int
    disconnects: int
    crash_rounds: int
    slowloris: int
    slowloris_seconds: float
    latency_samples: int
    admin_cases: int
    coverage_seconds: float
    coverage_examples: int
    interleave_seconds: float = 20.0


QUICK = Budget(fuzz_cases=20_000, fuzz_seconds=45, batch_conversations=60, disconnects=1_000, crash_rounds=8,
               slowloris=500, slowloris_seconds=12, latency_samples=300, admin_cases=1_500,
               coverage_seconds=15, coverage_examples=2_000)
DEFAULT = Budget(fuzz_cases=1_000_000, fuzz_seconds=1_500, batch_conversations=150, disconnects=10_000,
                 crash_rounds=100, slowloris=500, slowloris_seconds=40, latency_samples=2_000, admin_cases=20_000,
                 coverage_seconds=150, coverage_examples=200_000, interleave_seconds=180.0)


class Report:
    """One line per check, and the final tally."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str) -> bool:
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


class Run:
    """Everything a check needs: the work directory, the budget, the report and the repository's corpus dir."""

    def __init__(self, workdir: Path, budget: Budget, report: Report, corpus: Path, seed: int) -> None:
        self.workdir = workdir
        self.budget = budget
        self.report = report
        self.corpus = corpus
        self.seed = seed
        self._n = 0

    def server(self, name: str, *, data_dir: Path | None = None, extra: list[str] = ()) -> ServerProcess:
        """A fresh `qm2qm serve` with its own data directory and log file (not yet started)."""
        self._n += 1
        data = data_dir or self.workdir / f"{name}-{self._n}-data"
        return ServerProcess(data, self.workdir / f"{name}-{self._n}.log", extra=list(extra))


class LogWatch:
    """New tracebacks / ERROR lines in a server log since the last look."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.offset = 0

    def new_problems(self) -> list[str]:
        text = self.server.log_text()
        fresh, self.offset = text[self.offset:], len(text)
        return log_problems(fresh)


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value
