"""The private ADM of the qm2qm server (MS-MQQP 3.1.1.2–3.1.1.5): remote-read and open-queue entries.

Serialization (3.1.1.3, 3.1.1.5: "The server MUST serialize concurrent read, write, and iteration operations",
"including the processing of each element ... in the loop"): every handler, rundown routine and shared_adm
event runs on the one asyncio loop thread, and no method here (nor any loop over a collection in a handler)
awaits. A read, write or whole iteration with its per-element processing therefore runs to completion before
any other call can touch the collection: the loop thread is the lock.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


def _remove_identical(entries: list | None, entry: Any) -> bool:
    """Remove this very object (not an equal one) from a bucket of entries; False if it is not there."""
    for i, e in enumerate(entries or ()):
        if e is entry:
            del entries[i]
            return True
    return False


@dataclass(eq=False, slots=True)
class RemoteReadEntry:
    """RemoteReadEntry (3.1.1.2): one initialized, pending or completed remote read."""
    open_queue_descriptor_handle: int
    timeout: int
    action: int
    request_id: int
    # UserMessagePacket: what Dequeue Message End takes as iMessage. shared_adm identifies the message by the
    # MessagePosition a receive Locked (a peek leaves it None); the packet bytes are not kept (up to 4 MB each).
    user_message_packet: Any = field(default=None, repr=False)
    # Implementation state, not in the spec's ADM:
    open_queue_descriptor: Any = field(default=None, repr=False)    # the descriptor read through
    waiting: Any = field(default=None, repr=False)                  # the PendingRead while it waits
    finished: bool = False          # EndReceive, CloseQueue or rundown has released the message


class RemoteReadEntryCollection:
    """RemoteReadEntryCollection (3.1.1.3), indexed by (OpenQueueDescriptorHandle, RequestId)."""

    __slots__ = ("_by_descriptor",)

    def __init__(self) -> None:
        self._by_descriptor: dict[int, dict[int, list[RemoteReadEntry]]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for by_id in self._by_descriptor.values() for entries in by_id.values())

    def __iter__(self) -> Iterator[RemoteReadEntry]:
        return iter([e for by_id in self._by_descriptor.values() for entries in by_id.values() for e in entries])

    def __contains__(self, entry: RemoteReadEntry) -> bool:
        return any(e is entry for e in self._by_descriptor.get(entry.open_queue_descriptor_handle, {})
                   .get(entry.request_id, ()))

    def add(self, entry: RemoteReadEntry) -> None:
        """Add an entry (duplicates are the caller's choice: 3.1.4.11 adds without checking)."""
        by_id = self._by_descriptor.setdefault(entry.open_queue_descriptor_handle, {})
        by_id.setdefault(entry.request_id, []).append(entry)

    def remove(self, entry: RemoteReadEntry) -> bool:
        """Remove this very entry; False if it was not there."""
        by_id = self._by_descriptor.get(entry.open_queue_descriptor_handle)
        entries = by_id.get(entry.request_id) if by_id else None
        if not _remove_identical(entries, entry):
            return False
        if not entries:
            del by_id[entry.request_id]
            if not by_id:
                del self._by_descriptor[entry.open_queue_descriptor_handle]
        return True

    def find(self, descriptor_handle: int, request_id: int) -> RemoteReadEntry | None:
        """The (first) entry with this OpenQueueDescriptorHandle and RequestId, or None."""
        entries = self._by_descriptor.get(descriptor_handle, {}).get(request_id)
        return entries[0] if entries else None

    def for_descriptor(self, descriptor_handle: int) -> list[RemoteReadEntry]:
        """Every entry with this OpenQueueDescriptorHandle (a snapshot list)."""
        return [e for entries in self._by_descriptor.get(descriptor_handle, {}).values() for e in entries]


@dataclass(eq=False, slots=True)
class OpenQueueEntry:
    """OpenQueueEntry (3.1.1.4): one remote open queue, referenced by a PCTX_RRSESSION_HANDLE_TYPE."""
    open_queue_descriptor_handle: int
    client_id: uuid.UUID
    closed: bool = False            # RemoteQMCloseQueue or rundown has run for it


class OpenQueueEntryCollection:
    """OpenQueueEntryCollection (3.1.1.5), indexed by OpenQueueDescriptorHandle."""

    __slots__ = ("_by_descriptor",)

    def __init__(self) -> None:
        self._by_descriptor: dict[int, list[OpenQueueEntry]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_descriptor.values())

    def __iter__(self) -> Iterator[OpenQueueEntry]:
        return iter([e for entries in self._by_descriptor.values() for e in entries])

    def __contains__(self, entry: OpenQueueEntry) -> bool:
        return any(e is entry for e in self._by_descriptor.get(entry.open_queue_descriptor_handle, ()))

    def add(self, entry: OpenQueueEntry) -> None:
        """Add an entry; two sessions may name the same descriptor (3.1.4.3 does not forbid it)."""
        self._by_descriptor.setdefault(entry.open_queue_descriptor_handle, []).append(entry)

    def remove(self, entry: OpenQueueEntry) -> bool:
        """Remove this very entry; False if it was not there."""
        entries = self._by_descriptor.get(entry.open_queue_descriptor_handle)
        if not _remove_identical(entries, entry):
            return False
        if not entries:
            del self._by_descriptor[entry.open_queue_descriptor_handle]
        return True

    def find(self, descriptor_handle: int) -> OpenQueueEntry | None:
        """An entry with this OpenQueueDescriptorHandle, or None."""
        entries = self._by_descriptor.get(descriptor_handle)
        return entries[0] if entries else None


class ServerAdm:
    """The qm2qm server's private ADM (3.1.1.2–3.1.1.5) for one QueueManager.

    ``remote_read_entries`` is rRemoteReadEntryCollection (reads in progress, 3.1.1.3) and
    ``open_queue_entries`` is rOpenQueueEntryCollection (3.1.1.5). ``receive_handles`` is ours: the
    RemoteReadEntry elements that hold a Locked message and are referenced by a live
    PCTX_REMOTEREAD_HANDLE_TYPE, so that RemoteQMCloseQueue can release them (docs/mqqp-choices.md).
    """

    __slots__ = ("remote_read_entries", "open_queue_entries", "receive_handles")

    def __init__(self) -> None:
        self.remote_read_entries = RemoteReadEntryCollection()
        self.open_queue_entries = OpenQueueEntryCollection()
        self.receive_handles = RemoteReadEntryCollection()

    def is_idle(self) -> bool:
        """True when no entry of any kind is held (no leak after every session is closed or run down)."""
        return not (len(self.remote_read_entries) or len(self.open_queue_entries) or len(self.receive_handles))
