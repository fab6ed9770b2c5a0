"""The queue manager's bounds on what callers keep open (our bounds, not MS-MQDMPR's): Open Queue (3.1.7.1.5) past
max_open_queues answers MQ_ERROR_INSUFFICIENT_RESOURCES and opens nothing; Open Cursor (3.1.7.1.1) past max_cursors
raises CursorLimitReached; a close makes room again."""
from __future__ import annotations

import pytest

from shared_adm import status as st
from shared_adm.queue_manager import DEFAULT_MAX_CURSORS, DEFAULT_MAX_OPEN_QUEUES, CursorLimitReached

from .conftest import DENY_NONE, QNAME, RECEIVE, SEND


def test_open_queue_past_max_open_queues_answers_insufficient_resources_until_one_is_closed(qm, queue):
    assert (qm.max_open_queues, qm.max_cursors) == (DEFAULT_MAX_OPEN_QUEUES, DEFAULT_MAX_CURSORS)
    qm.max_open_queues = 2
    first, second = (qm.open_queue(QNAME, RECEIVE, DENY_NONE)[1] for _ in range(2))
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE) == (st.MQ_ERROR_INSUFFICIENT_RESOURCES, None)
    assert queue.open_queue_descriptor_collection == [first, second]
    assert qm.close_queue(first) == st.MQ_OK
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE)[0] == st.MQ_OK


def test_a_multiple_element_open_that_meets_the_limit_opens_none_of_its_elements(qm, queue):
    _, other = qm.create_queue(r".\private$\other")
    qm.max_open_queues = 2                  # the parent and one element fit; the second element does not
    status, _ = qm.open_queue(QNAME + r",DIRECT=OS:qm2qm\private$\other", SEND, DENY_NONE)
    assert status == st.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert not queue.open_queue_descriptor_collection and not other.open_queue_descriptor_collection
    assert qm.open_queue(QNAME, RECEIVE, DENY_NONE)[0] == st.MQ_OK


def test_open_cursor_past_max_cursors_raises_until_one_is_closed(qm, desc):
    qm.max_cursors = 1
    cursor = qm.open_cursor(desc)
    with pytest.raises(CursorLimitReached, match="already holds 1 cursors") as info:
        qm.open_cursor(desc)
    assert info.value.status == st.MQ_ERROR_INSUFFICIENT_RESOURCES and list(desc.cursor_collection) == [cursor.handle]
    assert qm.close_cursor(cursor) == st.MQ_OK
    assert qm.open_cursor(desc) is not None
