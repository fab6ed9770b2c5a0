"""The qm2qm pytest plugin (qm2qm.pytest_plugin, pytest11 entry point): its fixtures used from a test file
outside the package, run by pytester in a fresh pytest process that loads the plugin the way a user's would."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"

USER_TESTS = r'''
import pytest

from qm2qm.mqmp.constants import IP_READ
from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RR_ACK
from qm2qm.mqrr.client import MqrrClient


def test_in_process_server_admin_and_client(qm2qm_server, qm2qm_admin, qm2qm_client):
    assert qm2qm_admin.info()["rpc"]["port"] == qm2qm_server.port
    assert qm2qm_client.get_version()[0] >= 5
    assert qm2qm_server.app is not None and qm2qm_server.process is None
    names = qm2qm_server.call(lambda: sorted(q.pathname for q in qm2qm_server.app.qm.queue_collection.values()))
    assert "private$\\admin_queue$" in names


def test_queue_helpers_and_remote_read(qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make("orders", messages=["one", b"\x00two", {"body": "three", "label": "L3", "priority": 7}])
    assert [m["label"] for m in qm2qm_admin.list_messages(q)] == ["L3", "", ""]
    session = qm2qm_queues.open_session(q)
    got = session.client.start_receive2(session.handle, action=MQ_ACTION_RECEIVE)
    assert got.ok and got.message().body == b"three"
    assert session.client.end_receive(got.context, RR_ACK)[0] == 0
    assert qm2qm_admin.show_queue(q)["messages"] == 2


def test_every_test_gets_a_fresh_store(qm2qm_admin):
    assert not [q for q in qm2qm_admin.list_queues() if q["pathname"].endswith("\\orders")]


@pytest.mark.qm2qm(mqrr=True)
def test_subprocess_server(qm2qm_server_process):
    assert qm2qm_server_process.process.poll() is None and qm2qm_server_process.app is None
    assert qm2qm_server_process.admin().info()["rpc"]["port"] == qm2qm_server_process.port
    with qm2qm_server_process.client() as client:
        assert client.get_version()[0] >= 5
    remote_read = MqrrClient(qm2qm_server_process.host, qm2qm_server_process.port)    # the marker became --mqrr
    assert remote_read.get_server_port() == qm2qm_server_process.port
    remote_read.disconnect()


def test_qmcomm_client_opens_on_the_port_info_names(qm2qm_server, qm2qm_qmcomm_client, qm2qm_queues):
    assert qm2qm_qmcomm_client.port == qm2qm_server.info["qmcomm_port"]
    assert qm2qm_qmcomm_client.get_rtqm_server_port(IP_READ) == qm2qm_server.port
    opened = qm2qm_qmcomm_client.open_remote_queue("DIRECT=TCP:127.0.0.1\\" + qm2qm_queues.make("cq")[2:])
    assert opened.status == 0 and qm2qm_server.app.qmcomm_service.open_contexts


def test_mqrr_client_turns_remoteread_on(qm2qm_server, qm2qm_mqrr_client, qm2qm_queues):
    assert qm2qm_server.app.mqrr_service is not None
    handle = qm2qm_mqrr_client.open("DIRECT=OS:localhost\\" + qm2qm_queues.make("rq", messages=["m"])[2:])
    read = qm2qm_mqrr_client.read(handle, request_id=1)
    assert read.status == 0 and b"m" in read.packet and qm2qm_mqrr_client.end(handle, 1) == 0


def test_without_the_marker_remoteread_is_off(qm2qm_server):
    assert qm2qm_server.app.mqrr_service is None


@pytest.mark.qm2qm(mqrr=True)
def test_reader_factory_reads_one_queue_over_both_protocols(qm2qm_reader, qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make(messages=["a", "b"])
    assert qm2qm_reader(q, protocol="mqrr").receive().message().body == b"a"
    reader = qm2qm_reader(q)
    assert reader.protocol == "qm2qm" and reader.receive().message().body == b"b"
    assert qm2qm_admin.show_queue(q)["messages"] == 0
'''

SWITCHED = r'''
import pytest


@pytest.fixture
def qm2qm_server(qm2qm_server_process):
    return qm2qm_server_process


def test_admin_and_client_follow_the_override(qm2qm_server, qm2qm_admin, qm2qm_client, qm2qm_queues):
    assert qm2qm_server.process is not None
    q = qm2qm_queues.make(messages=["x"])
    assert qm2qm_admin.show_queue(q)["messages"] == 1
    assert qm2qm_client.port == qm2qm_server.port
'''


def readme_example() -> str:
    section = README.read_text().split("## Testing against qm2qm", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_plugin_fixtures_from_user_test_files(pytester):
    """One pytest run (the plugin loaded from its entry point) of: the fixtures used directly, a conftest-free
    module overriding qm2qm_server with the subprocess, and the README's example."""
    assert len(readme_example().strip().splitlines()) <= 10
    pytester.makepyfile(test_user=USER_TESTS, test_switched=SWITCHED, test_readme=readme_example())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=10)


def test_a_server_that_cannot_start_raises_the_reason(tmp_path):
    from qm2qm.app import StartupError
    from qm2qm.pytest_plugin import start_in_process
    (tmp_path / "file").write_text("x")
    with pytest.raises(StartupError, match=r"data directory '.*file' is not a directory"):
        start_in_process(tmp_path / "file")
