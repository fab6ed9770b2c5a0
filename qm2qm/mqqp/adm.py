"""The private ADM of the qm2qm server (MS-MQQP 3.1.1.2–3.1.1.5): remote-read and open-queue entries.

RemoteReadEntry and its collection are the protocol-neutral qm2qm.remote_read entries under their MS-MQQP
names; OpenQueueEntry (3.1.1.4) is MS-MQQP's own. Serialization (3.1.1.3, 3.1.1.5): see remote_read/entries.py.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from qm2qm.remote_read.entries import ReadEntry, ReadEntryTable, remove_identical

RemoteReadEntry = ReadEntry                         # 3.1.1.2 (UserMessagePacket is ReadEntry.position)
RemoteReadEntryCollection = ReadEntryTable          # 3.1.1.3, by (OpenQueueDescriptorHandle, RequestId)


@dataclass(eq=False, slots=True)
class OpenQueueEntry:
    """OpenQueueEntry (3.1.1.4): one remote open queue, referenced by a PCTX_RRSESSION_HANDLE_TYPE."""
    open_queue_descriptor_handle: int
    client_id: uuid.UUID
    closed: bool = False            # RemoteQMCloseQueue or rundown has run for it
    peer_host: str = ""             # ours: the host that opened the session (OpenQueueDescriptor.opener_host)


class OpenQueueEntryCollection:
    """OpenQueueEntryCollection (3.1.1.5), indexed by OpenQueueDescriptorHandle."""

    __slots__ = ("_by_descriptor",)

    def __init__(self) -> None:
        # descriptor handle -> its entries in the order added (a dict as an ordered set: they hash by identity)
        self._by_descriptor: dict[int, dict[OpenQueueEntry, None]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_descriptor.values())

    def __iter__(self) -> Iterator[OpenQueueEntry]:
        return iter([e for entries in self._by_descriptor.values() for e in entries])

    def __contains__(self, entry: OpenQueueEntry) -> bool:
        return entry in self._by_descriptor.get(entry.open_queue_descriptor_handle, ())

    def add(self, entry: OpenQueueEntry) -> None:
        """Add an entry; two sessions may name the same descriptor (3.1.4.3 does not forbid it)."""
        self._by_descriptor.setdefault(entry.open_queue_descriptor_handle, {})[entry] = None

    def remove(self, entry: OpenQueueEntry) -> bool:
        """Remove this very entry; False if it was not there."""
        entries = self._by_descriptor.get(entry.open_queue_descriptor_handle)
        if not remove_identical(entries, entry):
            return False
        if not entries:
            del self._by_descriptor[entry.open_queue_descriptor_handle]
        return True

    def find(self, descriptor_handle: int) -> OpenQueueEntry | None:
        """An entry with this OpenQueueDescriptorHandle, or None."""
        entries = self._by_descriptor.get(descriptor_handle)
        return next(iter(entries)) if entries else None


class ServerAdm:
    """The qm2qm server's private ADM (3.1.1.2–3.1.1.5) for one QueueManager.

    ``remote_read_entries`` is rRemoteReadEntryCollection (reads in progress, 3.1.1.3: the ReadCore's
    ``pending``) and ``open_queue_entries`` is rOpenQueueEntryCollection (3.1.1.5). ``receive_handles`` is ours
    (the ReadCore's ``locked``): the RemoteReadEntry elements that hold a Locked message and are referenced by a
    live PCTX_REMOTEREAD_HANDLE_TYPE, so that RemoteQMCloseQueue can release them (docs/mqqp-choices.md).
    """

    __slots__ = ("remote_read_entries", "open_queue_entries", "receive_handles")

    def __init__(self, remote_read_entries: ReadEntryTable | None = None,
                 receive_handles: ReadEntryTable | None = None) -> None:
        self.remote_read_entries = remote_read_entries if remote_read_entries is not None else ReadEntryTable()
        self.open_queue_entries = OpenQueueEntryCollection()
        self.receive_handles = receive_handles if receive_handles is not None else ReadEntryTable()

    def is_idle(self) -> bool:
        """True when no entry of any kind is held (no leak after every session is closed or run down)."""
        return not (len(self.remote_read_entries) or len(self.open_queue_entries) or len(self.receive_handles))
