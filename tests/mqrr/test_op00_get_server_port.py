"""R_GetServerPort (MS-MQRR 3.1.4.1, opnum 0)."""
from __future__ import annotations

from qm2qm.mqrr.interface import service_interface
from shared_adm import status as st


async def test_get_server_port_returns_the_tcp_port_of_the_remoteread_interface(env):
    c = await env.connect()
    port = await env.call(c.get_server_port)
    assert port == env.server.port and port != 0


def test_get_server_port_is_the_only_opnum_open_without_authentication(env):
    interface = service_interface(env.service)
    assert interface.unauthenticated_opnums == frozenset({0})
    assert interface.access_denied_status == st.MQ_ERROR_ACCESS_DENIED
