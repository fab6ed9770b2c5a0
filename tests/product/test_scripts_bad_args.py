"""The benchmark and soak scripts refuse bad arguments up front with argparse's usage error (exit 2, naming the
argument), not a traceback part-way through, nor after the whole run, nor by running something else."""
from __future__ import annotations

import pytest

from tests.product.test_scripts import ROOT, run_script_process

# A hang guard, not a timing assertion: every case here is refused before any work starts.
GUARD_S = 60


def refused(name: str, *args: str) -> str:
    """Run scripts/<name> with ``args``; its stderr, after checking it was a usage error and no traceback."""
    returncode, _, stderr = run_script_process(name, *args, cwd=ROOT, timeout=GUARD_S)
    assert returncode == 2 and "Traceback" not in stderr, (returncode, stderr[-2000:])
    return stderr


@pytest.mark.parametrize("name, args, says", [
    ("bench_store.py", ["--synchronous", "bogus"], "argument --synchronous: 'bogus' is not NORMAL or FULL"),
    ("bench_store.py", ["--producers", "abc"], "argument --producers: 'abc' is not comma-separated whole numbers"),
    ("bench_store.py", ["--acks", "0"], "argument --acks: '0': every count must be at least 1"),
    ("bench_store.py", ["--load-sizes", "1,x"], "argument --load-sizes: '1,x' is not comma-separated whole numbers"),
    ("bench_store.py", ["--messages", "0"], "argument --messages: 0 is less than 1"),
    ("bench_adm.py", ["--sizes", "abc"], "argument --sizes: 'abc' is not comma-separated whole numbers"),
    ("bench_adm.py", ["--sizes", ""], "argument --sizes: '': give one or more depths, each at least 1"),
    ("bench_adm.py", ["--ops", "0"], "argument --ops: 0 is less than 3 (one operation per round)"),
    ("bench.py", ["--clients", "0"], "argument --clients: 0 is less than 1"),
    ("bench.py", ["--duration", "-1"], "argument --duration: -1 is not a duration above 0 seconds"),
    ("bench.py", ["--duration", "nan"], "argument --duration: nan is not a duration above 0 seconds"),
    ("bench.py", ["--repeat", "0"], "argument --repeat: 0 is less than 1"),
    ("bench.py", ["--processes", "0"], "argument --processes: 0 is less than 1"),
    ("bench.py", ["--json", "/proc/no-such-dir/x.json", "--only", "floor"],
     "argument --json: cannot write '/proc/no-such-dir/x.json'"),
])
def test_a_benchmark_refuses_a_bad_argument_before_it_runs(name, args, says):
    assert says in refused(name, *args)


@pytest.mark.parametrize("only", ["", ",", " "])
def test_soak_only_naming_no_check_is_refused_not_the_whole_run(only):
    assert "argument --only: names no check; choose from " in refused("soak.py", "--only", only)


def test_soak_only_naming_an_unknown_check_is_still_refused():
    assert "unknown check(s) bogus" in refused("soak.py", "--only", "bogus")
