"""One process-wide allowance for request fragments held until their last one (C706 12.6.3.7; MS-RPCE 3.3.3.5.4).

The per-connection bound (``Limits.max_request_size``, 8 MiB) times ``--max-connections`` (1024) lets slow senders
hold 8 GiB of half-sent requests; the connections of every listener share this one allowance instead, and a
fragment past it is refused with nca_s_server_too_busy (the fault Windows gives a call it has no room for).
"""
from __future__ import annotations

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
