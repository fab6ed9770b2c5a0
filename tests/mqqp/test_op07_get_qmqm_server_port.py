"""RemoteQMGetQMQMServerPort (MS-MQQP 3.1.4.8, opnum 7) through the RPC path."""
from qm2qm.mqqp.constants import IP_HANDSHAKE, IP_READ, IPX_HANDSHAKE, IPX_READ, RPC_S_INVALID_BOUND

from tests.mqqp.conftest import QMCOMM_PORT


async def test_get_qmqm_server_port_ip_handshake_returns_the_qmcomm_port(env):
    c = await env.connect()
    assert await c.call(c.get_qmqm_server_port, IP_HANDSHAKE) == QMCOMM_PORT


async def test_get_qmqm_server_port_ip_read_returns_the_port_actually_bound(env):
    c = await env.connect()
    assert await c.call(c.get_qmqm_server_port, IP_READ) == env.server.port != 0


async def test_get_qmqm_server_port_ipx_values_return_zero(env):
    c = await env.connect()
    assert await c.call(c.get_qmqm_server_port, IPX_HANDSHAKE) == 0
    assert await c.call(c.get_qmqm_server_port, IPX_READ) == 0


async def test_get_qmqm_server_port_ip_read_returns_zero_while_the_port_is_unknown(env):
    env.service.config.bound_port = 0
    c = await env.connect()
    assert await c.call(c.get_qmqm_server_port, IP_READ) == 0


async def test_get_qmqm_server_port_refuses_a_port_type_outside_its_range(env):
    # [in, range(0, 3)] with strict NDR checks (<9>): the stub refuses it before the method runs.
    c = await env.connect()
    assert await c.call(c.fault, c.get_qmqm_server_port, 4) == RPC_S_INVALID_BOUND
    assert await c.call(c.get_qmqm_server_port, IP_HANDSHAKE) == QMCOMM_PORT
