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
    b = np.frombuffer(buf if len(buf) >= 64 else bytes(buf) + bytes(64), dtype=np.uint8)   # windows fit in it
    data = starts + 16
    caplen = np.append(starts[1:], stop) - data

    def window(at: np.ndarray, width: int) -> np.ndarray:
        """Bytes at[i] .. at[i] + width - 1 of each frame, a row each (a frame too near the buffer's end reads
        the last ``width`` bytes instead: its length masks those fields out)."""
        rows = np.lib.stride_tricks.sliding_window_view(b, width)
        return rows[np.minimum(at, len(rows) - 1)]

    head = window(data, 48)                                    # Ethernet, IPv4 and TCP up to the flags
    raw = ((caplen >= 54) & (head[:, 12] == 8) & (head[:, 13] == 0) & (head[:, 14] == 0x45) & (head[:, 23] == 6)
           & ((head[:, 20] & 0x3F | head[:, 21]) == 0))
    r = np.flatnonzero(raw)                                    # frames read in place, as pcapfile.raw_flow_key
    d, cap, h = data[r], caplen[r], head[r]

    def col(k: int) -> np.ndarray:
        return h[:, k].astype(np.int64)

    ends = [(col(k) << 40 | col(k + 1) << 32 | col(k + 2) << 24 | col(k + 3) << 16 | col(p) << 8 | col(p + 1))
            for k, p in ((26, 34), (30, 36))]                  # address, port: 48 bits, compared as the bytes
    lo, hi = np.minimum(*ends), np.maximum(*ends)
    flags = col(47)
    total = col(16) << 8 | col(17)
    ip_end = np.where(total != 0, 14 + total, cap)            # total 0: segmentation offload, as dpkt
    tcp_len = (col(46) >> 4) << 2
    valid = (ip_end >= 54) & (tcp_len >= 20)                   # as tcp_segment: a segment
    size = np.minimum(ip_end, cap) - 34 - tcp_len
    at = d + 34 + tcp_len
    pdu = window(at, 10).astype(np.int64)
    frag_len = pdu[:, 8] | pdu[:, 9] << 8
    # a whole little-endian request PDU with PFC_FIRST_FRAG | PFC_LAST_FRAG (C706 12.6.3.1, 12.6.4.9): _Scan.segment
    request = (valid & (size >= 24) & (pdu[:, 0] == 5) & (pdu[:, 1] <= 1) & (pdu[:, 2] == 0) & (pdu[:, 3] & 3 == 3)
               & (pdu[:, 4] & 0xF0 == 0x10) & (frag_len >= 24) & (frag_len <= size))
    opens = valid & (flags & SYN != 0) & (flags & ACK == 0)
    # runs: consecutive frames of one flow key, cut at each SYN and wherever a frame not read in place comes between
    cut = np.ones(len(r), dtype=bool)
    cut[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1]) | (r[1:] != r[:-1] + 1) | opens[1:]
    runs = np.flatnonzero(cut)
    if not len(runs):
        picked = runs
    else:
        # a connection's runs, in order, grouped while no SYN opens one and no frame not read in place comes between
        # (it could be the connection's own SYN): each group's first segment, data segment and request are picked
        run_ends = np.append(runs[1:], len(r)) - 1
        high, high_rank = np.unique(hi[runs], return_inverse=True)   # a flow's number: its two ends' ranks
        flow_of_run = np.unique(lo[runs], return_inverse=True)[1].ravel() * len(high) + high_rank.ravel()
        by_flow = np.argsort(flow_of_run, kind="stable")
        not_in_place = np.cumsum(~raw)                         # frames not read in place up to each frame
        sorted_flows, sorted_starts, sorted_ends = flow_of_run[by_flow], runs[by_flow], run_ends[by_flow]
        group = np.ones(len(runs), dtype=bool)
        group[1:] = ((sorted_flows[1:] != sorted_flows[:-1]) | opens[sorted_starts[1:]]
                     | (not_in_place[r[sorted_starts[1:]]] != not_in_place[r[sorted_ends[:-1]]]))
        groups = np.flatnonzero(group)
        index = np.arange(len(r))

        def firsts(mask: np.ndarray) -> np.ndarray:
            per_run = np.minimum.reduceat(np.where(mask, index, len(r)), runs)[by_flow]
            first = np.minimum.reduceat(per_run, groups)
            return first[first < len(r)]

        picked = np.union1d(np.union1d(firsts(valid), firsts(valid & (size > 0))),
                            np.union1d(firsts(request), np.flatnonzero(valid & (flags & (SYN | FIN | RST) != 0))))
    keys: dict[tuple[int, int], tuple[bytes, bytes]] = {}

    def key_of(i: int) -> tuple[bytes, bytes]:
        pair = (int(lo[i]), int(hi[i]))
        key = keys.get(pair)
        if key is None:
            key = keys[pair] = (pair[0].to_bytes(6, "big"), pair[1].to_bytes(6, "big"))
        return key

    # one by one in file order: the frames not read in place (as Frames), and the picked ones
    rest = np.flatnonzero(~raw)
    order = np.concatenate([rest, r[picked]])
    kinds = np.concatenate([np.full(len(rest), -1), picked])
    sequence = np.argsort(order, kind="stable")
    flag_list, size_list, at_list = (dict(zip(picked.tolist(), column[picked].tolist()))
                                     for column in (flags, size, at))
    current, connection, segment = scan.current, scan.connection, scan.segment
    for frame_index, i in zip(order[sequence].tolist(), kinds[sequence].tolist()):
        start = int(starts[frame_index])
        sec, frac = times(start)
        if i < 0:
            scan.frame(Frame(sec * 1_000_000 + frac * 1_000_000 // per_second, LINKTYPE_ETHERNET,
                             buf[start + 16:start + 16 + int(caplen[frame_index])], start))
            continue
        key, flag, seg_size, seg_at = key_of(i), flag_list[i], size_list[i], at_list[i]
        conn = current.get(key)
        if conn is None or flag & SYN and not flag & ACK:
            f = start + 16
            conn = connection(key, flag, start, lambda f=f: (
                address_text(socket.AF_INET, buf[f + 26:f + 30]), buf[f + 34] << 8 | buf[f + 35],
                address_text(socket.AF_INET, buf[f + 30:f + 34]), buf[f + 36] << 8 | buf[f + 37]))
        if seg_size > 0 or flag & (FIN | RST):
            segment(conn, flag, buf, seg_at, max(seg_size, 0),
                    lambda sec=sec, frac=frac: sec * 1_000_000 + frac * 1_000_000 // per_second)
    # spans last, one fold a flow: a Frame scanned above may be of a flow whose span these extend (min/max)
    if len(runs):
        flows = np.flatnonzero(np.append(True, sorted_flows[1:] != sorted_flows[:-1]))
        spans = scan.spans
        for run, first, last, nbytes in zip(sorted_starts[flows].tolist(),
                                            np.minimum.reduceat(starts[r[sorted_starts]], flows).tolist(),
                                            np.maximum.reduceat(starts[r[sorted_ends]], flows).tolist(),
                                            np.add.reduceat(np.add.reduceat(cap, runs)[by_flow], flows).tolist()):
            key = key_of(run)
            span = spans.get(key)
            if span is None:
                spans[key] = [first, last, nbytes]
            else:
                span[0], span[1], span[2] = min(span[0], first), max(span[1], last), span[2] + nbytes
