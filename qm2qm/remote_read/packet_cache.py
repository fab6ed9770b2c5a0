"""A small memo of serialized UserMessage packets (MS-MQDMPR 3.1.7.1.32) for messages remote-peeked again and again.

Serialize Message to Buffer is a pure function of the Message, and a queued Message is held as its compact form
(shared_adm/compact.py), so the packet can be looked up by that form: the same bytes give the same packet. Only
small packets are kept, and only a bounded number of bytes in all (least recently used out first): the memo is
not a copy of the queue — a message that is only ever received once is never stored, and one peeked once is
only remembered as seen (its hash): its packet is kept from its second peek on (a cursor walking distinct messages
no longer pushes every packet through the memo).
"""
from __future__ import annotations

from collections import OrderedDict

MAX_CACHED_COMPACT_FORM = 16 * 1024      # larger messages are serialized every time (hashing them costs too)
MAX_CACHED_BYTES = 1024 * 1024           # compact forms + packets held at once
MAX_CACHED_ENTRIES = 256
MAX_SEEN = 4 * MAX_CACHED_ENTRIES        # hashes of compact forms offered once (then forgotten all at once)


class PacketCache:
    """compact form → (UserMessage packet bytes, PacketSize, ArrivalTime, LookupIdentifier), bounded by entries
    and bytes (LRU)."""
    __slots__ = ("_entries", "_bytes", "max_bytes", "max_entries", "_seen", "second_sight")

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES, max_entries: int = MAX_CACHED_ENTRIES,
                 second_sight: bool = True) -> None:
        self._entries: OrderedDict[bytes, tuple[bytes, int, int, int]] = OrderedDict()
        self._bytes = 0
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._seen: set[int] = set()
        self.second_sight = second_sight        # False: keep a packet from its first put

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_in_bytes(self) -> int:
        """Bytes of compact forms and packets held."""
        return self._bytes

    def get(self, packed: bytes | None) -> tuple[bytes, int, int, int] | None:
        """(packet, PacketSize, Message.ArrivalTime, Message.LookupIdentifier) stored for this compact form,
        or None."""
        if packed is None or len(packed) > MAX_CACHED_COMPACT_FORM:
            return None
        found = self._entries.get(packed)
        if found is not None:
            self._entries.move_to_end(packed)
        return found

    def put(self, packed: bytes | None, buffer: bytes, size: int, arrival_time: int = 0,
            lookup_identifier: int = 0) -> None:
        """Remember the packet of this compact form (small ones only, from the second time it is offered),
        dropping the least recently used. A hash collision in the seen set only admits a packet early."""
        if packed is None or len(packed) > MAX_CACHED_COMPACT_FORM or packed in self._entries:
            return
        if self.second_sight:
            seen = self._seen
            key = hash(packed)
            if key not in seen:
                if len(seen) >= MAX_SEEN:
                    seen.clear()
                seen.add(key)
                return
            seen.discard(key)
        cost = len(packed) + len(buffer)
        if cost > self.max_bytes:
            return
        entries = self._entries
        while entries and (self._bytes + cost > self.max_bytes or len(entries) >= self.max_entries):
            old_packed, (old_buffer, *_) = entries.popitem(last=False)
            self._bytes -= len(old_packed) + len(old_buffer)
        entries[packed] = (buffer, size, arrival_time, lookup_identifier)
        self._bytes += cost

    def clear(self) -> None:
        """Forget every packet (and every compact form seen once)."""
        self._entries.clear()
        self._seen.clear()
        self._bytes = 0
