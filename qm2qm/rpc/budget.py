"""One process-wide allowance for request fragments held until their last one (C706 12.6.3.7; MS-RPCE 3.3.3.5.4).

The per-connection bound (``Limits.max_request_size``, 8 MiB) times ``--max-connections`` (1024) lets slow senders
hold 8 GiB of half-sent requests; the connections of every listener share this one allowance instead, and a
fragment past it is refused with nca_s_server_too_busy (the fault Windows gives a call it has no room for).
"""
from __future__ import annotations

from typing import Callable

from qm2qm.logfmt import Refusals

# 32 whole 8 MiB requests at once; a qm2qm request is a few hundred bytes, so only hostile or bulk peers meet it.
DEFAULT_MAX_REASSEMBLY_BYTES = 256 * 1024 * 1024


class ReassemblyBudget:
    """Bytes of request stubs held by unfinished fragmented calls, over every connection that shares it."""

    __slots__ = ("capacity", "held", "refused")

    def __init__(self, capacity: int = DEFAULT_MAX_REASSEMBLY_BYTES) -> None:
        if capacity < 0:
            raise ValueError(f"reassembly capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.held = 0
        self.refused = 0        # fragments refused since start (the /metrics counter)

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes if they fit; False (nothing held, ``refused`` counted) if they do not."""
        if self.held + size > self.capacity:
            self.refused += 1
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Give back bytes a finished, refused or abandoned call held."""
        self.held -= size


class ConnectionSlots:
    """Connections open at once over every listener that shares it (serve --max-connections): one more is refused."""

    __slots__ = ("capacity", "open", "refusals")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"max connections must be >= 1, got {capacity}")
        self.capacity = capacity
        self.open = 0
        self.refusals = Refusals()          # connections refused since start (the /metrics counter, the log line)

    def take(self) -> bool:
        """One more connection if there is room; False if not (the caller notes the refusal)."""
        if self.open >= self.capacity:
            return False
        self.open += 1
        return True

    def give(self) -> None:
        """A connection that took a slot closed."""
        self.open -= 1


# 256 peers each leaving a 4 MiB answer unread; the per-connection bound (server.MAX_UNREAD_ANSWERS, 64 MiB) times
# --max-connections would be 64 GiB.
DEFAULT_MAX_UNREAD_BYTES = 1024 * 1024 * 1024


class UnreadAnswerBudget:
    """Bytes of answers queued for peers that have stopped reading (their transport paused writing), over every
    connection that shares it; past ``capacity`` the connection holding the most is closed (MS-RPCE 3.3.3). A closed
    connection's bytes stay counted until its transport has let go of them (uvloop frees them a turn later)."""

    __slots__ = ("capacity", "held", "closed", "_by_holder")

    def __init__(self, capacity: int = DEFAULT_MAX_UNREAD_BYTES) -> None:
        if capacity < 0:
            raise ValueError(f"unread-answer capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.held = 0
        self.closed = 0         # connections closed for it since start (the /metrics counter)
        self._by_holder: dict[object, int] = {}

    def note(self, holder: object, unread: int) -> bool:
        """Record what ``holder`` now leaves unread; True if the total is past the capacity."""
        self.held += unread - self._by_holder.get(holder, 0)
        self._by_holder[holder] = unread
        return self.held > self.capacity

    def forget(self, holder: object) -> None:
        """``holder`` reads again (its transport resumed writing) or is gone."""
        self.held -= self._by_holder.pop(holder, 0)

    def recount(self, size_of) -> bool:
        """Record every holder's unread bytes afresh (``size_of(holder)``: peers read between two notes); True if
        the total is still past the capacity."""
        for holder in list(self._by_holder):
            self.note(holder, size_of(holder))
        return self.held > self.capacity

    def largest(self, eligible: Callable[[object], bool]) -> tuple[object, int] | None:
        """The ``eligible`` holder that leaves the most unread, and how much (the one to close first); None if no
        holder is eligible."""
        candidates = [holder for holder in self._by_holder if eligible(holder)]
        if not candidates:
            return None
        holder = max(candidates, key=self._by_holder.__getitem__)
        return holder, self._by_holder[holder]
