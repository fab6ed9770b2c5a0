"""What an RPC interface registers with the runtime (C706 ch. 12; MS-RPCE 3.3): opnums, handle types, rundown."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

# Transfer syntaxes (MS-RPCE 2.2.4.12, 3.3.1.5.3)
NDR20 = (uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860"), 2)
NDR64 = (uuid.UUID("71710533-beba-4937-8319-b5dbef9ccc36"), 1)


class RpcFault(Exception):
    """Raised by a handler (or a stub decoder) to answer the call with a fault PDU of this status."""

    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(message or f"fault 0x{status:08x}")
        self.status = status


@dataclass(frozen=True)
class ContextHandleType:
    """A typed context handle (MS-RPCE 3.3.1.4.1); ``rundown`` runs once per live handle when its
    association group loses its last connection (C706 12.6.4.3 / MS-RPCE 3.3.1.1)."""
    name: str
    rundown: Callable[[Any], Awaitable[None] | None]


# Well-known SIDs (MS-DTYP 2.4.2.4) a principal's group list may carry.
EVERYONE_SID = "S-1-1-0"
ANONYMOUS_SID = "S-1-5-7"
AUTHENTICATED_USERS_SID = "S-1-5-11"


@dataclass(frozen=True)
class Principal:
    """Who made a call (MS-RPCE 3.3.3.4.3 RpcBindingInqAuthClient; MS-DTYP 2.4.2 SIDs).

    ``authenticated`` is False for an unauthenticated binding or an anonymous NTLM logon; then the principal is
    ANONYMOUS LOGON (S-1-5-7), which, as on Windows since XP, is not a member of Everyone. ``sid`` is None when
    the security package did not tell it (NTLM gives names, not SIDs; a user file may configure one)."""
    domain: str = "NT AUTHORITY"
    user: str = "ANONYMOUS LOGON"
    sid: str | None = ANONYMOUS_SID
    authenticated: bool = False

    @property
    def name(self) -> str:
        """DOMAIN\\user, as Windows prints an account."""
        return f"{self.domain}\\{self.user}" if self.domain else self.user

    @property
    def sids(self) -> tuple[str, ...]:
        """The SIDs an access check matches: the user's own (if known) and its well-known groups."""
        if not self.authenticated:
            return (ANONYMOUS_SID,)
        own = (self.sid,) if self.sid else ()
        return own + (EVERYONE_SID, AUTHENTICATED_USERS_SID)


ANONYMOUS = Principal()

# Authentication levels (MS-RPCE 2.2.1.1.8); NONE also stands for an unauthenticated binding.
RPC_C_AUTHN_LEVEL_NONE = 1
RPC_C_AUTHN_LEVEL_CONNECT = 2
RPC_C_AUTHN_LEVEL_CALL = 3
RPC_C_AUTHN_LEVEL_PKT = 4
RPC_C_AUTHN_LEVEL_PKT_INTEGRITY = 5
RPC_C_AUTHN_LEVEL_PKT_PRIVACY = 6


class CallContext(Protocol):
    """What a handler sees of the call it serves."""
    call_id: int
    opnum: int
    ndr64: bool                     # negotiated transfer syntax of the presentation context
    connection_id: int
    association_group_id: int
    peer_host: str                  # the caller's network address ("" when the transport gives none)
    principal: Principal            # the caller (ANONYMOUS when the call is not authenticated)
    auth_level: int                 # RPC_C_AUTHN_LEVEL_* of the call's security context (NONE if none)

    def lookup_handle(self, wire: bytes, handle_type: ContextHandleType) -> Any | None:
        """20-byte wire handle → the object registered for it; None for the NULL handle.
        Unknown, closed or wrongly typed handles raise RpcFault(nca_s_fault_context_mismatch)."""

    def new_handle(self, handle_type: ContextHandleType, obj: Any) -> bytes:
        """Register obj in this call's association group; returns the 20-byte wire handle."""

    def close_handle(self, wire: bytes) -> bytes:
        """Forget a handle (no rundown for it); returns the 20-byte NULL handle to send back."""


# A handler takes the request stub bytes and returns the response stub bytes; it may be a plain
# function (answered at once) or a coroutine function (runs as a task; co_cancel cancels it).
Handler = Callable[[CallContext, bytes], "bytes | Awaitable[bytes]"]


@dataclass(frozen=True)
class Operation:
    opnum: int
    name: str
    handler: Handler


@dataclass
class Interface:
    """One abstract syntax (interface UUID + version) with its opnum table."""
    uuid: uuid.UUID
    version: tuple[int, int]        # (major, minor)
    name: str
    operations: dict[int, Operation] = field(default_factory=dict)
    handle_types: tuple[ContextHandleType, ...] = ()
    transfer_syntaxes: tuple[tuple[uuid.UUID, int], ...] = (NDR20, NDR64)
    # Authentication policy (MS-RPCE 3.3.1.5.2; MS-MQQP 5, MS-MQMP 5.1): when the server requires authentication,
    # an unauthenticated call to an opnum not in ``unauthenticated_opnums`` is answered with a fault of
    # ``access_denied_status`` before any handler runs. None means every opnum stays open (mgmt, epm).
    unauthenticated_opnums: frozenset[int] | None = None
    access_denied_status: int = 0x00000005      # nca_s_fault_access_denied; qm2qm uses MQ_ERROR_ACCESS_DENIED
    # opnum → lane(ctx, stub): the response stub of a call its handler would answer at once, computed along a
    # shorter path (no request/response objects), or what the handler itself would return for a call that waits
    # (its coroutine, not yet started), or None — having changed nothing — to leave the call to the handler. Tried
    # only where the handler could answer inline (no earlier call still waiting to start); it must answer exactly
    # as the handler does.
    lanes: dict[int, Handler] = field(default_factory=dict)
