"""The handle values qmcomm's R_QMOpenRemoteQueue returns serve the host that opened the queue, and no other
(OpenQueueDescriptor.opener_host; docs/mqqp-choices.md "Which descriptors qm2qm can see"). qm2qm names a descriptor
by its 32-bit Handle alone, and R_QMCreateRemoteCursor answered whether a guessed value was live: a hostile probe
read, received and purged another caller's queue with a guessed handle, even after the queue's owner revoked its
rights."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from qm2qm.mqmp.constants import MQ_RECEIVE_ACCESS
from qm2qm.mqmp.handlers.create_remote_cursor import create_remote_cursor
from qm2qm.mqmp.handlers.open_remote_queue import open_remote_queue
from qm2qm.mqmp.interface import build_service as build_qmcomm
from qm2qm.mqqp.codec_types import REMOTEREADDESC
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers.close_queue import close_queue
from qm2qm.mqqp.handlers.open_queue import open_queue
from qm2qm.mqqp.handlers.purge_queue import purge_queue
from qm2qm.mqqp.handlers.start_receive import start_receive_now
from qm2qm.mqqp.interface import build_service
from qm2qm.rpc.interface import ANONYMOUS, RpcFault
from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.message import Message
from shared_adm.queue_manager import QueueManager
from tests.mqqp.test_scenarios import _Ctx

FORMAT = "DIRECT=OS:qm2qm\\private$\\orders"


def _ctx(host: str) -> _Ctx:
    ctx = _Ctx(False)
    ctx.peer_host, ctx.principal, ctx.answer_now = host, ANONYMOUS, True
    return ctx


def _read(service, ctx, handle: int, action: int, request_id: int = 1) -> int:
    desc = REMOTEREADDESC(hRemoteQueue=handle, dwQueue=handle, ulAction=action, dwRequestID=request_id)
    return start_receive_now(service, ctx, desc).status


def _opened():
    qm = QueueManager(computer_name="qm2qm", scheduler=ManualScheduler())
    qm.initialize()
    qm.allow_anonymous_read = True
    _, queue = qm.create_queue(".\\private$\\orders")
    qm.enqueue_message(queue, Message(body=b"theirs", destination_queue_format_name=FORMAT))
    owner = _ctx("192.0.2.10")
    status, _, handle = open_remote_queue(build_qmcomm(qm), owner, FORMAT, MQ_RECEIVE_ACCESS, 0)
    assert status == st.MQ_OK
    return qm, queue, owner, handle


def test_another_host_cannot_read_purge_or_make_a_cursor_with_the_handle_value_nor_close_the_queue():
    qm, _, owner, handle = _opened()
    service = build_service(qm)
    intruder = _ctx("198.51.100.66")
    status, session = open_queue(service, intruder, uuid.uuid4(), 0, handle, handle, handle)
    assert status == st.MQ_OK                           # a session on any value (docs/mqqp-choices.md #2) ...
    for action in (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE):
        assert _read(service, intruder, handle, action) == st.MQ_ERROR_INVALID_HANDLE     # ... reads nothing
    with pytest.raises(RpcFault) as fault:
        asyncio.run(purge_queue(service, handle, intruder.peer_host))
    assert fault.value.status == st.MQ_ERROR_INVALID_HANDLE
    assert create_remote_cursor(build_qmcomm(qm), handle, intruder.peer_host) == (st.MQ_ERROR_INVALID_HANDLE, 0)
    assert close_queue(service, intruder, session)[0] == st.MQ_OK
    assert qm.descriptor_by_handle(handle) is not None  # the intruder's session end did not close the owner's queue
    # the owner's host still finds its message there and receives it
    status, _ = open_queue(service, owner, uuid.uuid4(), 0, handle, handle, handle)
    assert status == st.MQ_OK
    assert _read(service, owner, handle, MQ_ACTION_PEEK_CURRENT) == st.MQ_OK
    assert _read(service, owner, handle, MQ_ACTION_RECEIVE, request_id=2) == st.MQ_OK


def test_the_opening_host_keeps_every_use_of_its_handle():
    qm, _, owner, handle = _opened()
    service = build_service(qm)
    same_host_other_connection = _ctx(owner.peer_host)
    assert open_queue(service, same_host_other_connection, uuid.uuid4(), 0, handle, handle, handle)[0] == st.MQ_OK
    assert create_remote_cursor(build_qmcomm(qm), handle, owner.peer_host)[0] == st.MQ_OK
    assert _read(service, same_host_other_connection, handle, MQ_ACTION_RECEIVE) == st.MQ_OK


def test_a_queue_opened_over_ms_mqrr_is_bound_to_its_host_too():
    """Found by the bypass probe: R_OpenQueue's descriptors had no opener host, so qm2qm (and R_QMCreateRemoteCursor,
    the oracle) served their handle values to anyone."""
    from qm2qm.mqrr.constants import MQ_DENY_NONE
    from qm2qm.mqrr.handlers.open_queue import open_descriptor
    from qm2qm.mqrr.interface import build_service as build_mqrr
    from shared_adm.enums import QueueAccessType
    qm = QueueManager(computer_name="qm2qm", scheduler=ManualScheduler())
    qm.initialize()
    qm.allow_anonymous_read = True
    _, queue = qm.create_queue(".\\private$\\orders")
    qm.enqueue_message(queue, Message(body=b"theirs", destination_queue_format_name=FORMAT))
    owner, intruder = _ctx("192.0.2.10"), _ctx("198.51.100.66")
    direct = (3, 0, FORMAT[len("DIRECT="):])                   # QUEUE_FORMAT_TYPE_DIRECT, no suffix
    descriptor = open_descriptor(build_mqrr(qm, port=2105), owner, direct, QueueAccessType.RECEIVE_ACCESS,
                                 MQ_DENY_NONE)
    handle, service = descriptor.handle, build_service(qm)
    assert create_remote_cursor(build_qmcomm(qm), handle, intruder.peer_host) == (st.MQ_ERROR_INVALID_HANDLE, 0)
    assert open_queue(service, intruder, uuid.uuid4(), 0, handle, handle, handle)[0] == st.MQ_OK
    assert _read(service, intruder, handle, MQ_ACTION_RECEIVE) == st.MQ_ERROR_INVALID_HANDLE
    assert create_remote_cursor(build_qmcomm(qm), handle, owner.peer_host)[0] == st.MQ_OK


def test_another_hosts_session_ending_leaves_the_owners_reads_alone():
    """Found by the bypass probe: a session on the value from another host, once closed, released the owner's
    reads (a received message went back to the queue while its reader still held it: delivered twice)."""
    qm, queue, owner, handle = _opened()
    service = build_service(qm)
    assert open_queue(service, owner, uuid.uuid4(), 0, handle, handle, handle)[0] == st.MQ_OK
    desc = REMOTEREADDESC(hRemoteQueue=handle, dwQueue=handle, ulAction=MQ_ACTION_RECEIVE, dwRequestID=7)
    held = start_receive_now(service, owner, desc)
    assert held.status == st.MQ_OK and held.handle != bytes(20)          # received, awaiting RemoteQMEndReceive
    intruder = _ctx("198.51.100.66")
    status, session = open_queue(service, intruder, uuid.uuid4(), 0, handle, handle, handle)
    assert status == st.MQ_OK and close_queue(service, intruder, session)[0] == st.MQ_OK
    assert service.adm.receive_handles.find(handle, 7) is not None       # still the owner's to ACK
    assert _read(service, owner, handle, MQ_ACTION_PEEK_CURRENT, request_id=8) == st.MQ_ERROR_IO_TIMEOUT
