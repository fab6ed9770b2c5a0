"""Interop with impacket's DCE/RPC client over real TCP, NDR and NDR64 (MS-RPCE 2.2.5, 3.3.1.5.6)."""
import asyncio
import struct

import pytest
from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.rpcrt import DCERPCException, RPC_C_AUTHN_LEVEL_PKT_PRIVACY
from impacket.uuid import uuidtup_to_bin

from qm2qm.rpc import testing as t

NDR = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64 = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
PROBE = uuidtup_to_bin((str(t.PROBE_UUID), "1.0"))


def dce_for(port: int, syntax=NDR):
    rpctransport = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]")
    rpctransport.set_connect_timeout(10)
    dce = rpctransport.get_dce_rpc()
    dce.connect()
    dce.bind(PROBE, transfer_syntax=syntax)
    return dce


def call(dce, opnum: int, stub: bytes) -> bytes:
    dce.call(opnum, stub)
    return dce.recv()


@pytest.mark.parametrize("syntax", [NDR, NDR64], ids=["ndr", "ndr64"])
async def test_impacket_binds_and_calls(server, syntax):
    def run():
        dce = dce_for(server.port, syntax)
        try:
            negotiated = dce.transfer_syntax
            replies = [call(dce, t.OP_ECHO, b"ping %d" % i) for i in range(3)]
            replies.append(call(dce, t.OP_ASYNC_ECHO, b"async"))
            return negotiated, replies
        finally:
            dce.disconnect()
    negotiated, replies = await asyncio.to_thread(run)
    assert negotiated == uuidtup_to_bin(syntax)
    assert replies == [b"ping 0", b"ping 1", b"ping 2", b"async"]


async def test_impacket_sees_faults_and_keeps_the_connection(server):
    def run():
        dce = dce_for(server.port)
        try:
            errors = []
            for opnum, stub in [(t.OP_FAULT, struct.pack("<I", 0x1C00001A)), (t.OP_CRASH, b""), (99, b"")]:
                with pytest.raises(DCERPCException) as info:
                    call(dce, opnum, stub)
                errors.append(str(info.value))
            return errors, call(dce, t.OP_ECHO, b"alive")
        finally:
            dce.disconnect()
    errors, alive = await asyncio.to_thread(run)
    assert "nca_s_fault_context_mismatch" in errors[0]
    assert "nca_s_fault_unspec" in errors[1]
    assert "nca_s_op_rng_error" in errors[2]
    assert alive == b"alive"


@pytest.mark.parametrize("syntax", [NDR, NDR64], ids=["ndr", "ndr64"])
async def test_impacket_fragmented_request_and_response(server, syntax):
    big = bytes(range(256)) * 600            # 153 600 bytes: many fragments each way
    def run():
        dce = dce_for(server.port, syntax)
        try:
            return call(dce, t.OP_ECHO, big)
        finally:
            dce.disconnect()
    assert await asyncio.to_thread(run) == big


async def test_impacket_context_handles_and_alter_context(server, probe):
    def run():
        dce = dce_for(server.port)
        try:
            wire = call(dce, t.OP_OPEN_A, b"via impacket")
            used = call(dce, t.OP_USE_A, wire)
            dce2 = dce.alter_ctx(PROBE)                  # second presentation context, same connection
            used2 = call(dce2, t.OP_USE_A, wire)
            closed = call(dce2, t.OP_CLOSE, wire)
            with pytest.raises(DCERPCException) as info:
                call(dce, t.OP_USE_A, wire)
            return used, used2, closed, str(info.value)
        finally:
            dce.disconnect()
    used, used2, closed, error = await asyncio.to_thread(run)
    assert used == used2 == b"via impacket" and closed == bytes(20)
    assert "nca_s_fault_context_mismatch" in error
    assert probe.rundowns == []


async def test_impacket_authenticated_bind_fails_fast_instead_of_hanging(server):
    def run():
        rpctransport = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{server.port}]")
        rpctransport.set_connect_timeout(10)
        rpctransport.set_credentials("user", "password", "DOMAIN")
        dce = rpctransport.get_dce_rpc()
        dce.set_auth_level(RPC_C_AUTHN_LEVEL_PKT_PRIVACY)
        dce.connect()
        try:
            dce.bind(PROBE)
        finally:
            dce.disconnect()
    with pytest.raises(Exception) as info:
        await asyncio.to_thread(run)
    assert not isinstance(info.value, TimeoutError), "the server left the client waiting"
