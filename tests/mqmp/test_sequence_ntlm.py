"""The whole Windows remote-read sequence (MS-MQMP 4.2 + MS-MQQP 4.1) with NTLM on both bindings, and the queue
access check (MS-MQMP 5.1, MS-MQMQ 2.2.24) deciding with the authenticated caller's SIDs."""
from __future__ import annotations

import asyncio

import pytest

from qm2qm.client import RemoteReader, RpcCallError
from qm2qm.mqmp.handlers._service import QmcommConfig
from qm2qm.mqmp.interface import build_interfaces
from qm2qm.mqqp.interface import build_service as build_qm2qm_service, service_interface
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.auth.policy import AuthPolicy
from qm2qm.rpc.auth.users import UserStore
from qm2qm.rpc.server import RpcServer
from shared_adm import security
from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from tests.mqmp.conftest import FORMAT_NAME, QUEUE_PATH

ALICE_SID = "S-1-5-21-1004336348-1177238915-682003330-1001"
BOB_SID = "S-1-5-21-1004336348-1177238915-682003330-1002"
USERS = f"QM2QM:alice:secret-a:{ALICE_SID}\nQM2QM:bob:secret-b:{BOB_SID}\n"
HANG_GUARD_S = 60


@pytest.fixture(params=[False, True], ids=["ndr", "ndr64"])
async def secured(request):
    """qmcomm and qm2qm listeners accepting NTLM (auth optional), anonymous readers not allowed (the default)."""
    users = UserStore.parse(USERS)
    policy = AuthPolicy(users=users)
    qm = QueueManager(scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    status, queue = qm.create_queue(".\\" + QUEUE_PATH)
    assert status == 0 and not qm.allow_anonymous_read
    qm2qm_config = MqqpConfig()
    qm2qm = RpcServer([service_interface(build_qm2qm_service(qm, qm2qm_config))], port=0, idle_timeout_s=None,
                      auth=policy)
    await qm2qm.start()
    qmcomm_service, interfaces = build_interfaces(qm, QmcommConfig())
    qmcomm = RpcServer(interfaces, port=0, idle_timeout_s=None, auth=policy)
    await qmcomm.start()
    qmcomm_service.config.qmcomm_port = qm2qm_config.qmcomm_port = qmcomm.port
    qmcomm_service.config.qm2qm_port = qm2qm_config.bound_port = qm2qm.port
    yield qm, queue, qmcomm.port, qm2qm.port, request.param
    await qmcomm.close()
    await qm2qm.close()
    users.close()


def _read(qmcomm_port, qm2qm_port, ndr64, level, user=None, password="", count=2):
    """``count`` receives through the whole sequence; returns the reader's steps and the bodies received."""
    kwargs = dict(user=user, domain="QM2QM", password=password, auth_level=level) if user else {}
    with RemoteReader("127.0.0.1", FORMAT_NAME, qmcomm_port=qmcomm_port, qm2qm_port=qm2qm_port, ndr64=ndr64,
                      **kwargs) as reader:
        bodies = [reader.receive().message().body for _ in range(count)]
        steps = list(reader.steps)
    return steps, bodies


def _put(qm, queue, *bodies):
    for body in bodies:
        assert qm.enqueue_message(queue, Message(body=body, destination_queue_format_name=FORMAT_NAME)) == st.MQ_OK


@pytest.mark.parametrize("level", [2, 4, 5, 6])
async def test_whole_sequence_with_ntlm_at_each_level(secured, level):
    qm, queue, qmcomm_port, qm2qm_port, ndr64 = secured
    _put(qm, queue, b"one", b"two")
    steps, bodies = await asyncio.wait_for(asyncio.to_thread(
        _read, qmcomm_port, qm2qm_port, ndr64, level, "alice", "secret-a"), HANG_GUARD_S)
    assert bodies == [b"one", b"two"]
    assert steps[:4] == ["R_QMGetRTQMServerPort", "R_QMOpenRemoteQueue", "RemoteQMOpenQueue", "RemoteQmGetVersion"]
    assert list(queue.open_queue_descriptor_collection) == []     # closed at the end of the sequence


async def test_anonymous_reader_is_denied_where_an_authenticated_one_reads(secured):
    qm, queue, qmcomm_port, qm2qm_port, ndr64 = secured
    _put(qm, queue, b"kept")
    with pytest.raises(RpcCallError) as refused:
        await asyncio.wait_for(asyncio.to_thread(_read, qmcomm_port, qm2qm_port, ndr64, None), HANG_GUARD_S)
    assert refused.value.status == st.MQ_ERROR_ACCESS_DENIED
    assert list(queue.open_queue_descriptor_collection) == []
    _, bodies = await asyncio.wait_for(asyncio.to_thread(
        _read, qmcomm_port, qm2qm_port, ndr64, 5, "alice", "secret-a", 1), HANG_GUARD_S)
    assert bodies == [b"kept"]                                   # the refused reader took nothing


async def test_the_access_check_uses_the_sid_from_the_user_file(secured):
    qm, queue, qmcomm_port, qm2qm_port, ndr64 = secured
    only_alice = security.QueueSecurity(owner=ALICE_SID, aces=[(ALICE_SID, security.MQSEC_RECEIVE_MESSAGE)])
    security.set_queue_security(qm, queue, only_alice)
    _put(qm, queue, b"for alice", b"spare")
    with pytest.raises(RpcCallError) as refused:
        await asyncio.wait_for(asyncio.to_thread(
            _read, qmcomm_port, qm2qm_port, ndr64, 6, "bob", "secret-b"), HANG_GUARD_S)
    assert refused.value.status == st.MQ_ERROR_ACCESS_DENIED
    _, bodies = await asyncio.wait_for(asyncio.to_thread(
        _read, qmcomm_port, qm2qm_port, ndr64, 6, "alice", "secret-a"), HANG_GUARD_S)
    assert bodies == [b"for alice", b"spare"]


async def test_wrong_password_opens_nothing(secured):
    qm, queue, qmcomm_port, qm2qm_port, ndr64 = secured
    with pytest.raises(RpcCallError):
        await asyncio.wait_for(asyncio.to_thread(
            _read, qmcomm_port, qm2qm_port, ndr64, 6, "alice", "wrong"), HANG_GUARD_S)
    assert list(queue.open_queue_descriptor_collection) == []
