"""pcapng blocks the reader cannot use are `damaged` problems at their offset, never exceptions (pcapng
draft-ietf-opsawg-pcapng 4.2-4.4; docs/pipeline.md "Problems table")."""
from __future__ import annotations

import struct

import dpkt

from qm2qm.pipeline import schema
from qm2qm.pipeline.ingest import ingest_file


def block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


SHB = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
IDB = block(1, struct.pack("<HHI", 1, 0, 65535))


def epb(buf: bytes, ticks: int) -> bytes:
    return block(6, struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(buf), len(buf)) + buf)


def test_a_timestamp_past_int64_microseconds_is_a_damaged_block(tmp_path, recorded):
    src, _ = recorded
    with open(src, "rb") as fh:
        frames = list(dpkt.pcap.Reader(fh))
    data = SHB + IDB + b"".join(epb(buf, int(ts * 1_000_000)) for ts, buf in frames[:-1])
    at = len(data)
    path = tmp_path / "late.pcapng"
    path.write_bytes(data + epb(frames[-1][1], 2 ** 64 - 1))
    result = ingest_file(path)
    (problem,) = [p for p in result.problems if p["kind"] == "damaged"]
    assert problem["offset"] == at and "timestamp" in problem["message"] and f"offset {at}" in problem["message"]
    assert result.calls
    schema.table(result.calls, schema.CALL_SCHEMA)
