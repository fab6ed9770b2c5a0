"""The admin listener's bounds (qm2qm/admin_listener.py): connections open at once, and a new one's silence; local
clients that connect and say nothing cannot take what the RPC side needs."""
from __future__ import annotations

import asyncio
import json

from qm2qm.admin_listener import AdminConnections
from qm2qm.app import App
from qm2qm.config import load_config

HANG_GUARD_S = 60


async def _get(port: int, path: str = "/v1/info") -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), HANG_GUARD_S)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _rpc_version(port: int):
    from qm2qm.client import Qm2qmClient
    with Qm2qmClient("127.0.0.1", port) as client:
        return client.get_version()


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def test_silent_admin_connections_are_bounded_and_closed_and_rpc_keeps_answering(tmp_path):
    app = App(load_config(None, {"data_dir": str(tmp_path / "data"), "port": 0, "qmcomm_port": 0, "admin_port": 0,
                                 "epm_port": 0}))
    await asyncio.wait_for(app.start(), HANG_GUARD_S)
    app.admin_connections.capacity, app.admin_connections.first_byte_timeout_s = 3, 0.5
    silent = []
    try:
        for _ in range(3):
            silent.append(await asyncio.open_connection("127.0.0.1", app.admin_port))
        await asyncio.wait_for(_until(lambda: app.admin_connections.open == 3), HANG_GUARD_S)
        reader, writer = await asyncio.open_connection("127.0.0.1", app.admin_port)     # one too many: reset
        try:
            assert await asyncio.wait_for(reader.read(), HANG_GUARD_S) == b""
        except ConnectionResetError:
            pass
        writer.close()
        assert app.admin_connections.refusals.count == 1
        # the RPC side is another listener with its own allowance: it answers meanwhile
        assert await asyncio.to_thread(_rpc_version, app.rpc.port) is not None
        # the silent ones are closed after first_byte_timeout_s, and the admin API answers again
        for reader, _ in silent:
            assert await asyncio.wait_for(reader.read(), HANG_GUARD_S) == b""
        await asyncio.wait_for(_until(lambda: app.admin_connections.open == 0), HANG_GUARD_S)
        status, info = await _get(app.admin_port)
        assert status == 200 and info["rpc"]["port"] == app.rpc.port
    finally:
        for _, writer in silent:
            writer.close()
        await app.close()


def test_the_defaults_are_the_rpc_sides():
    from qm2qm.config import DEFAULT_IDLE_TIMEOUT_S
    bounds = AdminConnections()
    assert (bounds.capacity, bounds.first_byte_timeout_s) == (256, DEFAULT_IDLE_TIMEOUT_S)
