"""RemoteQMStartReceiveByLookupId (MS-MQQP 3.1.4.11, opnum 10) through the RPC path: one test per bullet."""
import pytest

from qm2qm.mqqp.constants import (MQ_ACTION_RECEIVE, MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_NEXT, MQ_LOOKUP_PEEK_PREV,
                                  MQ_LOOKUP_RECEIVE_CURRENT, MQ_LOOKUP_RECEIVE_NEXT, MQ_LOOKUP_RECEIVE_PREV, RR_ACK,
                                  RR_NACK)
from shared_adm import status as st
from shared_adm.enums import PositionState

from tests.mqqp.conftest import NULL_HANDLE

LAST = 0xFFFFFFFFFFFFFFFF
LOW_7_BYTES = (1 << 56) - 1


async def three(env):
    c, d, _ = await env.session()
    messages = [env.enqueue(b"msg-%d" % i) for i in range(3)]
    return c, d, messages


async def test_start_receive_by_lookup_id_returns_invalid_handle_when_premotereaddesc_is_null(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT,
                     null_desc=True)
    assert (r.status, r.context) == (st.MQ_ERROR_INVALID_HANDLE, NULL_HANDLE)


async def test_start_receive_by_lookup_id_returns_invalid_parameter_when_hremotequeue_is_zero(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, 0, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT, dw_queue=d.handle)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive_by_lookup_id_returns_invalid_parameter_when_ultimeout_is_not_zero(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT, timeout=1)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive_by_lookup_id_returns_invalid_parameter_when_hcursor_is_not_zero(env):
    c, d, (m0, _, _) = await three(env)
    cursor = env.qm.open_cursor(d)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT,
                     cursor=cursor.handle)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_start_receive_by_lookup_id_returns_invalid_parameter_when_no_open_queue_entry(env):
    c = await env.connect()
    d = env.open_descriptor()
    m = env.enqueue()
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


@pytest.mark.parametrize("action", [MQ_ACTION_RECEIVE, 0x40000014, 0x40000024])
async def test_start_receive_by_lookup_id_returns_invalid_parameter_for_an_action_not_in_the_table(env, action):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, action)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER


@pytest.mark.parametrize("action", [MQ_LOOKUP_PEEK_CURRENT, MQ_LOOKUP_PEEK_PREV, MQ_LOOKUP_RECEIVE_CURRENT,
                                    MQ_LOOKUP_RECEIVE_PREV])
async def test_start_receive_by_lookup_id_returns_invalid_parameter_for_lookup_id_zero_where_it_must_not_be(
        env, action):
    c, d, _ = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, 0, action)
    assert r.status == st.MQ_ERROR_INVALID_PARAMETER
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_by_lookup_id_peek_current_reads_the_named_message_without_removing_it(env):
    c, d, (m0, m1, m2) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m1.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT)
    assert (r.status, r.context) == (st.MQ_OK, NULL_HANDLE) and b"msg-1" in r.buffer
    assert r.sequential_id == m1.lookup_identifier & LOW_7_BYTES
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_by_lookup_id_peek_next_with_lookup_id_zero_reads_the_first_message(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, 0, MQ_LOOKUP_PEEK_NEXT)
    assert r.status == st.MQ_OK and r.sequential_id == m0.lookup_identifier & LOW_7_BYTES


async def test_start_receive_by_lookup_id_peek_next_reads_the_following_message(env):
    c, d, (m0, m1, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_NEXT)
    assert r.status == st.MQ_OK and b"msg-1" in r.buffer


async def test_start_receive_by_lookup_id_peek_prev_with_all_ones_reads_the_last_message(env):
    c, d, (_, _, m2) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, LAST, MQ_LOOKUP_PEEK_PREV)
    assert r.status == st.MQ_OK and r.sequential_id == m2.lookup_identifier & LOW_7_BYTES


async def test_start_receive_by_lookup_id_peek_prev_reads_the_preceding_message(env):
    c, d, (m0, m1, m2) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m2.lookup_identifier, MQ_LOOKUP_PEEK_PREV)
    assert r.status == st.MQ_OK and b"msg-1" in r.buffer


async def test_start_receive_by_lookup_id_receive_current_locks_the_message_and_sets_a_handle(env):
    c, d, (m0, m1, m2) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m1.lookup_identifier, MQ_LOOKUP_RECEIVE_CURRENT)
    assert r.status == st.MQ_OK and r.context != NULL_HANDLE and b"msg-1" in r.buffer
    assert env.positions()[m1.lookup_identifier] is PositionState.LOCKED
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK
    assert m1.lookup_identifier not in env.positions()


async def test_start_receive_by_lookup_id_receive_next_with_lookup_id_zero_receives_the_first(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, 0, MQ_LOOKUP_RECEIVE_NEXT)
    assert r.status == st.MQ_OK and r.sequential_id == m0.lookup_identifier & LOW_7_BYTES
    assert env.positions()[m0.lookup_identifier] is PositionState.LOCKED
    assert (await c.call(c.end_receive, r.context, RR_NACK))[0] == st.MQ_OK
    assert env.positions()[m0.lookup_identifier] is PositionState.AVAILABLE


async def test_start_receive_by_lookup_id_receive_next_receives_the_following_message(env):
    c, d, (m0, m1, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_RECEIVE_NEXT)
    assert r.status == st.MQ_OK and b"msg-1" in r.buffer
    assert env.positions()[m1.lookup_identifier] is PositionState.LOCKED


async def test_start_receive_by_lookup_id_receive_prev_with_all_ones_receives_the_last(env):
    c, d, (_, _, m2) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, LAST, MQ_LOOKUP_RECEIVE_PREV)
    assert r.status == st.MQ_OK and env.positions()[m2.lookup_identifier] is PositionState.LOCKED


async def test_start_receive_by_lookup_id_receive_prev_receives_the_preceding_message(env):
    c, d, (m0, m1, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m1.lookup_identifier, MQ_LOOKUP_RECEIVE_PREV)
    assert r.status == st.MQ_OK and env.positions()[m0.lookup_identifier] is PositionState.LOCKED


async def test_start_receive_by_lookup_id_returns_the_status_of_the_lookup_when_no_message_matches(env):
    c, d, (m0, _, m2) = await three(env)
    for lookup_id, action in [(m2.lookup_identifier, MQ_LOOKUP_PEEK_NEXT), (m0.lookup_identifier, MQ_LOOKUP_PEEK_PREV),
                              (m2.lookup_identifier + 100, MQ_LOOKUP_PEEK_CURRENT),
                              (LAST, MQ_LOOKUP_RECEIVE_CURRENT)]:
        r = await c.call(c.start_receive_by_lookup_id, d.handle, lookup_id, action)
        assert (r.status, r.context, r.size) == (st.MQ_ERROR_MESSAGE_NOT_FOUND, NULL_HANDLE, 0)
    assert set(env.positions().values()) == {PositionState.AVAILABLE}


async def test_start_receive_by_lookup_id_removes_the_remote_read_entry_when_it_returns(env):
    c, d, (m0, _, _) = await three(env)
    await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT)
    await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_RECEIVE_CURRENT)
    assert len(env.adm.remote_read_entries) == 0 and len(env.adm.receive_handles) == 1


async def test_start_receive_by_lookup_id_does_not_check_dwqueue(env):
    c, d, (m0, _, _) = await three(env)
    r = await c.call(c.start_receive_by_lookup_id, d.handle, m0.lookup_identifier, MQ_LOOKUP_PEEK_CURRENT, dw_queue=0)
    assert r.status == st.MQ_OK
