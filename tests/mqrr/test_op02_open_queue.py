"""R_OpenQueue (MS-MQRR 3.1.4.2, opnum 2): failures are thrown as faults."""
from __future__ import annotations

import pytest

from qm2qm.mqrr import idl
from qm2qm.mqrr.constants import MQ_DENY_NONE, MQ_DENY_SHARE, PEEK_ACCESS, RECEIVE_ACCESS
from shared_adm import security as access
from qm2qm.remote_read.actions import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import QueueAccessType, QueueShareMode

from .conftest import FORMAT_NAME


def descriptors(env):
    return list(env.queue.open_queue_descriptor_collection)


@pytest.mark.parametrize("dw_access", [0, 2, 4, 0x21])
async def test_open_queue_invalid_dwaccess_throws_invalid_parameter(env, dw_access):
    c = await env.connect()
    assert await env.fault(c.open, FORMAT_NAME, dw_access) == st.MQ_ERROR_INVALID_PARAMETER
    assert descriptors(env) == []


async def test_open_queue_invalid_dwsharemode_throws_invalid_parameter(env):
    c = await env.connect()
    assert await env.fault(c.open, FORMAT_NAME, RECEIVE_ACCESS, 2) == st.MQ_ERROR_INVALID_PARAMETER


@pytest.mark.parametrize("qft", [0, 5, 6, 7])
async def test_open_queue_format_type_outside_the_subset_throws_invalid_parameter(env, qft):
    c = await env.connect()
    request = idl.R_OpenQueue()
    request["pQueueFormat"]["m_qft"] = request["pQueueFormat"]["u"]["tag"] = qft
    arm = request["pQueueFormat"]["u"]
    if qft == 5:
        arm["m_GConnectorID"] = bytes(16)
    elif qft == 6:
        arm["m_DlID"]["m_DlGuid"] = bytes(16)
        arm["m_DlID"]["m_pwzDomain"] = "d\x00"
    request["dwAccess"], request["pClientId"] = RECEIVE_ACCESS, bytes(16)
    assert await env.fault(c.call, request) == st.MQ_ERROR_INVALID_PARAMETER


async def test_open_queue_unknown_queue_throws_queue_not_found(env):
    c = await env.connect()
    assert await env.fault(c.open, "DIRECT=OS:qm2qm\\private$\\nowhere") == st.MQ_ERROR_QUEUE_NOT_FOUND


async def test_open_queue_receive_access_opens_with_receive_access_and_deny_none(env):
    c, h = await env.opened(RECEIVE_ACCESS)
    [d] = descriptors(env)
    assert (d.access_type, d.share_mode) == (QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    assert len(h) == 20 and h != bytes(20)


async def test_open_queue_peek_access_opens_with_peek_access_that_cannot_receive(env):
    env.enqueue(b"m")
    c, h = await env.opened(PEEK_ACCESS)
    [d] = descriptors(env)
    assert d.access_type is QueueAccessType.PEEK_ACCESS
    assert (await env.call(c.read, h, MQ_ACTION_PEEK_CURRENT)).status == st.MQ_OK
    assert (await env.call(c.read, h, MQ_ACTION_RECEIVE)).status == st.MQ_ERROR_ACCESS_DENIED


async def test_open_queue_deny_share_opens_deny_receive(env):
    c, h = await env.opened()
    await env.call(c.close, h)
    h = await env.call(c.open, FORMAT_NAME, RECEIVE_ACCESS, MQ_DENY_SHARE)
    [d] = descriptors(env)
    assert d.share_mode is QueueShareMode.DENY_RECEIVE
    assert await env.fault(c.open, FORMAT_NAME, RECEIVE_ACCESS, MQ_DENY_NONE) == st.MQ_ERROR_SHARING_VIOLATION


async def test_open_queue_private_format_name_opens_the_queue(env):
    c = await env.connect()
    name = f"PRIVATE={env.qm.identifier}\\{env.queue.private_queue_number:08x}"
    await env.call(c.open, name)
    assert [d.queue_reference for d in descriptors(env)] == [env.queue]


async def test_open_queue_access_check_with_the_caller_sids_denied_throws_access_denied(env, monkeypatch):
    seen = []

    def deny(qm, queue, sids, rights):
        seen.append((queue, tuple(sids), rights))
        return False

    monkeypatch.setattr(access, "check_access", deny)
    c = await env.connect()
    assert await env.fault(c.open, FORMAT_NAME, RECEIVE_ACCESS) == st.MQ_ERROR_ACCESS_DENIED
    assert seen == [(env.queue, ("S-1-5-7",), access.MQSEC_RECEIVE_MESSAGE)]
    assert descriptors(env) == []                   # the descriptor Open Queue made is closed again


async def test_open_queue_anonymous_caller_refused_without_allow_anonymous_read(env):
    env.qm.allow_anonymous_read = False             # the default: ANONYMOUS LOGON is not in Everyone
    c = await env.connect()
    assert await env.fault(c.open, FORMAT_NAME, RECEIVE_ACCESS) == st.MQ_ERROR_ACCESS_DENIED
    assert descriptors(env) == []


async def test_open_queue_failure_of_the_open_queue_event_is_thrown(env):
    c = await env.connect()
    # the queue manager's own private queues are never remote-readable (MS-MQDMPR Open Queue, MS-MQCN 3.2.3)
    assert await env.fault(c.open, "DIRECT=OS:qm2qm\\private$\\admin_queue$") == st.MQ_ERROR_ACCESS_DENIED
    assert descriptors(env) == []


@pytest.mark.parametrize("name", ["DIRECT=HTTP://qm2qm/msmq/private$/orders",
                                  "DIRECT=HTTPS://qm2qm/msmq/private$/orders",
                                  "DIRECT=IPX:00000000:000000000000\\private$\\orders",
                                  "DIRECT=SPX:qm2qm\\private$\\orders"])
async def test_open_queue_direct_protocol_outside_tcp_and_os_throws_invalid_parameter(env, name):
    """2.2.3: R_OpenQueue takes the TCP and OS Protocol Address Specifications only (HTTP answered Open Queue's
    UNSUPPORTED_FORMATNAME_OPERATION, IPX and SPX opened the local queue); 3.1.4.2 throws INVALID_PARAMETER."""
    c = await env.connect()
    assert await env.fault(c.open, name) == st.MQ_ERROR_INVALID_PARAMETER
    assert descriptors(env) == []


@pytest.mark.parametrize("opnum", [2, 11], ids=["R_OpenQueue", "R_OpenQueueForMove"])
async def test_open_queue_direct_name_that_is_not_utf16_throws_invalid_parameter(env, opnum):
    """Found by scripts/soak.py: an unpaired surrogate in m_pDirectID raised UnicodeDecodeError in the handler."""
    from impacket.dcerpc.v5.rpcrt import DCERPC_v5

    from qm2qm.mqrr.queue_format import queue_format
    request = idl.R_OpenQueueForMove() if opnum == 11 else idl.R_OpenQueue()
    request["pQueueFormat"] = queue_format("DIRECT=OS:.\\private$\\QQ")
    request["dwAccess"], request["dwShareMode"] = 4 if opnum == 11 else RECEIVE_ACCESS, MQ_DENY_NONE
    request["pClientId"] = bytes(16)
    request["fNonRoutingServer"], request["Major"], request["Minor"], request["BuildNumber"] = 1, 6, 1, 0
    request["fWorkgroup"] = 1
    if env.ndr64:
        request.changeTransferSyntax(DCERPC_v5.NDR64Syntax)
    stub = request.getData().replace("QQ".encode("utf-16le"), b"\x00\xd8Q\x00")
    assert await env.stub_fault(opnum, stub) == st.MQ_ERROR_INVALID_PARAMETER
    assert descriptors(env) == []
