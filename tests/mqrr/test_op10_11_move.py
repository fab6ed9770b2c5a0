"""R_MoveMessage (MS-MQRR 3.1.4.10, opnum 10) and R_OpenQueueForMove (3.1.4.11, opnum 11).

The related destinations: a subqueue of the source ("QueueName;Subqueue", opened by QUEUE_FORMAT_TYPE_SUBQUEUE with
QUEUE_SUFFIX_TYPE_SUBQUEUE, MS-MQMQ 2.2.7; the first open creates it, shared_adm/subqueues.py), the queue of a
subqueue, another subqueue of the same queue, and the queue itself (the same parent pathname)."""
from __future__ import annotations

import os

from qm2qm.mqrr.constants import MQ_MOVE_ACCESS, RR_ACK
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import PositionState, QueueAccessType

from .conftest import FORMAT_NAME

JOURNAL = FORMAT_NAME + ";JOURNAL"      # a second, distinct destination of the same queue family
OTHER_PATH = "private$\\other"


async def setup(env, destination=FORMAT_NAME):
    m = env.enqueue(b"moved")
    c, h = await env.opened()
    move_context, h_to = await env.call(c.open, destination, MQ_MOVE_ACCESS, for_move=True)
    return c, h, move_context, h_to, m


async def test_open_queue_for_move_opens_with_move_access_and_returns_a_random_move_context(env):
    c = await env.connect()
    a, h1 = await env.call(c.open, JOURNAL, MQ_MOVE_ACCESS, for_move=True)
    b, h2 = await env.call(c.open, JOURNAL, MQ_MOVE_ACCESS, for_move=True)
    journal = env.queue.journal_queue_reference
    assert [d.access_type for d in journal.open_queue_descriptor_collection] == [QueueAccessType.MOVE_ACCESS] * 2
    assert a != b and a != 0 and b != 0 and h1 != h2
    assert set(env.service.move_contexts) == {a, b}


async def test_open_queue_for_move_unknown_queue_throws_queue_not_found(env):
    c = await env.connect()
    fault = await env.fault(c.open, "DIRECT=OS:qm2qm\\private$\\nowhere", MQ_MOVE_ACCESS, for_move=True)
    assert fault == st.MQ_ERROR_QUEUE_NOT_FOUND


async def test_move_message_generates_move_message_and_returns_mq_ok(env):
    c, h, move_context, _, m = await setup(env)
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.MQ_OK
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}
    assert env.bodies() == [b"moved"]


async def test_move_message_without_the_source_descriptor_fails(env):
    c, h, move_context, _, m = await setup(env)
    env.qm.close_queue(next(d for d in env.queue.open_queue_descriptor_collection
                            if d.access_type is QueueAccessType.RECEIVE_ACCESS))
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.MQ_ERROR_INVALID_HANDLE


async def test_move_message_from_a_peek_handle_returns_access_denied_and_moves_nothing(env):
    """phContextFrom MUST come from R_OpenQueue with RECEIVE_ACCESS (3.1.4.10): a peek handle (which opens while
    another reader holds the queue with MQ_DENY_RECEIVE_SHARE) must not take messages off the queue."""
    from qm2qm.mqrr.constants import MQ_DENY_SHARE, PEEK_ACCESS, RECEIVE_ACCESS
    m = env.enqueue(b"kept")
    holder = await env.connect()
    await env.call(holder.open, FORMAT_NAME, RECEIVE_ACCESS, MQ_DENY_SHARE)      # the queue held exclusively
    c, peek = await env.opened(access=PEEK_ACCESS)
    to_poison, _ = await env.call(c.open, POISON, MQ_MOVE_ACCESS, for_move=True)
    assert await env.call(c.move, peek, to_poison, m.lookup_identifier) == st.MQ_ERROR_ACCESS_DENIED
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE} and env.bodies() == [b"kept"]


async def test_move_message_unknown_or_closed_destination_returns_invalid_handle(env):
    c, h, move_context, h_to, m = await setup(env)
    assert await env.call(c.move, h, move_context ^ 1, m.lookup_identifier) == st.MQ_ERROR_INVALID_HANDLE
    await env.call(c.close, h_to)
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.MQ_ERROR_INVALID_HANDLE
    assert env.bodies() == [b"moved"]


async def test_move_message_between_unrelated_queues_returns_status_invalid_parameter(env):
    env.qm.create_queue(".\\" + OTHER_PATH)
    c, h, move_context, _, m = await setup(env, "DIRECT=OS:qm2qm\\" + OTHER_PATH)
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.STATUS_INVALID_PARAMETER


async def test_move_message_in_a_transaction_to_a_non_transactional_queue_returns_transaction_usage(env):
    c, h, move_context, _, m = await setup(env)
    uow = os.urandom(16)
    env.qm.create_transaction(uow)
    assert await env.call(c.move, h, move_context, m.lookup_identifier, uow) == st.MQ_ERROR_TRANSACTION_USAGE


async def test_move_message_of_a_missing_message_returns_message_not_found(env):
    c, h, move_context, _, m = await setup(env)
    assert await env.call(c.move, h, move_context, m.lookup_identifier + 1) == st.MQ_ERROR_MESSAGE_NOT_FOUND


async def test_move_message_locked_under_a_transaction_returns_message_locked_under_transaction(env):
    c, h, move_context, _, m = await setup(env)
    transaction = env.qm.create_transaction(os.urandom(16))
    d = next(d for d in env.queue.open_queue_descriptor_collection
             if d.access_type is QueueAccessType.RECEIVE_ACCESS)
    assert env.qm.dequeue_message(d, 0, transaction=transaction).status == st.MQ_OK
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION


async def test_move_message_locked_by_another_reader_s_receive_is_not_found_and_its_ack_deletes_it(env):
    c, h, move_context, _, m = await setup(env)
    assert (await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=7)).status == st.MQ_OK    # Locked, two-phase
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.MQ_ERROR_MESSAGE_NOT_FOUND
    assert env.positions() == {m.lookup_identifier: PositionState.LOCKED}
    assert await env.call(c.end, h, 7, RR_ACK) == st.MQ_OK
    assert env.positions() == {}                # received once, and gone: not alive again under a moved position


async def transactional_setup(env):
    status, queue = env.qm.create_queue(".\\private$\\xorders", transactional=True)
    m = env.enqueue(b"moved in a transaction", queue=queue)
    c = await env.connect()
    h = await env.call(c.open, "DIRECT=OS:qm2qm\\private$\\xorders")
    move_context, _ = await env.call(c.open, "DIRECT=OS:qm2qm\\private$\\xorders", MQ_MOVE_ACCESS, for_move=True)
    return c, h, move_context, m, queue


async def test_move_message_in_an_unknown_transaction_returns_transaction_sequence(env):
    c, h, move_context, m, _ = await transactional_setup(env)
    assert await env.call(c.move, h, move_context, m.lookup_identifier, os.urandom(16)) == \
        st.MQ_ERROR_TRANSACTION_SEQUENCE


async def test_move_message_in_a_transaction_is_provisional_until_commit(env):
    c, h, move_context, m, queue = await transactional_setup(env)
    uow = os.urandom(16)
    env.qm.create_transaction(uow)
    assert await env.call(c.move, h, move_context, m.lookup_identifier, uow) == st.MQ_OK
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    assert env.qm.transaction_commit(uow) == st.MQ_OK
    assert env.bodies(queue) == [b"moved in a transaction"]          # moved within its own queue family
    assert set(env.positions(queue).values()) == {PositionState.AVAILABLE}


POISON = FORMAT_NAME + ";poison"


async def test_open_queue_for_move_of_a_subqueue_creates_it_and_sends_the_subqueue_format(env):
    from qm2qm.mqrr.queue_format import queue_format
    wire = queue_format(POISON)
    assert (wire["m_qft"], wire["m_SuffixAndFlags"]) == (8, 5)      # QUEUE_FORMAT_TYPE_SUBQUEUE, SUFFIX_TYPE_SUBQUEUE
    c = await env.connect()
    move_context, _ = await env.call(c.open, POISON, MQ_MOVE_ACCESS, for_move=True)
    poison = env.qm.subqueue(env.queue, "poison")
    assert move_context and poison is not None
    assert [d.access_type for d in poison.open_queue_descriptor_collection] == [QueueAccessType.MOVE_ACCESS]


async def test_move_message_into_a_subqueue_of_the_source_and_back(env):
    c, h, to_poison, _, m = await setup(env, POISON)
    assert await env.call(c.move, h, to_poison, m.lookup_identifier) == st.MQ_OK
    poison = env.qm.subqueue(env.queue, "poison")
    assert env.positions() == {} and env.bodies(poison) == [b"moved"]
    h_poison = await env.call(c.open, POISON)
    to_queue, _ = await env.call(c.open, FORMAT_NAME, MQ_MOVE_ACCESS, for_move=True)
    assert await env.call(c.move, h_poison, to_queue, m.lookup_identifier) == st.MQ_OK
    assert env.bodies() == [b"moved"] and env.positions() == {m.lookup_identifier: PositionState.AVAILABLE}


async def test_move_message_between_two_subqueues_of_one_queue(env):
    c, h, to_poison, _, m = await setup(env, POISON)
    await env.call(c.move, h, to_poison, m.lookup_identifier)
    h_poison = await env.call(c.open, POISON)
    to_retry, _ = await env.call(c.open, FORMAT_NAME + ";retry", MQ_MOVE_ACCESS, for_move=True)
    assert await env.call(c.move, h_poison, to_retry, m.lookup_identifier) == st.MQ_OK
    assert env.bodies(env.qm.subqueue(env.queue, "retry")) == [b"moved"]
    assert env.bodies(env.qm.subqueue(env.queue, "poison")) == []


async def test_move_message_into_another_queue_s_subqueue_returns_status_invalid_parameter(env):
    env.qm.create_queue(".\\" + OTHER_PATH)
    c, h, move_context, _, m = await setup(env, "DIRECT=OS:qm2qm\\" + OTHER_PATH + ";poison")
    assert await env.call(c.move, h, move_context, m.lookup_identifier) == st.STATUS_INVALID_PARAMETER
    assert env.bodies() == [b"moved"]


async def test_move_message_into_a_subqueue_in_a_transaction_lands_at_commit(env):
    c, h, _, m, queue = await transactional_setup(env)
    to_poison, _ = await env.call(c.open, "DIRECT=OS:qm2qm\\private$\\xorders;poison", MQ_MOVE_ACCESS, for_move=True)
    uow = os.urandom(16)
    env.qm.create_transaction(uow)
    assert await env.call(c.move, h, to_poison, m.lookup_identifier, uow) == st.MQ_OK
    assert env.positions(queue) == {m.lookup_identifier: PositionState.LOCKED}
    assert env.qm.transaction_commit(uow) == st.MQ_OK
    assert env.positions(queue) == {} and env.bodies(env.qm.subqueue(queue, "poison")) == [b"moved in a transaction"]

