"""What RpcServer(observer=...) tells an observer: connections opening and closing, and every answered call."""
from __future__ import annotations

from typing import Any, Protocol

from qm2qm.rpc.interface import Interface


class RpcObserver(Protocol):
    """Called on the event loop thread, inline with the call: implementations must be cheap and must not raise.

    ``call_done`` runs once per call the server answered with a response or a fault PDU (C706 12.6.4.9,
    12.6.4.7): ``fault`` is the fault status (None for a response), ``stub`` the response stub (None for a
    fault), ``seconds`` the time from the request's arrival to the answer. Calls that were orphaned, or whose
    connection was lost, are not answered and not reported; nor are the faults the protocol core sends before
    dispatch (unknown interface or opnum, server too busy, malformed PDUs: qm2qm/rpc/connection.py), which never
    become calls."""

    def connection_opened(self, connection: Any) -> None: ...

    def connection_closed(self, connection: Any) -> None: ...

    def call_done(self, interface: Interface, opnum: int, fault: int | None, stub: bytes | None,
                  seconds: float) -> None: ...
