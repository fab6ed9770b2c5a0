"""The durable-store contract behind the Persistent attributes of MS-MQDMPR 3.1.1 (general rules, 3.1.1)."""
from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Iterable, Protocol

from shared_adm.compact import unpack
from shared_adm.message import Message


@dataclass(slots=True)
class StoredQueue:
    """The Persistent attributes of one Queue (3.1.1.2), keyed by its Identifier (GUID string)."""
    identifier: str
    attributes: dict            # JSON-able: pathname, queue_type, label, transactional, quota, ...


@dataclass(slots=True)
class StoredMessage:
    """One MessagePosition (3.1.1.11) with its Message (3.1.1.12); state is the PositionState name."""
    queue_identifier: str
    lookup_identifier: int
    state: str                  # "Available" | "Locked" | "PurgePending"
    message: Message


class PackedStoredMessage(StoredMessage):
    """A StoredMessage given by its Message's compact form (shared_adm/compact.py), as a MessagePosition holds it:
    a store that keeps that form takes it as it is; ``message`` is unpacked only when asked for."""
    __slots__ = ("packed",)

    def __init__(self, queue_identifier: str, lookup_identifier: int, state: str, packed: bytes) -> None:
        if type(packed) is not bytes:
            raise TypeError(f"a compact form is bytes, not {type(packed).__qualname__}")
        self.queue_identifier = queue_identifier
        self.lookup_identifier = lookup_identifier
        self.state = state
        self.packed = packed

    @property
    def message(self) -> Message:
        return unpack(self.packed)

    def __reduce__(self):       # copies (MemoryStore keeps them) hold the compact form, not a Message
        return type(self), (self.queue_identifier, self.lookup_identifier, self.state, self.packed)


@dataclass(slots=True)
class Snapshot:
    """Everything a store holds, read once at start-up (3.1.3 Initialization). From ``load()`` ``messages`` is a
    list; from ``load_stream()`` it is a one-shot iterator (consume it once, to the end)."""
    queue_manager_identifier: str | None
    sequential_id: int
    queues: list[StoredQueue] = field(default_factory=list)
    messages: Iterable[StoredMessage] = field(default_factory=list)
    # load_packed(): (queue identifier, LookupIdentifier) of streamed rows flagged "no TTBR" whose stored form does set
    # one -- known, and filled in, once ``messages`` is exhausted (SqliteStore's parallel load check).
    expiring: list[tuple[str, int]] = field(default_factory=list)


class StoreError(RuntimeError):
    """A store that cannot be opened or read; the message names the file."""


class Store(Protocol):
    """Mutations are recorded synchronously (cheap) and made durable by group commit.

    Callers on the asyncio loop thread record changes, then ``await store.durable()`` before
    acknowledging them; one commit covers every change recorded before it (group commit).
    ``flush()`` is the blocking equivalent for scripts and tests.
    """

    def load(self) -> Snapshot: ...
    # Optional: the same as load() with messages streamed (a store of millions starts in bounded memory);
    # QueueManager.initialize uses it when a store has it.
    # def load_stream(self) -> Snapshot: ...
    # Optional, preferred by QueueManager.initialize: load_stream() with messages as lists of (queue identifier,
    # LookupIdentifier, state, compact form, TTBR set, _) tuples (SqliteStore.load_packed); an empty list says the rows
    # have ended and a last step (a parallel check) runs before the iterator does.
    # def load_packed(self) -> Snapshot: ...
    def set_queue_manager_identifier(self, identifier: str) -> None: ...
    def set_sequential_id(self, value: int) -> None: ...
    def put_queue(self, queue: StoredQueue) -> None: ...
    def delete_queue(self, identifier: str) -> None: ...
    def put_message(self, stored: StoredMessage) -> None: ...
    def set_message_state(self, queue_identifier: str, lookup_identifier: int, state: str) -> None: ...
    def delete_message(self, queue_identifier: str, lookup_identifier: int) -> None: ...
    def delete_messages(self, queue_identifier: str, lookup_identifiers: list[int]) -> None: ...
    async def durable(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class MemoryStore:
    """A volatile Store: everything is 'durable' at once. For tests and ``--data-dir :memory:``.

    Like SqliteStore it keeps copies taken when a change is recorded, so later changes the
    queue manager makes to its own objects never alter what is "stored"."""

    def __init__(self) -> None:
        self._snapshot = Snapshot(queue_manager_identifier=None, sequential_id=0)
        self._queues: dict[str, StoredQueue] = {}
        self._messages: dict[tuple[str, int], StoredMessage] = {}

    def load(self) -> Snapshot:
        return Snapshot(self._snapshot.queue_manager_identifier, self._snapshot.sequential_id,
                        copy.deepcopy(list(self._queues.values())),
                        copy.deepcopy(list(self._messages.values())))

    def set_queue_manager_identifier(self, identifier: str) -> None:
        self._snapshot.queue_manager_identifier = identifier

    def set_sequential_id(self, value: int) -> None:
        self._snapshot.sequential_id = value

    def put_queue(self, queue: StoredQueue) -> None:
        self._queues[queue.identifier] = copy.deepcopy(queue)

    def delete_queue(self, identifier: str) -> None:
        self._queues.pop(identifier, None)
        for key in [k for k in self._messages if k[0] == identifier]:
            del self._messages[key]

    def put_message(self, stored: StoredMessage) -> None:
        self._messages[(stored.queue_identifier, stored.lookup_identifier)] = copy.deepcopy(stored)

    def set_message_state(self, queue_identifier: str, lookup_identifier: int, state: str) -> None:
        stored = self._messages.get((queue_identifier, lookup_identifier))
        if stored is not None:
            stored.state = state

    def delete_message(self, queue_identifier: str, lookup_identifier: int) -> None:
        self._messages.pop((queue_identifier, lookup_identifier), None)

    def delete_messages(self, queue_identifier: str, lookup_identifiers: list[int]) -> None:
        for lookup_identifier in lookup_identifiers:
            self._messages.pop((queue_identifier, lookup_identifier), None)

    async def durable(self) -> None:
        await asyncio.sleep(0)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
