"""The memo of serialized UserMessage packets used by the qm2qm reads (MS-MQDMPR 3.1.7.1.32; qm2qm/remote_read/packet_cache.py)."""
from __future__ import annotations

import struct

import pytest

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
from qm2qm.mqqp.handlers import start_receive2
from qm2qm.remote_read.packet_cache import MAX_CACHED_COMPACT_FORM, MAX_SEEN, PacketCache
from qm2qm.remote_read.locks import release
from shared_adm import status as st
from shared_adm.packet import serialize_message_to_buffer

from .conftest import NDR64
from .test_read_fast_path import FakeCall, _desc, _stub


def test_the_cache_keeps_at_most_its_entries_least_recently_used_out_first():
    cache = PacketCache(max_entries=3, second_sight=False)
    for i in range(3):
        cache.put(b"k%d" % i, b"p%d" % i, i)
    assert cache.get(b"k0") == (b"p0", 0, 0, 0)      # k0 now most recently used
    cache.put(b"k3", b"p3", 3)
    assert cache.get(b"k1") is None and cache.get(b"k0") == (b"p0", 0, 0, 0) and len(cache) == 3


def test_the_cache_keeps_at_most_its_bytes():
    cache = PacketCache(max_bytes=1000, second_sight=False)
    for i in range(50):
        cache.put(b"%03d" % i, bytes(97), 97)
    assert cache.size_in_bytes <= 1000 and len(cache) == 10
    assert cache.get(b"049") == (bytes(97), 97, 0, 0) and cache.get(b"000") is None
    cache.put(b"big", bytes(2000), 2000)               # larger than the whole budget: not kept
    assert cache.get(b"big") is None and len(cache) == 10


def test_large_messages_and_missing_compact_forms_are_never_kept():
    cache = PacketCache()
    big = bytes(MAX_CACHED_COMPACT_FORM + 1)
    for _ in range(2):
        cache.put(big, b"packet", 6)
        cache.put(None, b"packet", 6)
    assert cache.get(big) is None and cache.get(None) is None and len(cache) == 0 and cache.size_in_bytes == 0


def test_a_packet_is_kept_from_the_second_time_it_is_offered():
    cache = PacketCache()
    cache.put(b"k", b"p", 1, 2, 3)
    assert cache.get(b"k") is None and len(cache) == 0
    cache.put(b"k", b"p", 1, 2, 3)
    assert cache.get(b"k") == (b"p", 1, 2, 3) and len(cache) == 1


def test_the_seen_set_is_bounded_and_cleared_with_the_cache():
    cache = PacketCache()
    for i in range(MAX_SEEN + 1):                       # the first is forgotten when the set fills up
        cache.put(b"%d" % i, b"p", 1)
    cache.put(b"0", b"p", 1)
    assert cache.get(b"0") is None
    cache.put(b"x", b"p", 1)
    cache.clear()
    cache.put(b"x", b"p", 1)
    assert cache.get(b"x") is None and len(cache) == 0


async def _peek(env, d, timeout: int = 0) -> bytes:
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    return start_receive2.serve(env.service, ctx, _stub(9, _desc(d.handle, MQ_ACTION_PEEK_CURRENT, timeout),
                                                        env.syntax == NDR64))


def _packet(env, answer: bytes) -> bytes:
    response = codec.decode_response(9, answer, env.syntax == NDR64)
    assert response.ErrorCode == st.MQ_OK
    return response.lpRemoteReadDesc2.pRemoteReadDesc.lpBuffer


@pytest.mark.parametrize("body", [b"x" * 100, bytes(range(256)) * 10])
async def test_a_peek_answered_from_the_cache_is_byte_identical_to_a_fresh_one(make_env, body):
    env = await make_env()
    _, d, _ = await env.session()
    message = env.enqueue(body, label="cached")
    first = await _peek(env, d)
    assert len(env.service.packets) == 0               # seen once: not kept yet
    second = await _peek(env, d)
    assert len(env.service.packets) == 1
    third = await _peek(env, d)                        # from the cache
    env.service.packets.clear()
    fresh = await _peek(env, d)                        # serialized again
    assert first == second == third == fresh
    [position] = list(env.queue.message_position_list)
    expected = serialize_message_to_buffer(position.message)
    size = struct.unpack_from("<I", expected, 8)[0]
    assert _packet(env, fresh) == expected[:size]
    assert message.body == body


async def test_the_cache_answers_each_message_with_its_own_packet(make_env):
    env = await make_env()
    _, d, _ = await env.session()
    env.enqueue(b"first", label="a")
    first = _packet(env, await _peek(env, d))
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    received = start_receive2.serve(env.service, ctx, _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, 0),
                                                            env.syntax == NDR64))
    assert _packet(env, received) == first             # the receive found the peeked packet
    [entry] = ctx.handles.values()
    assert release(env.service, entry, delete=True) == st.MQ_OK
    env.enqueue(b"second", label="b")
    second = _packet(env, await _peek(env, d))
    assert second != first and b"second" in second and b"first" not in second


async def test_a_received_message_is_not_kept(make_env):
    env = await make_env()
    _, d, _ = await env.session()
    for i in range(5):
        env.enqueue(b"r%d" % i)
    ctx = FakeCall(env.syntax == NDR64, answer_now=True)
    for i in range(5):
        answer = start_receive2.serve(env.service, ctx, _stub(9, _desc(d.handle, MQ_ACTION_RECEIVE, 0,
                                                                       request_id=i + 1), env.syntax == NDR64))
        assert _packet(env, answer)
    assert len(env.service.packets) == 0
