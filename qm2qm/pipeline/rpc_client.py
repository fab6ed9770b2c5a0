"""A small asyncio DCE/RPC client over ncacn_ip_tcp (C706 12.6; MS-RPCE 2.2.2) that sends raw request stubs and
returns raw response stubs, with several calls in flight on one connection: what replay needs."""
from __future__ import annotations

import asyncio
import itertools
import uuid

from qm2qm.pipeline.rpcstream import Framer, Pdu
from qm2qm.rpc.events import ContextItem
from qm2qm.rpc.faults import (PFC_LAST_FRAG, PTYPE_BIND_ACK, PTYPE_BIND_NAK, PTYPE_CO_CANCEL, PTYPE_FAULT,
                              PTYPE_RESPONSE)
from qm2qm.rpc.pdu import (PduError, build_bind, build_header_only, fragment_request, parse_bind_ack_body,
                           parse_fault_status)

MAX_FRAG = 5840
CONTEXT_ID = 0


class RpcClientError(Exception):
    """The connection or the bind failed; the message says which and where."""


class RpcClient:
    """One connection bound to one interface with one transfer syntax."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.framer = Framer()
        self.call_ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future] = {}
        self.parts: dict[int, list[bytes]] = {}
        self.max_xmit = MAX_FRAG
        self.association_group_id = 0
        self._reader_task: asyncio.Task | None = None

    async def connect(self, abstract: tuple[uuid.UUID, int, int], transfer: tuple[uuid.UUID, int, int]) -> None:
        """Open the TCP connection and bind (C706 12.6.4.3); raises RpcClientError if not accepted."""
        try:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            raise RpcClientError(f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from None
        call_id = next(self.call_ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[call_id] = future
        self._reader_task = asyncio.create_task(self._read())
        self.writer.write(build_bind(call_id, [ContextItem(CONTEXT_ID, abstract, (transfer,))],
                                     max_xmit_frag=MAX_FRAG, max_recv_frag=MAX_FRAG))
        pdu = await future
        if pdu.ptype == PTYPE_BIND_NAK:
            raise RpcClientError(f"{self.host}:{self.port} refused the bind (bind_nak)")
        if pdu.ptype != PTYPE_BIND_ACK:
            raise RpcClientError(f"{self.host}:{self.port} answered the bind with PDU type {pdu.ptype}")
        try:
            body = parse_bind_ack_body(pdu.data, len(pdu.data))
        except PduError as exc:
            raise RpcClientError(f"{self.host}:{self.port} sent an unreadable bind_ack: {exc}") from None
        if not body.results:
            raise RpcClientError(f"{self.host}:{self.port} answered the bind with no presentation context result")
        result, _reason, syntax = body.results[0]
        if result != 0:
            raise RpcClientError(f"{self.host}:{self.port} rejected the presentation context "
                                 f"{syntax[0]} (result {result})")
        self.max_xmit = min(body.max_xmit_frag, MAX_FRAG)
        self.association_group_id = body.assoc_group_id

    async def _read(self) -> None:
        out: list[Pdu] = []
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                self.framer.feed(data, 0, out)
                for pdu in out:
                    self._pdu(pdu)
                out.clear()
                if self.framer.error:
                    break
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(RpcClientError(f"{self.host}:{self.port} closed the connection"))
            self.waiting.clear()

    def _pdu(self, pdu: Pdu) -> None:
        if pdu.ptype == PTYPE_RESPONSE:
            self.parts.setdefault(pdu.call_id, []).append(pdu.data[24:])
            if not pdu.flags & PFC_LAST_FRAG:
                return
            stub = b"".join(self.parts.pop(pdu.call_id))
            result: object = ("ok", stub)
        elif pdu.ptype == PTYPE_FAULT:
            self.parts.pop(pdu.call_id, None)
            result = ("fault", parse_fault_status(pdu.data))
        else:
            result = pdu
        future = self.waiting.pop(pdu.call_id, None)
        if future is not None and not future.done():
            future.set_result(result)

    async def start(self, opnum: int, stub: bytes) -> tuple[int, asyncio.Future]:
        """Send one request; (call_id, future of ('ok', response stub) or ('fault', status))."""
        if self.writer is None or self._reader_task is None or self._reader_task.done():
            raise RpcClientError(f"{self.host}:{self.port}: not connected")
        call_id = next(self.call_ids)
        # built before the future is registered: a request that cannot be built (opnum beyond 16 bits) must not
        # leave a future behind that the connection's close would fail unobserved
        fragments = fragment_request(call_id, CONTEXT_ID, opnum, stub, self.max_xmit)
        future = asyncio.get_running_loop().create_future()
        self.waiting[call_id] = future
        for fragment in fragments:
            self.writer.write(fragment)
        await self.writer.drain()
        return call_id, future

    async def call(self, opnum: int, stub: bytes) -> tuple[str, object]:
        """Send one request and wait: ('ok', response stub) or ('fault', status); RpcClientError if the link drops."""
        _, future = await self.start(opnum, stub)
        return await future

    def cancel(self, call_id: int) -> None:
        """co_cancel for an outstanding call (C706 12.6.4.6); the server answers it with the cancel fault."""
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(build_header_only(PTYPE_CO_CANCEL, call_id))

    async def close(self) -> None:
        """Close the connection (pending calls fail with RpcClientError)."""
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)
