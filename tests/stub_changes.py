"""A drawn change of a valid stub -- cut short, extended, or one byte changed -- for the property tests that prove a
struct decoder either refuses a stub or reads it as impacket does (tests/mqmp/test_codec_fast.py,
tests/mqrr/test_codec.py)."""
from __future__ import annotations

from hypothesis import strategies as st


def changed(data: st.DataObject, stub: bytes) -> bytes:
    """``stub`` truncated, extended by 1-9 bytes, or with one byte replaced, as ``data`` draws it."""
    out = bytearray(stub)
    change = data.draw(st.sampled_from(["cut", "extend", "byte"]))
    if change == "cut":
        out = out[:data.draw(st.integers(0, len(out) - 1))]
    elif change == "extend":
        out += data.draw(st.binary(min_size=1, max_size=9))
    else:
        out[data.draw(st.integers(0, len(out) - 1))] = data.draw(st.integers(0, 255))
    return bytes(out)
