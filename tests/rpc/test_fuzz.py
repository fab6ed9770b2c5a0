"""Random and mutated byte streams never raise and always end in an answer, a close or a bounded wait."""
from __future__ import annotations

import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.connection import Connection
from qm2qm.rpc.events import (
    BindRequest, CallOrphaned, CallRequest, CancelRequest, ConnectionTerminated, ContextItem,
)
from qm2qm.rpc.limits import MAX_BIND_FRAG
from tests.rpc.test_connection import BTFN3, IFACE, N64, NDR, OTHER, new_connection

SERVER_PTYPES = {F.PTYPE_BIND_ACK, F.PTYPE_BIND_NAK, F.PTYPE_ALTER_CONTEXT_RESP, F.PTYPE_FAULT, F.PTYPE_RESPONSE}
# QM2QM_FUZZ_EXAMPLES raises the bound for a long local run; the suite default keeps it to a few seconds.
FUZZ = settings(max_examples=int(os.environ.get("QM2QM_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def check_output(out: bytes) -> list[int]:
    """Every byte we send is a well-formed server PDU; returns their PTYPEs."""
    ptypes, pos = [], 0
    while pos < len(out):
        assert len(out) - pos >= 16
        vers, minor, ptype, _flags, drep, length = struct.unpack_from("<BBBB4sH", out, pos)
        assert (vers, minor, drep) == (5, 0, b"\x10\x00\x00\x00")
        assert ptype in SERVER_PTYPES and 16 <= length <= len(out) - pos
        if ptype == F.PTYPE_FAULT:
            assert struct.unpack_from("<I", out, pos + 24)[0] not in F.FORBIDDEN_FAULT_STATUSES
        ptypes.append(ptype)
        pos += length
    return ptypes


def drive(conn: Connection, chunks: list[bytes], answer_every: int = 1) -> list:
    """Act as the transport: accept binds, answer calls, check invariants after every read."""
    seen: list = []
    pending: list[int] = []
    for index, chunk in enumerate(chunks + [b""]):
        events = conn.receive_data(chunk)
        for event in events:
            assert not any(isinstance(e, ConnectionTerminated) for e in seen), "event after termination"
            seen.append(event)
            if isinstance(event, BindRequest):
                conn.accept_bind(event, 0x77, "2105")
            elif isinstance(event, CallRequest):
                pending.append(event.call_id)
            elif isinstance(event, (CancelRequest, CallOrphaned)):
                pass
            else:
                assert isinstance(event, ConnectionTerminated) and event.reason
        if index % answer_every == 0:
            for call_id in pending:
                if call_id % 3 == 0:
                    conn.send_fault(call_id, call_id)             # call_id 0 maps to a forbidden status 0
                else:
                    conn.send_response(call_id, b"r" * (call_id % 7000))
            pending.clear()
        check_output(conn.data_to_send())
        if not conn.closed:
            assert len(conn._buf) < MAX_BIND_FRAG + 1
    # EOF always ends the connection
    assert conn.closed
    assert isinstance(seen[-1], ConnectionTerminated)
    assert sum(isinstance(e, ConnectionTerminated) for e in seen) == 1
    return seen


def valid_session() -> bytes:
    items = (ContextItem(0, IFACE, (NDR,)), ContextItem(1, IFACE, (N64,)), ContextItem(2, IFACE, (BTFN3,)))
    parts = [P.build_bind(1, items),
             P.build_request(2, 1, 3, b"abc"),
             P.build_bind(3, (ContextItem(4, OTHER, (NDR,)), ContextItem(5, IFACE, (NDR, N64))), alter_context=True)]
    parts += P.fragment_request(4, 1, 2, bytes(range(256)) * 40, 2048)
    parts += [P.build_request(5, 1, 1, b"x"), P.build_header_only(F.PTYPE_CO_CANCEL, 5),
              P.build_header_only(F.PTYPE_ORPHANED, 5), P.build_request(6, 5, 0, b"y", object_uuid=None)]
    return b"".join(parts)


VALID = valid_session()


def test_valid_session_is_clean():
    seen = drive(new_connection(), [VALID])
    kinds = [type(e).__name__ for e in seen]
    assert kinds.count("CallRequest") == 4 and kinds[-1] == "ConnectionTerminated"


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points + [len(data)]:
        pieces.append(data[last:point])
        last = point
    return [p for p in pieces if p]


@FUZZ
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3000), max_size=6), bound=st.booleans())
def test_random_bytes(data, cuts, bound):
    conn = new_connection()
    prefix = [P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),))] if bound else []
    drive(conn, prefix + chunked(data, cuts))


@st.composite
def mutated_session(draw):
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "dup"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos] = draw(st.sampled_from([0, 1, 2, 3, 0x10, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del data[pos:pos + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=32))
        else:
            length = draw(st.integers(1, 200))
            data[pos:pos] = data[pos:pos + length]
    return bytes(data)


@FUZZ
@given(data=mutated_session(), cuts=st.lists(st.integers(0, 20000), max_size=8),
       answer_every=st.integers(1, 4))
def test_mutated_valid_sessions(data, cuts, answer_every):
    drive(new_connection(), chunked(data, cuts), answer_every)


@FUZZ
@given(fields=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255),
                        st.binary(min_size=4, max_size=4), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF),
                        st.integers(0, 0xFFFFFFFF)),
       body=st.binary(max_size=300), bound=st.booleans())
def test_random_headers(fields, body, bound):
    conn = new_connection()
    prefix = [P.build_bind(1, (ContextItem(0, IFACE, (NDR,)),))] if bound else []
    drive(conn, prefix + [struct.pack("<BBBB4sHHI", *fields) + body])
