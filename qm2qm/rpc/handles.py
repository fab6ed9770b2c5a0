"""Context-handle table of one association group (MS-RPCE 3.3.1.4.1; C706 5.1.6, 12.6.4.3 rundown)."""
from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass
from typing import Any

from qm2qm.rpc.interface import ContextHandleType, RpcFault

NCA_S_FAULT_CONTEXT_MISMATCH = 0x1C00001A
NCA_S_FAULT_REMOTE_NO_MEMORY = 0x1C00001B
NULL_HANDLE = bytes(20)
HANDLE_SIZE = 20
# Context handles one association group may hold (our bound, not the spec's: Samba refuses a pipe's 2049th policy
# handle, MAX_OPEN_POLS). Each costs the server about a kilobyte with what it stands for (an open queue), so without
# a bound one client could open queues until the server runs out of memory.
MAX_CONTEXT_HANDLES = 4096

_log = logging.getLogger("qm2qm.rpc")

_POOL_SIZE = 4096                       # random bytes fetched at once: 256 handle keys per getrandom call
# version 4, variant RFC 4122 (what uuid.uuid4() gives): octet 6's high nibble 4, octet 8's two high bits 10
_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


class _RandomKeys:
    """Random (version 4) UUIDs as 16 bytes, cut from a pool of os.urandom bytes: uuid.uuid4() costs a
    getrandom call and a UUID object per handle. The version and variant bits of a whole pool are set at once
    (two translated strides), so a key is one slice. The pool is dropped in a forked child (no shared keys)."""
    __slots__ = ("_pool", "_pos")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._pool = b""
        self._pos = _POOL_SIZE

    def next(self) -> bytes:
        pos = self._pos
        if pos >= _POOL_SIZE:
            pool = bytearray(os.urandom(_POOL_SIZE))
            pool[6::16] = pool[6::16].translate(_VERSION_4)
            pool[8::16] = pool[8::16].translate(_VARIANT)
            self._pool, pos = bytes(pool), 0
        self._pos = pos + 16
        return self._pool[pos:pos + 16]


_random_keys = _RandomKeys()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_random_keys.reset)


@dataclass(slots=True)
class HandleEntry:
    """One live context handle: its wire form, type and the object the handler registered."""
    wire: bytes
    handle_type: ContextHandleType
    obj: Any


class HandleLimitReached(RpcFault):
    """The association group already holds its most context handles: a new one is refused (a handler that opened
    something for it undoes that and answers its own "insufficient resources" status)."""

    def __init__(self, limit: int) -> None:
        super().__init__(NCA_S_FAULT_REMOTE_NO_MEMORY, f"the association group already holds {limit} context handles")


class HandleTable:
    """The context handles of one association (MS-RPCE 3.3.1.4.1: the association is the handle's scope).

    Keys are the 16-byte UUID part of the 20-byte wire form (4-byte attributes + UUID, C706 / MIDL
    ndr_context_handle); types are compared by identity (type-strict handles, MS-RPCE 3.1.1.5.3.3)."""

    __slots__ = ("_entries", "_run_down", "limit", "refused")

    def __init__(self, limit: int = MAX_CONTEXT_HANDLES) -> None:
        self._entries: dict[bytes, HandleEntry] = {}     # insertion order = creation order
        self._run_down = False
        self.limit = limit
        self.refused = 0                                 # new handles refused at the limit (logged once)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[HandleEntry]:
        """The live handles in creation order (a snapshot, for monitoring)."""
        return list(self._entries.values())

    def new(self, handle_type: ContextHandleType, obj: Any) -> bytes:
        """Register obj; return its 20-byte wire handle (attributes 0 + random UUID)."""
        if self._run_down:
            # The group already lost its last connection: nobody could ever use or run this down.
            raise RpcFault(NCA_S_FAULT_CONTEXT_MISMATCH, "association already run down")
        if len(self._entries) >= self.limit:
            self.refused += 1
            raise HandleLimitReached(self.limit)
        while True:
            key = _random_keys.next()
            if key not in self._entries:
                break
        wire = b"\x00\x00\x00\x00" + key
        self._entries[key] = HandleEntry(wire, handle_type, obj)
        return wire

    def lookup(self, wire: bytes, handle_type: ContextHandleType) -> Any | None:
        """Wire handle → object; None for the NULL handle; unknown/closed/wrong-type → context mismatch fault."""
        if type(wire) is bytes and len(wire) == HANDLE_SIZE:      # the common case: a live handle of this type
            entry = self._entries.get(wire[4:])                   # (a minted key is never all zeros: not NULL)
            if entry is not None and entry.handle_type is handle_type:
                return entry.obj
        if wire == NULL_HANDLE:
            return None
        entry = self._entry(wire)
        if entry.handle_type is not handle_type:
            raise RpcFault(NCA_S_FAULT_CONTEXT_MISMATCH,
                           f"handle of type {entry.handle_type.name!r} where {handle_type.name!r} expected")
        return entry.obj

    def close(self, wire: bytes) -> HandleEntry:
        """Forget a handle without running it down; unknown, closed or NULL → context mismatch fault."""
        entry = self._entry(wire)
        del self._entries[entry.wire[4:]]
        return entry

    def drain(self) -> list[HandleEntry]:
        """Take every live handle out in creation order and refuse new ones (rundown happens once)."""
        self._run_down = True
        entries = list(self._entries.values())
        self._entries.clear()
        return entries

    def _entry(self, wire: bytes) -> HandleEntry:
        if len(wire) != HANDLE_SIZE:
            raise RpcFault(NCA_S_FAULT_CONTEXT_MISMATCH, f"context handle of {len(wire)} bytes, expected 20")
        entry = self._entries.get(bytes(wire[4:]))
        if entry is None:
            raise RpcFault(NCA_S_FAULT_CONTEXT_MISMATCH, "unknown or closed context handle")
        return entry


async def run_down(entries: list[HandleEntry], *, logger: logging.Logger = _log, extra: dict | None = None) -> None:
    """Call each handle type's rundown routine once, in the given order (C706 5.1.6); errors are logged."""
    for entry in entries:
        fields = dict(extra or {})
        fields.update(handle=entry.wire[4:].hex(), handle_type=entry.handle_type.name, handle_event="rundown")
        try:
            result = entry.handle_type.rundown(entry.obj)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("rundown of %s handle %s failed", entry.handle_type.name, fields["handle"],
                             extra=fields)
        else:
            logger.debug("ran down %s handle %s", entry.handle_type.name, fields["handle"], extra=fields)
