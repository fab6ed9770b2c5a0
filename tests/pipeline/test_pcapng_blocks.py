"""pcapng blocks the reader cannot use are `damaged` problems at their offset, never exceptions (pcapng
draft-ietf-opsawg-pcapng 4.2-4.4; docs/pipeline.md "Problems table")."""
from __future__ import annotations

import struct

import dpkt
import pytest

from qm2qm.pipeline import schema
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.split import plan


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


FRAME = bytes(60)
EPB = epb(FRAME, 0)
IDB_OPTION = struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HH", 9, 1)      # if_tsresol of 1 byte, none left
SHORT = {
    "interface description block shorter than 8 bytes": SHB + block(1, b"") + EPB,
    "option 9 of 1 bytes runs past the block": SHB + struct.pack("<II", 1, 12 + len(IDB_OPTION)) + IDB_OPTION
    + struct.pack("<I", 12 + len(IDB_OPTION)) + EPB,
    "simple packet block shorter than 4 bytes": SHB + IDB + block(3, b""),
}


@pytest.mark.parametrize("says", SHORT)
def test_a_block_too_short_for_its_fields_is_damaged_at_its_offset(tmp_path, says):
    path = tmp_path / "short.pcapng"
    path.write_bytes(SHORT[says])
    (problem,) = ingest_file(path).problems
    assert (problem["kind"], problem["offset"]) == ("damaged", len(SHB) + (len(IDB) if "simple" in says else 0))
    assert says in problem["message"] and str(path) in problem["message"]


def test_a_split_capture_with_a_short_block_is_a_problem_of_the_first_pass(tmp_path):
    path = tmp_path / "big.pcapng"
    path.write_bytes(SHB + IDB + EPB * 50 + block(3, b""))
    head, _parts = plan(path, 2)
    assert [(p["kind"], p["offset"]) for p in head.problems] == [("damaged", len(SHB) + len(IDB) + 50 * len(EPB))]
