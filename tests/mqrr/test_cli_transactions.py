"""`qm2qm transaction list|commit|abort` against a running `serve --mqrr`: the operator's way to end a transaction an
MS-MQRR client received in, which no DTC here ever will."""
from __future__ import annotations

import asyncio
import json
import os

import pytest
from click.testing import CliRunner

from qm2qm.app import App
from qm2qm.cli import main
from qm2qm.mqrr.client import MqrrClient
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from shared_adm import status as st
from tests.mqmp.test_serve_wiring import config

Q = ".\\private$\\txq"


@pytest.fixture
async def app(tmp_path):
    app = App(config(tmp_path, computer_name="qm2qm", mqrr=True, allow_anonymous_read=True))
    await app.start()
    yield app
    await app.close()


def _cli(app, *args, as_json=True):
    result = CliRunner().invoke(main, [*args, "--admin", app.admin_url, *(["--json"] if as_json else [])],
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


async def test_list_then_abort_returns_the_message_and_a_second_abort_is_a_one_line_error(app):
    uow = os.urandom(16)

    def run():
        assert _cli(app, "queue", "create", Q, "--transactional")[0] == 0
        assert _cli(app, "send", Q, "--body", "held")[0] == 0
        client = MqrrClient("127.0.0.1", app.rpc.port)
        try:
            handle = client.open("DIRECT=OS:qm2qm\\private$\\txq")
            assert client.read(handle, MQ_ACTION_RECEIVE, transaction=uow).status == st.MQ_OK
            assert client.read(handle, MQ_ACTION_PEEK_CURRENT).status == st.MQ_ERROR_IO_TIMEOUT    # Locked
            listed = _cli(app, "transaction", "list")
            table = _cli(app, "transaction", "list", as_json=False)
            aborted = _cli(app, "transaction", "abort", uow.hex(), as_json=False)
            peeked = client.read(handle, MQ_ACTION_PEEK_CURRENT)
        finally:
            client.disconnect()
        again = _cli(app, "transaction", "abort", uow.hex(), as_json=False)
        return listed, table, aborted, peeked, again

    listed, table, aborted, peeked, again = await asyncio.to_thread(run)
    [transaction] = json.loads(listed[1])
    assert transaction["identifier"] == uow.hex() and transaction["operations"][0]["queue"] == "qm2qm\\private$\\txq"
    assert table[1].splitlines()[0].split() == ["TRANSACTION", "OPERATION", "QUEUE", "LOOKUP", "ID"]
    assert table[1].splitlines()[1].split()[:3] == [uow.hex(), "Dequeue", "qm2qm\\private$\\txq"]
    assert aborted == (0, f"aborted {uow.hex()}\n", "")
    assert peeked.status == st.MQ_OK and b"held" in peeked.packet
    assert again[0] == 1 and again[2].count("\n") == 1 and f"no transaction '{uow.hex()}'" in again[2]
