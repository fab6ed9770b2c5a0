"""CPU time and memory of another process from Linux /proc/<pid>/stat and /status (proc(5)), for the benchmarks and the
soak."""
from __future__ import annotations

import os


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far, in clock ticks; OSError once it is gone."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far (Linux /proc/<pid>/stat)."""
    user, system = cpu_split(pid)
    return user + system


def status_kib(pid: int, key: str) -> int | None:
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM, ...); None when absent, OSError once the process is gone."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None
