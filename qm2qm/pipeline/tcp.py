"""TCP stream reassembly per direction (RFC 9293 3.4 sequence numbers): in order, retransmissions trimmed,
out-of-order segments held until the gap fills; a gap that never fills is reported, not guessed over."""
from __future__ import annotations

import heapq
from typing import Callable

SEQ_MOD = 1 << 32
# Out-of-order bytes held per direction before the gap is declared lost (a capture that dropped a segment).
MAX_HELD = 8 * 1024 * 1024
FIN, SYN, RST = 0x01, 0x02, 0x04


class Direction:
    """One direction of a TCP connection: calls ``deliver(data, time_us)`` with contiguous stream bytes."""

    __slots__ = ("deliver", "next_seq", "held", "starts", "held_bytes", "delivered", "gap", "closed")

    def __init__(self, deliver: Callable[[bytes, int], None]) -> None:
        self.deliver = deliver
        self.next_seq: int | None = None
        self.held: dict[int, bytes] = {}          # out-of-order segments by stream offset
        self.starts: list[int] = []               # their stream offsets, a heap
        self.held_bytes = 0
        self.delivered = 0            # stream offset of the next byte
        self.gap: int | None = None   # stream offset where bytes went missing
        self.closed = False

    def segment(self, seq: int, flags: int, payload: bytes, time_us: int) -> None:
        """Feed one segment of this direction."""
        if flags & SYN:
            self.next_seq = (seq + 1) % SEQ_MOD
            seq = self.next_seq
        if self.gap is not None:
            return
        if payload:
            if self.next_seq is None:
                self.next_seq = seq            # capture started mid-stream
            if seq == self.next_seq and not self.held:     # the common case: the next bytes, nothing held
                self.next_seq = (seq + len(payload)) % SEQ_MOD
                self.delivered += len(payload)
                self.deliver(payload, time_us)
            else:
                self._data(seq, payload, time_us)
        if flags & (FIN | RST):
            self.closed = True

    def _data(self, seq: int, payload: bytes, time_us: int) -> None:
        ahead = (seq - self.next_seq) % SEQ_MOD
        if ahead >= SEQ_MOD // 2:                   # starts before next_seq: retransmission or overlap
            behind = SEQ_MOD - ahead
            if behind >= len(payload):
                return
            payload = payload[behind:]
            seq = self.next_seq
            ahead = 0
        if ahead:
            at = self.delivered + ahead                 # held by stream offset, so the heap orders them
            held = self.held.get(at)
            if held is None:
                heapq.heappush(self.starts, at)
            if held is None or len(held) < len(payload):
                self.held_bytes += len(payload) - len(held or b"")
                self.held[at] = payload
            if self.held_bytes > MAX_HELD:
                self.gap = self.delivered
            return
        self._emit(payload, time_us)
        # each held segment is taken once, in stream order, when the stream reaches it (no rescans)
        while self.starts and self.starts[0] <= self.delivered:
            at = heapq.heappop(self.starts)
            data = self.held.pop(at)
            self.held_bytes -= len(data)
            skip = self.delivered - at
            if skip < len(data):
                self._emit(data[skip:], time_us)

    def _emit(self, data: bytes, time_us: int) -> None:
        self.next_seq = (self.next_seq + len(data)) % SEQ_MOD
        self.delivered += len(data)
        self.deliver(data, time_us)

    def finish(self) -> int | None:
        """At end of capture: the stream offset of a gap (bytes never seen), or None if the stream is whole."""
        if self.gap is None and self.held:
            self.gap = self.delivered
        return self.gap
