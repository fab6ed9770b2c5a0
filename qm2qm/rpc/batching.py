"""Answers written at the end of the event loop's turn while turns answer several connections (the transport's
write policy; DCE/RPC itself says nothing of when bytes leave: C706 12.6).

Written one by one as each call is answered, the answers of a busy turn wake their clients one at a time: the
kernel switches to a client per answer and the next turn finds one request again. Written together at the turn's
end, one wake-up serves several. With 16 clients that halved the server's system time per call and raised
small-call throughput by a third (BENCHMARKS.md, seventh pass); with one request per turn it only adds a loop
turn to every answer. So the batcher writes at once until a probe turn (every ``probe_every`` direct writes)
answers ``enter_at`` or more connections (3: with two client processes, two answers in a turn seldom shared one,
and entering at 2 cost the 4-client peeks 10-15 %), holds every answer to the turn's end from then on, and writes
at once again after ``leave_after`` turns in a row that answered one connection.
"""
from __future__ import annotations

import asyncio
from typing import Protocol


class Writer(Protocol):
    """What the batcher needs of a connection: its held bytes (None when it holds none) and how to send them."""
    held: list[bytes] | None

    def write_now(self, data: bytes) -> None: ...

    def release_held(self) -> None: ...


class WriteBatcher:
    """One per server: decides, answer by answer, whether to write now or hold until the turn ends."""

    def __init__(self, *, probe_every: int = 256, enter_at: int = 3, leave_after: int = 16) -> None:
        self.probe_every = probe_every
        self.enter_at = enter_at
        self.leave_after = leave_after
        self.batching = False
        self._direct = 0                    # direct writes since the last probe
        self._single_turns = 0              # consecutive batched turns that answered one connection
        self._holding: list[Writer] = []    # connections holding bytes this turn, in the order they got them
        self._scheduled = False

    def write(self, writer: Writer, data: bytes) -> None:
        """Send ``data`` for ``writer``, now or at the end of this loop turn (always after what it holds)."""
        held = writer.held
        if held is not None:
            held.append(data)
            return
        if not (self.batching or self._scheduled):
            self._direct += 1
            if self._direct < self.probe_every:
                writer.write_now(data)
                return
            self._direct = 0                # a probe: this turn is held and counted
        if not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:            # no turn to end (a caller outside the loop): nothing is held
                writer.write_now(data)
                return
            loop.call_soon(self.end_turn)
            self._scheduled = True
        writer.held = [data]
        self._holding.append(writer)

    def end_turn(self) -> None:
        """Write what every connection holds (the turn's end; also called before the server closes)."""
        holding, self._holding = self._holding, []
        self._scheduled = False
        for writer in holding:
            writer.release_held()
        if len(holding) >= self.enter_at:
            self.batching = True
            self._single_turns = 0
        elif holding and self.batching:
            self._single_turns += 1
            if self._single_turns >= self.leave_after:
                self.batching = False
                self._single_turns = 0
