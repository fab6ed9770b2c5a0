"""Create/Delete/Open/Close Queue (MS-MQDMPR 3.1.7.1.3–3.1.7.1.6): every status and share-mode branch."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as hs

from shared_adm import status as st
from shared_adm.clock import ManualScheduler
from shared_adm.enums import QueueAccessType as A, QueueShareMode as S, QueueType
from shared_adm.format_name import parse, pathname_key
from shared_adm.queue_manager import QueueManager, share_kind
from shared_adm.store.base import MemoryStore

from .conftest import QNAME, put


def test_create_queue_statuses(qm):
    assert qm.create_queue(r".\private$\a")[0] == st.MQ_OK
    assert qm.create_queue(r"QM2QM\PRIVATE$\A")[0] == st.MQ_ERROR_QUEUE_EXISTS
    for bad in ("", r"a\b\c", r"other\private$\x", ".\\private$\\", r".\private$\a;b", 5, "x" * 300):
        assert qm.create_queue(bad)[0] == st.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    assert qm.create_queue(r".\private$\z", colour="red")[0] == st.MQ_ERROR_ILLEGAL_PROPERTY_VALUE


def test_create_queue_defaults_and_numbers(qm):
    _, a = qm.create_queue(r".\private$\a")
    _, b = qm.create_queue(r".\private$\b", transactional=True, label="L")
    _, pub = qm.create_queue(r"qm2qm\pub")
    assert (a.private_queue_number, b.private_queue_number) == (4, 5)
    assert a.quota == 0xFFFFFFFF and a.privacy_level == "Optional" and not a.transactional and a.base_priority == 0
    assert b.transactional and b.label == "L"
    assert pub.queue_type is QueueType.PUBLIC and a.queue_type is QueueType.PRIVATE
    assert qm.queue_by_pathname(r".\private$\B") is b


def test_system_queues_exist(qm):
    notify = qm.queue_by_pathname(r".\private$\notify_queue$")
    assert notify.private_queue_number == 3 and notify.queue_type is QueueType.SYSTEM
    for q in (qm.system_deadletter_queue, qm.system_transactional_deadletter_queue, qm.system_journal_queue):
        assert q.queue_type is QueueType.SYSTEM
    assert qm.system_transactional_deadletter_queue.transactional


@pytest.mark.parametrize("name", [
    QNAME, r"DIRECT=OS:.\private$\q", r"DIRECT=OS:qm2qm.example.com\private$\q", r"DIRECT=TCP:10.0.0.1\private$\q",
    r"direct=os:QM2QM\PRIVATE$\Q",
])
def test_open_queue_by_direct_names(qm, queue, name):
    status, d = qm.open_queue(name, A.RECEIVE_ACCESS, S.DENY_NONE)
    assert status == st.MQ_OK and d.queue_reference is queue and d.format_name == name


def test_open_queue_by_private_and_machine_names(qm, queue):
    name = f"PRIVATE={qm.identifier}\\{queue.private_queue_number:x}"
    assert qm.open_queue(name, A.RECEIVE_ACCESS, S.DENY_NONE)[1].queue_reference is queue
    status, d = qm.open_queue(f"MACHINE={qm.identifier};DEADLETTER", A.RECEIVE_ACCESS, S.DENY_NONE)
    assert d.queue_reference is qm.system_deadletter_queue
    status, d = qm.open_queue(f"MACHINE={qm.identifier};DEADXACT", A.PEEK_ACCESS, S.DENY_NONE)
    assert d.queue_reference is qm.system_transactional_deadletter_queue
    status, d = qm.open_queue(QNAME + ";journal", A.RECEIVE_ACCESS, S.DENY_NONE)
    assert d.queue_reference is queue.journal_queue_reference
    assert qm.open_queue(f"PRIVATE={qm.identifier}\\3", A.RECEIVE_ACCESS, S.DENY_NONE)[0] == st.MQ_OK


@pytest.mark.parametrize("suffix, attribute", [("DEADLETTER", "system_deadletter_queue"),
                                               ("DEADXACT", "system_transactional_deadletter_queue"),
                                               ("JOURNAL", "system_journal_queue")])
@pytest.mark.parametrize("host", ["OS:qm2qm", "OS:QM2QM.example.com", "TCP:10.0.0.5", "OS:."])
def test_open_queue_by_a_direct_machine_queue_path(qm, queue, suffix, attribute, host):
    """MS-MQMQ 2.1.2 MachineQueuePath: DIRECT=Protocol:Address\\SYSTEM$;(JOURNAL / DEADLETTER / DEADXACT), read only."""
    name = f"DIRECT={host}\\SYSTEM$;{suffix}"
    status, d = qm.open_queue(name, A.RECEIVE_ACCESS, S.DENY_NONE)
    assert status == st.MQ_OK and d.queue_reference is getattr(qm, attribute)
    assert qm.open_queue(name.lower(), A.PEEK_ACCESS, S.DENY_NONE)[1].queue_reference is getattr(qm, attribute)
    assert qm.open_queue(name, A.SEND_ACCESS, S.DENY_NONE)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert qm.open_queue(f"DIRECT={host}\\SYSTEM$;ORDERS", A.RECEIVE_ACCESS, S.DENY_NONE)[0] \
        == st.MQ_ERROR_QUEUE_NOT_FOUND


def test_open_queue_not_found_and_format_errors(qm, queue):
    r, o, n = A.RECEIVE_ACCESS, A.SEND_ACCESS, S.DENY_NONE
    assert qm.open_queue(r"DIRECT=OS:qm2qm\private$\nope", r, n)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.open_queue(r"DIRECT=OS:elsewhere\private$\q", r, n)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.open_queue(r"DIRECT=OS:qm2qm\private$\nope", o, n)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.open_queue(f"PRIVATE={qm.identifier}\\99", o, n)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.open_queue(r"DIRECT=OS:elsewhere\private$\q", o, n)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert qm.open_queue("DIRECT=HTTP://qm2qm/msmq/private$/q", r, n)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert qm.open_queue(f"MACHINE={qm.identifier};JOURNAL", o, n)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert qm.open_queue("MULTICAST=234.1.1.1:8001", r, n)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    # MS-MQMQ 2.1.2: Protocol = "TCP" / "OS" / "HTTP" / "HTTPS" / "IPX"; SPX is not a format name's protocol
    for bad in ("", "nonsense", "DIRECT=OS:", "PRIVATE=xyz\\1", None, 42, "DIRECT=OS:a\\b\x00",
                r"DIRECT=SPX:qm2qm\private$\q"):
        assert qm.open_queue(bad, r, n)[0] == st.MQ_ERROR_ILLEGAL_FORMATNAME
    assert qm.open_queue(QNAME, "ReceiveAccess", n)[0] == st.MQ_ERROR_INVALID_PARAMETER
    assert qm.open_queue("DL=00000000-0000-0000-0000-000000000001", o, n)[0] == st.MQ_ERROR_NO_DS


def test_open_queue_multiple_element(qm, queue):
    _, other = qm.create_queue(r".\private$\other")
    multi = QNAME + r",DIRECT=OS:qm2qm\private$\other"
    assert qm.open_queue(multi, A.RECEIVE_ACCESS, S.DENY_NONE)[0] == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert qm.open_queue(multi, A.SEND_ACCESS, S.DENY_RECEIVE)[0] == st.MQ_ERROR_UNSUPPORTED_ACCESS_MODE
    status, d = qm.open_queue(multi, A.SEND_ACCESS, S.DENY_NONE)
    assert status == st.MQ_OK and d.multiple and d.queue_reference is None
    assert [c.queue_reference for c in d.open_queue_descriptor_collection] == [queue, other]
    assert qm.close_queue(d) == st.MQ_OK
    assert not queue.open_queue_descriptor_collection and not other.open_queue_descriptor_collection
    bad = QNAME + r",DIRECT=OS:qm2qm\private$\missing"
    assert qm.open_queue(bad, A.SEND_ACCESS, S.DENY_NONE)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert not queue.open_queue_descriptor_collection


def _expected(existing, access, share) -> int:
    """The three ordered branches of 3.1.7.1.5, written independently of the implementation."""
    R, DR, DN = A.RECEIVE_ACCESS, S.DENY_RECEIVE, S.DENY_NONE
    if any(s is DR and a is R for a, s in existing):
        return st.MQ_ERROR_SHARING_VIOLATION if share is DR or (share is DN and access is R) else st.MQ_OK
    if any(s is DR and a in (A.PEEK_ACCESS, A.PEEK_ADMIN_ACCESS) for a, s in existing):
        return st.MQ_ERROR_SHARING_VIOLATION if access is R else st.MQ_OK
    if any(s is DN and a is R for a, s in existing):
        return st.MQ_ERROR_SHARING_VIOLATION if share is DR else st.MQ_OK
    return st.MQ_OK


ACCESSES = [A.RECEIVE_ACCESS, A.PEEK_ACCESS, A.SEND_ACCESS, A.PEEK_ADMIN_ACCESS]


@pytest.mark.parametrize("first", list(itertools.product(ACCESSES, S)))
@pytest.mark.parametrize("second", list(itertools.product(ACCESSES, S)))
def test_share_mode_table(qm, queue, first, second):
    status, d1 = qm.open_queue(QNAME, *first)
    assert status == _expected([], *first)
    status, _ = qm.open_queue(QNAME, *second)
    assert status == _expected([first], *second)


@settings(max_examples=150, deadline=None)
@given(hs.lists(hs.tuples(hs.sampled_from(ACCESSES), hs.sampled_from(list(S)), hs.integers(0, 7)), max_size=30))
def test_share_mode_of_opens_and_closes_in_any_order(steps):
    """Each open is judged on the descriptors open at that moment, however many opened and closed before: the queue's
    share_counts follow every open and close."""
    qm = QueueManager(store=MemoryStore(), scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    queue = qm.create_queue(r".\private$\q")[1]
    opened = []
    for access, share, close in steps:
        status, desc = qm.open_queue(QNAME, access, share)
        assert status == _expected([(d.access_type, d.share_mode) for d in opened], access, share)
        if desc is not None:
            opened.append(desc)
        if close < len(opened) and close % 2:
            assert qm.close_queue(opened.pop(close)) == st.MQ_OK
        assert list(queue.open_queue_descriptor_collection) == opened
        assert queue.share_counts == [sum(share_kind(d) == kind for d in opened) for kind in range(3)]


def test_descriptor_handles_unique_and_looked_up(qm, queue):
    descs = [qm.open_queue(QNAME, A.PEEK_ACCESS, S.DENY_NONE)[1] for _ in range(10)]
    assert len({d.handle for d in descs}) == 10 and len({d.context_value for d in descs}) == 10
    assert all(qm.descriptor_by_handle(d.handle) is d for d in descs)
    assert qm.descriptor_by_handle(0) is None and qm.descriptor_by_handle("1") is None
    assert queue.active


def test_close_queue_steps(qm, queue, desc):
    cursor = qm.open_cursor(desc)
    tagged = qm.dequeue_message(desc, 10_000, tag=9)
    peek = qm.peek_message(desc, 10_000, cursor=cursor)
    assert qm.close_queue(desc) == st.MQ_OK
    assert tagged.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    assert peek.result().status == st.MQ_ERROR_OPERATION_CANCELLED
    assert qm.cursor_by_handle(cursor.handle) is None
    assert desc not in queue.open_queue_descriptor_collection and not queue.active
    assert qm.close_queue(desc) == st.MQ_ERROR_INVALID_HANDLE
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_INVALID_HANDLE


def test_delete_queue(qm, queue, desc, store):
    from shared_adm.message import DeliveryGuarantee
    put(qm, queue, "a", "b", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    assert len(store.load().messages) == 2
    locked = qm.dequeue_message_begin(desc, 0)
    assert qm.dequeue_message(desc, 0).ok
    blocked = qm.dequeue_message(qm.open_queue(QNAME, A.RECEIVE_ACCESS, S.DENY_NONE)[1], 10_000)
    assert qm.delete_queue(queue) == st.MQ_OK
    assert blocked.result().status == st.MQ_ERROR_QUEUE_DELETED
    assert store.load().messages == []
    assert qm.dequeue_message_end(desc, locked.position, True) == st.MQ_ERROR_QUEUE_NOT_AVAILABLE
    assert desc.queue_reference is None
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE
    assert qm.peek_message(desc, 0).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE
    assert qm.open_queue(QNAME, A.RECEIVE_ACCESS, S.DENY_NONE)[0] == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.delete_queue(queue) == st.MQ_ERROR_QUEUE_NOT_FOUND
    assert qm.close_queue(desc) == st.MQ_OK
    assert store.load().queues and all(q.attributes["pathname"] != r"private$\q" for q in store.load().queues)


def test_format_name_parser_never_raises():
    for text in ["DIRECT=", "=", "PRIVATE=", "MACHINE=x", "DIRECT=HTTP://", "a,b", ",", "DIRECT=OS:h\\", "\x00"]:
        assert parse(text).kind == "illegal"
    assert pathname_key(r"h\private$\n") == ("h", "private$\\n")


@pytest.mark.parametrize("name", ["admin_queue$", "order_queue$", "notify_queue$"])
def test_open_queue_refuses_remote_read_of_reserved_private_queues(qm, name):
    from shared_adm.enums import RemoteReadState
    fmt = "DIRECT=OS:.\\private$\\" + name
    status, _ = qm.open_queue(fmt, A.RECEIVE_ACCESS, S.DENY_NONE, remote_read_state=RemoteReadState.OPENED)
    assert status == st.MQ_ERROR_ACCESS_DENIED
    status, desc = qm.open_queue(fmt, A.RECEIVE_ACCESS, S.DENY_NONE)      # the queue manager itself may read it
    assert status == st.MQ_OK and desc is not None
