"""The split's first pass over an Ethernet pcap (split.plan, docs/pipeline.md), vectorized: records are walked
in Python (each record's length gives the next one's place), then a block of records has its IPv4/TCP header
fields (RFC 791, RFC 9293 3.1) read at once with numpy. Only the frames that can change what the pass learns go
through split._Scan one by one: every SYN, FIN and RST; each frame the in-place reader does not read (not IPv4/TCP
without options, a fragment, short); and, per connection of the block, the first segment, first data segment and
first whole request PDU after each SYN or frame not read in place. The others only add to their connection's span."""
from __future__ import annotations

import mmap
import os
import socket
import struct
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qm2qm.pipeline.pcapfile import LINKTYPE_ETHERNET, MAX_RECORD, CaptureError, Frame, PcapRecords, address_text
from qm2qm.pipeline.tcp import FIN, RST, SYN

ACK = 0x10
# Bytes of records walked and then read at once; a block's header fields take ~100 bytes of numpy arrays a record.
BLOCK_BYTES = 16 << 20


def scan_ethernet_pcap(scan: Any, records: PcapRecords) -> bool:
    """Feed every record of an Ethernet pcap (after its file header) to ``scan`` (split._Scan) as a scan of each
    Frame would; raises CaptureError at an unreadable record, after scanning the records before it. False, having
    scanned nothing, when the file cannot be mapped (not a regular file): the caller reads it Frame by Frame."""
    fh, per_second = records.fh, records.per_second
    caplen_of = struct.Struct(records.order + "I").unpack_from
    times = struct.Struct(records.order + "II").unpack_from
    try:
        if os.fstat(fh.fileno()).st_size <= 24:      # no record (an empty file cannot be mapped)
            return True
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return False
    try:
        _walk(scan, buf, caplen_of, lambda at: times(buf, at), per_second)
    finally:
        try:
            buf.close()
        except BufferError:                  # an exception's traceback still holds a view of it: GC closes it
            pass
    return True


def _walk(scan: Any, buf: mmap.mmap, caplen_of: Any, times: Any, per_second: int) -> None:
    """Walk the records after the file header block by block (BLOCK_BYTES), scanning each block (_block)."""
    size, pos, released = len(buf), 24, 0          # the file as mapped; released: pages given back below it
    while pos + 16 <= size:
        limit, starts = min(size, pos + BLOCK_BYTES), array("q")
        append = starts.append
        while pos + 16 <= limit:
            end = pos + 16 + caplen_of(buf, pos + 8)[0]
            if end > size:
                break
            append(pos)
            pos = end
        walked = np.frombuffer(starts, dtype=np.int64)
        lengths = np.append(walked[1:], pos) - walked - 16
        damaged = np.flatnonzero(lengths > MAX_RECORD)     # a damaged length field: the walk past it is void
        if len(damaged):
            pos = int(walked[damaged[0]])
            walked = walked[:damaged[0]]
        if len(walked):
            _block(scan, buf, walked, pos, times, per_second)
        done = pos - pos % mmap.PAGESIZE                       # pages scanned: out of this process's memory
        if done > released and hasattr(buf, "madvise"):     # (not on Windows)
            buf.madvise(mmap.MADV_DONTNEED, released, done - released)
            released = done
        if len(damaged) or pos + 16 <= limit:    # a damaged record, or one that does not fit in the file
            break
    if pos + 16 > size:
        if pos < size:
            raise CaptureError("truncated", pos, f"truncated packet record header: {size - pos} of 16 bytes")
        return
    caplen = caplen_of(buf, pos + 8)[0]
    if caplen > MAX_RECORD:
        raise CaptureError("damaged", pos, f"packet record length {caplen} is not plausible")
    raise CaptureError("truncated", pos, f"truncated packet record: {size - pos - 16} of {caplen} bytes")


def _block(scan: Any, buf: Any, starts: np.ndarray, stop: int, times: Any, per_second: int) -> None:
    """Scan the whole records at ``starts`` of ``buf`` (the last one ends at ``stop``)."""
    fields = _Fields.read(buf, starts, stop)
    runs = _Runs.of(fields)
    _one_by_one(scan, buf, fields, runs.picked(fields), times, per_second)
    _fold_spans(scan, fields, runs)


@dataclass
class _Fields:
    """A block's records (``starts``, ``caplen``, ``raw``: read in place) and, for the ``r`` read in place, their
    header fields: the flow's two ends (``lo`` <= ``hi``, 48 bits each), TCP flags, payload size and offset."""
    starts: np.ndarray
    caplen: np.ndarray
    raw: np.ndarray
    r: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    flags: np.ndarray
    size: np.ndarray
    at: np.ndarray
    valid: np.ndarray
    request: np.ndarray
    opens: np.ndarray
    keys: dict[tuple[int, int], tuple[bytes, bytes]] = field(default_factory=dict)

    @classmethod
    def read(cls, buf: Any, starts: np.ndarray, stop: int) -> "_Fields":
        b = np.frombuffer(buf if len(buf) >= 64 else bytes(buf) + bytes(64), dtype=np.uint8)   # windows fit in it
        data = starts + 16
        caplen = np.append(starts[1:], stop) - data

        def window(at: np.ndarray, width: int) -> np.ndarray:
            """Bytes at[i] .. at[i] + width - 1 of each frame, a row each (a frame too near the buffer's end reads
            the last ``width`` bytes instead: its length masks those fields out)."""
            rows = np.lib.stride_tricks.sliding_window_view(b, width)
            return rows[np.minimum(at, len(rows) - 1)]

        head = window(data, 48)                                # Ethernet, IPv4 and TCP up to the flags
        raw = ((caplen >= 54) & (head[:, 12] == 8) & (head[:, 13] == 0) & (head[:, 14] == 0x45)
               & (head[:, 23] == 6) & ((head[:, 20] & 0x3F | head[:, 21]) == 0))
        r = np.flatnonzero(raw)                                # frames read in place, as pcapfile.raw_flow_key
        d, cap, h = data[r], caplen[r], head[r]

        def col(k: int) -> np.ndarray:
            return h[:, k].astype(np.int64)

        ends = [(col(k) << 40 | col(k + 1) << 32 | col(k + 2) << 24 | col(k + 3) << 16 | col(p) << 8 | col(p + 1))
                for k, p in ((26, 34), (30, 36))]              # address, port: 48 bits, compared as the bytes
        flags = col(47)
        total = col(16) << 8 | col(17)
        ip_end = np.where(total != 0, 14 + total, cap)        # total 0: segmentation offload, as dpkt
        tcp_len = (col(46) >> 4) << 2
        valid = (ip_end >= 54) & (tcp_len >= 20)               # as tcp_segment: a segment
        size = np.minimum(ip_end, cap) - 34 - tcp_len
        at = d + 34 + tcp_len
        pdu = window(at, 10).astype(np.int64)
        frag_len = pdu[:, 8] | pdu[:, 9] << 8
        # a whole little-endian request PDU, PFC_FIRST_FRAG | PFC_LAST_FRAG (C706 12.6.3.1, 12.6.4.9): _Scan.segment
        request = (valid & (size >= 24) & (pdu[:, 0] == 5) & (pdu[:, 1] <= 1) & (pdu[:, 2] == 0)
                   & (pdu[:, 3] & 3 == 3) & (pdu[:, 4] & 0xF0 == 0x10) & (frag_len >= 24) & (frag_len <= size))
        opens = valid & (flags & SYN != 0) & (flags & ACK == 0)
        return cls(starts, caplen, raw, r, np.minimum(*ends), np.maximum(*ends), flags, size, at, valid, request,
                   opens)

    def key_of(self, i: int) -> tuple[bytes, bytes]:
        """The flow key (pcapfile.raw_flow_key) of frame ``r[i]``."""
        pair = (int(self.lo[i]), int(self.hi[i]))
        key = self.keys.get(pair)
        if key is None:
            key = self.keys[pair] = (pair[0].to_bytes(6, "big"), pair[1].to_bytes(6, "big"))
        return key


@dataclass
class _Runs:
    """The block's runs (consecutive frames of one flow key, cut at each SYN and wherever a frame not read in
    place comes between) sorted by flow (``by_flow``: stable), and ``groups`` of them: a connection's runs, in order,
    while no SYN opens one and no frame not read in place comes between (it could be the connection's own SYN)."""
    runs: np.ndarray
    by_flow: np.ndarray
    flows: np.ndarray                  # per sorted run, its flow's number
    starts: np.ndarray                 # per sorted run, its first and last frame (indices into r)
    ends: np.ndarray
    groups: np.ndarray                 # where each group starts, in the sorted runs

    @classmethod
    def of(cls, f: _Fields) -> "_Runs":
        cut = np.ones(len(f.r), dtype=bool)
        cut[1:] = (f.lo[1:] != f.lo[:-1]) | (f.hi[1:] != f.hi[:-1]) | (f.r[1:] != f.r[:-1] + 1) | f.opens[1:]
        runs = np.flatnonzero(cut)
        run_ends = np.append(runs[1:], len(f.r)) - 1
        high, high_rank = np.unique(f.hi[runs], return_inverse=True)    # a flow's number: its two ends' ranks
        flow_of_run = np.unique(f.lo[runs], return_inverse=True)[1].ravel() * len(high) + high_rank.ravel()
        by_flow = np.argsort(flow_of_run, kind="stable")
        not_in_place = np.cumsum(~f.raw)                       # frames not read in place up to each frame
        flows, starts, ends = flow_of_run[by_flow], runs[by_flow], run_ends[by_flow]
        group = np.ones(len(runs), dtype=bool)
        group[1:] = ((flows[1:] != flows[:-1]) | f.opens[starts[1:]]
                     | (not_in_place[f.r[starts[1:]]] != not_in_place[f.r[ends[:-1]]]))
        return cls(runs, by_flow, flows, starts, ends, np.flatnonzero(group))

    def picked(self, f: _Fields) -> np.ndarray:
        """Indices into r of the frames read in place that go through _Scan one by one: each group's first segment,
        first data segment and first whole request, and every SYN, FIN and RST."""
        if not len(self.runs):
            return self.runs
        index, none = np.arange(len(f.r)), len(f.r)

        def firsts(mask: np.ndarray) -> np.ndarray:
            per_run = np.minimum.reduceat(np.where(mask, index, none), self.runs)[self.by_flow]
            first = np.minimum.reduceat(per_run, self.groups)
            return first[first < none]

        return np.union1d(np.union1d(firsts(f.valid), firsts(f.valid & (f.size > 0))),
                          np.union1d(firsts(f.request), np.flatnonzero(f.valid & (f.flags & (SYN | FIN | RST) != 0))))


def _one_by_one(scan: Any, buf: Any, f: _Fields, picked: np.ndarray, times: Any, per_second: int) -> None:
    """In file order: the frames not read in place (as Frames: _Scan.frame) and the picked ones (as _Scan reads
    a segment read in place)."""
    rest = np.flatnonzero(~f.raw)
    order = np.concatenate([rest, f.r[picked]])
    kinds = np.concatenate([np.full(len(rest), -1), picked])
    sequence = np.argsort(order, kind="stable")
    flag_of, size_of, at_of = (dict(zip(picked.tolist(), column[picked].tolist()))
                               for column in (f.flags, f.size, f.at))
    current, connection, segment = scan.current, scan.connection, scan.segment
    for frame_index, i in zip(order[sequence].tolist(), kinds[sequence].tolist()):
        start = int(f.starts[frame_index])
        sec, frac = times(start)
        time_us = sec * 1_000_000 + frac * 1_000_000 // per_second
        if i < 0:
            scan.frame(Frame(time_us, LINKTYPE_ETHERNET, buf[start + 16:start + 16 + int(f.caplen[frame_index])],
                             start))
            continue
        key, flag, seg_size = f.key_of(i), flag_of[i], size_of[i]
        conn = current.get(key)
        if conn is None or flag & SYN and not flag & ACK:
            d = start + 16
            conn = connection(key, flag, start, lambda d=d: (
                address_text(socket.AF_INET, buf[d + 26:d + 30]), buf[d + 34] << 8 | buf[d + 35],
                address_text(socket.AF_INET, buf[d + 30:d + 34]), buf[d + 36] << 8 | buf[d + 37]))
        if seg_size > 0 or flag & (FIN | RST):
            segment(conn, flag, buf, at_of[i], max(seg_size, 0), time_us)


def _fold_spans(scan: Any, f: _Fields, runs: _Runs) -> None:
    """Each flow's span in the block added to scan.spans, one fold a flow (min/max: a Frame scanned one by one may
    be of a flow whose span this extends)."""
    if not len(runs.runs):
        return
    flows = np.flatnonzero(np.append(True, runs.flows[1:] != runs.flows[:-1]))
    firsts = np.minimum.reduceat(f.starts[f.r[runs.starts]], flows).tolist()
    lasts = np.maximum.reduceat(f.starts[f.r[runs.ends]], flows).tolist()
    sizes = np.add.reduceat(np.add.reduceat(f.caplen[f.r], runs.runs)[runs.by_flow], flows).tolist()
    spans = scan.spans
    for run, first, last, nbytes in zip(runs.starts[flows].tolist(), firsts, lasts, sizes):
        key = f.key_of(run)
        span = spans.get(key)
        if span is None:
            spans[key] = [first, last, nbytes]
        else:
            span[0], span[1], span[2] = min(span[0], first), max(span[1], last), span[2] + nbytes
