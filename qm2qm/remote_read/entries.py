"""A read in progress or holding a Locked message, and the table of them (MS-MQQP 3.1.1.2–3.1.1.3, MS-MQRR 3.1.1.2–3.1.1.3).

Serialization (MS-MQQP 3.1.1.3, 3.1.1.5: "The server MUST serialize concurrent read, write, and iteration
operations"): every handler, rundown routine and shared_adm event runs on the one asyncio loop thread, and no
method here (nor any loop over a table in a caller) awaits. A read, write or whole iteration with its
per-element processing therefore runs to completion before any other call can touch the table.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from qm2qm.remote_read.actions import is_receive


def remove_identical(entries: dict | None, entry: Any) -> bool:
    """Remove this very object from a bucket of entries (a dict used as an insertion-ordered set: the entries hash by
    identity, so an equal one is not it); False if it is not there. One dict operation, however many share the key."""
    if entries is None or entry not in entries:
        return False
    del entries[entry]
    return True


@dataclass(eq=False, slots=True)
class ReadEntry:
    """One remote read: initialized, waiting, or holding the message its receive Locked."""
    descriptor_handle: int          # OpenQueueDescriptor.Handle (MS-MQRR: the queue context handle's descriptor)
    request_id: int
    timeout: int = 0
    action: int = 0                 # fixed once added: ReadEntryTable counts the receives by it
    # The MessagePosition a receive Locked: what Dequeue Message End takes as iMessage (a peek leaves it None).
    position: Any = field(default=None, repr=False)
    lookup_identifier: int = 0      # Message.LookupIdentifier of the Locked message
    descriptor: Any = field(default=None, repr=False)   # the OpenQueueDescriptor read through
    waiting: Any = field(default=None, repr=False)      # the PendingRead while it waits
    timer: Any = field(default=None, repr=False)        # cancelled when the message is released
    finished: bool = False          # End, close or rundown has released the message


class ReadEntryTable:
    """ReadEntry elements indexed by (descriptor handle, RequestId); one key may hold several entries."""

    __slots__ = ("_by_descriptor", "_receives")

    def __init__(self, count_receives: bool = False) -> None:
        # descriptor handle -> RequestId -> the entries of that key, in the order added (a dict as an ordered set)
        self._by_descriptor: dict[int, dict[int, dict[ReadEntry, None]]] = {}
        # count_receives: descriptor handle -> how many of its entries are receives (receives_of)
        self._receives: dict[int, int] | None = {} if count_receives else None

    def __len__(self) -> int:
        return sum(len(entries) for by_id in self._by_descriptor.values() for entries in by_id.values())

    def __iter__(self) -> Iterator[ReadEntry]:
        return iter([e for by_id in self._by_descriptor.values() for entries in by_id.values() for e in entries])

    def __contains__(self, entry: ReadEntry) -> bool:
        return entry in self._by_descriptor.get(entry.descriptor_handle, {}).get(entry.request_id, ())

    def add(self, entry: ReadEntry) -> None:
        """Add an entry (duplicates are the caller's choice: MS-MQQP 3.1.4.11 adds without checking)."""
        by_id = self._by_descriptor.setdefault(entry.descriptor_handle, {})
        entries = by_id.setdefault(entry.request_id, {})
        receives = self._receives
        if receives is not None and entry not in entries and is_receive(entry.action):
            receives[entry.descriptor_handle] = receives.get(entry.descriptor_handle, 0) + 1
        entries[entry] = None

    def remove(self, entry: ReadEntry) -> bool:
        """Remove this very entry; False if it was not there."""
        by_id = self._by_descriptor.get(entry.descriptor_handle)
        entries = by_id.get(entry.request_id) if by_id else None
        if not remove_identical(entries, entry):
            return False
        receives = self._receives
        if receives is not None and is_receive(entry.action):
            left = receives[entry.descriptor_handle] - 1
            if left:
                receives[entry.descriptor_handle] = left
            else:
                del receives[entry.descriptor_handle]
        if not entries:
            del by_id[entry.request_id]
            if not by_id:
                del self._by_descriptor[entry.descriptor_handle]
        return True

    def find(self, descriptor_handle: int, request_id: int) -> ReadEntry | None:
        """The (first) entry with this descriptor handle and RequestId, or None."""
        return next(self.matching(descriptor_handle, request_id), None)

    def receives_of(self, descriptor_handle: int) -> int:
        """How many entries with this descriptor handle are receives (actions.is_receive of their action); the table
        must count them (count_receives)."""
        return self._receives.get(descriptor_handle, 0)

    def has_descriptor(self, descriptor_handle: int) -> bool:
        """Whether any entry has this descriptor handle."""
        return descriptor_handle in self._by_descriptor

    def for_descriptor(self, descriptor_handle: int) -> list[ReadEntry]:
        """Every entry with this descriptor handle (a snapshot list)."""
        return [e for entries in self._by_descriptor.get(descriptor_handle, {}).values() for e in entries]

    def matching(self, descriptor_handle: int, request_id: int) -> Iterator[ReadEntry]:
        """The entries with this descriptor handle and RequestId, in the order added."""
        return iter(self._by_descriptor.get(descriptor_handle, {}).get(request_id, ()))
