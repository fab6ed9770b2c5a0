"""Every problem row names its file and an offset (docs/pipeline.md "Problems table": `message` names file and
offset): a connection's problems give the offset of its first frame."""
from __future__ import annotations

import dpkt

from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.pcapfile import read_frames, tcp_segment


def test_a_connections_problems_name_the_file_and_its_first_frame(tmp_path, recorded):
    src, _ = recorded
    with open(src, "rb") as fh:
        frames = list(dpkt.pcap.Reader(fh))
    with open(src, "rb") as fh:
        segments = [(f.offset, tcp_segment(f)) for f in read_frames(fh)]
    data = [i for i, (_, seg) in enumerate(segments) if seg.payload]
    lost = data[len(data) // 4]                                  # a data frame of the first connection
    flow = {(segments[lost][1].src, segments[lost][1].sport), (segments[lost][1].dst, segments[lost][1].dport)}
    first = next(offset for offset, seg in segments if {(seg.src, seg.sport), (seg.dst, seg.dport)} == flow)
    path = tmp_path / "gap.pcap"
    with open(path, "wb") as fh:
        writer = dpkt.pcap.Writer(fh, linktype=1)
        for i, (ts, buf) in enumerate(frames):
            if i != lost:
                writer.writepkt(buf, ts=ts)
    problems = ingest_file(path).problems
    assert "tcp_gap" in {p["kind"] for p in problems}
    for p in problems:
        if p["kind"] != "unknown_interface":
            assert p["offset"] == first and p["message"].startswith(f"{path}: offset {first}: "), p
