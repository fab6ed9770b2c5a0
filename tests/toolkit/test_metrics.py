"""GET /metrics (qm2qm.metrics): parsed with prometheus_client's parser after a scripted remote read, every counter
and gauge checked against what the script did (the server is the qm2qm_server fixture of qm2qm.pytest_plugin)."""
from __future__ import annotations

import os
import threading
import time
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from qm2qm.client import Qm2qmClient, RpcCallError
from qm2qm.mqqp.constants import (IP_READ, MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, MQ_LOOKUP_PEEK_CURRENT,
                                  RR_ACK)
from shared_adm import status as st

CONTEXT_MISMATCH = 0x1C00001A
REMOTE_CANCELED_BY_CLIENT = 0x400E03E9      # what a cancelled read answers (tests/product/test_client.py)
SESSION = "PCTX_RRSESSION_HANDLE_TYPE"
REMOTE_READ = "PCTX_REMOTEREAD_HANDLE_TYPE"


def scrape(server) -> dict:
    """{(sample name, frozenset of labels): value} of one GET /metrics."""
    with urllib.request.urlopen(server.admin_url + "/metrics", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def op(opnum: int, name: str, **extra: str) -> frozenset:
    return frozenset({"interface": "qm2qm", "opnum": str(opnum), "operation": name, **extra}.items())


def until(predicate, guard_s: float = 30.0) -> None:
    """Poll a server-side condition (a hang guard, not a timing assertion)."""
    end = time.monotonic() + guard_s
    while not predicate():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.01)


def test_metrics_after_a_scripted_remote_read(qm2qm_server, qm2qm_queues, qm2qm_admin):
    q = qm2qm_queues.make("metered", messages=["one", "two", {"body": "three", "label": "L3"}])
    idle = qm2qm_queues.make("idle")
    calls, hresults = Counter(), Counter()

    def did(opnum, name, hresult=None):
        calls[opnum, name] += 1
        if hresult is not None:
            hresults[opnum, name, hresult] += 1

    s = qm2qm_queues.open_session(q)                                        # opnum 2 on connection 1
    did(2, "RemoteQMOpenQueue", st.MQ_OK)
    c = s.client
    did(9, "RemoteQMStartReceive2", c.start_receive2(s.handle, action=MQ_ACTION_PEEK_CURRENT).hresult)
    got = c.start_receive2(s.handle, action=MQ_ACTION_RECEIVE)
    did(9, "RemoteQMStartReceive2", got.hresult)
    did(1, "RemoteQMEndReceive", c.end_receive(got.context, RR_ACK)[0])
    held = c.start_receive(s.handle, action=MQ_ACTION_RECEIVE)             # left awaiting EndReceive
    did(0, "RemoteQMStartReceive", held.hresult)
    missing = c.start_receive_by_lookup_id(s.handle, 0x7FFFFFFF, action=MQ_LOOKUP_PEEK_CURRENT)
    did(10, "RemoteQMStartReceiveByLookupId", missing.hresult)
    assert missing.hresult != st.MQ_OK
    c.get_version()
    did(8, "RemoteQmGetVersion")
    assert c.get_qmqm_server_port(IP_READ) == qm2qm_server.port
    did(7, "RemoteQMGetQMQMServerPort")
    try:
        c.end_receive(b"\0\0\0\0" + os.urandom(16), RR_ACK)
    except RpcCallError as exc:
        assert exc.status == CONTEXT_MISMATCH
    else:
        raise AssertionError("an unknown context handle was accepted")
    calls[1, "RemoteQMEndReceive"] += 1

    # a read blocked on the empty queue, on a second connection
    blocked = qm2qm_queues.open_session(idle)
    did(2, "RemoteQMOpenQueue", st.MQ_OK)
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(r=blocked.client.start_receive2(
        blocked.handle, action=MQ_ACTION_RECEIVE, timeout_ms=0xFFFFFFFF, request_id=77)))
    thread.start()
    until(lambda: any(r["request_id"] == 77 for r in qm2qm_admin.list_reads()["reads"]))

    during = scrape(qm2qm_server)
    assert during[("qm2qm_pending_reads", frozenset({"state": "pending"}.items()))] == 1
    assert during[("qm2qm_pending_reads", frozenset({"state": "awaiting_end_receive"}.items()))] == 1
    assert during[("qm2qm_waiting_reads", frozenset())] == 1
    assert during[("qm2qm_rpc_connections", frozenset())] == 2
    assert during[("qm2qm_rpc_connections_opened_total", frozenset())] == 2
    assert during[("qm2qm_rpc_connections_closed_total", frozenset())] == 0
    assert during[("qm2qm_rpc_connections_refused_total", frozenset())] == 0
    assert during[("qm2qm_rpc_association_groups", frozenset())] == 2
    handles = {dict(labels)["type"]: value for (name, labels), value in during.items()
               if name == "qm2qm_rpc_context_handles"}
    assert handles[SESSION] == 2 and handles[REMOTE_READ] == 1

    with Qm2qmClient(qm2qm_server.host, qm2qm_server.port) as other:     # connection 3
        assert other.cancel_receive(blocked.handle, 77) == st.MQ_OK
    did(5, "RemoteQMCancelReceive", st.MQ_OK)
    thread.join(timeout=30)
    did(9, "RemoteQMStartReceive2", outcome["r"].hresult)
    assert outcome["r"].hresult == REMOTE_CANCELED_BY_CLIENT
    until(lambda: scrape(qm2qm_server)[("qm2qm_rpc_connections_closed_total", frozenset())] == 1)

    after = scrape(qm2qm_server)
    seen_calls = {(int(dict(k)["opnum"]), dict(k)["operation"]): v for (name, k), v in after.items()
                  if name == "qm2qm_rpc_calls_total" and dict(k)["interface"] == "qm2qm"}
    assert seen_calls == dict(calls)
    seen_hresults = {(int(dict(k)["opnum"]), dict(k)["operation"], int(dict(k)["hresult"], 16)): v
                     for (name, k), v in after.items() if name == "qm2qm_rpc_hresults_total"}
    assert seen_hresults == dict(hresults)
    names = {dict(k)["hresult"]: dict(k)["name"] for (name, k), _ in after.items() if name == "qm2qm_rpc_hresults_total"}
    assert names["0x00000000"] == "MQ_OK"
    assert names[f"0x{missing.hresult:08X}"] == st.status_name(missing.hresult)
    faults = {(dict(k)["opnum"], dict(k)["status"]): v for (name, k), v in after.items()
              if name == "qm2qm_rpc_faults_total"}
    assert faults == {("1", f"0x{CONTEXT_MISMATCH:08x}"): 1}
    for (opnum, name), count in calls.items():
        labels = op(opnum, name)
        assert after[("qm2qm_rpc_call_duration_seconds_count", labels)] == count
        assert after[("qm2qm_rpc_call_duration_seconds_bucket", labels | {("le", "+Inf")})] == count
        assert after[("qm2qm_rpc_call_duration_seconds_sum", labels)] > 0
    # the blocked read waited until cancelled: at least as long as the wait for the first scrape
    assert after[("qm2qm_rpc_call_duration_seconds_bucket", op(9, "RemoteQMStartReceive2") | {("le", "5e-05")})] < 4
    assert after[("qm2qm_rpc_connections_opened_total", frozenset())] == 3
    assert after[("qm2qm_rpc_connections", frozenset())] == 2
    assert after[("qm2qm_pending_reads", frozenset({"state": "pending"}.items()))] == 0
    assert after[("qm2qm_waiting_reads", frozenset())] == 0

    for pathname in (q, idle):
        shown = qm2qm_admin.show_queue(pathname)
        labels = frozenset({"queue": shown["pathname"]}.items())
        assert after[("qm2qm_queue_messages", labels)] == shown["messages"]
        assert after[("qm2qm_queue_available_messages", labels)] == shown["available"]
        assert after[("qm2qm_queue_bytes", labels)] == shown["bytes"]
        assert after[("qm2qm_queue_open_handles", labels)] == shown["open_handles"]
    assert after[("qm2qm_queue_messages", frozenset({"queue": qm2qm_admin.show_queue(q)["pathname"]}.items()))] == 2

    commits = after[("qm2qm_store_commit_duration_seconds_count", frozenset())]
    assert 1 <= commits <= qm2qm_server.app.store.commits
    assert after[("qm2qm_store_commit_duration_seconds_sum", frozenset())] > 0


def test_the_store_reports_acks_made_durable_by_its_delete_journal(qm2qm_server, qm2qm_queues, qm2qm_reader):
    queue = qm2qm_queues.make(messages=[{"body": f"m{i}", "delivery": "recoverable"} for i in range(3)])
    before = scrape(qm2qm_server)
    reader = qm2qm_reader(queue)
    for _ in range(3):
        assert reader.receive(ack=True).hresult == st.MQ_OK
    store = qm2qm_server.app.store
    until(lambda: store.journal_backlog() == 0)         # moved into the database by the writer
    after = scrape(qm2qm_server)
    journal, database = (frozenset({"how": how}.items()) for how in ("delete_journal", "database"))
    assert after[("qm2qm_store_group_commits_total", journal)] - before[("qm2qm_store_group_commits_total", journal)] \
        == store.journaled >= 1                         # the three ACKs, in one to three appends
    assert after[("qm2qm_store_group_commits_total", database)] == store.commits - store.journaled >= 3   # sends
    assert after[("qm2qm_store_journaled_deletions", frozenset())] == 0


def test_metrics_off_keeps_scrape_time_gauges(tmp_path):
    from qm2qm.pytest_plugin import start_in_process
    handle, server = start_in_process(tmp_path / "data", metrics=False)
    try:
        handle.admin().create_queue(".\\private$\\quiet")
        with handle.client() as client:
            client.get_version()
        samples = scrape(handle)
    finally:
        server.stop()
    assert not [k for k in samples if k[0].startswith("qm2qm_rpc_calls")]
    assert not [k for k in samples if k[0].startswith("qm2qm_store_commit")]
    assert ("qm2qm_rpc_connections", frozenset()) in samples
    assert any(k[0] == "qm2qm_queue_messages" and dict(k[1])["queue"].endswith("\\private$\\quiet") for k in samples)



def test_hresults_are_read_from_ndr64_responses_too(qm2qm_server, qm2qm_queues):
    q = qm2qm_queues.make(messages=["a"])
    handle = qm2qm_queues.admin.open_queue(q)["hRemoteQueue"]
    with qm2qm_server.client(ndr64=True) as client:
        assert client.open_queue(handle)[0] == st.MQ_OK
        missing = client.start_receive_by_lookup_id(handle, 0x7FFFFFFF, action=MQ_LOOKUP_PEEK_CURRENT).hresult
        assert client.start_receive2(handle, action=MQ_ACTION_RECEIVE).ok
        empty = client.start_receive2(handle, action=MQ_ACTION_RECEIVE, timeout_ms=0).hresult
    assert missing != st.MQ_OK and empty == st.MQ_ERROR_IO_TIMEOUT
    samples = scrape(qm2qm_server)
    by_key = {(dict(k)["opnum"], dict(k)["hresult"]): v for (name, k), v in samples.items()
              if name == "qm2qm_rpc_hresults_total"}
    assert by_key == {("2", "0x00000000"): 1, ("10", f"0x{missing:08X}"): 1, ("9", "0x00000000"): 1,
                      ("9", f"0x{empty:08X}"): 1}


def per_interface(samples: dict, sample: str, interface: str) -> dict:
    """{(opnum, operation[, hresult]): value} of one interface's samples named ``sample``."""
    out = {}
    for (name, labels), value in samples.items():
        labels = dict(labels)
        if name == sample and labels["interface"] == interface:
            key = (int(labels["opnum"]), labels["operation"])
            out[key + ((int(labels["hresult"], 16),) if "hresult" in labels else ())] = value
    return out


@pytest.mark.qm2qm(mqrr=True)
def test_hresults_per_opnum_of_qmcomm_and_remoteread(qm2qm_server, qm2qm_qmcomm_client, qm2qm_reader,
                                                     qm2qm_queues):
    """MS-MQMP and MS-MQRR methods that return an HRESULT are counted per value; the void / port ones are not."""
    from qm2qm.mqmp.constants import IP_HANDSHAKE
    q = qm2qm_queues.make("both", messages=["one"])
    fmt = "DIRECT=TCP:127.0.0.1\\" + q[2:]
    qmcomm, rr = Counter(), Counter()
    assert qm2qm_qmcomm_client.get_rtqm_server_port(IP_HANDSHAKE) == qm2qm_server.info["qmcomm_port"]
    opened = qm2qm_qmcomm_client.open_remote_queue(fmt)
    qmcomm[2, "R_QMOpenRemoteQueue", opened.status] += 1
    status, _ = qm2qm_qmcomm_client.create_remote_cursor(opened.h_queue)
    qmcomm[4, "R_QMCreateRemoteCursor", status] += 1
    qm2qm_qmcomm_client.close_remote_queue_context(opened.context)        # void: a call, no HRESULT
    assert {opened.status, status} == {st.MQ_OK}

    reader = qm2qm_reader(q, protocol="mqrr")                              # R_GetServerPort, R_OpenQueue: no HRESULT
    got = reader.receive()
    rr[7, "R_StartReceive", got.hresult] += 1
    rr[9, "R_EndReceive", st.MQ_OK] += 1
    empty = reader.peek()
    rr[7, "R_StartReceive", empty.hresult] += 1
    rr[6, "R_PurgeQueue", reader.purge()] += 1
    reader.close()
    rr[3, "R_CloseQueue", st.MQ_OK] += 1
    assert got.ok and empty.hresult == st.MQ_ERROR_IO_TIMEOUT

    samples = scrape(qm2qm_server)
    assert per_interface(samples, "qm2qm_rpc_hresults_total", "qmcomm") == dict(qmcomm)
    assert per_interface(samples, "qm2qm_rpc_hresults_total", "RemoteRead") == dict(rr)
    assert per_interface(samples, "qm2qm_rpc_calls_total", "qmcomm") == {
        (31, "R_QMGetRTQMServerPort"): 1, (2, "R_QMOpenRemoteQueue"): 1, (4, "R_QMCreateRemoteCursor"): 1,
        (3, "R_QMCloseRemoteQueueContext"): 1}
    assert per_interface(samples, "qm2qm_rpc_calls_total", "RemoteRead") == {
        (0, "R_GetServerPort"): 1, (2, "R_OpenQueue"): 1, (7, "R_StartReceive"): 2, (9, "R_EndReceive"): 1,
        (6, "R_PurgeQueue"): 1, (3, "R_CloseQueue"): 1}


def test_a_subqueue_holding_messages_has_queue_series_and_an_empty_one_has_none(tmp_path):
    from qm2qm.pytest_plugin import start_in_process
    handle, server = start_in_process(tmp_path / "data")
    try:
        admin = handle.admin()
        admin.create_queue(".\\private$\\orders")
        sent = admin.send(".\\private$\\orders", body="bad")
        admin.move_message(".\\private$\\orders", sent["lookup_id"], "poison")
        held = scrape(handle)
        admin.move_message(".\\private$\\orders;poison", sent["lookup_id"])
        after = scrape(handle)
    finally:
        server.stop()
    subqueue_series = {k: v for k, v in held.items() if k[0] == "qm2qm_queue_messages"
                       and dict(k[1])["queue"].endswith("\\private$\\orders;poison")}
    assert list(subqueue_series.values()) == [1]
    assert not [k for k in after if k[0].startswith("qm2qm_queue") and dict(k[1])["queue"].endswith(";poison")]


def test_reassembly_gauges_follow_unfinished_fragmented_requests_over_every_connection(tmp_path):
    import socket
    import struct
    import uuid as uuid_

    from qm2qm.pytest_plugin import start_in_process
    from qm2qm.rpc import faults as F, pdu as P
    from qm2qm.rpc.events import ContextItem
    from qm2qm.rpc.interface import NDR20

    qm2qm_if = (uuid_.UUID("1088a980-eae5-11d0-8d9b-00a02453c337"), 1, 0)

    def bound(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(P.build_bind(1, (ContextItem(0, qm2qm_if, ((NDR20[0], 2, 0),)),)))
        assert read_pdu(sock)[2] == F.PTYPE_BIND_ACK
        return sock

    def read_pdu(sock: socket.socket) -> bytes:
        data = b""
        while len(data) < 16 or len(data) < struct.unpack_from("<H", data, 8)[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            data += chunk
        return data

    five_mib = P.fragment_request(2, 0, 8, bytes(5 * 1024 * 1024), 5840)
    handle, server = start_in_process(tmp_path / "data", max_reassembly_mib=8)
    try:
        holder, other = bound(handle.port), bound(handle.port)
        holder.sendall(b"".join(five_mib[:-1]))           # all but the last fragment: held
        held = sum(len(f) - P.REQUEST_HEADER_SIZE for f in five_mib[:-1])
        until(lambda: scrape(handle)[("qm2qm_rpc_reassembly_bytes", frozenset())] == held)
        other.sendall(b"".join(five_mib))                   # 8 MiB cannot hold both
        fault = read_pdu(other)
        assert fault[2] == F.PTYPE_FAULT and struct.unpack_from("<I", fault, 24)[0] == F.NCA_S_SERVER_TOO_BUSY
        samples = scrape(handle)
        assert samples[("qm2qm_rpc_reassembly_bytes", frozenset())] == held
        assert samples[("qm2qm_rpc_reassembly_capacity_bytes", frozenset())] == 8 * 1024 * 1024
        assert samples[("qm2qm_rpc_reassembly_refused_total", frozenset())] == 1
        holder.close()
        until(lambda: scrape(handle)[("qm2qm_rpc_reassembly_bytes", frozenset())] == 0)
        other.close()
    finally:
        server.stop()


def test_unread_answer_gauges_report_the_allowance_over_every_listener(tmp_path):
    from qm2qm.pytest_plugin import start_in_process
    handle, server = start_in_process(tmp_path / "data", max_unread_mib=16)
    try:
        samples = scrape(handle)
        assert samples[("qm2qm_rpc_unread_answer_capacity_bytes", frozenset())] == 16 * 1024 * 1024
        assert samples[("qm2qm_rpc_unread_answer_bytes", frozenset())] == 0
        assert samples[("qm2qm_rpc_unread_answer_closed_total", frozenset())] == 0
    finally:
        server.stop()


def test_the_runtime_gauges_count_every_listener(qm2qm_server, qm2qm_qmcomm_client, qm2qm_queues):
    """A qmcomm connection and its PCTX_OPENREMOTE handle are counted as the qm2qm listener's are: the connection
    counters already saw it, so the gauge must too (opened - closed = open)."""
    q = qm2qm_queues.make("gauged", messages=["one"])
    opened = qm2qm_qmcomm_client.open_remote_queue("DIRECT=TCP:127.0.0.1\\" + q[2:])
    assert opened.status == st.MQ_OK
    samples = scrape(qm2qm_server)
    total = {name: samples[(name, frozenset())] for name in ("qm2qm_rpc_connections", "qm2qm_rpc_association_groups",
                                                            "qm2qm_rpc_connections_opened_total",
                                                            "qm2qm_rpc_connections_closed_total")}
    assert total["qm2qm_rpc_connections"] == (total["qm2qm_rpc_connections_opened_total"]
                                              - total["qm2qm_rpc_connections_closed_total"]) >= 1
    assert total["qm2qm_rpc_association_groups"] >= 1
    assert samples[("qm2qm_rpc_context_handles", frozenset({"type": "PCTX_OPENREMOTE_HANDLE_TYPE"}.items()))] == 1
    qm2qm_qmcomm_client.close_remote_queue_context(opened.context)
    until(lambda: scrape(qm2qm_server)[("qm2qm_rpc_context_handles",
                                        frozenset({"type": "PCTX_OPENREMOTE_HANDLE_TYPE"}.items()))] == 0)
