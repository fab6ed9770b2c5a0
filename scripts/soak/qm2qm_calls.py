"""qm2qm stubs the pressure, leak and durability checks send (MS-MQQP 3.1.4), built with qm2qm.mqqp.idl."""
from __future__ import annotations

import struct
import uuid

from qm2qm.client import Qm2qmClient
from qm2qm.mqqp import codec, idl
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, RR_ACK, RR_NACK  # noqa: F401

from soak import wire

INFINITE = 0xFFFFFFFF
OPEN_QUEUE, END_RECEIVE, CLOSE_QUEUE, CLOSE_CURSOR, PURGE, START_RECEIVE2 = 2, 1, 3, 4, 6, 9


def open_queue(handle: int) -> bytes:
    r = idl.RemoteQMOpenQueue()
    r["pLicGuid"] = uuid.UUID(int=14).bytes_le
    r["dwMQS"] = 0
    r["hQueue"] = r["pQueue"] = r["dwpContext"] = handle
    return r.getData()


def start_receive2(handle: int, action: int, timeout_ms: int = 0, cursor: int = 0, request_id: int = 1) -> bytes:
    r = idl.RemoteQMStartReceive2()
    r["lpRemoteReadDesc2"]["pRemoteReadDesc"] = Qm2qmClient._desc(handle, action, timeout_ms, cursor, request_id,
                                                                  None)
    r["lpRemoteReadDesc2"]["SequentialId"] = 0
    return r.getData()


def end_receive(context: bytes, ack: int) -> bytes:
    r = idl.RemoteQMEndReceive()
    r["pphContext"] = context
    r["dwAck"] = ack
    return r.getData()


def close_queue(session: bytes) -> bytes:
    r = idl.RemoteQMCloseQueue()
    r["pphContext"] = session
    return r.getData()


def close_cursor(handle: int, cursor: int) -> bytes:
    r = idl.RemoteQMCloseCursor()
    r["hQueue"], r["hCursor"] = handle, cursor
    return r.getData()


def purge(handle: int) -> bytes:
    r = idl.RemoteQMPurgeQueue()
    r["hQueue"] = handle
    return r.getData()


def hresult_at_end(stub: bytes) -> int:
    return struct.unpack_from("<L", stub, len(stub) - 4)[0]


def receive_result(stub: bytes) -> tuple[int, bytes, int]:
    """(HRESULT, PCTX_REMOTEREAD handle, SequentialId) of a RemoteQMStartReceive2 response (NDR)."""
    resp = codec.decode_response(START_RECEIVE2, stub, False)
    return resp.ErrorCode & 0xFFFFFFFF, resp.pphContext, resp.lpRemoteReadDesc2.SequentialId


class Session:
    """A bound qm2qm connection with a RemoteQMOpenQueue session on an admin-opened handle."""

    def __init__(self, host: str, port: int, handle: int, timeout: float = 10.0) -> None:
        self.handle = handle
        self.client = wire.RawClient(host, port, timeout=timeout)
        self.client.bind()
        ptype, stub = self.client.call(OPEN_QUEUE, open_queue(handle))
        if ptype != wire.MSRPC_RESPONSE or hresult_at_end(stub) != 0:
            raise wire.WireError(f"RemoteQMOpenQueue({handle}) failed: type {ptype} {stub.hex()}")
        self.session = stub[:20]
