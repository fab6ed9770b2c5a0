"""R_QMCreateRemoteCursor (MS-MQMP 3.1.4.4), one test per processing rule; ptb1 parsed and ignored (<29>)."""
import struct

import pytest
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqmp import idl
from qm2qm.mqmp.codec import decode_request
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT
from qm2qm.rpc.faults import RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND
from qm2qm.rpc.interface import RpcFault
from shared_adm import status as st
from tests.mqmp.conftest import FORMAT_NAME, stub_fault
from tests.rpc.test_ndr_arrays import CURSOR_ARRAYS, cursor_request_with_arrays


async def test_unknown_descriptor_handle_fails(env):
    client = await env.qmcomm_client()
    status, cursor = await env.run(client.create_remote_cursor, 0x1234567)
    assert status == st.MQ_ERROR_INVALID_HANDLE and cursor == 0


async def test_open_cursor_on_the_found_descriptor_returns_its_handle(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    status, handle = await env.run(client.create_remote_cursor, opened.h_queue)
    assert status == st.MQ_OK and handle != 0
    cursor = env.qm.cursor_by_handle(handle)
    assert cursor is not None and cursor.open_queue_descriptor_reference.handle == opened.h_queue


def _receive_buffer_request(h_queue: int, length: int = 8) -> idl.R_QMCreateRemoteCursor:
    req = idl.R_QMCreateRemoteCursor()
    tb = req["ptb1"]
    tb["uTransferType"] = 1
    tb["u"]["tag"] = 1
    receive = tb["u"]["Receive"]
    receive["RequestTimeout"] = 1000
    receive["Action"] = 0x80000000
    receive["ulResponseFormatNameLen"] = length
    for name in ("ppResponseFormatName", "pulResponseFormatNameLenProp", "ppAdminFormatName",
                 "pulAdminFormatNameLenProp", "ppDestFormatName", "pulDestFormatNameLenProp",
                 "ppOrderingFormatName", "pulOrderingFormatNameLenProp"):
        receive[name] = NULL
    req["hQueue"] = h_queue
    return req


async def test_ptb1_is_parsed_and_ignored(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    resp = await env.run(client.dce.request, _receive_buffer_request(opened.h_queue), checkError=False)
    assert resp["ErrorCode"] == st.MQ_OK and env.qm.cursor_by_handle(resp["phCursor"]) is not None


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_ptb1_arrays_are_stepped_over_not_kept(ndr64):
    # ptb1 MUST be ignored: a body a peer puts in it is checked as NDR and skipped, not made a list of its bytes
    stub = cursor_request_with_arrays(ndr64, b"body" * 300, "title", b"sid", "provider")
    request = decode_request(4, stub, ndr64)
    tb = request["ptb1"]
    assert request["hQueue"] == 7
    assert [tb.fields[name].fields["Data"].fields["Data"]["Data"] for name in CURSOR_ARRAYS] == [[], [], [], []]
    with pytest.raises(RpcFault) as cut:
        decode_request(4, stub[:-40], ndr64)
    assert cut.value.status == RPC_X_BAD_STUB_DATA


async def test_ptb1_range_violation_is_rpc_x_invalid_bound(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    req = _receive_buffer_request(opened.h_queue, length=1025)
    assert await env.run(stub_fault, client.dce, 4, req) == RPC_X_INVALID_BOUND


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
@pytest.mark.parametrize("kind", [3, 0xFFFFFFFF])
def test_a_transfer_type_outside_its_range_is_rpc_x_invalid_bound_whatever_follows(ndr64, kind):
    # [range(0,2)] uTransferType is checked as it is read, before the union it selects: an arm of that number does
    # not exist, so a stub that read the union first would answer bad stub data instead
    zeroed = bytearray(decode_request_bytes(ndr64))
    tag = 8 if ndr64 else 4                 # the union's DWORD tag, at the union's alignment (a pointer arm's)
    struct.pack_into("<I", zeroed, 0, kind)
    struct.pack_into("<I", zeroed, tag, kind)   # switch_is(uTransferType): the tag agrees with it
    stub = bytes(zeroed)
    with pytest.raises(RpcFault) as refused:
        decode_request(4, stub, ndr64)
    assert refused.value.status == RPC_X_INVALID_BOUND


def decode_request_bytes(ndr64: bool) -> bytes:
    """A well-formed R_QMCreateRemoteCursor stub with the zeroed CreateCursor transfer buffer."""
    req = idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    req["ptb1"]["uTransferType"] = req["ptb1"]["u"]["tag"] = 2
    req["hQueue"] = 7
    return req.getData()


async def test_truncated_ptb1_is_bad_stub_data(env):
    client = await env.qmcomm_client()
    assert await env.run(stub_fault, client.dce, 4, b"\x00" * 40) == RPC_X_BAD_STUB_DATA


async def test_cursor_created_through_qmcomm_is_used_by_qm2qm_peek_next(env):
    for body in (b"body-alpha", b"body-bravo", b"body-charlie"):
        env.enqueue(body)
    qmcomm = await env.qmcomm_client()
    qm2qm = await env.qm2qm_client()
    opened = await env.run(qmcomm.open_remote_queue, FORMAT_NAME)
    status, _ = await env.run(qm2qm.open_queue, opened.h_queue)
    assert status == st.MQ_OK
    status, cursor = await env.run(qmcomm.create_remote_cursor, opened.h_queue)
    assert status == st.MQ_OK
    await env.run(qmcomm.close_remote_queue_context, opened.context)
    bodies = []
    for action in (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_PEEK_NEXT):
        read = await env.run(qm2qm.start_receive2, opened.h_queue, action, cursor=cursor)
        assert read.status == st.MQ_OK
        bodies.append(read.buffer)
    assert [b"body-alpha" in bodies[0], b"body-bravo" in bodies[1], b"body-charlie" in bodies[2]] == [True] * 3
    assert b"body-alpha" not in bodies[1]
    assert await env.run(qm2qm.close_cursor, opened.h_queue, cursor) == st.MQ_OK
