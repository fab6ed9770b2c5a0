"""The MS-MQMP 3.1.4 / 3.1.5 supporting-server gate, the reserved opnums, and malformed stubs: clear faults."""
import pytest

from qm2qm.mqmp import idl
from qm2qm.mqmp.client import bind
from qm2qm.mqmp.constants import RESERVED_OPNUMS, SUPPORTING_SERVER_OPNUMS
from qm2qm.rpc.faults import NCA_S_OP_RNG_ERROR, RPC_X_BAD_STUB_DATA
from shared_adm import status as st
from tests.mqmp.conftest import FORMAT_NAME, stub_fault
from qm2qm.mqmp import codec


async def test_every_supporting_server_method_of_qmcomm_fails(env):
    client = await env.qmcomm_client()
    for opnum in sorted(SUPPORTING_SERVER_OPNUMS):
        assert await env.run(stub_fault, client.dce, opnum, b"\x00" * 16) == st.MQ_ERROR_WKS_CANT_SERVE_CLIENT, opnum
    assert env.descriptors() == []


async def test_every_qmcomm2_method_fails(env):
    dce = await env.run(bind, "127.0.0.1", env.qmcomm_server.port, idl.MSRPC_UUID_QMCOMM2, ndr64=env.ndr64)
    try:
        for opnum in range(4):
            assert await env.run(stub_fault, dce, opnum, b"") == st.MQ_ERROR_WKS_CANT_SERVE_CLIENT
        assert await env.run(stub_fault, dce, 4, b"") == NCA_S_OP_RNG_ERROR
    finally:
        dce.disconnect()


async def test_reserved_opnums_answer_op_rng_error(env):
    client = await env.qmcomm_client()
    for opnum in sorted(RESERVED_OPNUMS | {35, 200}):
        assert await env.run(stub_fault, client.dce, opnum, b"") == NCA_S_OP_RNG_ERROR, opnum
    # the connection is still usable
    assert (await env.run(client.open_remote_queue, FORMAT_NAME)).status == st.MQ_OK


@pytest.mark.parametrize("opnum", [2, 3, 4, 31])
async def test_truncated_stub_is_bad_stub_data(env, opnum):
    client = await env.qmcomm_client()
    assert await env.run(stub_fault, client.dce, opnum, b"\x01\x02") == RPC_X_BAD_STUB_DATA


async def test_trailing_bytes_are_bad_stub_data(env):
    client = await env.qmcomm_client()
    assert await env.run(stub_fault, client.dce, 31, b"\x00" * 8) == RPC_X_BAD_STUB_DATA


async def test_queue_format_discriminant_disagreeing_with_m_qft_is_bad_stub_data(env):
    client = await env.qmcomm_client()
    req = idl.R_QMOpenRemoteQueue(isNDR64=env.ndr64)
    codec.fill_queue_format(req["pQueueFormat"], FORMAT_NAME)
    req["pQueueFormat"]["m_qft"] = 2
    req["pLicGuid"] = bytes(16)
    assert await env.run(stub_fault, client.dce, 2, req.getData()) == RPC_X_BAD_STUB_DATA
    assert env.descriptors() == []
