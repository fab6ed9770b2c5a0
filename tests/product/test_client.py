"""qm2qm.client.Qm2qmClient: every opnum 0–10 against a server of the qm2qm pytest plugin (MS-MQQP 3.1.4, 3.2.4)."""
from __future__ import annotations

import threading
import time

import pytest

from qm2qm.client import Qm2qmClient, RpcCallError
from qm2qm.mqqp.constants import (IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, MQ_ACTION_PEEK_CURRENT,
                                  MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE, MQ_LOOKUP_PEEK_NEXT,
                                  MQ_LOOKUP_RECEIVE_CURRENT, RR_ACK, RR_NACK)
from shared_adm import status as st

NULL = bytes(20)


@pytest.fixture
def setup(qm2qm_queues):
    """A fresh server and queue with three messages, a remote-read handle and a client whose session is open
    (the qm2qm pytest plugin's fixtures)."""
    q = qm2qm_queues.make(messages=["one", "two", "three"])
    read = qm2qm_queues.open_session(q)
    assert read.session != NULL
    yield qm2qm_queues.admin, q, read.handle, read.client, read.session


def bodies(admin, q):
    return [m["body_text"] for m in admin.list_messages(q, body=True)]


def until(predicate, guard_s=30.0):
    """Poll a server-side condition (a hang guard, not a timing assertion)."""
    end = time.monotonic() + guard_s
    while not predicate():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.01)


def test_opnum0_start_receive_peek_decodes_the_user_message(setup):
    admin, q, h, client, _ = setup
    result = client.start_receive(h, action=MQ_ACTION_PEEK_CURRENT)
    assert result.ok and result.context == NULL and result.sequential_id is None
    assert result.size == len(result.buffer) and result.reserved == 1
    assert result.message().body == b"one"
    assert bodies(admin, q) == ["one", "two", "three"]


def test_opnum0_rejects_dwqueue_not_equal_to_hremotequeue(setup):
    _, _, h, client, _ = setup
    assert client.start_receive(h, dw_queue=h + 1).hresult == st.MQ_ERROR_INVALID_PARAMETER


def test_opnum9_receive_then_opnum1_ack_deletes(setup):
    admin, q, h, client, _ = setup
    result = client.start_receive2(h, action=MQ_ACTION_RECEIVE)
    assert result.ok and result.context != NULL and result.message().body == b"one"
    listed = admin.list_messages(q)
    assert listed[0]["state"] == "Locked"
    assert result.sequential_id == listed[0]["lookup_id"] & ((1 << 56) - 1)
    assert client.end_receive(result.context, RR_ACK) == (st.MQ_OK, NULL)
    assert bodies(admin, q) == ["two", "three"]


def test_opnum1_nack_returns_the_message(setup):
    admin, q, h, client, _ = setup
    result = client.start_receive2(h, action=MQ_ACTION_RECEIVE)
    assert client.end_receive(result.context, RR_NACK) == (st.MQ_OK, NULL)
    assert [m["state"] for m in admin.list_messages(q)] == ["Available"] * 3


def test_opnum10_by_lookup_id(setup):
    admin, q, h, client, _ = setup
    first = client.start_receive_by_lookup_id(h, 0, action=MQ_LOOKUP_PEEK_NEXT)
    assert first.ok and first.message().body == b"one"
    second_id = admin.list_messages(q)[1]["lookup_id"]
    taken = client.start_receive_by_lookup_id(h, second_id, action=MQ_LOOKUP_RECEIVE_CURRENT)
    assert taken.ok and taken.message().body == b"two"
    assert client.end_receive(taken.context, RR_ACK)[0] == st.MQ_OK
    assert bodies(admin, q) == ["one", "three"]
    bad = client.start_receive_by_lookup_id(h, second_id, action=MQ_LOOKUP_PEEK_NEXT, timeout_ms=5)
    assert bad.hresult == st.MQ_ERROR_INVALID_PARAMETER           # ulTimeout MUST be 0 (3.1.4.11)


def test_cursor_peek_next_and_opnum4_close_cursor(setup):
    admin, q, h, client, _ = setup
    c = admin.open_cursor(h)["hCursor"]
    got = [client.start_receive2(h, action=MQ_ACTION_PEEK_CURRENT, cursor=c).message().body]
    got += [client.start_receive2(h, action=MQ_ACTION_PEEK_NEXT, cursor=c).message().body for _ in range(2)]
    assert got == [b"one", b"two", b"three"]
    assert client.close_cursor(h, c) == st.MQ_OK
    assert client.close_cursor(h, c) == st.MQ_ERROR_INVALID_HANDLE


def test_opnum5_cancel_receive_answers_the_blocked_read(qm2qm_server, setup):
    admin, q, h, client, _ = setup
    client.purge_queue(h)
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(
        r=client.start_receive2(h, action=MQ_ACTION_RECEIVE, timeout_ms=0xFFFFFFFF, request_id=77)))
    thread.start()
    until(lambda: any(r["request_id"] == 77 for r in admin.list_reads()["reads"]))
    with Qm2qmClient(qm2qm_server.host, qm2qm_server.port) as other:
        assert other.cancel_receive(h, 77) == st.MQ_OK
        assert other.cancel_receive(h, 77) == st.MQ_ERROR_INVALID_HANDLE     # nothing pending any more
    thread.join(30)
    assert outcome["r"].hresult == 0x400E03E9 and outcome["r"].context == NULL   # REMOTE_CANCELED_BY_CLIENT


def test_opnum6_purge(setup):
    admin, q, h, client, _ = setup
    assert client.purge_queue(h) == st.MQ_OK
    assert bodies(admin, q) == []


def test_opnum7_ports_and_opnum8_version(qm2qm_server):
    with Qm2qmClient(qm2qm_server.host, qm2qm_server.port) as client:
        assert client.get_qmqm_server_port(IP_READ) == qm2qm_server.port
        assert client.get_qmqm_server_port(IP_HANDSHAKE) == qm2qm_server.info["qmcomm_port"] != 0
        assert client.get_qmqm_server_port(IPX_HANDSHAKE) == 0
        assert client.get_version() == (6, 1, 20348)
        assert client.uses_start_receive2()
        with pytest.raises(RpcCallError) as info:
            client.get_qmqm_server_port(4)                     # [range(0, 3)] violation
        assert info.value.status is not None


def test_opnum3_close_queue_closes_the_descriptor(setup):
    admin, q, h, client, session = setup
    assert client.close_queue(session) == (st.MQ_OK, NULL)
    assert all(x["hRemoteQueue"] != h for x in admin.list_handles())
    assert client.start_receive2(h).hresult != st.MQ_OK


def test_disconnect_runs_the_read_handle_down_as_nack(qm2qm_server, setup):
    admin, q, h, client, _ = setup
    result = client.start_receive2(h, action=MQ_ACTION_RECEIVE)
    assert result.ok and admin.list_messages(q)[0]["state"] == "Locked"
    client.close()                                            # 3.1.6.2: rundown = EndReceive(RR_NACK)
    until(lambda: [m["state"] for m in admin.list_messages(q)] == ["Available"] * 3)


def test_ndr64_client(qm2qm_server, setup):
    admin, q, h, _, _ = setup
    with Qm2qmClient(qm2qm_server.host, qm2qm_server.port, ndr64=True) as wide:
        result = wide.start_receive2(h, action=MQ_ACTION_PEEK_CURRENT)
        assert result.ok and result.message().body == b"one"


def test_unreachable_server_is_an_rpc_call_error():
    with pytest.raises(RpcCallError, match=r"cannot reach 127.0.0.1:9"):
        Qm2qmClient("127.0.0.1", 9, connect_timeout=5).connect()


@pytest.mark.qm2qm(mqrr=True)
@pytest.mark.parametrize("protocol", ["qm2qm", "mqrr"])
def test_an_admin_close_of_a_handle_ends_the_reads_through_it(qm2qm_server, qm2qm_queues, qm2qm_reader, protocol):
    """DELETE /v1/handles/{h} ends a receive awaiting its End as a client's close does: the message Available, and
    no read left listed on a handle that is gone (docs/admin-api.md)."""
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    q = qm2qm_queues.make(messages=["held"])
    admin = qm2qm_queues.admin
    before = {h["hRemoteQueue"] for h in admin.list_handles()}
    reader = qm2qm_reader(q, protocol=protocol)
    assert reader._start(MQ_ACTION_RECEIVE, 0).ok                    # Locked, its End not sent
    (handle,) = {h["hRemoteQueue"] for h in admin.list_handles()} - before
    assert len(admin.list_reads()["reads"]) == 1
    admin.close_handle(handle)
    assert admin.list_reads()["reads"] == []
    assert [m["state"] for m in admin.list_messages(q)] == ["Available"]
