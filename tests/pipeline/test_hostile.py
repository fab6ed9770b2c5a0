"""Hostile captures: mutated, truncated and random bytes are problems, never exceptions."""
from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings, strategies as st

from qm2qm.pipeline.capture import ingest_capture
from qm2qm.pipeline.recorder import PcapSink
from qm2qm.pipeline.rpcstream import Conversation, Framer

from tests.pipeline.test_capture import CLIENT, SERVER, Wire


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_captures_never_raise(recorded, tmp_path_factory, data):
    src, _ = recorded
    raw = bytearray(src.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    raw = raw[:data.draw(st.integers(0, len(raw)))]
    path = tmp_path_factory.mktemp("mut") / "m.pcap"
    path.write_bytes(bytes(raw))
    result = ingest_capture(path)
    assert all(p["message"] for p in result.problems)
    assert all(c["session_id"] for c in result.calls)


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(st.binary(min_size=0, max_size=300), max_size=12), bias=st.booleans())
def test_random_pdu_streams_never_raise(chunks, bias):
    """Random bytes (optionally behind a valid-looking header) fed to the framer and conversation."""
    problems = []
    conv = Conversation("s", lambda kind, offset, message: problems.append((kind, message)))
    framers = [Framer(), Framer()]
    for i, chunk in enumerate(chunks):
        if bias and len(chunk) >= 16:
            length = max(16, len(chunk))
            chunk = struct.pack("<BBBBBBxxHHI", 5, 0, chunk[2] % 20, chunk[3], 0x10, 0, length, chunk[10] % 4,
                                chunk[12]) + chunk[16:length]
        out = []
        framers[i % 2].feed(chunk, i, out)
        for pdu in out:
            conv.pdu(pdu, *((CLIENT, SERVER) if i % 2 == 0 else (SERVER, CLIENT)))
    conv.finish()


def test_random_tcp_payloads_in_a_capture(tmp_path):
    import random
    rng = random.Random(5)
    path = tmp_path / "noise.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    for i in range(50):
        wire.send(i % 2 == 0, bytes([5, 0, rng.randrange(20), 3, 0x10, 0, 0, 0]) + rng.randbytes(rng.randrange(200)))
    sink.close()
    result = ingest_capture(path)
    assert {p["kind"] for p in result.problems} <= {"damaged_stream", "bad_pdu", "orphan_response",
                                                   "incomplete_call", "unknown_interface"}
