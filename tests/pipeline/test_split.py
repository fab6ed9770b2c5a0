"""Splitting one capture by TCP session (split.py, spark_jobs.plan_tasks): every part holds whole connections, the
parts are of about equal bytes, and the merged parts are the rows of an unsplit ingest, numbering included."""
from __future__ import annotations

import socket
import uuid

import dpkt
import pytest

from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.mqqp.codec import RemoteQmGetVersionResponse, encode_response
from qm2qm.pipeline import split
from qm2qm.pipeline.capture import ingest_capture
from qm2qm.pipeline.pcapfile import flow_key, read_frames
from qm2qm.pipeline.recorder import PcapSink
from qm2qm.pipeline import spark_jobs
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.spark_jobs import bundle_tasks, plan_tasks
from qm2qm.rpc.events import ContextItem
from qm2qm.rpc.interface import NDR20
from qm2qm.rpc.pdu import append_response, build_bind, build_bind_ack, build_request, fragment_request

from tests.pipeline.test_capture import SERVER, Wire

NDR = (NDR20[0], NDR20[1], 0)
VERSION = encode_response(8, RemoteQmGetVersionResponse(6, 1, 20348), False)


def _session(wire: Wire, calls: int, interface=(QM2QM_UUID, 1, 0)) -> None:
    wire.send(True, build_bind(1, [ContextItem(0, interface, (NDR,))]))
    wire.send(False, build_bind_ack(1, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840,
                                    assoc_group_id=3, secondary_address="2105", results=[(0, 0, NDR)]))
    for call_id in range(2, 2 + calls):
        wire.send(True, build_request(call_id, 0, 8, b""))
        out = bytearray()
        append_response(out, call_id, 0, VERSION, 5840)
        wire.send(False, bytes(out))


def _udp_frame(sink: PcapSink) -> None:
    udp = dpkt.udp.UDP(sport=137, dport=137, data=b"name query")
    udp.ulen = len(bytes(udp))
    ip = dpkt.ip.IP(src=socket.inet_aton("10.0.0.9"), dst=socket.inet_aton("10.0.0.255"), p=dpkt.ip.IP_PROTO_UDP,
                    data=udp)
    ip.len = len(bytes(ip))
    sink.writer.writepkt(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)))


def _capture(path, pcapng: bool) -> None:
    """Seven sessions of different sizes, one 4-tuple reused after FIN, one call on an unknown interface, a UDP
    frame, and a capture cut short in its last record."""
    sink = PcapSink(path, pcapng=pcapng)
    for i in range(6):
        wire = Wire(sink, client=("10.0.0.1", 50000 + i), server=SERVER)
        _session(wire, calls=3 + 2 * i)
        if i == 2:
            _udp_frame(sink)
    reused = ("10.0.0.1", 50000)
    sink.segment(reused, SERVER, 10**6, 0, dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK)
    _session(Wire(sink, client=reused, server=SERVER), calls=2)
    _session(Wire(sink, client=("10.0.0.3", 40000), server=SERVER), calls=1, interface=(uuid.UUID(int=1), 1, 0))
    sink.close()
    with open(path, "r+b") as fh:
        fh.truncate(fh.seek(0, 2) - 7)


def _fragmented_first_call_capture(path) -> None:
    """Three sessions; the second one's first request comes in two fragments, which the first pass does not
    recognize as a call (it guesses the session's next request instead)."""
    sink = PcapSink(path)
    _session(Wire(sink, client=("10.0.0.1", 50000), server=SERVER), calls=2)
    wire = Wire(sink, client=("10.0.0.1", 50001), server=SERVER)
    wire.send(True, build_bind(1, [ContextItem(0, (QM2QM_UUID, 1, 0), (NDR,))]))
    wire.send(False, build_bind_ack(1, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840,
                                    assoc_group_id=3, secondary_address="2105", results=[(0, 0, NDR)]))
    for frag in fragment_request(2, 0, 8, bytes(100), 24 + 16 + 24):
        wire.send(True, frag)
    out = bytearray()
    append_response(out, 2, 0, VERSION, 5840)
    wire.send(False, bytes(out))
    wire.send(True, build_request(3, 0, 8, b""))
    _session(Wire(sink, client=("10.0.0.1", 50002), server=SERVER), calls=2)
    sink.close()


def _frames_of(path) -> list:
    """Every frame read_frames gives before the capture's cut last record."""
    frames = []
    with open(path, "rb") as fh:
        try:
            frames.extend(read_frames(fh))
        except Exception:                                                # noqa: BLE001 - the cut last record
            pass
    return frames


def _rows(result):
    by_seq = lambda r: (r["session_seq"] if r["session_seq"] is not None else -1, r["session_id"],  # noqa: E731
                        r.get("call_index") or 0)
    return (sorted(result.calls, key=by_seq), sorted(result.sessions, key=by_seq),
            sorted((p["kind"], p["message"]) for p in result.problems), result.counters)


@pytest.mark.parametrize("pcapng", [False, True], ids=["pcap", "pcapng"])
@pytest.mark.parametrize("parts", [2, 3, 16])
def test_merged_parts_are_the_unsplit_ingest(tmp_path, pcapng, parts):
    path = tmp_path / "c.pcap"
    _capture(path, pcapng)
    whole = ingest_capture(path)
    assert {p["kind"] for p in whole.problems} == {"truncated", "unknown_interface"}
    assert any(c["session_id"].endswith("#1") for c in whole.calls)
    assert whole.counters["non_tcp_frames"] == 1
    assert _rows(split.ingest_split(path, parts)) == _rows(whole)


@pytest.mark.parametrize("pcapng", [False, True], ids=["pcap", "pcapng"])
def test_parts_number_their_rows_file_wide_when_the_first_pass_predicted_their_connections(tmp_path, pcapng):
    """A 4-tuple reused, a UDP frame, a cut last record: each part finds the connections the first pass
    predicted, so its own rows already carry the unsplit ingest's connection_id and session_seq."""
    path = tmp_path / "c.pcap"
    _capture(path, pcapng)
    whole = ingest_capture(path)
    _head, parts = split.plan(path, 3)
    results = [split.ingest_part(path, part) for part in parts]
    assert [r.numbered for r in results] == [True] * 3
    assert _numbering(c for r in results for c in r.calls) == _numbering(whole.calls)
    assert _numbering(s for r in results for s in r.sessions) == _numbering(whole.sessions)


def test_a_part_whose_connections_differ_from_the_prediction_is_left_to_renumber(tmp_path):
    path = tmp_path / "c.pcap"
    _fragmented_first_call_capture(path)
    whole = ingest_capture(path)
    _head, parts = split.plan(path, 3)
    results = [split.ingest_part(path, part) for part in parts]
    fragmented = [any(s.startswith("10.0.0.1:50001-") for s, _, _ in part.expect) for part in parts]
    assert [r.numbered for r in results] == [not f for f in fragmented] and any(fragmented) and not all(fragmented)
    assert _rows(split.merge([_head, *results])) == _rows(whole)


def test_plan_keeps_connections_whole_and_parts_balanced(tmp_path):
    path = tmp_path / "c.pcap"
    _capture(path, pcapng=False)
    _head, parts = split.plan(path, 3)
    assert len(parts) == 3
    owner = {key: index for index, part in enumerate(parts) for key in part.keys}
    assert sum(len(part.keys) for part in parts) == len(owner)          # no connection in two parts
    for frame in _frames_of(path):
        key = flow_key(frame)
        if key is not None:
            part = parts[owner[key]]
            assert part.start <= frame.offset <= part.stop               # every frame inside its part's range
    sizes = [part.bytes for part in parts]
    assert max(sizes) < 2 * min(sizes)


@pytest.mark.parametrize("pcapng", [False, True], ids=["pcap", "pcapng"])
@pytest.mark.parametrize("parts", [2, 3, 5, 16])
def test_a_part_is_read_without_a_filter_only_when_its_range_holds_only_its_connections(tmp_path, parts, pcapng):
    """Part.exclusive exactly when no other part's connection spans into the part's range and no frame of no
    connection lies in it (pairwise here); such a part then holds only its own frames. The UDP frame and the reused
    4-tuple (whose span crosses the parts between) leave some parts filtered."""
    path = tmp_path / "c.pcap"
    _capture(path, pcapng)
    _head, planned = split.plan(path, parts)
    scan, frames = split.scan_file(path), _frames_of(path)
    keyless = [f.offset for f in frames if flow_key(f) is None]
    for part in planned:
        others = [span for key, span in scan.spans.items() if key not in part.keys]
        expected = not any(first <= part.stop and last >= part.start for first, last, _ in others) and \
            not any(part.start <= offset <= part.stop for offset in keyless)
        assert part.exclusive == expected
        if part.exclusive:
            assert all(flow_key(f) in part.keys for f in frames if part.start <= f.offset <= part.stop)
    assert not all(p.exclusive for p in planned) and (any(p.exclusive for p in planned) or parts < 5)
    results = [split.ingest_part(path, part) for part in planned]
    assert all(r.numbered for r in results)
    assert _rows(split.merge([_head, *results])) == _rows(ingest_capture(path))


def test_sessions_one_after_another_make_parts_read_without_a_filter(tmp_path):
    path = tmp_path / "c.pcap"
    sink = PcapSink(path)
    for i in range(4):
        _session(Wire(sink, client=("10.0.0.1", 50000 + i), server=SERVER), calls=3)
    sink.close()
    _head, planned = split.plan(path, 2)
    assert [part.exclusive for part in planned] == [True, True]
    assert _rows(split.merge([_head, *(split.ingest_part(path, part) for part in planned)])) == \
        _rows(ingest_capture(path))


def test_plan_tasks_splits_only_a_capture_above_its_share(tmp_path):
    big, small = tmp_path / "big.pcap", tmp_path / "small.pcap"
    _capture(big, pcapng=False)
    sink = PcapSink(small)
    _session(Wire(sink), calls=1)
    sink.close()
    tasks = plan_tasks([str(big), str(small)], parallelism=2, split_min_bytes=1)
    big_parts = [spec for path, spec, _ in tasks if path == str(big)]
    assert len(big_parts) == 2 and all(big_parts)
    assert [spec for path, spec, _ in tasks if path == str(small)] == [None]
    assert [path for path, _, _ in plan_tasks([str(big), str(small)], parallelism=2)] == [str(big), str(small)]


def _dpkt_segment(data: bytes):
    """What tcp_segment gave for an Ethernet frame before the IPv4 fast path: dpkt objects all the way."""
    import struct
    try:
        ip = dpkt.ethernet.Ethernet(data).data
    except (dpkt.UnpackError, ValueError, IndexError, struct.error):
        return None
    if not isinstance(ip, dpkt.ip.IP) or ip.mf or ip.offset or not isinstance(ip.data, dpkt.tcp.TCP):
        return None
    return (socket.inet_ntoa(ip.src), ip.data.sport, socket.inet_ntoa(ip.dst), ip.data.dport, ip.data.seq,
            ip.data.flags, bytes(ip.data.data))


def test_ipv4_fast_path_reads_what_dpkt_reads(tmp_path):
    """Ethernet/IPv4/TCP frames with options, fragments, truncation and bad lengths: the struct-based reader
    (pcapfile._ipv4_tcp) gives the segment dpkt gives, or None where dpkt gives none; the in-buffer flow key
    (pcapfile.raw_flow_key) names the addresses and ports dpkt reads."""
    import random
    from qm2qm.pipeline.pcapfile import Frame, raw_flow_key, tcp_segment
    path = tmp_path / "c.pcap"
    _capture(path, pcapng=False)
    rng = random.Random(7)
    checked = 0
    for data in [frame.data for frame in _frames_of(path)][:60]:
        variants = [data, data[:rng.randrange(14, len(data))]]
        for pos in (16, 17, 20, 21, 23, 14, 46):                # length, fragment, protocol, IHL, TCP offset
            mutated = bytearray(data)
            if pos < len(mutated):
                mutated[pos] = rng.randrange(256)
                variants.append(bytes(mutated))
        for raw in variants:
            got = tcp_segment(Frame(0, 1, raw, 0))
            raw_key, dpkt_seg = raw_flow_key(raw, 0, len(raw)), _dpkt_segment(raw)
            assert raw is not data or (raw_key is None) == (dpkt_seg is None)
            if raw_key is not None and dpkt_seg is not None:                   # read in place as dpkt reads it
                src = socket.inet_aton(dpkt_seg[0]) + dpkt_seg[1].to_bytes(2, "big")
                dst = socket.inet_aton(dpkt_seg[2]) + dpkt_seg[3].to_bytes(2, "big")
                assert raw_key == (min(src, dst), max(src, dst))
            assert (None if got is None else (got.src, got.sport, got.dst, got.dport, got.seq, got.flags,
                                              got.payload)) == _dpkt_segment(raw), raw.hex()
            checked += 1
    assert checked > 300


def test_bundles_hold_every_task_once_and_are_about_equal():
    tasks = [(f"f{i}", None, size) for i, size in enumerate([90, 50, 40, 30, 20, 10, 0])]
    bundles = bundle_tasks(tasks, parallelism=2, bundle_bytes=1000)
    assert sorted(i for b in bundles for i in b) == list(range(7))
    assert sorted(sum(tasks[i][2] for i in b) for b in bundles) == [120, 120]
    assert len(bundle_tasks(tasks, parallelism=2, bundle_bytes=60)) == 4          # 240 bytes in bundles of ~60
    assert len(bundle_tasks(tasks[:1], parallelism=8)) == 1 and bundle_tasks([], parallelism=2) == []


NUMBERING = ("source_file", "session_id", "session_seq", "call_index", "connection_id")


def _numbering(rows) -> list[tuple]:
    return sorted(tuple(r.get(k) for k in NUMBERING if k in r) for r in rows)


def test_a_split_capture_in_bundled_tasks_is_numbered_as_an_unsplit_ingest(spark, tmp_path):
    """The parts of a split capture run bundled (fewer Spark tasks than parts) and are renumbered file-wide: the
    calls, sessions and problems of ingest_file."""
    import pyarrow.parquet as pq
    path = tmp_path / "c.pcap"
    _capture(path, pcapng=False)
    expected = ingest_file(path)
    assert len({c["session_id"] for c in expected.calls}) > 2
    summary = spark_jobs.ingest(spark, [str(path)], tmp_path / "a", split_min_bytes=1)
    assert (summary["split_files"], summary["spark_tasks"]) == (1, 2) and summary["tasks"] > 2
    assert summary["renumbered_files"] == 0                 # every part numbered itself from the first pass
    assert _numbering(pq.read_table(tmp_path / "a" / "calls").to_pylist()) == _numbering(expected.calls)
    assert _numbering(pq.read_table(tmp_path / "a" / "sessions").to_pylist()) == _numbering(expected.sessions)
    assert sorted((p["kind"], p["offset"]) for p in summary["problems"]) == \
           sorted((p["kind"], p["offset"]) for p in expected.problems)


def test_a_split_capture_whose_prediction_failed_is_renumbered_by_the_job(spark, tmp_path):
    import pyarrow.parquet as pq
    path = tmp_path / "c.pcap"
    _fragmented_first_call_capture(path)
    expected = ingest_file(path)
    summary = spark_jobs.ingest(spark, [str(path)], tmp_path / "a", split_min_bytes=1)
    assert (summary["split_files"], summary["renumbered_files"]) == (1, 1)
    assert _numbering(pq.read_table(tmp_path / "a" / "calls").to_pylist()) == _numbering(expected.calls)
    assert _numbering(pq.read_table(tmp_path / "a" / "sessions").to_pylist()) == _numbering(expected.sessions)


def test_more_bundles_than_cores_each_run_once_one_partition_a_bundle(spark, tmp_path, monkeypatch):
    """Bundles beyond the parallelism (BUNDLE_BYTES reached): one RDD partition per bundle, each task's
    calls written once, the rows of ingest_file file by file; an empty input still writes an empty calls table."""
    import pyarrow.parquet as pq
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"c{i}.pcap")
        _capture(paths[-1], pcapng=bool(i % 2))
    monkeypatch.setattr(spark_jobs, "BUNDLE_BYTES", 1)
    summary = spark_jobs.ingest(spark, [str(p) for p in paths], tmp_path / "a", split_min_bytes=1 << 40)
    assert (summary["tasks"], summary["spark_tasks"]) == (3, 3)
    calls = pq.read_table(tmp_path / "a" / "calls").to_pylist()
    expected = [c for p in paths for c in ingest_file(p).calls]
    assert sorted(_numbering(calls)) == sorted(_numbering(expected)) and len(calls) == len(expected)
    empty = spark_jobs.ingest(spark, [], tmp_path / "b")
    assert (empty["tasks"], empty["spark_tasks"]) == (0, 0)
    assert pq.read_table(tmp_path / "b" / "calls").num_rows == 0


def test_forgetting_zip_package_finders_keeps_imports_working(tmp_path, monkeypatch):
    """spark_jobs._forget_zip_package_finders drops the finders of a zip on sys.path and of the packages inside
    it, and a later import below a dropped one still works."""
    import importlib
    import sys
    import zipfile
    archive = tmp_path / "code.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zpkg/__init__.py", "")
        zf.writestr("zpkg/sub/__init__.py", "")
        zf.writestr("zpkg/sub/a.py", "A = 1\n")
        zf.writestr("zpkg/sub/b.py", "B = 2\n")
    monkeypatch.syspath_prepend(str(archive))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    for name in ("zpkg", "zpkg.sub", "zpkg.sub.a", "zpkg.sub.b"):
        monkeypatch.delitem(sys.modules, name, raising=False)         # undone after the test: imported ones go
    assert importlib.import_module("zpkg.sub.a").A == 1
    inner = [p for p in sys.path_importer_cache if p.startswith(str(archive) + "/")]
    assert inner
    spark_jobs._forget_zip_package_finders()
    assert not [p for p in sys.path_importer_cache if p.startswith(str(archive))]
    importlib.invalidate_caches()
    assert importlib.import_module("zpkg.sub.b").B == 2


def test_a_worker_freezes_its_long_lived_objects_once(monkeypatch):
    """spark_jobs._freeze_long_lived_objects: the first task's end collects and freezes the heap, later ones do not
    (each freeze would keep a task's leftovers out of the collector for good)."""
    import gc
    monkeypatch.setattr(spark_jobs, "_frozen", False)
    gc.unfreeze()
    try:
        spark_jobs._freeze_long_lived_objects()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        later = [[] for _ in range(1000)]                  # noqa: F841 - tracked objects a second freeze would take
        spark_jobs._freeze_long_lived_objects()
        assert gc.get_freeze_count() < frozen + 1000       # (frozen objects freed by refcount leave the count)
    finally:
        gc.unfreeze()
