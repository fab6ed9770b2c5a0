"""TCP reassembly (qm2qm/pipeline/tcp.py, RFC 9293 3.4): out-of-order segments are delivered in stream order at a
cost linear in the segments, whatever their order."""
from __future__ import annotations

import random
import sys

from qm2qm.pipeline import tcp
from qm2qm.pipeline.tcp import SYN, Direction


def _reassemble(segments: list[tuple[int, bytes]], isn: int) -> tuple[bytes, int]:
    """(the stream delivered, lines of tcp.py run) for (stream offset, payload) segments fed in this order."""
    out: list[bytes] = []
    direction = Direction(lambda data, _t: out.append(data))
    lines = 0

    def tracer(frame, event, _arg):
        nonlocal lines
        if frame.f_code.co_filename != tcp.__file__:
            return None
        if event == "line":
            lines += 1
        return tracer

    direction.segment(isn, SYN, b"", 0)
    sys.settrace(tracer)
    try:
        for offset, payload in segments:
            direction.segment((isn + 1 + offset) % tcp.SEQ_MOD, 0, payload, 0)
    finally:
        sys.settrace(None)
    assert direction.finish() is None
    return b"".join(out), lines


def test_segments_in_reverse_order_cost_a_bounded_number_of_steps_each():
    stream = bytes(range(256)) * 16
    segments = [(i, stream[i:i + 1]) for i in range(len(stream))]
    data, lines = _reassemble(segments[::-1], tcp.SEQ_MOD - 100)         # the sequence numbers wrap, too
    assert data == stream
    assert lines < 40 * len(segments)


def test_overlapping_out_of_order_segments_give_the_stream_once():
    stream = bytes(random.Random(5).randrange(256) for _ in range(3000))
    rng = random.Random(7)
    segments = []
    for _ in range(600):
        start = rng.randrange(len(stream))
        segments.append((start, stream[start:start + rng.randrange(1, 40)]))
    segments += [(i, stream[i:i + 30]) for i in range(0, len(stream), 30)]
    rng.shuffle(segments)
    data, _ = _reassemble(segments, 1000)
    assert data == stream
