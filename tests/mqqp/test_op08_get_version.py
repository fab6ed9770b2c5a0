"""RemoteQmGetVersion (MS-MQQP 3.1.4.9, opnum 8) through the RPC path."""
from qm2qm.mqqp.server_config import DEFAULT_VERSION


async def test_get_version_sets_major_6_minor_1_and_the_build_number(env):
    c = await env.connect()
    assert await c.call(c.get_version) == (6, 1, 20348) == DEFAULT_VERSION


async def test_get_version_reports_the_configured_version(env):
    env.service.config.version = (6, 1, 7601)
    c = await env.connect()
    assert await c.call(c.get_version) == (6, 1, 7601)
