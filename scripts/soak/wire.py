"""Connection-oriented DCE/RPC PDUs built with impacket's structures, and a small blocking raw client (C706 12.6)."""
from __future__ import annotations

import socket
import struct
import time

from impacket.dcerpc.v5.rpcrt import (MSRPC_ALTERCTX, MSRPC_AUTH3, MSRPC_BIND, MSRPC_BINDACK, MSRPC_CO_CANCEL,
                                      MSRPC_FAULT, MSRPC_ORPHANED, MSRPC_REQUEST, MSRPC_RESPONSE, PFC_FIRST_FRAG,
                                      PFC_LAST_FRAG, PFC_OBJECT_UUID, SEC_TRAILER, CtxItem, MSRPCBind, MSRPCHeader,
                                      MSRPCRequestHeader)
from impacket.uuid import uuidtup_to_bin

NDR20 = uuidtup_to_bin(("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0"))
NDR64 = uuidtup_to_bin(("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0"))
QM2QM = uuidtup_to_bin(("1088a980-eae5-11d0-8d9b-00a02453c337", "1.0"))
FIRST_LAST = PFC_FIRST_FRAG | PFC_LAST_FRAG
PTYPES = {"bind": MSRPC_BIND, "alter_context": MSRPC_ALTERCTX, "auth3": MSRPC_AUTH3, "request": MSRPC_REQUEST,
          "co_cancel": MSRPC_CO_CANCEL, "orphaned": MSRPC_ORPHANED}


def sec_trailer(auth_type: int = 10, auth_level: int = 2, pad: int = 0, ctx_id: int = 0) -> bytes:
    """An auth_verifier's sec_trailer (MS-RPCE 2.2.2.11)."""
    t = SEC_TRAILER()
    t["auth_type"], t["auth_level"], t["auth_pad_len"], t["auth_ctx_id"] = auth_type, auth_level, pad, ctx_id
    return t.getData()


def _header(ptype: int, call_id: int, body: bytes, flags: int = FIRST_LAST, auth: bytes = b"",
            trailer: bytes = b"") -> bytes:
    h = MSRPCHeader()
    h["type"], h["flags"], h["call_id"], h["pduData"] = ptype, flags, call_id, body
    if auth:
        h["pad"] = b"\x00" * ((4 - len(body) % 4) % 4)
        h["sec_trailer"] = trailer or sec_trailer(pad=len(h["pad"]))
        h["auth_data"] = auth
    return h.get_packet()


def bind(call_id: int, contexts: list[tuple[int, bytes, bytes]], *, assoc_group: int = 0, alter: bool = False,
         auth: bytes = b"", max_frag: int = 5840) -> bytes:
    """bind / alter_context with presentation contexts (ctx_id, abstract syntax, transfer syntax)."""
    b = MSRPCBind()
    b["max_tfrag"] = b["max_rfrag"] = max_frag
    b["assoc_group"] = assoc_group
    for ctx_id, abstract, transfer in contexts:
        item = CtxItem()
        item["ContextID"], item["TransItems"] = ctx_id, 1
        item["AbstractSyntax"], item["TransferSyntax"] = abstract, transfer
        b.addCtxItem(item)
    return _header(MSRPC_ALTERCTX if alter else MSRPC_BIND, call_id, b.getData(), auth=auth)


def request(call_id: int, ctx_id: int, opnum: int, stub: bytes, *, flags: int = FIRST_LAST, alloc_hint: int | None = None,
            object_uuid: bytes | None = None, auth: bytes = b"") -> bytes:
    """A request PDU (C706 12.6.4.9)."""
    r = MSRPCRequestHeader()
    r["type"], r["call_id"], r["ctx_id"], r["op_num"] = MSRPC_REQUEST, call_id, ctx_id, opnum
    r["flags"] = flags | (PFC_OBJECT_UUID if object_uuid else 0)
    r["alloc_hint"] = len(stub) if alloc_hint is None else alloc_hint
    if object_uuid:
        r["uuid"] = object_uuid
    r["pduData"] = stub
    if auth:
        r["pad"] = b"\x00" * ((4 - len(stub) % 4) % 4)
        r["sec_trailer"] = sec_trailer(pad=len(r["pad"]))
        r["auth_data"] = auth
    return r.get_packet()


def auth3(call_id: int, auth: bytes = b"\x00" * 16) -> bytes:
    """rpc_auth_3 (MS-RPCE 2.2.2.12): four pad octets, then the auth verifier."""
    return _header(MSRPC_AUTH3, call_id, b"\x00" * 4, auth=auth)


def co_cancel(call_id: int) -> bytes:
    return _header(MSRPC_CO_CANCEL, call_id, b"")


def orphaned(call_id: int) -> bytes:
    return _header(MSRPC_ORPHANED, call_id, b"")


def fragments(call_id: int, ctx_id: int, opnum: int, stub: bytes, size: int) -> list[bytes]:
    """A request split into fragments of ``size`` stub bytes (first/last flags set as C706 12.6.3.7 says)."""
    parts = [stub[i:i + size] for i in range(0, len(stub), size)] or [b""]
    out = []
    for i, part in enumerate(parts):
        flags = (PFC_FIRST_FRAG if i == 0 else 0) | (PFC_LAST_FRAG if i == len(parts) - 1 else 0)
        out.append(request(call_id, ctx_id, opnum, part, flags=flags, alloc_hint=len(stub) - i * size))
    return out


# -------------------------------------------------------------------------------------------- raw client

class WireError(Exception):
    """The server closed the connection, timed out or answered something unexpected."""


def read_pdu(sock: socket.socket) -> bytes:
    """One whole PDU (header + body) from the socket."""
    head = _read_exact(sock, 16)
    frag_len = head[8] | (head[9] << 8)
    if frag_len < 16:
        raise WireError(f"frag_length {frag_len} < 16")
    return head + _read_exact(sock, frag_len - 16)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise WireError("connection closed by the server")
        buf += chunk
    return bytes(buf)


class RawClient:
    """A blocking DCE/RPC client speaking bytes (for the health check, the load and the leak checks)."""

    def __init__(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.call_id = 0
        self.assoc_group = 0

    def bind(self, abstract: bytes = QM2QM, transfer: bytes = NDR20) -> None:
        self.call_id += 1
        self.sock.sendall(bind(self.call_id, [(0, abstract, transfer)]))
        pdu = read_pdu(self.sock)
        if pdu[2] != MSRPC_BINDACK:
            raise WireError(f"bind answered with PDU type {pdu[2]}")
        self.assoc_group = struct.unpack_from("<L", pdu, 20)[0]

    def send_request(self, opnum: int, stub: bytes, ctx_id: int = 0) -> int:
        self.call_id += 1
        self.sock.sendall(request(self.call_id, ctx_id, opnum, stub))
        return self.call_id

    def read_reply(self) -> tuple[int, bytes]:
        """(PDU type, stub) of one whole reply; a fault's stub is its 4-byte status."""
        pdu = read_pdu(self.sock)
        ptype, flags = pdu[2], pdu[3]
        if ptype == MSRPC_FAULT:
            return ptype, pdu[24:28]
        if ptype != MSRPC_RESPONSE:
            raise WireError(f"unexpected PDU type {ptype}")
        auth_len = pdu[10] | (pdu[11] << 8)
        stub = pdu[24:len(pdu) - (auth_len + 8 if auth_len else 0)]
        while not flags & PFC_LAST_FRAG:
            pdu = read_pdu(self.sock)
            flags = pdu[3]
            stub += pdu[24:]
        return ptype, stub

    def call(self, opnum: int, stub: bytes, ctx_id: int = 0) -> tuple[int, bytes]:
        self.send_request(opnum, stub, ctx_id)
        return self.read_reply()

    def abort(self) -> None:
        """Close with RST (SO_LINGER 0): the abrupt disconnect a crashed or unplugged client produces."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.sock.close()

    def close(self) -> None:
        self.sock.close()


GET_VERSION_OPNUM = 8


def get_version_latency(host: str, port: int, timeout: float = 2.0) -> float:
    """Health check: connect, bind qm2qm, RemoteQmGetVersion; seconds taken. Raises WireError/OSError."""
    start = time.perf_counter()
    c = RawClient(host, port, timeout=timeout)
    try:
        c.bind()
        ptype, stub = c.call(GET_VERSION_OPNUM, b"")
        if ptype != MSRPC_RESPONSE or len(stub) < 4:
            raise WireError(f"GetVersion answered type {ptype} with {stub.hex()}")
    finally:
        c.close()
    elapsed = time.perf_counter() - start
    if elapsed > timeout:
        raise WireError(f"GetVersion took {elapsed:.3f} s (> {timeout} s)")
    return elapsed
