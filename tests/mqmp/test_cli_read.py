"""`qm2qm peek/receive/lookup/purge` open the queue with the Windows sequence by default; --via-admin is the shortcut."""
from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from qm2qm.app import App
from qm2qm.cli import main
from qm2qm.cli.read import _format_name
from tests.mqmp.test_serve_wiring import config
from tests.product.test_wiring import free_port

Q = ".\\private$\\cliq"


@pytest.fixture
async def app(tmp_path):
    app = App(config(tmp_path, epm_port=free_port(), computer_name="qm2qm"))
    await app.start()
    yield app
    await app.close()


def _cli(app, *args):
    result = CliRunner().invoke(main, [*args, "--admin", app.admin_url, "--json"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_path_names_become_direct_tcp_format_names():
    assert _format_name(".\\private$\\q", "10.0.0.5") == "DIRECT=TCP:10.0.0.5\\private$\\q"
    assert _format_name("private$\\q", "h") == "DIRECT=TCP:h\\private$\\q"
    assert _format_name("host\\pub", "h") == "DIRECT=TCP:h\\pub"
    assert _format_name("DIRECT=OS:x\\private$\\q", "h") == "DIRECT=OS:x\\private$\\q"


async def test_default_reads_use_qmcomm_and_are_access_checked(app):
    def run():
        assert _cli(app, "queue", "create", Q)[0] == 0
        assert _cli(app, "send", Q, "--body", "one")[0] == 0
        denied = _cli(app, "receive", Q)
        shortcut = _cli(app, "peek", Q, "--via-admin")
        assert _cli(app, "queue", "grant", Q, "ANONYMOUS LOGON", "receive")[0] == 0
        received = _cli(app, "receive", Q)
        assert _cli(app, "send", Q, "--body", "two")[0] == 0
        via_epm = _cli(app, "peek", Q, "--epm-port", str(app.epm.port), "--rpc", f"127.0.0.1:{app.rpc.port}")
        purged = _cli(app, "purge", Q)
        handles = _cli(app, "handles")
        return denied, shortcut, received, via_epm, purged, handles

    denied, shortcut, received, via_epm, purged, handles = await asyncio.to_thread(run)
    assert denied[0] == 1 and "MQ_ERROR_ACCESS_DENIED" in denied[2]
    assert json.loads(shortcut[1])["message"]["body_text"] == "one"          # the admin shortcut has no check
    assert json.loads(received[1])["message"]["body_text"] == "one"
    assert json.loads(via_epm[1])["message"]["body_text"] == "two"
    assert purged[0] == 0 and json.loads(handles[1]) == []
    assert app.qmcomm_service.open_contexts == set()
