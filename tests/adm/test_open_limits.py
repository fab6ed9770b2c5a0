"""The queue manager's bounds on what callers keep open (our bounds, not MS-MQDMPR's): a remote reader's Open Queue
(3.1.7.1.5) past max_open_queues answers MQ_ERROR_INSUFFICIENT_RESOURCES and opens nothing; Open Cursor (3.1.7.1.1)
past max_cursors raises CursorLimitReached; a close makes room again."""
from __future__ import annotations

import pytest

from shared_adm import status as st
from shared_adm.enums import RemoteReadState
from shared_adm.queue_manager import DEFAULT_MAX_CURSORS, DEFAULT_MAX_OPEN_QUEUES, CursorLimitReached

from .conftest import DENY_NONE, QNAME, RECEIVE

OPENED = RemoteReadState.OPENED


def test_a_remote_reader_s_open_past_max_open_queues_answers_insufficient_resources_until_one_is_closed(qm, queue):
    assert (qm.max_open_queues, qm.max_cursors) == (DEFAULT_MAX_OPEN_QUEUES, DEFAULT_MAX_CURSORS)
    from qm2qm import config
    assert (config.DEFAULT_MAX_OPEN_QUEUES, config.DEFAULT_MAX_CURSORS, config.DEFAULT_MAX_SUBQUEUES) == (
        DEFAULT_MAX_OPEN_QUEUES, DEFAULT_MAX_CURSORS, qm.max_subqueues)        # the serve defaults are the same
    qm.max_open_queues = 2
    first, second = (qm.open_queue(QNAME, RECEIVE, DENY_NONE, OPENED)[1] for _ in range(2))
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE, OPENED) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, None)
    assert list(queue.open_queue_descriptor_collection) == [first, second]
    assert qm.close_queue(first) == st.MQ_OK
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE, OPENED)[0] == st.MQ_OK


def test_the_queue_manager_s_own_opens_are_neither_counted_nor_refused(qm, queue):
    qm.max_open_queues = 1
    own = [qm.open_queue(QNAME, RECEIVE, DENY_NONE)[0] for _ in range(3)]      # as MS-MQCN opens notify_queue$
    assert own == [st.MQ_OK] * 3
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE, OPENED)[0] == st.MQ_OK
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE, OPENED)[0] == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE)[0] == st.MQ_OK


def test_open_cursor_past_max_cursors_raises_until_one_is_closed(qm, desc):
    qm.max_cursors = 1
    cursor = qm.open_cursor(desc)
    with pytest.raises(CursorLimitReached, match="already holds 1 cursors") as info:
        qm.open_cursor(desc)
    assert info.value.status == st.MQ_ERROR_INSUFFICIENT_RESOURCES and list(desc.cursor_collection) == [cursor.handle]
    assert qm.close_cursor(cursor) == st.MQ_OK
    assert qm.open_cursor(desc) is not None
