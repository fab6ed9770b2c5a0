"""The RemoteRead interface as registered (MS-MQRR 3.1.4, 6): opnum table, IDL names, the inline read path."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from qm2qm.mqrr import idl
from qm2qm.mqrr.constants import MQRR_UUID, MQRR_VERSION, OPNUM_NAMES
from qm2qm.mqrr.handlers import end_receive, start_receive
from qm2qm.mqrr.interface import service_interface
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st

from .conftest import FakeCall
from .test_op03_close_queue import open_request, receive_request

NCA_S_OP_RNG_ERROR = 0x1C010002
IDL = Path(__file__).resolve().parents[2] / "idl" / "mqrr.idl"


@pytest.mark.parametrize("opnum", [1, 16, 17, 255])
async def test_opnum_1_and_past_15_are_nca_s_op_rng_error(env, opnum):
    assert await env.stub_fault(opnum, b"") == NCA_S_OP_RNG_ERROR


def test_interface_is_remoteread_1a9134dd_v1_0_with_opnums_0_and_2_to_15(env):
    interface = service_interface(env.service)
    assert (interface.uuid, interface.version) == (MQRR_UUID, MQRR_VERSION)
    assert sorted(interface.operations) == [0] + list(range(2, 16))
    assert {n: op.name for n, op in interface.operations.items()} == OPNUM_NAMES


def test_idl_py_mirrors_idl_mqrr_idl_name_for_name():
    text = IDL.read_text()
    methods = re.findall(r"^\s*(?:HRESULT|DWORD|void)\s+(\w+)\(", text, re.M)
    assert [m for m in methods if m != "Opnum1NotUsedOnWire"] == [OPNUM_NAMES[n] for n in sorted(OPNUM_NAMES)]
    for opnum, (request, response) in idl.OPNUMS.items():
        body = re.search(rf"\b{request.__name__}\((.*?)\);", text, re.S).group(1)
        ins = re.findall(r"\[in[^\]]*\][^,]*?(\w+)\s*(?:,|$)", body)
        outs = re.findall(r"\[(?:in, )?out[^\]]*\][^,]*?(\w+)\s*(?:,|$)", body)
        assert [n for n, _ in request.structure] == [n for n in ins if n != "hBind"], request.__name__
        assert [n for n, _ in response.structure if n != "ErrorCode"] == outs, request.__name__


async def test_a_read_that_completes_at_once_is_answered_inline(env):
    env.enqueue(b"now")
    ctx = FakeCall()
    h = open_queue_handle(env, ctx)
    ctx.answer_now = True
    answer = start_receive.serve(env.service, ctx, receive_request(h, timeout=5000).getData())
    assert isinstance(answer, bytes)                    # no task: the read found its message at once
    response = idl.R_StartReceiveResponse()
    response.fromString(answer)
    assert response["ErrorCode"] == st.MQ_OK and response["pdwNumberOfSections"] == 1


async def test_a_read_that_must_wait_goes_through_a_task_having_changed_nothing(env):
    ctx = FakeCall()
    h = open_queue_handle(env, ctx)
    ctx.answer_now = True
    answer = start_receive.serve(env.service, ctx, receive_request(h, timeout=5000).getData())
    assert not isinstance(answer, bytes)
    assert len(env.service.pending) == 0 and not any(
        d.waiting_message_read_operation_collection for d in env.queue.open_queue_descriptor_collection)
    env.enqueue(b"later")
    response = idl.R_StartReceiveResponse()
    response.fromString(await answer)
    assert response["ErrorCode"] == st.MQ_OK


async def test_an_end_receive_ack_is_answered_once_durable(env):
    env.enqueue(b"acked")
    ctx = FakeCall()
    h = open_queue_handle(env, ctx)
    await start_receive.start_receive(env.service, ctx, receive_request(h, request_id=4, action=MQ_ACTION_RECEIVE))
    request = idl.R_EndReceive()
    request["phContext"], request["dwAck"], request["dwRequestId"] = h, 2, 4
    answer = end_receive.serve(env.service, ctx, request.getData())
    answer = answer if isinstance(answer, bytes) else await answer
    response = idl.R_EndReceiveResponse()
    response.fromString(answer)
    assert response["ErrorCode"] == st.MQ_OK and env.positions() == {}


def open_queue_handle(env, ctx) -> bytes:
    from qm2qm.mqrr.handlers import open_queue
    return open_queue.open_queue(env.service, ctx, open_request())
