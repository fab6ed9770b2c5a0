"""`qm2qm discover` and `qm2qm directory ...` (qm2qm/cli/mqcn.py) through click's runner; UDP on 127.0.0.1 only."""
import asyncio
import json
import threading
import uuid

import pytest
from click.testing import CliRunner

from qm2qm.cli.mqcn import directory_group, discover_command, parse_value
from qm2qm.mqsd.codec import ServerEntry
from qm2qm.mqsd.responder import Topology, start_responder
from shared_adm.store.sqlite import SqliteStore

from tests.mqsd.test_codec import CLIENT_SITE, CN, OTHER_SITE

QUEUE = "aaaaaaaa-0000-0000-0000-000000000001"


class ResponderThread:
    """An MQSD responder on its own loop in a thread, so the CLI's asyncio.run can talk to it."""

    def __init__(self, topology):
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(topology,), daemon=True)
        self.thread.start()
        assert self.ready.wait(30)

    def _run(self, topology):
        asyncio.set_event_loop(self.loop)
        self.responder = self.loop.run_until_complete(start_responder(topology, "127.0.0.1", 0))
        self.ready.set()
        self.loop.run_forever()

    def stop(self):
        self.loop.call_soon_threadsafe(self.responder.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def test_discover_same_site_prints_the_connected_networks():
    server = ResponderThread(Topology(CLIENT_SITE, [CN]))
    try:
        r = CliRunner().invoke(discover_command, ["--site", str(CLIENT_SITE), "--network", "127.0.0.1", "--target",
                                                  "127.0.0.1", "--port", str(server.responder.port), "--json"])
    finally:
        server.stop()
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"success": True, "directory_servers": [], "connected_networks": [str(CN)],
                                    "reason": ""}


def test_discover_failure_exits_1_with_the_reason():
    r = CliRunner().invoke(discover_command, ["--site", str(CLIENT_SITE), "--network", "127.0.0.1", "--target",
                                              "127.0.0.1", "--port", "9", "--timeout-ms", "1"])
    assert r.exit_code == 1 and "no TopologyServerReply" in r.output


def test_discover_other_site_human_output():
    server = ResponderThread(Topology(OTHER_SITE, [CN], [ServerEntry("nt4pec")]))
    try:
        r = CliRunner().invoke(discover_command, ["--site", str(CLIENT_SITE), "--network", "127.0.0.1", "--target",
                                                  "127.0.0.1", "--port", str(server.responder.port),
                                                  "--timeout-ms", "1500"])
    finally:
        server.stop()
    assert r.exit_code == 0 and "nt4pec" in r.output


def test_discover_rejects_a_bad_guid():
    r = CliRunner().invoke(discover_command, ["--site", "nope"])
    assert r.exit_code == 2 and "not a GUID" in r.output


@pytest.fixture
def data_dir(tmp_path):
    SqliteStore(tmp_path).close()
    return str(tmp_path)


def test_directory_create_show_set_list_delete(data_dir):
    run = lambda *args: CliRunner().invoke(directory_group, [args[0], "--data-dir", data_dir, *args[1:]])
    r = run("set", "queue", QUEUE, "Pathname=qm2qm\\pub", "Quota=64", "Security=hex:0102",
            f"QueueManager=guid:{CN}", "Journaling=true", "Label=\"42\"", "--create")
    assert r.exit_code == 0, r.output
    r = run("show", "Queue", QUEUE, "--json")
    attrs = json.loads(r.output)["attributes"]
    assert attrs == {"Pathname": "qm2qm\\pub", "Quota": 64, "Security": {"$hex": "0102"},
                     "QueueManager": {"$guid": str(CN)}, "Journaling": True, "Label": "42"}
    assert run("set", "Queue", QUEUE, "Quota=1").exit_code == 0
    assert "Quota = 1" in run("show", "Queue", QUEUE).output
    assert QUEUE in run("list").output and run("list", "--type", "site", "--json").output.strip() == "[]"
    assert run("delete", "Queue", QUEUE).exit_code == 0
    missing = run("show", "Queue", QUEUE)
    assert missing.exit_code == 1 and "ObjectNotFound" in missing.output


@pytest.mark.parametrize("args,code,message", [
    (["set", "Printer", QUEUE, "a=1"], 2, "unknown object type"),
    (["set", "Queue", "xyz", "a=1"], 2, "not a GUID"),
    (["set", "Queue", QUEUE, "novalue"], 2, "expected NAME=VALUE"),
    (["set", "Queue", QUEUE, "a=1"], 1, "ObjectNotFound"),
    (["set", "Queue", QUEUE, "a={\"x\": 1}"], 2, "objects are not directory values"),
    (["set", "Queue", QUEUE, "a=hex:zz"], 2, "not hex"),
])
def test_directory_errors(data_dir, args, code, message):
    r = CliRunner().invoke(directory_group, [args[0], "--data-dir", data_dir, *args[1:]])
    assert r.exit_code == code and message in r.output


def test_directory_without_a_store(tmp_path):
    r = CliRunner().invoke(directory_group, ["list", "--data-dir", str(tmp_path)])
    assert r.exit_code == 1 and "no qm2qm store" in r.output


def test_parse_value_forms():
    assert parse_value("guid:{00000000-0000-0000-0000-000000000001}") == uuid.UUID(int=1)
    assert (parse_value("null"), parse_value("7"), parse_value("[1, 2]"), parse_value("plain text")) == (
        None, 7, [1, 2], "plain text")
