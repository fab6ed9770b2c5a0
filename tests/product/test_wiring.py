"""`qm2qm serve` composition: endpoint mapper (MS-RPCE 2.2.1.2), trace, MS-MQCN consumer, MS-MQSD responder."""
from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid

import pytest
from impacket.dcerpc.v5 import epm, transport

from qm2qm.app import App, StartupError
from qm2qm.config import load_config
from qm2qm.mqqp.constants import QM2QM_UUID

HANG_GUARD_S = 60


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(tmp_path, **values):
    return load_config(None, {"data_dir": str(tmp_path / "data"), "port": 0, "admin_port": 0, **values})


def ept_map_qm2qm(port: int, interface: uuid.UUID = QM2QM_UUID) -> str:
    """impacket's epm client: where does qm2qm (or ``interface`` v1.0) live, according to the mapper on ``port``?"""
    dce = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]").get_dce_rpc()
    dce.connect()
    try:
        return epm.hept_map("127.0.0.1", epm.uuidtup_to_bin((str(interface), "1.0")), protocol="ncacn_ip_tcp",
                            dce=dce)
    finally:
        dce.disconnect()


async def test_endpoint_mapper_listener_answers_ept_map_with_the_qm2qm_port(tmp_path):
    app = App(config(tmp_path, epm_port=free_port()))
    await app.start()
    try:
        assert f" epm=127.0.0.1:{app.epm.port}" in app.ready_line()
        binding = await asyncio.to_thread(ept_map_qm2qm, app.epm.port)
        assert binding == f"ncacn_ip_tcp:127.0.0.1[{app.rpc.port}]"
        on_qm2qm_port = await asyncio.to_thread(ept_map_qm2qm, app.rpc.port)     # epm also on the qm2qm port
        assert on_qm2qm_port == binding
    finally:
        await app.close()


async def test_epm_port_zero_starts_no_listener_but_the_qm2qm_port_still_maps(tmp_path):
    app = App(config(tmp_path, epm_port=0))
    await app.start()
    try:
        assert app.epm is None and " epm=" not in app.ready_line()
        assert await asyncio.to_thread(ept_map_qm2qm, app.rpc.port) == f"ncacn_ip_tcp:127.0.0.1[{app.rpc.port}]"
    finally:
        await app.close()


async def test_a_busy_explicit_epm_port_is_a_startup_error_naming_it(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        app = App(config(tmp_path, epm_port=port))
        with pytest.raises(StartupError, match=f"TCP port {port} on 127.0.0.1 is already in use"):
            await app.start()
        assert app.rpc is None and app.store is None           # everything started was undone


async def test_a_default_epm_port_that_cannot_be_bound_is_a_warning(tmp_path, monkeypatch, caplog):
    import qm2qm.rpc.epm as epm_module

    async def refuse(*args, **kwargs):
        raise epm_module.EpmListenerError(13, "TCP port 135 needs root or CAP_NET_BIND_SERVICE")
    monkeypatch.setattr(epm_module, "start_epm_listener", refuse)
    app = App(config(tmp_path))                                 # epm_port left at its default
    await app.start()
    try:
        assert app.epm is None and app.rpc is not None
        assert "endpoint mapper not started: TCP port 135 needs root" in caplog.text
    finally:
        await app.close()


async def test_trace_records_the_calls_served(tmp_path):
    from qm2qm.client import Qm2qmClient
    from qm2qm.pipeline.trace import read_calls
    trace = tmp_path / "calls.jsonl"
    app = App(config(tmp_path, epm_port=0, trace=str(trace)))
    await app.start()
    try:
        def version():
            with Qm2qmClient("127.0.0.1", app.rpc.port) as client:
                return client.get_version()
        for _ in range(3):
            await asyncio.to_thread(version)
        # each closed connection's session is forgotten (the listener's observer tells the tracer)
        for _ in range(200):
            if not app.tracer._sessions:
                break
            await asyncio.sleep(0.01)
        assert app.tracer._sessions == {}
    finally:
        await app.close()
    calls = read_calls(trace).to_pylist()
    assert [(c["opnum"], c["session_seq"]) for c in calls] == [(8, 0), (8, 1), (8, 2)]


async def test_notification_consumer_and_embedded_directory_run(tmp_path):
    app = App(config(tmp_path, epm_port=0))
    await app.start()
    try:
        assert app.mqcn is not None and app.directory is not None
        assert app.mqcn.descriptor.queue_reference.pathname.endswith("notify_queue$")
    finally:
        await app.close()


async def test_mqsd_responder_answers_discovery_when_enabled(tmp_path):
    from qm2qm.mqsd.discovery import discover
    site, network = uuid.uuid4(), uuid.uuid4()
    app = App(config(tmp_path, epm_port=0, mqsd_port=free_port(socket.SOCK_DGRAM), mqsd_site_id=str(site),
                     mqsd_networks=[str(network)]))
    await app.start()
    try:
        assert f" mqsd=udp:127.0.0.1:{app.mqsd.port}" in app.ready_line()
        result = await asyncio.wait_for(discover(uuid.uuid4(), site, networks=["127.0.0.1"], target="127.0.0.1",
                                                 port=app.mqsd.port), HANG_GUARD_S)
        assert result.success and result.connected_network_identifier_list == [network]
    finally:
        await app.close()


async def test_mqsd_is_off_by_default(tmp_path):
    app = App(config(tmp_path, epm_port=0))
    await app.start()
    try:
        assert app.mqsd is None and " mqsd=" not in app.ready_line()
    finally:
        await app.close()


async def test_a_public_queue_created_through_the_admin_api_is_written_to_the_directory(tmp_path, caplog):
    from qm2qm.client import AdminClient
    from shared_adm.directory import DirectoryOperationResult, equals
    app = App(config(tmp_path, epm_port=0))
    await app.start()
    try:
        admin = AdminClient(app.admin_url)
        await asyncio.to_thread(admin.create_queue, ".\\orders", label="public orders")
        queue = app.qm.queue_by_pathname(".\\orders")
        result, obj = app.directory.read_directory("Queue", [equals("Identifier", queue.identifier)])
        assert result is DirectoryOperationResult.SUCCESS and obj.attributes["Label"] == "public orders"
        await asyncio.to_thread(admin.delete_queue, ".\\orders")
        result, _ = app.directory.read_directory("Queue", [equals("Identifier", queue.identifier)])
        assert result is DirectoryOperationResult.OBJECT_NOT_FOUND
    finally:
        await app.close()


async def test_idle_timeout_reaches_the_rpc_server_and_closes_a_silent_unbound_connection(tmp_path):
    app = App(config(tmp_path, idle_timeout=0.2))
    await asyncio.wait_for(app.start(), HANG_GUARD_S)
    try:
        assert app.rpc.idle_timeout_s == 0.2
        reader, writer = await asyncio.open_connection("127.0.0.1", app.rpc.port)
        assert await asyncio.wait_for(reader.read(1), HANG_GUARD_S) == b""     # closed by the server, no data
        writer.close()
    finally:
        await app.close()


async def test_a_store_that_cannot_commit_at_shutdown_is_one_error_line_and_a_store_error(tmp_path, caplog):
    from shared_adm.store.base import StoreError
    app = App(config(tmp_path))
    await asyncio.wait_for(app.start(), HANG_GUARD_S)
    store = app.store

    def full():
        raise StoreError("qm2qm.sqlite3: commit failed: database or disk is full")
    store.flush = full
    with caplog.at_level("ERROR", logger="qm2qm.app"):
        with pytest.raises(StoreError, match="disk is full"):
            await app.close()
    # ERROR and above only: start-up may warn that a default port is busy (another server on this machine)
    (record,) = [r for r in caplog.records if r.name == "qm2qm.app" and r.levelno >= logging.ERROR]
    assert "store closed without its last changes" in record.getMessage() and not record.exc_info


async def test_max_connections_counts_the_connections_of_every_listener(tmp_path):
    """--max-connections is the most RPC connections open at once (each a file descriptor): the qm2qm, qmcomm and
    endpoint mapper listeners share it, and the refusals are counted once for all of them."""
    app = App(config(tmp_path, max_connections=2, qmcomm_port=0, epm_port=free_port()))
    await asyncio.wait_for(app.start(), HANG_GUARD_S)
    opened = []
    try:
        for port in (app.rpc.port, app.qmcomm.port):
            opened.append(await asyncio.open_connection("127.0.0.1", port))
        await asyncio.wait_for(_until(lambda: app.connection_slots.open == 2), HANG_GUARD_S)
        for port in (app.epm.port, app.qmcomm.port, app.rpc.port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                assert await asyncio.wait_for(reader.read(1), HANG_GUARD_S) == b""      # reset as accepted
            except ConnectionResetError:
                pass
            writer.close()
        assert app.connection_slots.refusals.count == 3
        assert sum(len(server.connections) for server in app.listeners()) == 2
        reader, writer = opened.pop()
        writer.close()
        await asyncio.wait_for(_until(lambda: app.connection_slots.open == 1), HANG_GUARD_S)
        opened.append(await asyncio.open_connection("127.0.0.1", app.epm.port))    # room again, on any listener
        await asyncio.wait_for(_until(lambda: app.connection_slots.open == 2), HANG_GUARD_S)
    finally:
        for _, writer in opened:
            writer.close()
        await app.close()


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


TCP_REPAIR = 19     # linux/tcp.h: a socket in repair mode closes without sending a FIN or RST


def test_a_client_that_vanishes_without_fin_or_rst_is_run_down_by_keepalive(tmp_path):
    """MS-RPCE 3.3.3.2.1: a client whose host dies sends nothing; the keep-alive probe after --keepalive seconds
    finds it gone (its host answers the probe with a reset, or nothing answers ten), the connection closes and its
    handles run down: the message its receive Locked is Available again. TCP_REPAIR (CAP_NET_ADMIN) drops the
    client's socket without a packet, as a crash would."""
    from qm2qm.client import Qm2qmClient
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    from qm2qm.pytest_plugin import start_in_process
    probe = socket.socket()
    try:
        probe.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    except PermissionError:
        pytest.skip("needs CAP_NET_ADMIN (root, as in CI) for TCP_REPAIR: a socket closed without a packet")
    finally:
        probe.close()
    handle, server = start_in_process(tmp_path / "data", keepalive=1)
    try:
        admin = handle.admin()
        admin.create_queue(".\\private$\\silent")
        admin.send(".\\private$\\silent", body="held by a client that dies", delivery="recoverable")
        h_queue = admin.open_queue(".\\private$\\silent")["hRemoteQueue"]
        client = Qm2qmClient(handle.host, handle.port).connect()
        assert client.open_queue(h_queue)[0] == 0
        assert client.start_receive2(h_queue, action=MQ_ACTION_RECEIVE).ok
        assert [m["state"] for m in admin.list_messages(".\\private$\\silent")] == ["Locked"]
        time.sleep(1.0)     # every byte the server sent acknowledged: no retransmission would find the peer gone
        sock = client._dce.get_rpc_transport().get_socket()
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
        sock.close()                                    # gone without a packet
        end = time.monotonic() + HANG_GUARD_S           # a hang guard: the probe comes after 1 s
        while [m["state"] for m in admin.list_messages(".\\private$\\silent")] != ["Available"]:
            assert time.monotonic() < end, "the vanished client's receive was never run down"
            time.sleep(0.1)
        assert server.app.connection_slots.open == 0
    finally:
        server.stop()


async def test_serve_on_localhost_starts_and_maps_its_ipv4_address(tmp_path):
    app = App(config(tmp_path, host="localhost", epm_port=free_port()))
    await asyncio.wait_for(app.start(), HANG_GUARD_S)      # the endpoint mapper refused a host name at start
    try:
        binding = await asyncio.to_thread(ept_map_qm2qm, app.epm.port)
        assert binding == f"ncacn_ip_tcp:127.0.0.1[{app.rpc.port}]"
    finally:
        await app.close()
