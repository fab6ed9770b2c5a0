"""The admin API's TCP listener with the bounds aiohttp's does not have: connections open at once, and how long a
new one may stay silent, so that local clients that connect and say nothing (or leave pages unread) cannot take the
file descriptors the RPC listeners need (the RPC side's --max-connections and --idle-timeout, for the admin port).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from qm2qm.rpc.budget import ConnectionSlots

log = logging.getLogger("qm2qm.admin")

# The web view polls with a few connections, a script with one; 256 leaves room for scripts run side by side.
MAX_ADMIN_CONNECTIONS = 256
# Seconds a new connection may go without sending a byte (the RPC listeners' default --idle-timeout).
FIRST_BYTE_TIMEOUT_S = 60.0


class AdminConnections(ConnectionSlots):
    """Connections open on the admin listener, against MAX_ADMIN_CONNECTIONS, and how long a new one may be silent."""

    __slots__ = ("first_byte_timeout_s",)

    def __init__(self, capacity: int = MAX_ADMIN_CONNECTIONS, first_byte_timeout_s: float = FIRST_BYTE_TIMEOUT_S):
        super().__init__(capacity)
        self.first_byte_timeout_s = first_byte_timeout_s


class BoundedConnection(asyncio.Protocol):
    """One admin connection: aiohttp's request handler (``inner``) behind the listener's bounds."""

    def __init__(self, bounds: AdminConnections, make_inner: Callable[[], Any]) -> None:
        self.bounds = bounds
        self.make_inner = make_inner
        self.inner: Any = None
        self._silence: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        bounds = self.bounds
        if not bounds.take():
            if bounds.refusals.note():
                log.warning("admin connection refused: %d open (the most the admin listener takes); %d refused "
                            "since the server started", bounds.open, bounds.refusals.count)
            transport.abort()
            return
        self.inner = self.make_inner()
        self.inner.connection_made(transport)
        self._silence = asyncio.get_running_loop().call_later(bounds.first_byte_timeout_s, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.inner is None:
            return
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        self.bounds.give()
        self.inner.connection_lost(exc)


async def listen(runner: Any, host: str, port: int, bounds: AdminConnections) -> asyncio.AbstractServer:
    """Serve the set-up aiohttp ``runner`` on host:port under ``bounds`` (close the result before the runner's
    cleanup)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: BoundedConnection(bounds, runner.server), host, port,
                                    reuse_address=True)
