"""Context-handle rundown (MS-MQQP 3.1.6): a severed connection closes its sessions and NACKs its receives."""
import asyncio
import socket
import struct
import uuid

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, MQ_LOOKUP_RECEIVE_CURRENT, RR_ACK
from shared_adm import status as st
from shared_adm.enums import PositionState

INFINITE = 0xFFFFFFFF


async def test_remoteread_rundown_is_end_receive_with_rr_nack(env):
    owner, d, _ = await env.session()
    reader = await env.connect()                 # holds only the read handle: its session is owner's
    message = env.enqueue(b"nack me")
    assert (await reader.call(reader.start_receive, d.handle, MQ_ACTION_RECEIVE)).status == st.MQ_OK
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}
    await env.kill(reader)
    assert len(env.adm.receive_handles) == 0
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert env.qm.descriptor_by_handle(d.handle) is d          # the session (owner's) is untouched
    assert (await owner.call(owner.start_receive, d.handle, MQ_ACTION_RECEIVE)).status == st.MQ_OK


async def test_remoteread_rundown_of_a_lookup_receive_returns_the_message(env):
    owner, d, _ = await env.session()
    reader = await env.connect()
    message = env.enqueue()
    r = await reader.call(reader.start_receive_by_lookup_id, d.handle, message.lookup_identifier,
                          MQ_LOOKUP_RECEIVE_CURRENT)
    assert r.status == st.MQ_OK
    await env.kill(reader)
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
    assert len(env.adm.receive_handles) == 0


async def test_rrsession_rundown_is_close_queue(env):
    c, d, _ = await env.session()
    await env.kill(c)
    assert env.adm.is_idle()
    assert env.qm.descriptor_by_handle(d.handle) is None


async def test_rundown_of_a_session_and_its_receives_leaves_nothing_locked_and_no_entry(env):
    # The runtime runs handles down in creation order: the session first, then the read handles.
    c, d, _ = await env.session()
    messages = [env.enqueue(b"m%d" % i) for i in range(3)]
    for _ in range(2):
        assert (await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)).status == st.MQ_OK
    await env.kill(c)
    assert env.adm.is_idle()
    assert env.positions() == {m.lookup_identifier: PositionState.AVAILABLE for m in messages}
    assert env.qm.descriptor_by_handle(d.handle) is None


async def test_a_receive_pending_when_the_connection_dies_is_withdrawn(env):
    owner, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive, d.handle, timeout=INFINITE, request_id=11)
    await env.kill(reader, pending)
    assert len(env.adm.remote_read_entries) == 0
    assert not d.waiting_message_read_operation_collection
    message = env.enqueue(b"for the owner")
    r = await owner.call(owner.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert r.status == st.MQ_OK and b"for the owner" in r.buffer
    assert env.positions() == {message.lookup_identifier: PositionState.LOCKED}


async def test_a_peek_pending_when_the_connection_dies_is_withdrawn(env):
    owner, d, _ = await env.session()
    reader = await env.connect()
    pending = await env.blocked(reader, reader.start_receive2, d.handle, MQ_ACTION_PEEK_CURRENT,
                                timeout=INFINITE, request_id=12)
    await env.kill(reader, pending)
    assert len(env.adm.remote_read_entries) == 0
    assert not d.waiting_message_read_operation_collection


async def test_a_session_killed_with_a_pending_receive_leaves_nothing_behind(env):
    c, d, _ = await env.session()
    pending = await env.blocked(c, c.start_receive, d.handle, timeout=INFINITE, request_id=13)
    await env.kill(c, pending)
    assert env.adm.is_idle()
    assert env.qm.descriptor_by_handle(d.handle) is None
    message = env.enqueue(b"nobody waits")
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}


async def test_rundown_after_end_receive_does_nothing_more(env):
    c, d, session = await env.session()
    env.enqueue()
    r = await c.call(c.start_receive, d.handle, MQ_ACTION_RECEIVE)
    assert (await c.call(c.end_receive, r.context, RR_ACK))[0] == st.MQ_OK
    assert (await c.call(c.close_queue, session))[0] == st.MQ_OK
    second, d2, _ = await env.session()
    await env.kill(c)
    assert env.positions() == {}
    assert len(env.adm.open_queue_entries) == 1 and env.qm.descriptor_by_handle(d2.handle) is d2


def _pdu(ptype: int, call_id: int, body: bytes = b"") -> bytes:
    return struct.pack("<BBBB4sHHI", 5, 0, ptype, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body


def _request(call_id: int, opnum: int, stub: bytes) -> bytes:
    return _pdu(0, call_id, struct.pack("<IHH", len(stub), 0, opnum) + stub)


def _bind() -> bytes:
    ndr20 = uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860")
    item = struct.pack("<HBB", 0, 1, 0) + QM2QM_UUID.bytes_le + struct.pack("<HH", 1, 0)
    item += ndr20.bytes_le + struct.pack("<HH", 2, 0)
    return _pdu(11, 1, struct.pack("<HHIB3x", 5840, 5840, 0, 1) + item)


def _read_pdu(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 16:
        head += sock.recv(16 - len(head))
    body = b""
    size = struct.unpack_from("<H", head, 8)[0] - 16
    while len(body) < size:                 # exactly this PDU: a second reply may follow in the same segment
        body += sock.recv(size - len(body))
    return head + body


async def test_a_receive_cancelled_in_the_segment_that_carries_it_leaves_nothing_behind(env):
    # A request and its co_cancel arriving together: the runtime cancels the call before its handler runs.
    owner, d, _ = await env.session()
    sock = socket.create_connection(("127.0.0.1", env.server.port))

    def open_then_receive_and_cancel_then_get_version():
        sock.sendall(_bind())
        _read_pdu(sock)
        stub = codec.encode_request(2, codec.RemoteQMOpenQueueRequest(uuid.uuid4(), 0, d.handle, d.handle,
                                                                      d.handle), False)
        sock.sendall(_request(2, 2, stub))
        _read_pdu(sock)
        desc = codec.REMOTEREADDESC(hRemoteQueue=d.handle, dwQueue=d.handle, ulAction=MQ_ACTION_RECEIVE,
                                    ulTimeout=INFINITE, dwRequestID=9)
        stub = codec.encode_request(0, codec.RemoteQMStartReceiveRequest(desc), False)
        sock.sendall(_request(3, 0, stub) + _pdu(18, 3))          # request + co_cancel (PTYPE 18), one send
        sock.sendall(_request(4, 8, b""))                          # RemoteQmGetVersion: proves both were read
        while True:
            pdu = _read_pdu(sock)
            if struct.unpack_from("<I", pdu, 12)[0] == 4:
                return
    await asyncio.to_thread(open_then_receive_and_cancel_then_get_version)
    await env.wait_until(lambda: len(env.adm.remote_read_entries) == 0)
    assert not d.waiting_message_read_operation_collection
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    await env.wait_until(lambda: len(env.adm.open_queue_entries) == 1)      # the raw session ran down
    assert len(env.adm.remote_read_entries) == 0 and len(env.adm.receive_handles) == 0
    message = env.enqueue(b"not stolen")
    assert env.positions() == {message.lookup_identifier: PositionState.AVAILABLE}
