"""The real `qm2qm serve` as a subprocess: ephemeral ports, the ready line, its log, RSS, SIGKILL (issue 14)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from proc_cpu import cpu_seconds, status_kib

from qm2qm.ready import parse_ready_line


def qm2qm_command() -> list[str]:
    """The `qm2qm` console script of this interpreter's environment (as a user runs it)."""
    script = Path(sys.executable).with_name("qm2qm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "qm2qm"]


# Every hosted interface on ephemeral ports: qmcomm/qmcomm2 on their own listener (MS-MQMP 3.1.4.24; 0 = not the
# machine-wide 2103), MS-MQRR on the qm2qm one; anonymous reads allowed so fuzzed reads reach the queue code.
SERVE_OPTIONS = ("--qmcomm-port", "0", "--mqrr", "--allow-anonymous-read")


class ServerProcess:
    """One `qm2qm serve` run; ``log_path`` receives its stderr (scanned for tracebacks)."""

    def __init__(self, data_dir: str | Path, log_path: str | Path, *, extra: list[str] = (),
                 log_level: str = "warning") -> None:
        self.data_dir = str(data_dir)
        self.log_path = Path(log_path)
        self.extra = list(extra)
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.admin = ""
        self.epm_port = 0
        self.qmcomm_port = 0

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        cmd = qm2qm_command() + ["serve", "--data-dir", self.data_dir, "--port", "0", "--admin-port", "0",
                                 "--epm-port", "0", "--host", "127.0.0.1", "--log-level", self.log_level,
                                 *SERVE_OPTIONS, *self.extra]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        os.set_blocking(self.proc.stdout.fileno(), True)
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            ready = parse_ready_line(line.decode(errors="replace"))
            if ready:
                self.host, self.port, self.admin = ready.host, ready.port, ready.admin
                self.epm_port = ready.epm[1] if ready.epm else 0
                self.qmcomm_port = self._info()["qmcomm_port"]
                return self
        code = self.proc.poll()
        raise RuntimeError(f"qm2qm serve did not print its ready line (exit {code}); see {self.log_path}")

    def _info(self) -> dict:
        """GET /v1/info (docs/admin-api.md): where the listeners the ready line does not name are bound."""
        with urllib.request.urlopen(self.admin.rstrip("/") + "/v1/info", timeout=10) as resp:
            return json.load(resp)

    def port_of(self, listener: str) -> int:
        """The TCP port of a listener a seed-table entry names ("rpc" or "qmcomm")."""
        return self.qmcomm_port if listener == "qmcomm" else self.port

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> int:
        """VmRSS of the server process (Linux /proc), 0 when gone."""
        try:
            return status_kib(self.pid, "VmRSS") or 0
        except OSError:
            return 0

    def cpu_seconds(self) -> float:
        """user + system CPU time of the server so far (Linux /proc/<pid>/stat, clock ticks), 0.0 when gone."""
        try:
            return cpu_seconds(self.pid)
        except OSError:
            return 0.0

    def kill(self) -> None:
        """SIGKILL: the crash the durability check simulates (no flush, no close)."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            self.proc.stdout.close()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (clean shutdown); SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc.stdout.close()
        return self.proc.returncode

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def log_problems(text: str) -> list[str]:
    """Lines that must never appear in a server log under hostile input: tracebacks and ERROR/CRITICAL records."""
    return [line for line in text.splitlines()
            if line.startswith("Traceback") or " ERROR " in line or " CRITICAL " in line]
