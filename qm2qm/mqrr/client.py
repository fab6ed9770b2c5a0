"""MqrrClient: an MS-MQRR RemoteRead client over impacket's DCE/RPC transport (MS-MQRR 3.2), NDR or NDR64.

Every call returns the HRESULT the server answered; a fault PDU (R_OpenQueue throws its failures, MS-MQRR
3.1.4.2) raises MqrrFault with its exact status (impacket would mask statuses it does not know).
"""
from __future__ import annotations

import contextlib
import socket
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from impacket.dcerpc.v5 import transport
from impacket.dcerpc.v5.rpcrt import DCERPCException
from impacket.uuid import uuidtup_to_bin

from qm2qm.client import RpcCallError
from qm2qm.mqmp.client import Credentials, bind, fault_status
from qm2qm.mqrr import idl
from qm2qm.mqrr.codec import handle_bytes
from qm2qm.mqrr.constants import MQ_DENY_NONE, RECEIVE_ACCESS, RR_ACK
from qm2qm.mqrr.queue_format import queue_format
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE

NDR = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64 = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
_FAULT, _RESPONSE, _LAST_FRAG = 3, 2, 0x02
ALL = 0xFFFFFFFF                    # dwMaxBodySize / dwMaxCompoundMessageSize that never cut the packet


class MqrrFault(RpcCallError):
    """A fault PDU (C706 12.6.4.7); ``status`` is its exact code."""

    def __init__(self, status: int) -> None:
        super().__init__(f"fault 0x{status:08x}", status)


@dataclass
class Read:
    """The answer of R_StartReceive / R_StartTransactionalReceive."""
    status: int
    arrive_time: int = 0
    sequence_id: int = 0
    sections: list[tuple[int, int, bytes]] = field(default_factory=list)   # (SectionType, SizeAlloc, bytes)

    @property
    def packet(self) -> bytes:
        """The sections concatenated (2.2.6): the whole packet when it was not cut."""
        return b"".join(buffer for _, _, buffer in self.sections)


class MqrrClient:
    """One connection bound to RemoteRead; ``open`` / ``read`` / ``end`` / ``close`` and every other opnum."""

    def __init__(self, host: str, port: int, *, ndr64: bool = False, timeout: float = 60.0,
                 credentials: Credentials | None = None) -> None:
        """With ``credentials`` the binding is authenticated (NTLM at their level) and every response goes
        through impacket's verifier and unsealing; without, responses are read straight off the socket."""
        if credentials is not None and credentials.user:
            self.dce = bind(host, port, idl.MSRPC_UUID_REMOTEREAD, ndr64=ndr64, connect_timeout=timeout,
                            credentials=credentials, name="RemoteRead")
            self.authenticated = True
        else:
            rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:{host}[{port}]")
            rpc.set_connect_timeout(timeout)
            self.dce = rpc.get_dce_rpc()
            self.dce.connect()
            self.dce.bind(idl.MSRPC_UUID_REMOTEREAD, transfer_syntax=NDR64 if ndr64 else NDR)
            self.authenticated = False
        self.ndr64 = self.dce.transfer_syntax == uuidtup_to_bin(NDR64)

    def disconnect(self) -> None:
        """Sever the connection, even while another thread is blocked in a call on it."""
        with contextlib.suppress(OSError):
            self.dce.get_rpc_transport().get_socket().shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):        # already closed by the peer
            self.dce.disconnect()

    # -- the wire --
    def call(self, request: Any) -> Any:
        """Send an idl.py request; return its decoded response, or raise MqrrFault."""
        if self.ndr64:
            request.changeTransferSyntax(self.dce.NDR64Syntax)
        return self.decode(request.opnum, self.call_stub(request.opnum, request))

    def decode(self, opnum: int, stub: bytes) -> Any:
        response = idl.OPNUMS[opnum][1](isNDR64=self.ndr64)
        response.fromString(stub)
        return response

    def call_stub(self, opnum: int, stub: Any) -> bytes:
        """Send ``stub`` (bytes or an NDR request) as opnum; the response stub, or MqrrFault."""
        self.dce.call(opnum, stub)
        if self.authenticated:
            try:
                return self.dce.recv()      # impacket checks the verifier and unseals (MS-RPCE 3.3.1.5.2)
            except DCERPCException as exc:
                status, _ = fault_status(exc)
                raise MqrrFault(0x1C010003 if status is None else status) from None
        rpc, data = self.dce.get_rpc_transport(), b""
        while True:
            header = rpc.recv(count=16)
            body = rpc.recv(count=struct.unpack_from("<H", header, 8)[0] - 16)
            if header[2] == _FAULT:
                raise MqrrFault(struct.unpack_from("<I", body, 8)[0])
            if header[2] != _RESPONSE:
                raise MqrrFault(0x1C010003)     # nca_s_proto_error: neither a response nor a fault
            data += body[8:]
            if header[3] & _LAST_FRAG:
                return data

    @staticmethod
    def status(response: Any) -> int:
        return response["ErrorCode"] & 0xFFFFFFFF

    # -- opnums --
    def get_server_port(self) -> int:
        return self.call(idl.R_GetServerPort())["ErrorCode"]

    def open(self, format_name: str, access: int = RECEIVE_ACCESS, share_mode: int = MQ_DENY_NONE,
             *, for_move: bool = False) -> Any:
        """R_OpenQueue (or R_OpenQueueForMove): the 20-byte queue context handle (and the move context)."""
        request = idl.R_OpenQueueForMove() if for_move else idl.R_OpenQueue()
        request["pQueueFormat"] = queue_format(format_name)
        request["dwAccess"], request["dwShareMode"] = access, share_mode
        request["pClientId"] = uuid.uuid4().bytes_le
        request["fNonRoutingServer"], request["Major"], request["Minor"] = 1, 6, 1
        request["BuildNumber"], request["fWorkgroup"] = 0, 1
        response = self.call(request)
        handle = handle_bytes(response["pphContext"])
        return (response["pMoveContext"], handle) if for_move else handle

    def close(self, handle: bytes) -> tuple[int, bytes]:
        request = idl.R_CloseQueue()
        request["pphContext"] = handle
        response = self.call(request)
        return self.status(response), handle_bytes(response["pphContext"])

    def create_cursor(self, handle: bytes) -> tuple[int, int]:
        request = idl.R_CreateCursor()
        request["phContext"] = handle
        response = self.call(request)
        return self.status(response), response["phCursor"]

    def close_cursor(self, handle: bytes, cursor: int) -> int:
        request = idl.R_CloseCursor()
        request["phContext"], request["hCursor"] = handle, cursor
        return self.status(self.call(request))

    def purge(self, handle: bytes) -> int:
        request = idl.R_PurgeQueue()
        request["phContext"] = handle
        return self.status(self.call(request))

    def read(self, handle: bytes, action: int = MQ_ACTION_RECEIVE, *, timeout: int = 0, request_id: int = 1,
             lookup_id: int = 0, cursor: int = 0, max_body: int = ALL, max_compound: int = ALL,
             transaction: bytes | None = None) -> Read:
        """R_StartReceive, or R_StartTransactionalReceive when ``transaction`` (an XACTUOW) is given."""
        request = idl.R_StartReceive() if transaction is None else idl.R_StartTransactionalReceive()
        request["phContext"] = handle
        request["LookupId"], request["hCursor"], request["ulAction"] = lookup_id, cursor, action
        request["ulTimeout"], request["dwRequestId"] = timeout, request_id
        request["dwMaxBodySize"], request["dwMaxCompoundMessageSize"] = max_body, max_compound
        if transaction is not None:
            request["pTransactionId"]["rgb"] = transaction
        response = self.call(request)
        sections = []
        for s in response["ppPacketSections"] or ():
            data = s["pSectionBuffer"]
            data = data if isinstance(data, bytes) else b"".join(data)
            sections.append((s["SectionBufferType"], s["SectionSizeAlloc"], data))
        return Read(self.status(response), response["pdwArriveTime"], response["pSequenceId"], sections)

    def cancel(self, handle: bytes, request_id: int) -> int:
        request = idl.R_CancelReceive()
        request["phContext"], request["dwRequestId"] = handle, request_id
        return self.status(self.call(request))

    def end(self, handle: bytes, request_id: int, ack: int = RR_ACK, *, transactional: bool = False) -> int:
        """R_EndReceive (or R_EndTransactionalReceive)."""
        request = idl.R_EndTransactionalReceive() if transactional else idl.R_EndReceive()
        request["phContext"], request["dwAck"], request["dwRequestId"] = handle, ack, request_id
        return self.status(self.call(request))

    def move(self, handle: bytes, move_context: int, lookup_id: int, transaction: bytes = bytes(16)) -> int:
        """R_MoveMessage to the queue R_OpenQueueForMove's ``move_context`` names."""
        request = idl.R_MoveMessage()
        request["phContextFrom"], request["ullContextTo"], request["LookupId"] = handle, move_context, lookup_id
        request["pTransactionId"]["rgb"] = transaction
        return self.status(self.call(request))

    def enlist(self, transaction: bytes, token: bytes, format_name: str) -> int:
        """R_QMEnlistRemoteTransaction with an MS-DTCO propagation token."""
        request = idl.R_QMEnlistRemoteTransaction()
        request["pTransactionId"]["rgb"] = transaction
        request["cbPropagationToken"], request["pbPropagationToken"] = len(token), list(token)
        request["pQueueFormat"] = queue_format(format_name)
        return self.status(self.call(request))

    def set_acknowledgement_class(self, handle: bytes, lookup_id: int, ack_class: int) -> int:
        request = idl.R_SetUserAcknowledgementClass()
        request["phContext"], request["LookupId"], request["usClass"] = handle, lookup_id, ack_class
        return self.status(self.call(request))
