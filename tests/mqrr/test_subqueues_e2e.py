"""Poison-message handling as WCF's netMsmqBinding does it, against a running `serve --mqrr`: a reader moves a message
it cannot process into the ";poison" subqueue (MS-MQRR R_OpenQueueForMove, R_MoveMessage), the subqueue survives a
restart, the operator sees it in `qm2qm queue list` and moves the message back with `qm2qm move`."""
from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from qm2qm.app import App
from qm2qm.cli import main
from qm2qm.mqrr.client import MqrrClient
from qm2qm.mqrr.constants import MQ_MOVE_ACCESS
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT
from shared_adm import status as st
from tests.mqmp.test_serve_wiring import config

Q = ".\\private$\\orders"
FORMAT_NAME = "DIRECT=OS:qm2qm\\private$\\orders"


def _cli(app, *args, as_json=True):
    result = CliRunner().invoke(main, [*args, "--admin", app.admin_url, *(["--json"] if as_json else [])],
                                catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


async def _started(tmp_path):
    app = App(config(tmp_path, computer_name="qm2qm", mqrr=True, allow_anonymous_read=True))
    await app.start()
    return app


@pytest.fixture
async def app(tmp_path):
    app = await _started(tmp_path)
    yield app
    await app.close()


async def test_a_poison_message_moved_to_the_subqueue_survives_a_restart_and_is_moved_back(tmp_path):
    app = await _started(tmp_path)

    def poison():
        assert _cli(app, "queue", "create", Q)[0] == 0
        sent = json.loads(_cli(app, "send", Q, "--body", "bad order", "--delivery", "recoverable")[1])
        client = MqrrClient("127.0.0.1", app.rpc.port)
        try:
            source = client.open(FORMAT_NAME)
            peeked = client.read(source, MQ_ACTION_PEEK_CURRENT)
            move_context, _ = client.open(FORMAT_NAME + ";poison", MQ_MOVE_ACCESS, for_move=True)
            return sent["lookup_id"], peeked, client.move(source, move_context, sent["lookup_id"])
        finally:
            client.disconnect()

    try:
        lookup_id, peeked, moved = await asyncio.to_thread(poison)
    finally:
        await app.close()
    assert peeked.status == st.MQ_OK and moved == st.MQ_OK
    app = await _started(tmp_path)
    try:
        def operator():
            table = _cli(app, "queue", "list", as_json=False)[1]
            held = json.loads(_cli(app, "messages", Q + ";poison")[1])
            back = _cli(app, "move", Q + ";poison", str(lookup_id), as_json=False)
            client = MqrrClient("127.0.0.1", app.rpc.port)
            try:
                again = client.read(client.open(FORMAT_NAME), MQ_ACTION_PEEK_CURRENT)
            finally:
                client.disconnect()
            return table, held, back, again, _cli(app, "queue", "show", Q)[1]

        table, held, back, again, shown = await asyncio.to_thread(operator)
    finally:
        await app.close()
    row = next(line.split() for line in table.splitlines() if "orders;poison" in line)
    assert row[:3] == ["qm2qm\\private$\\orders;poison", "subqueue", "1"]
    assert [m["lookup_id"] for m in held] == [lookup_id]
    assert back[0] == 0 and back[1].strip() == (f"moved lookup_id={lookup_id} from qm2qm\\private$\\orders;poison "
                                                "to qm2qm\\private$\\orders")
    assert again.status == st.MQ_OK and b"bad order" in again.packet
    assert json.loads(shown)["subqueues"] == []


async def test_move_of_a_message_to_an_illegal_subqueue_name_is_a_one_line_error(app):
    def run():
        assert _cli(app, "queue", "create", Q)[0] == 0
        sent = json.loads(_cli(app, "send", Q, "--body", "x")[1])
        return _cli(app, "move", Q, str(sent["lookup_id"]), "a;b", as_json=False)

    code, out, err = await asyncio.to_thread(run)
    assert code != 0 and "is no subqueue name" in err and len(err.strip().splitlines()) == 1
