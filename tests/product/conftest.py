"""A real `qm2qm serve` subprocess on ephemeral ports, and a CLI runner pointed at it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from qm2qm.cli import main
from qm2qm.pytest_plugin import start_subprocess

REPO = Path(__file__).resolve().parents[2]
# A hang guard, not a timing assertion: a server that has not printed its line by then is broken.
START_GUARD_S = 60


@dataclass
class Server:
    proc: subprocess.Popen
    host: str
    port: int
    admin: str
    line: str
    data_dir: Path

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """Signal the server, wait for it to exit; (exit code, stderr)."""
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=START_GUARD_S)
        return self.proc.returncode, err


def server_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("QM2QM_ADMIN", None)
    env.pop("QM2QM_RPC", None)
    return env


def start_server(data_dir: Path, *extra: str) -> Server:
    """`qm2qm serve` of this checkout (the qm2qm pytest plugin's start_subprocess), run from data_dir's parent."""
    try:
        handle = start_subprocess(data_dir, *extra, env=server_env(), cwd=data_dir.parent)
    except RuntimeError as exc:
        raise AssertionError(str(exc)) from None
    return Server(handle.process, handle.host, handle.port, handle.admin_url, handle.line, data_dir)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("serve") / "data")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


class Cli:
    """Runs `qm2qm ...` in-process with --admin pointed at a server."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.runner = CliRunner()

    def run(self, *args: str, expect: int = 0):
        result = self.runner.invoke(main, [*args, "--admin", self.admin], catch_exceptions=False)
        assert result.exit_code == expect, (args, result.exit_code, result.output)
        return result

    def json(self, *args: str, expect: int = 0):
        return json.loads(self.run(*args, "--json", expect=expect).stdout)


@pytest.fixture(scope="module")
def cli(server):
    return Cli(server.admin)


@pytest.fixture
async def api():
    """The admin API (qm2qm.admin) over an in-memory queue manager, as an aiohttp test client (``.qm`` on it)."""
    from aiohttp.test_utils import TestClient, TestServer

    from qm2qm.admin import AdminApi
    from qm2qm.mqqp.interface import build_service
    from shared_adm.queue_manager import QueueManager
    from shared_adm.store.base import MemoryStore
    qm = QueueManager(MemoryStore(), computer_name="testhost")
    qm.initialize()
    admin = AdminApi(qm, info=lambda: {"rpc": {"host": "127.0.0.1", "port": 1}}, service=build_service(qm))
    client = TestClient(TestServer(admin.app))
    await client.start_server()
    client.qm = qm
    yield client
    await client.close()
