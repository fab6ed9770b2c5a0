"""R_QMGetRTQMServerPort (MS-MQMP 3.1.4.24), one test per rule."""
from qm2qm.mqmp.constants import IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, IPX_READ
from qm2qm.mqmp.interface import qmcomm_interface


async def test_ip_handshake_returns_the_bound_qmcomm_port(env):
    client = await env.qmcomm_client()
    assert await env.run(client.get_rtqm_server_port, IP_HANDSHAKE) == env.qmcomm_server.port != 0


async def test_ip_read_returns_the_bound_qm2qm_port(env):
    client = await env.qmcomm_client()
    assert await env.run(client.get_rtqm_server_port, IP_READ) == env.qm2qm_server.port != 0


async def test_spx_values_return_failure_zero(env):
    client = await env.qmcomm_client()
    assert await env.run(client.get_rtqm_server_port, IPX_HANDSHAKE) == 0
    assert await env.run(client.get_rtqm_server_port, IPX_READ) == 0


async def test_invalid_fip_returns_zero(env):
    client = await env.qmcomm_client()
    assert await env.run(client.get_rtqm_server_port, 4) == 0
    assert await env.run(client.get_rtqm_server_port, 0xFFFFFFFF) == 0


def test_never_requires_authentication(env):
    interface = qmcomm_interface(env.qmcomm)
    assert interface.unauthenticated_opnums == frozenset({31})
    assert interface.access_denied_status == 0xC00E0025
