"""Events of the sans-IO connection core (C706 12.6.4 connection-oriented protocol, MS-RPCE 3.3.1)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

from qm2qm.rpc.interface import ANONYMOUS, RPC_C_AUTHN_LEVEL_NONE, Interface, Principal

SyntaxId = tuple[uuid.UUID, int, int]          # (uuid, major, minor) as on the wire (20 bytes)


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One p_cont_elem_t of a bind / alter_context (C706 12.6.3.1)."""
    context_id: int
    abstract_syntax: SyntaxId
    transfer_syntaxes: tuple[SyntaxId, ...]


@dataclass(frozen=True, slots=True)
class BindRequest:
    """A bind or alter_context the transport must answer with Connection.accept_bind / reject_bind."""
    call_id: int
    is_alter_context: bool
    max_xmit_frag: int
    max_recv_frag: int
    assoc_group_id: int
    items: tuple[ContextItem, ...]
    auth_type: int | None               # None when no sec_trailer; else the requested auth_type
    auth_level: int | None


class CallRequest(NamedTuple):
    """A complete (reassembled) request PDU on an accepted presentation context. Immutable like the other events;
    a named tuple because one is made per call (a frozen dataclass took 1.2 µs to build, this 0.3)."""
    call_id: int
    context_id: int
    opnum: int
    object_uuid: uuid.UUID | None
    stub: bytes
    interface: Interface
    ndr64: bool
    principal: Principal = ANONYMOUS                # the security context's caller (MS-RPCE 3.3.3.4.3)
    auth_level: int = RPC_C_AUTHN_LEVEL_NONE


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """co_cancel for call_id (C706 12.6.4.6)."""
    call_id: int


@dataclass(frozen=True, slots=True)
class CallOrphaned:
    """orphaned for call_id (C706 12.6.4.8): abandon the call, send nothing."""
    call_id: int


@dataclass(frozen=True, slots=True)
class ConnectionTerminated:
    """The peer violated the protocol or asked to close; send data_to_send() and close the socket."""
    reason: str
