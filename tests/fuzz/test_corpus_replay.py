"""Replays every conversation of tests/fuzz/corpus against a real `qm2qm serve` (issue 14 regression corpus).

scripts/soak.py saves each conversation that made the server log a traceback/ERROR, crash or stop answering;
the seed-*.json entries are representative conversations of each interface and syntax. After each one the
server must still be running, answer bind + RemoteQmGetVersion, and have logged no traceback and no ERROR.
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from soak import fuzz, wire  # noqa: E402
from soak.check_fuzz import admin_handle, format_name_of, port_for  # noqa: E402
from soak.admin import Admin  # noqa: E402
from soak.server import ServerProcess, log_problems  # noqa: E402

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.json"))
QUEUE = r".\private$\replay"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay")
    server = ServerProcess(root / "data", root / "server.log").start()
    admin = Admin(server.admin)
    admin.ok("POST", "/v1/queues", {"pathname": QUEUE})
    admin.ok("POST", f"/v1/queues/{Admin.q(QUEUE)}/messages", {"body": "replay", "count": 20})
    yield server, admin
    admin.close()
    server.stop()


def test_corpus_is_not_empty():
    assert CORPUS, "tests/fuzz/corpus holds no conversation"


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_replayed_conversation_leaves_server_healthy(served, path):
    server, admin = served
    conv = fuzz.Conversation.from_json(json.loads(path.read_text()))
    offset = len(server.log_text())
    handle = admin_handle(admin, conv, QUEUE)
    try:
        asyncio.run(fuzz.run_conversation(server.host, port_for(server, conv), conv, handle=handle,
                                          format_name=format_name_of(admin, QUEUE), timeout=10))
    except (OSError, asyncio.TimeoutError):
        pass                                    # the server may close or reset the connection: that is an answer
    assert server.alive()
    wire.get_version_latency(server.host, server.port, timeout=10)
    assert log_problems(server.log_text()[offset:]) == []
