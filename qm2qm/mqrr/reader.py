"""The MS-MQRR side of qm2qm.client.RemoteReader: a Windows client's RemoteRead sequence (MS-MQRR 3.2.4, 4.1–4.2).

Endpoint-mapper lookup of RemoteRead (or a given port), R_GetServerPort (3.2.4.1, rebinding to the port it names),
R_OpenQueue, R_CreateCursor (3.2.4.8), R_StartReceive / R_EndReceive (3.2.4.3, 3.2.4.4.1, 3.2.4.9, 3.2.4.10.1),
R_PurgeQueue (3.2.4.7), R_CloseCursor and R_CloseQueue (3.2.4.12–13). Answers come back as qm2qm.client.ReadResult
holding the reconstructed packet (TimeToReachQueue relative again, as MS-MQMQ 2.2.19.1 and qm2qm carry it), so the
reader's API names no protocol.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

# EPT_S_NOT_REGISTERED as the endpoint mapper answers it (DCE nca status, MS-RPCE 2.2.1.2.5) and as the Win32
# code MS-MQRR 3.2.4.1 names (0x000006D9): either one sends a client back to qmcomm + qm2qm.
EPT_S_NOT_REGISTERED = frozenset({0x16C9A0D6, 0x000006D9})


def _wire(name: str, step: Callable[..., Any], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """step(name, fn, ...) with a lost connection reported as RpcCallError, as the qm2qm path reports it."""
    from impacket.dcerpc.v5.rpcrt import DCERPCException
    from qm2qm.client import RpcCallError
    try:
        return step(name, fn, *args, **kwargs)
    except RpcCallError:
        raise
    except (DCERPCException, OSError, EOFError) as exc:
        raise RpcCallError(f"{name}: {exc}") from None


class MqrrNotRegistered(Exception):
    """The endpoint mapper does not know RemoteRead: a Windows client falls back to MS-MQQP (MS-MQRR 3.2.4.1)."""


class MqrrReadPath:
    """One queue opened over MS-MQRR; ``step(name, fn, *args)`` records and makes each call (RemoteReader._step)."""

    def __init__(self, host: str, format_name: str, *, access: int, share_mode: int, cursor: bool, ndr64: bool,
                 connect_timeout: float, step: Callable[..., Any], credentials: Any = None) -> None:
        self.host, self.format_name = host, format_name
        self.access, self.share_mode, self.want_cursor, self.ndr64 = access, share_mode, cursor, ndr64
        self.connect_timeout = connect_timeout
        self.credentials = credentials      # qm2qm.mqmp.client.Credentials: NTLM on the RemoteRead binding
        self.step = lambda name, fn, *args, **kwargs: _wire(name, step, fn, *args, **kwargs)
        self.client = None              # qm2qm.mqrr.client.MqrrClient
        self.queue: bytes | None = None  # QUEUE_CONTEXT_HANDLE_SERIALIZE
        self.cursor = 0
        self.server_port = 0
        self._request_ids = itertools.count(1)

    def open(self, port: int, *, given: bool) -> None:
        """R_GetServerPort on ``port`` (rebinding to the port it answers unless ``given``), R_OpenQueue and, when
        asked, R_CreateCursor; RpcCallError (``status`` the HRESULT or fault) on failure."""
        from qm2qm.client import RpcCallError
        from qm2qm.mqrr.client import MqrrFault
        self.client = self._connect(port)
        self.server_port = self.step("R_GetServerPort", self.client.get_server_port)
        if self.server_port and self.server_port != port and not given:
            self.client.disconnect()
            self.client = self._connect(self.server_port)
        try:
            self.queue = self.step("R_OpenQueue", self.client.open, self.format_name, self.access, self.share_mode)
        except MqrrFault as fault:
            if fault.status in EPT_S_NOT_REGISTERED:
                raise MqrrNotRegistered(f"R_OpenQueue: 0x{fault.status:08X}") from None
            raise RpcCallError(f"R_OpenQueue({self.format_name}): 0x{fault.status:08X}", fault.status) from None
        if self.want_cursor:
            status, self.cursor = self.step("R_CreateCursor", self.client.create_cursor, self.queue)
            if status != 0:
                raise RpcCallError(f"R_CreateCursor: 0x{status:08X}", status)

    def start(self, action: int, timeout_ms: int, *, lookup_id: int = 0):
        """R_StartReceive on the queue (with the cursor, or a LookupId with an MQ_LOOKUP_* action): a ReadResult
        holding the whole packet."""
        from qm2qm.client import NULL_HANDLE, ReadResult
        from qm2qm.mqrr.sections import relative_expiry
        request_id = next(self._request_ids) & 0xFFFFFFFF
        read = self.step("R_StartReceive", self.client.read, self.queue, action, timeout=timeout_ms,
                         request_id=request_id, cursor=0 if lookup_id else self.cursor, lookup_id=lookup_id)
        # 3.2.4.3: reconstruct the message; TimeToReachQueue comes absolute (2.2.5.1), ReadResult holds it relative
        packet = relative_expiry(read.packet) if read.status == 0 and read.packet else read.packet
        return ReadResult(hresult=read.status, context=NULL_HANDLE, request_id=request_id, size=len(packet),
                          arrive_time=read.arrive_time, reserved=0, buffer=packet,
                          sequential_id=read.sequence_id if read.status == 0 else None)

    def end(self, request_id: int, ack: int) -> int:
        """R_EndReceive for a receive's ``request_id``: RR_ACK deletes, RR_NACK makes the message available again."""
        return self.step("R_EndReceive", self.client.end, self.queue, request_id, ack)

    def purge(self) -> int:
        """R_PurgeQueue (3.2.4.7); the HRESULT."""
        return self.step("R_PurgeQueue", self.client.purge, self.queue)

    def close(self, quiet: Callable[..., None]) -> None:
        """R_CloseCursor (if a cursor) and R_CloseQueue through ``quiet`` (errors ignored), then disconnect."""
        try:
            if self.client is not None and self.queue is not None:
                if self.cursor:
                    quiet("R_CloseCursor", self.client.close_cursor, self.queue, self.cursor)
                quiet("R_CloseQueue", self.client.close, self.queue)
        finally:
            self.queue, self.cursor = None, 0
            if self.client is not None:
                client, self.client = self.client, None
                client.disconnect()

    def _connect(self, port: int):
        from impacket.dcerpc.v5.rpcrt import DCERPCException
        from qm2qm.client import RpcCallError
        from qm2qm.mqrr.client import MqrrClient
        try:
            return MqrrClient(self.host, port, ndr64=self.ndr64, timeout=self.connect_timeout,
                              credentials=self.credentials)
        except (DCERPCException, OSError) as exc:
            raise RpcCallError(f"cannot bind RemoteRead (MS-MQRR) at {self.host}:{port}: {exc}") from None
