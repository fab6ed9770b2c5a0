"""`qm2qm peek/receive/lookup/purge --protocol qm2qm|mqrr|auto` and RemoteReader(protocol=...) against a real
server (the pytest plugin's in-process one): MS-MQRR when `--mqrr` is on, the fallback to qmcomm + qm2qm on
EPT_S_NOT_REGISTERED when it is off (MS-MQRR 3.2.4.1), and one queue read through both protocols."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qm2qm.cli import main
from qm2qm.client import RemoteReader, RpcCallError

EPT_S_NOT_REGISTERED = 0x16C9A0D6


def cli(server, *args):
    result = CliRunner().invoke(main, [*args, "--admin", server.admin_url, "--json"], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def bodies(stdout: str) -> list[str]:
    out = json.loads(stdout)
    return [entry["message"]["body_text"] for entry in (out if isinstance(out, list) else [out])]


@pytest.mark.qm2qm(mqrr=True)
def test_cli_peek_and_receive_with_protocol_mqrr_read_over_remoteread(qm2qm_server, qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make(messages=["one", "two", "three"])
    code, out, err = cli(qm2qm_server, "peek", q, "--protocol", "mqrr", "--cursor", "--count", "2")
    assert code == 0, err
    assert bodies(out) == ["one", "two"] and {e["protocol"] for e in json.loads(out)} == {"mqrr"}
    code, out, err = cli(qm2qm_server, "receive", q, "--protocol", "mqrr")
    assert code == 0, err
    entry = json.loads(out)
    assert entry["message"]["body_text"] == "one" and entry["end_receive"].startswith("MQ_OK")
    assert [m["body_size"] for m in qm2qm_admin.list_messages(q)] == [3, 5]
    code, out, _ = cli(qm2qm_server, "receive", q, "--protocol", "mqrr", "--nack")
    assert code == 0 and qm2qm_admin.show_queue(q)["messages"] == 2          # RR_NACK: the message stays
    assert qm2qm_admin.list_handles() == [] and qm2qm_server.app.mqrr_service is not None


@pytest.mark.qm2qm(mqrr=True)
def test_cli_lookup_and_purge_with_protocol_mqrr(qm2qm_server, qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make(messages=["a", "b"])
    second = qm2qm_admin.list_messages(q)[1]["lookup_id"]
    code, out, err = cli(qm2qm_server, "lookup", q, str(second), "--protocol", "mqrr")
    assert code == 0, err
    assert json.loads(out)["message"]["body_text"] == "b" and json.loads(out)["protocol"] == "mqrr"
    code, out, err = cli(qm2qm_server, "purge", q, "--protocol", "mqrr")
    assert code == 0, err
    assert json.loads(out)["status"].startswith("MQ_OK")
    assert qm2qm_admin.show_queue(q)["messages"] == 0


def test_cli_protocol_mqrr_without_the_switch_names_the_unregistered_interface(qm2qm_server, qm2qm_queues):
    q = qm2qm_queues.make(messages=["x"])
    code, _, err = cli(qm2qm_server, "peek", q, "--protocol", "mqrr")
    assert code == 1 and "ept_s_not_registered" in err.lower()


def test_cli_protocol_auto_falls_back_to_qm2qm_when_mqrr_is_off(qm2qm_server, qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make(messages=["one", "two"])
    code, out, err = cli(qm2qm_server, "receive", q, "--protocol", "auto")
    assert code == 0, err
    entry = json.loads(out)
    assert entry["message"]["body_text"] == "one" and "protocol" not in entry       # read over qm2qm
    assert "sequential_id" in entry and qm2qm_admin.show_queue(q)["messages"] == 1


def test_reader_auto_takes_the_windows_fallback_path(qm2qm_reader, qm2qm_queues):
    q = qm2qm_queues.make(messages=["one"])
    reader = qm2qm_reader(q, protocol="auto")
    assert reader.protocol == "qm2qm" and reader.steps[:2] == ["ept_map(RemoteRead)", "R_QMGetRTQMServerPort"]
    assert reader.peek().message().body == b"one"


def test_reader_mqrr_without_the_switch_raises_ept_s_not_registered(qm2qm_server, qm2qm_queues):
    q = qm2qm_queues.make(messages=["one"])
    reader = RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\" + q.split("\\", 1)[1], protocol="mqrr",
                          epm_port=qm2qm_server.port)
    with pytest.raises(RpcCallError) as error:
        reader.open()
    assert error.value.status == EPT_S_NOT_REGISTERED and reader.mqrr is None


@pytest.mark.qm2qm(mqrr=True)
def test_reader_auto_prefers_mqrr_when_registered(qm2qm_reader, qm2qm_queues):
    reader = qm2qm_reader(qm2qm_queues.make(messages=["one"]), protocol="auto", cursor=True)
    assert reader.protocol == "mqrr"
    assert reader.steps == ["ept_map(RemoteRead)", "R_GetServerPort", "R_OpenQueue", "R_CreateCursor"]
    assert reader.peek().message().body == b"one"
    assert reader.peek_next(timeout_ms=0).hresult == 0xC00E001B      # MQ_ERROR_IO_TIMEOUT: nothing after it


@pytest.mark.qm2qm(mqrr=True)
def test_the_same_queue_read_through_both_protocols(qm2qm_reader, qm2qm_queues, qm2qm_admin, qm2qm_server):
    q = qm2qm_queues.make(messages=["first", "second", "third"])
    over_mqrr = qm2qm_reader(q, protocol="mqrr")
    over_qm2qm = qm2qm_reader(q, protocol="qm2qm")
    assert (over_mqrr.protocol, over_qm2qm.protocol) == ("mqrr", "qm2qm")
    assert over_mqrr.peek().buffer == over_qm2qm.peek().buffer                 # the same UserMessage packet
    assert over_mqrr.receive().message().body == b"first"
    assert over_qm2qm.receive().message().body == b"second"
    assert over_mqrr.receive().message().body == b"third"
    assert over_qm2qm.receive().hresult == 0xC00E001B
    assert qm2qm_admin.show_queue(q)["messages"] == 0
    over_mqrr.close()
    over_qm2qm.close()
    assert over_mqrr.steps[-1] == "R_CloseQueue" and over_qm2qm.steps[-1] == "R_QMCloseRemoteQueueContext"
    assert qm2qm_admin.list_handles() == []


def test_reader_rejects_an_unknown_protocol():
    with pytest.raises(ValueError, match="expected qm2qm, mqrr or auto, got 'mqmp'"):
        RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\private$\\q", protocol="mqmp")


def test_via_admin_cannot_be_combined_with_protocol_mqrr(qm2qm_server, qm2qm_queues):
    code, _, err = cli(qm2qm_server, "peek", qm2qm_queues.make(), "--protocol", "mqrr", "--via-admin")
    assert code == 2 and "--via-admin opens a qm2qm session" in err


@pytest.mark.qm2qm(mqrr=True)
def test_reader_over_mqrr_negotiates_ndr64_when_asked(qm2qm_reader, qm2qm_queues):
    reader = qm2qm_reader(qm2qm_queues.make(messages=["wide"]), protocol="mqrr", ndr64=True)
    assert reader.mqrr.client.ndr64 and reader.receive().message().body == b"wide"
