"""rpc/batching.py: when answers leave — at once, or held to the end of the loop turn while turns answer several
connections — and that held answers keep their order with everything else a connection sends."""
import asyncio
import struct

from qm2qm.rpc import testing as t
from qm2qm.rpc.batching import WriteBatcher
from qm2qm.rpc.server import RpcConnection
from tests.rpc.conftest import FAULT, RESPONSE, RawClient, bind_pdu, request_pdu
from tests.rpc.test_connection import split_pdus


class FakeWriter:
    def __init__(self) -> None:
        self.held = None
        self.sent: list[bytes] = []

    def write_now(self, data: bytes) -> None:
        self.sent.append(data)

    def release_held(self) -> None:
        held, self.held = self.held, None
        self.sent.append(b"".join(held))


async def turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_answers_leave_at_once_until_a_probe_turn_answers_enough_connections():
    batcher = WriteBatcher(probe_every=4, enter_at=3, leave_after=2)
    writers = [FakeWriter() for _ in range(3)]
    for i in range(3):                                  # direct writes 1..3: sent at once
        batcher.write(writers[i], b"%d" % i)
        assert writers[i].sent == [b"%d" % i]
    batcher.write(writers[0], b"p")                     # the 4th: a probe, held with the rest of this turn
    batcher.write(writers[1], b"q")
    batcher.write(writers[0], b"r")
    assert writers[0].sent == [b"0"] and writers[1].sent == [b"1"]
    await turn()
    assert writers[0].sent == [b"0", b"pr"] and writers[1].sent == [b"1", b"q"]
    assert not batcher.batching                         # two connections: below enter_at


async def test_batching_holds_every_answer_to_the_turn_end_and_stops_after_single_turns():
    batcher = WriteBatcher(probe_every=1, enter_at=3, leave_after=2)
    writers = [FakeWriter() for _ in range(3)]
    for w in writers:
        batcher.write(w, b"a")
    await turn()
    assert batcher.batching and all(w.sent == [b"a"] for w in writers)
    for _ in range(2):                                  # two turns answering one connection each
        sent = len(writers[0].sent)
        batcher.write(writers[0], b"b")
        assert len(writers[0].sent) == sent             # held while batching
        await turn()
    assert not batcher.batching
    assert writers[0].sent == [b"a", b"b", b"b"]


def test_outside_a_running_loop_nothing_is_held():
    batcher = WriteBatcher(probe_every=1)
    writer = FakeWriter()
    batcher.write(writer, b"x")
    assert writer.sent == [b"x"] and writer.held is None


async def test_end_turn_releases_what_is_held_at_once():
    batcher = WriteBatcher(probe_every=1)
    writer = FakeWriter()
    batcher.write(writer, b"x")
    batcher.end_turn()                                  # as RpcServer.close does
    assert writer.sent == [b"x"] and writer.held is None
    await turn()                                        # the scheduled end finds nothing left
    assert writer.sent == [b"x"]


async def test_held_answers_keep_their_order_with_faults_and_other_connections(server):
    server.writes.batching = True                       # as after a busy probe turn
    clients = [await RawClient.connect(server.port) for _ in range(3)]
    for client in clients:
        await client.bind()
    # one read per client holding two calls: an inline answer (held) then a fault (queued by the core)
    for n, client in enumerate(clients):
        client.send(request_pdu(5, t.OP_ECHO, b"e%d" % n) + request_pdu(6, t.OP_FAULT, struct.pack("<I", 0x6F7)))
    for n, client in enumerate(clients):
        first, second = await client.recv(), await client.recv()
        assert (first.ptype, first.call_id, first.body[8:]) == (RESPONSE, 5, b"e%d" % n)
        assert (second.ptype, second.call_id) == (FAULT, 6)
    assert (await clients[0].call(t.OP_ECHO, b"again", call_id=9)).body[8:] == b"again"
    for client in clients:
        await client.close()


class FakeTransport:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.data += data

    def writelines(self, chunks) -> None:
        for chunk in chunks:
            self.write(chunk)

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0                            # it takes every byte at once

    def close(self) -> None:
        self.closed = True

    abort = close

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1) if name == "peername" else None


async def bound_while_batching(server) -> tuple[RpcConnection, FakeTransport]:
    """A bound connection over a FakeTransport (written bytes cleared) on a server whose batcher is holding."""
    server.writes.batching = True
    rc = RpcConnection(server)
    transport = FakeTransport()
    rc.connection_made(transport)
    rc.data_received(bind_pdu())
    await turn()
    transport.data.clear()
    return rc, transport


async def test_a_connection_the_core_ends_sends_its_held_answer_then_the_fault_then_closes(server):
    rc, transport = await bound_while_batching(server)
    rc.data_received(request_pdu(5, t.OP_ECHO, b"kept"))              # answered inline, held to the turn's end
    rc.data_received(struct.pack("<BBBBIHHI", 5, 0, 12, 3, 0x10, 16, 0, 8))  # a bind_ack from a client: the end
    assert transport.data == b"" and not transport.closed             # nothing overtakes the held answer
    await turn()
    answer, fault = split_pdus(bytes(transport.data))
    assert (answer[2], answer[12], answer[24:]) == (RESPONSE, 5, b"kept") and fault[2] == FAULT
    assert transport.closed
    rc.connection_lost(None)


async def test_a_peer_that_half_closes_still_gets_its_held_answer(server):
    rc, transport = await bound_while_batching(server)
    rc.data_received(request_pdu(5, t.OP_ECHO, b"last"))
    assert transport.data == b""
    assert rc.eof_received() is False                                # asyncio closes the transport on return
    [answer] = split_pdus(bytes(transport.data))
    assert (answer[2], answer[12], answer[24:]) == (RESPONSE, 5, b"last")
    rc.connection_lost(None)
