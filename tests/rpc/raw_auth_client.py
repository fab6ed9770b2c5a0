"""A minimal authenticated DCE/RPC client on pyspnego's initiator, for what impacket's client cannot do
(SPNEGO→NTLM with its alter_context leg): bind, legs, and requests protected as MS-RPCE 3.3.1.5.2.2 says."""
from __future__ import annotations

import socket
import struct

import spnego
from spnego.iov import BufferType

from qm2qm.rpc import faults as F
from qm2qm.rpc import pdu as P
from qm2qm.rpc.events import ContextItem

SIG = 16
PFC_SUPPORT_HEADER_SIGN = 0x04      # MS-RPCE 2.2.2.3


class RawAuthClient:
    def __init__(self, port: int, abstract, syntax, *, user: str | None, password: str | None, auth_type: int = 9,
                 level: int = 6, context_id: int = 7, hostname: str = "qm2qm", kerberos: bool = False) -> None:
        """kerberos: SPNEGO (9) or Kerberos (16) through GSSAPI with the ccache of KRB5CCNAME (user/password
        None), DCE style as Windows binds (MS-KILE 3.4.5.1); otherwise NTLM (10, or 9 offering NTLM only)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.auth_type, self.level, self.context_id = auth_type, level, context_id
        protocol = {9: "negotiate", 10: "ntlm", 16: "kerberos"}[auth_type]
        if kerberos or auth_type == 16:
            options = spnego.NegotiateOptions.use_gssapi if auth_type == 16 else spnego.NegotiateOptions.use_negotiate
            req = spnego.ContextReq.default | spnego.ContextReq.dce_style
        else:
            options = spnego.NegotiateOptions.use_negotiate if auth_type == 9 else spnego.NegotiateOptions.use_ntlm
            req = spnego.ContextReq.default
        self.ctx = spnego.client(user, password, hostname=hostname, service="host", protocol=protocol,
                                 options=options, context_req=req)
        self.kerberos = kerberos or auth_type == 16
        self.header_signed = False          # PFC_SUPPORT_HEADER_SIGN offered (Kerberos, as Windows) and echoed
        self.items = (ContextItem(0, abstract, (syntax,)),)
        self.call_id = 1
        self.legs: list[int] = []           # PTYPEs of the server's leg answers

    def _with_auth(self, pdu: bytes, token: bytes) -> bytes:
        pad = -len(pdu) % 4
        trailer = P.SEC_TRAILER.pack(self.auth_type, self.level, pad, 0, self.context_id)
        body = pdu + bytes(pad) + trailer + token
        return body[:8] + struct.pack("<H", len(body)) + struct.pack("<H", len(token)) + body[12:]

    def read_pdu(self) -> bytes:
        header = self._recv(16)
        return header + self._recv(struct.unpack_from("<H", header, 8)[0] - 16)

    def _recv(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    @staticmethod
    def token_of(pdu: bytes) -> bytes:
        auth_length = struct.unpack_from("<H", pdu, 10)[0]
        return pdu[len(pdu) - auth_length:] if auth_length else b""

    def bind(self, *, third_leg: str = "alter") -> bytes:
        """bind → bind_ack → (alter_context → alter_context_resp)* or rpc_auth3, until the context completes."""
        flags = P.PFC_FIRST_FRAG | P.PFC_LAST_FRAG | (PFC_SUPPORT_HEADER_SIGN if self.kerberos else 0)
        bind = P.build_bind(self.call_id, self.items, flags=flags)
        self.sock.sendall(self._with_auth(bind, self.ctx.step()))
        ack = self.read_pdu()
        self.legs.append(ack[2])
        if ack[2] != F.PTYPE_BIND_ACK:
            return ack
        self.header_signed = bool(ack[3] & PFC_SUPPORT_HEADER_SIGN)
        token = self.ctx.step(self.token_of(ack))
        while token:
            self.call_id += 1
            if third_leg == "auth3":
                auth3 = P.pack_header(F.PTYPE_AUTH3, 3, 20, self.call_id) + b"    "
                self.sock.sendall(self._with_auth(auth3, token))
                break
            alter = P.build_bind(self.call_id, self.items, alter_context=True)
            self.sock.sendall(self._with_auth(alter, token))
            resp = self.read_pdu()
            self.legs.append(resp[2])
            if resp[2] != F.PTYPE_ALTER_CONTEXT_RESP:
                return resp
            answer = self.token_of(resp)
            token = self.ctx.step(answer) if answer else b""
        return ack

    def request(self, opnum: int, stub: bytes) -> bytes:
        """One protected single-fragment request; returns the response PDU as received."""
        self.call_id += 1
        pad = -len(stub) % 16
        body = stub + bytes(pad)
        sig_size = self.signature_size()
        length = P.REQUEST_HEADER_SIZE + len(body) + 8 + sig_size
        header = P.pack_header(F.PTYPE_REQUEST, 3, length, self.call_id, sig_size) + \
            P.REQUEST_FIELDS.pack(len(stub), 0, opnum)
        trailer = P.SEC_TRAILER.pack(self.auth_type, self.level, pad, 0, self.context_id)
        whole = self._signs_header()
        if self.level == 6:
            iov = [(BufferType.sign_only, header), (BufferType.data, body), (BufferType.sign_only, trailer)] \
                if whole else [(BufferType.data, body)]
            res = self.ctx.wrap_iov(iov + [BufferType.header])
            body = next(b.data for b in res.buffers if b.type == BufferType.data)
            sig = res.buffers[-1].data
        else:
            sig = self.ctx.sign(header + body + trailer if whole else body)
        self.sock.sendall(header + body + trailer + sig)
        return self.read_pdu()

    def _signs_header(self) -> bool:
        """NTLM (extended session security) signs header + body + trailer always; Kerberos only once header
        signing is agreed (MS-RPCE 3.3.1.5.2.2)."""
        return not self.kerberos or self.header_signed

    def signature_size(self) -> int:
        """NTLM: 16 (MS-NLMP 2.2.2.9); Kerberos: the wrap token header at privacy, the MIC token otherwise
        (RFC 4121 4.2.6: a 16-byte header + the checksum, 12 bytes for the aes*-sha1-96 types)."""
        if getattr(self.ctx, "negotiated_protocol", "ntlm") != "kerberos":
            return SIG
        return self.ctx.query_message_sizes().header if self.level == 6 else 28

    def response_stub(self, pdu: bytes) -> bytes:
        """Verify / unseal a single-fragment response; its stub."""
        auth_length = struct.unpack_from("<H", pdu, 10)[0]
        trailer_at = len(pdu) - auth_length - 8
        header, body, trailer, sig = pdu[:24], pdu[24:trailer_at], pdu[trailer_at:trailer_at + 8], pdu[trailer_at + 8:]
        whole = self._signs_header()
        if self.level == 6:
            iov = [(BufferType.sign_only, header), (BufferType.data, body), (BufferType.sign_only, trailer)] \
                if whole else [(BufferType.data, body)]
            res = self.ctx.unwrap_iov(iov + [(BufferType.header, sig)])
            body = next(b.data for b in res.buffers if b.type == BufferType.data)
        else:
            self.ctx.verify(header + body + trailer if whole else body, sig)
        return body[:len(body) - trailer[2]]

    def close(self) -> None:
        self.sock.close()
