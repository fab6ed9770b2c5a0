"""Bad input to every RemoteRead opnum gets a specific answer — an HRESULT or an RPC fault — and never an
internal error, a leaked entry or a lost message (MS-MQRR 3.1.4; MS-RPCE 3.3.1.5.6 strict NDR)."""
from __future__ import annotations

import asyncio
import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qm2qm.mqrr.codec import RPC_X_BAD_STUB_DATA
from qm2qm.mqrr.interface import HANDLER_MODULES
from qm2qm.rpc.interface import RpcFault

from .conftest import FakeCall


async def answer(module, env, ctx, stub: bytes):
    try:
        result = module.serve(env.service, ctx, stub)
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, 5)
    except RpcFault as fault:
        return fault.status
    assert isinstance(result, bytes)
    return result


@pytest.mark.parametrize("opnum", sorted(HANDLER_MODULES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stub=st.binary(max_size=120))
async def test_random_stubs_are_answered_or_faulted_and_change_nothing(env, opnum, stub):
    message = env.enqueue(b"untouched")
    before = env.positions()
    await answer(HANDLER_MODULES[opnum], env, FakeCall(), stub)
    assert env.positions() == before and message.lookup_identifier in before
    assert len(env.service.pending) == 0 and len(env.service.locked) == 0
    env.qm.purge_queue(env.queue)


@pytest.mark.parametrize("opnum", [2, 7, 9, 13])
async def test_a_truncated_stub_over_the_wire_is_the_fault_rpc_x_bad_stub_data(env, opnum):
    assert await env.stub_fault(opnum, b"\x01\x02\x03") == RPC_X_BAD_STUB_DATA
