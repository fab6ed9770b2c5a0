"""`qm2qm serve` wiring of qmcomm (MS-MQMP 3.1.3, 3.1.4.24): its own listener, the +11 rule, the endpoint mapper,
the port answers of both interfaces, and --allow-anonymous-read."""
from __future__ import annotations

import asyncio

import pytest
from impacket.dcerpc.v5 import epm

from qm2qm.app import App, StartupError
from qm2qm.client import Qm2qmClient
from qm2qm.config import load_config
from qm2qm.mqmp.client import QmcommClient
from qm2qm.mqmp.constants import IP_HANDSHAKE, IP_READ, QMCOMM2_UUID, QMCOMM_UUID
from qm2qm.mqqp.constants import QM2QM_UUID
from tests.product.test_serve import _FakeRpc
from tests.product.test_wiring import free_port


def config(tmp_path, **values):
    return load_config(None, {"data_dir": str(tmp_path / "data"), "port": 0, "admin_port": 0, "qmcomm_port": 0,
                              "epm_port": 0, **values})


def ept_map(port: int, interface) -> str:
    from qm2qm.client import ept_map_port
    return f"ncacn_ip_tcp:127.0.0.1[{ept_map_port('127.0.0.1', port, epm.uuidtup_to_bin((str(interface), '1.0')))}]"


async def test_qmcomm_listens_on_its_own_port_and_the_port_queries_answer_the_bound_ports(tmp_path):
    app = App(config(tmp_path))
    await app.start()
    try:
        qmcomm_port = app.qmcomm.port
        assert qmcomm_port not in (0, app.rpc.port)
        def ask() -> tuple[int, int, int]:
            with QmcommClient("127.0.0.1", qmcomm_port) as qmcomm, Qm2qmClient("127.0.0.1", app.rpc.port) as qm2qm:
                return (qmcomm.get_rtqm_server_port(IP_HANDSHAKE), qmcomm.get_rtqm_server_port(IP_READ),
                        qm2qm.get_qmqm_server_port(IP_HANDSHAKE))

        assert await asyncio.to_thread(ask) == (qmcomm_port, app.rpc.port, qmcomm_port)
        assert app.info()["qmcomm_port"] == qmcomm_port
    finally:
        await app.close()


async def test_endpoint_mapper_maps_qmcomm_qmcomm2_and_qm2qm(tmp_path):
    app = App(config(tmp_path, epm_port=free_port()))
    await app.start()
    try:
        for interface, port in ((QMCOMM_UUID, app.qmcomm.port), (QMCOMM2_UUID, app.qmcomm.port),
                                (QM2QM_UUID, app.rpc.port)):
            assert await asyncio.to_thread(ept_map, app.epm.port, interface) == f"ncacn_ip_tcp:127.0.0.1[{port}]"
    finally:
        await app.close()


async def test_busy_default_qmcomm_port_moves_by_11():
    _FakeRpc.busy, _FakeRpc.tried = {2103, 2114}, []
    app = App(load_config())
    server = await app._bind(_FakeRpc, [], 2103, app.config.increments_busy_qmcomm_port, "MS-MQMP 3.1.4.24")
    assert server.port == 2125 and _FakeRpc.tried == [2103, 2114, 2125]


async def test_busy_explicit_qmcomm_port_is_a_startup_error():
    _FakeRpc.busy, _FakeRpc.tried = {2103}, []
    app = App(load_config(None, {"qmcomm_port": 2103}))
    assert not app.config.increments_busy_qmcomm_port
    with pytest.raises(StartupError, match=r"cannot listen on 127.0.0.1:2103: address already in use"):
        await app._bind(_FakeRpc, [], 2103, app.config.increments_busy_qmcomm_port, "MS-MQMP 3.1.4.24")


async def test_allow_anonymous_read_reaches_the_queue_manager(tmp_path):
    for value in (False, True):
        app = App(config(tmp_path, allow_anonymous_read=value))
        await app.start()
        try:
            assert app.qm.allow_anonymous_read is value and app.info()["allow_anonymous_read"] is value
        finally:
            await app.close()


async def test_a_traced_server_records_qmcomm_and_qm2qm_calls_in_separate_sessions(tmp_path):
    from qm2qm.client import AdminClient, RemoteReader
    from qm2qm.pipeline.trace import read_calls
    app = App(config(tmp_path, trace=str(tmp_path / "trace.jsonl"), allow_anonymous_read=True,
                     computer_name="qm2qm"))
    await app.start()
    try:
        def run():
            AdminClient(app.admin_url).create_queue(".\\private$\\t")
            with RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\private$\\t", qmcomm_port=app.qmcomm.port,
                              qm2qm_port=app.rpc.port) as reader:
                reader.peek()
        await asyncio.to_thread(run)
    finally:
        await app.close()
    rows = read_calls(tmp_path / "trace.jsonl").to_pylist()
    interfaces_by_session = {}
    for row in rows:
        interfaces_by_session.setdefault(row["session_seq"], set()).add(row["interface_name"])
    assert sorted(map(sorted, interfaces_by_session.values())) == [["qm2qm"], ["qmcomm"]]
    assert {r["op_name"] for r in rows if r["interface_name"] == "qmcomm"} == {
        "R_QMGetRTQMServerPort", "R_QMOpenRemoteQueue", "R_QMCloseRemoteQueueContext"}


async def test_serve_limits_reach_the_listeners_and_the_queue_manager_and_info_reports_them(tmp_path):
    app = App(config(tmp_path, max_context_handles=3, max_open_queues=4, max_cursors=5, max_subqueues=6,
                     max_reassembly_mib=9, max_unread_mib=17, keepalive=30, epm_port=free_port()))
    await app.start()
    try:
        assert app.rpc.groups.max_context_handles == app.qmcomm.groups.max_context_handles == 3
        assert (app.qm.max_open_queues, app.qm.max_cursors, app.qm.max_subqueues) == (4, 5, 6)
        # one allowance for unfinished fragmented requests over every listener
        assert app.rpc.reassembly_budget is app.qmcomm.reassembly_budget is app.epm.reassembly_budget \
            is app.reassembly_budget and app.reassembly_budget.capacity == 9 * 1024 * 1024
        # and one for answers left unread
        assert app.rpc.unread_budget is app.qmcomm.unread_budget is app.epm.unread_budget \
            is app.unread_budget and app.unread_budget.capacity == 17 * 1024 * 1024
        # and one bound on live security contexts
        assert app.rpc.security is app.qmcomm.security is app.epm.security is app.security
        # and one count of open connections; each listener sets the keep-alives
        assert app.rpc.connection_slots is app.qmcomm.connection_slots is app.epm.connection_slots \
            is app.connection_slots and app.connection_slots.capacity == 1024
        assert app.rpc.keepalive_s == app.qmcomm.keepalive_s == app.epm.keepalive_s == 30
        assert app.info()["limits"] == {"max_connections": 1024, "max_context_handles": 3, "max_open_queues": 4,
                                        "max_cursors": 5, "max_subqueues": 6, "max_reassembly_mib": 9,
                                        "max_unread_mib": 17, "keepalive": 30}
    finally:
        await app.close()
