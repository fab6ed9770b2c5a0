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


def _answer(dce, opnum: int, stub: bytes) -> tuple[int, int]:
    """(PTYPE, fault status or 0) of the answer to one raw request."""
    import struct
    dce.call(opnum, stub)
    rpc = dce.get_rpc_transport()
    header = rpc.recv(count=16)
    body = rpc.recv(count=struct.unpack_from("<H", header, 8)[0] - 16)
    return header[2], (struct.unpack_from("<I", body, 8)[0] if header[2] == 3 else 0)


async def test_random_stubs_get_a_clear_answer_and_leave_nothing_open(env):
    """Bounded fuzz (fixed seed, 60 stubs per opnum): every stub is answered with a response or one of the
    documented faults; the connection and the queue manager stay usable."""
    import random
    rng = random.Random(11)
    client = await env.qmcomm_client()
    allowed = {0, RPC_X_BAD_STUB_DATA, 0x6C6, 0x1C00001A, st.MQ_ERROR_ILLEGAL_OPERATION}   # 0x1C00001A: context mismatch
    valid = {}
    for opnum in (2, 4):
        req = idl.R_QMOpenRemoteQueue(isNDR64=env.ndr64) if opnum == 2 else idl.R_QMCreateRemoteCursor(isNDR64=env.ndr64)
        if opnum == 2:
            codec.fill_queue_format(req["pQueueFormat"], FORMAT_NAME)
            req["pLicGuid"] = bytes(16)
        else:
            from impacket.dcerpc.v5.ndr import NULL
            req["ptb1"]["uTransferType"] = 0
            req["ptb1"]["u"]["tag"] = 0
            req["ptb1"]["u"]["Send"]["pAdminQueueFormat"] = NULL
            req["ptb1"]["u"]["Send"]["pResponseQueueFormat"] = NULL
        valid[opnum] = req.getData()

    def fuzz():
        seen = set()
        for opnum in (1, 2, 3, 4, 31):
            for _ in range(60):
                base = bytearray(valid.get(opnum, bytes(rng.randrange(0, 64))))
                for _ in range(rng.randrange(1, 6)):
                    if base and rng.random() < 0.7:
                        base[rng.randrange(len(base))] = rng.randrange(256)
                    else:
                        base = base[:rng.randrange(len(base) + 1)]
                ptype, status = _answer(client.dce, opnum, bytes(base))
                assert ptype in (2, 3) and status in allowed, (opnum, bytes(base).hex(), ptype, hex(status))
                seen.add(status)
        return seen

    seen = await env.run(fuzz)
    assert RPC_X_BAD_STUB_DATA in seen
    for h in [d.handle for d in env.descriptors()]:
        env.qm.close_queue(env.qm.descriptor_by_handle(h))
    assert (await env.run(client.open_remote_queue, FORMAT_NAME)).status == st.MQ_OK


async def test_a_bad_stub_does_not_fill_the_log(env, caplog):
    import logging
    client = await env.qmcomm_client()
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            assert await env.run(stub_fault, client.dce, 2, b"\x01\x00\x00\x00\x03") == RPC_X_BAD_STUB_DATA
    assert [r for r in caplog.records if r.name.startswith("impacket")] == []
