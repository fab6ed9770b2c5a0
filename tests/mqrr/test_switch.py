"""The --mqrr switch (qm2qm serve, TOML key ``mqrr``): off by default, so the endpoint mapper answers "not
registered" (EPT_S_NOT_REGISTERED) for RemoteRead and a Windows client falls back to qmcomm + qm2qm; on, RemoteRead
is served on the qm2qm listener and registered there (MS-MQRR 2.1, 3.1.3)."""
from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner
from impacket.dcerpc.v5.rpcrt import DCERPCException

from qm2qm.app import App
from qm2qm.config import ConfigError, load_config
from qm2qm.mqrr.client import MqrrClient
from qm2qm.mqrr.constants import MQRR_UUID
from tests.product.test_wiring import ept_map_qm2qm

EPT_S_NOT_REGISTERED = 0x16C9A0D6


def config(tmp_path, **values):
    return load_config(None, {"data_dir": str(tmp_path / "data"), "port": 0, "admin_port": 0, "epm_port": 0,
                              "qmcomm_port": 0, "allow_anonymous_read": True, **values})


def ept_map_remoteread(port: int) -> str:
    """Where does RemoteRead live, according to the mapper on ``port``?"""
    return ept_map_qm2qm(port, MQRR_UUID)


async def test_by_default_remoteread_is_not_registered_so_a_client_falls_back(tmp_path):
    app = App(config(tmp_path))
    await app.start()
    try:
        with pytest.raises(DCERPCException) as error:
            await asyncio.to_thread(ept_map_remoteread, app.rpc.port)
        assert error.value.get_error_code() == EPT_S_NOT_REGISTERED
        assert app.mqrr_service is None
    finally:
        await app.close()


async def test_with_mqrr_on_the_endpoint_mapper_maps_remoteread_to_the_qm2qm_listener(tmp_path):
    app = App(config(tmp_path, mqrr=True))
    await app.start()
    try:
        binding = await asyncio.to_thread(ept_map_remoteread, app.rpc.port)
        assert binding == f"ncacn_ip_tcp:127.0.0.1[{app.rpc.port}]"
        client = await asyncio.to_thread(MqrrClient, "127.0.0.1", app.rpc.port)
        try:
            assert await asyncio.to_thread(client.get_server_port) == app.rpc.port
        finally:
            client.disconnect()
    finally:
        await app.close()


async def test_with_mqrr_off_a_bind_to_remoteread_is_refused(tmp_path):
    app = App(config(tmp_path))
    await app.start()
    try:
        with pytest.raises(DCERPCException, match="abstract_syntax_not_supported"):
            await asyncio.to_thread(MqrrClient, "127.0.0.1", app.rpc.port)
        assert all(iface.uuid != MQRR_UUID for iface in app.rpc.registry.values())
    finally:
        await app.close()


def test_the_toml_key_mqrr_takes_true_or_false(tmp_path):
    path = tmp_path / "qm2qm.toml"
    path.write_text("mqrr = true\n")
    assert load_config(str(path), {}).mqrr is True
    path.write_text('mqrr = "yes"\n')
    with pytest.raises(ConfigError, match="mqrr: expected true or false"):
        load_config(str(path), {})
    assert load_config(None, {}).mqrr is False


def test_serve_has_the_mqrr_switch():
    from qm2qm.cli import main
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0 and "--mqrr / --no-mqrr" in result.output


async def test_with_mqrr_on_the_admin_api_lists_remoteread_receives_awaiting_their_end(tmp_path):
    from qm2qm.client import AdminClient
    app = App(config(tmp_path, mqrr=True))
    await app.start()
    client = None
    try:
        admin = AdminClient(app.admin_url)
        await asyncio.to_thread(admin.create_queue, ".\\private$\\listed")
        await asyncio.to_thread(admin.send, ".\\private$\\listed", body_base64="aGk=")
        client = await asyncio.to_thread(MqrrClient, "127.0.0.1", app.rpc.port)
        handle = await asyncio.to_thread(client.open, "DIRECT=OS:localhost\\private$\\listed")
        assert (await asyncio.to_thread(client.read, handle, request_id=9)).status == 0
        reads = (await asyncio.to_thread(admin.list_reads))["reads"]
        assert [(r["protocol"], r["request_id"], r["state"]) for r in reads] == \
            [("MS-MQRR", 9, "awaiting R_EndReceive")]
    finally:
        if client is not None:
            client.disconnect()
        await app.close()
