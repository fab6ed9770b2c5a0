"""Queue (MS-MQDMPR 3.1.1.2), MessagePosition (3.1.1.11) and the ordered MessagePositionList.

The list is keyed by Message.LookupIdentifier: its high byte is 7 - Priority and its low 7 bytes the
queue manager's SequentialID at enqueue (DEFECTS.md #12), so ascending LookupIdentifier is exactly the
list order "ascending arrival time within priority" (3.1.1.2). A SortedDict gives O(1) Head/Tail, O(log n)
insert, lookup and Next/Previous by id; a second SortedList holds only Available ids so that Seek
Available Message Position (3.1.7.3.2) skips Locked/PurgePending positions in O(log n).
A removed (Deleted) position keeps its LookupIdentifier, so Next/Previous stay defined for a cursor that
still references it (DEFECTS.md #20).
"""
from __future__ import annotations

import uuid
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from sortedcontainers import SortedDict, SortedList

from shared_adm.compact import allow_peek_when_locked, body_size, pack, unpack
from shared_adm.enums import PositionState, QueueType
from shared_adm.message import Message

START_KEY = -1
END_KEY = 1 << 64


# Neighbour search on a SortedList by value, O(log n), through its sublists (``_maxes``/``_lists``):
# positional indexing (``sl[i]``) would rebuild SortedList's index after every insert/remove.
def _next_after(sorted_list: SortedList, key: int):
    maxes = sorted_list._maxes
    pos = bisect_right(maxes, key)
    if pos == len(maxes):
        return None
    sub = sorted_list._lists[pos]
    return sub[bisect_right(sub, key)]


def _prev_before(sorted_list: SortedList, key: int):
    maxes = sorted_list._maxes
    if not maxes:
        return None
    pos = bisect_left(maxes, key)
    if pos == len(maxes):
        return sorted_list._lists[-1][-1]
    sub = sorted_list._lists[pos]
    idx = bisect_left(sub, key)
    if idx:
        return sub[idx - 1]
    return sorted_list._lists[pos - 1][-1] if pos else None


class MessagePosition:
    """MessagePosition (3.1.1.11): State, MessageReference (held packed, see compact.py), QueueReference."""
    __slots__ = ("queue", "lookup_identifier", "state", "packed")

    def __init__(self, queue: "Queue | None", lookup_identifier: int, state: PositionState, packed: bytes) -> None:
        self.queue = queue
        self.lookup_identifier = lookup_identifier
        self.state = state
        self.packed = packed

    @property
    def message(self) -> Message:
        """MessageReference: a Message rebuilt from the compact form (a fresh object per call)."""
        return unpack(self.packed)

    @property
    def is_sentinel(self) -> bool:
        """True for the reserved Start and End entries."""
        return self.lookup_identifier in (START_KEY, END_KEY)

    @property
    def next(self) -> "MessagePosition":
        """Next (3.1.1.11): the following position, or the queue's End."""
        return self.queue.positions.after(self.lookup_identifier)

    @property
    def previous(self) -> "MessagePosition":
        """Previous (3.1.1.11): the preceding position, or the queue's Start (DEFECTS.md #17)."""
        return self.queue.positions.before(self.lookup_identifier)

    def __repr__(self) -> str:
        if self.lookup_identifier == START_KEY:
            return "<MessagePosition Start>"
        if self.lookup_identifier == END_KEY:
            return "<MessagePosition End>"
        return f"<MessagePosition {self.lookup_identifier:#018x} {self.state.value}>"


class MessagePositionList:
    """Queue.MessagePositionList (3.1.1.2) with its reserved Start and End entries."""
    __slots__ = ("start", "end", "_by_id", "_available", "peek_locked")

    def __init__(self, queue: "Queue") -> None:
        self.start = MessagePosition(queue, START_KEY, PositionState.AVAILABLE, b"")
        self.end = MessagePosition(queue, END_KEY, PositionState.AVAILABLE, b"")
        self._by_id: SortedDict = SortedDict()
        self._available: SortedList = SortedList()
        # Locked positions whose Message.AllowPeekWhenLocked is True (visible to peeks, 3.1.7.3.2)
        self.peek_locked = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self):
        return iter(self._by_id.values())

    def __contains__(self, position: MessagePosition) -> bool:
        return self._by_id.get(position.lookup_identifier) is position

    @property
    def head(self) -> MessagePosition:
        """Head: the first entry, or End when the list is empty (3.1.1.2)."""
        return self._by_id.peekitem(0)[1] if self._by_id else self.end

    @property
    def tail(self) -> MessagePosition:
        """Tail: the last entry, or Start when the list is empty."""
        return self._by_id.peekitem(-1)[1] if self._by_id else self.start

    @property
    def available_count(self) -> int:
        """Number of positions whose State is Available."""
        return len(self._available)

    def get(self, lookup_identifier: int) -> MessagePosition | None:
        """The linked position with this LookupIdentifier, or None."""
        return self._by_id.get(lookup_identifier)

    def insert(self, position: MessagePosition) -> None:
        """Insert in list order (ascending LookupIdentifier == priority, then arrival)."""
        key = position.lookup_identifier
        if key in self._by_id:
            raise ValueError(f"LookupIdentifier {key:#x} already in the list")
        self._by_id[key] = position
        if position.state is PositionState.AVAILABLE:
            self._available.add(key)
        elif position.state is PositionState.LOCKED and allow_peek_when_locked(position.packed):
            self.peek_locked += 1

    def insert_many(self, positions: list[MessagePosition]) -> None:
        """insert() of each, in one bulk update of the sorted indexes (start-up loads millions)."""
        by_id = self._by_id
        if len(positions) < 64:
            for position in positions:
                self.insert(position)
            return
        keys = {position.lookup_identifier for position in positions}
        if len(keys) != len(positions) or not keys.isdisjoint(by_id):
            raise ValueError("a LookupIdentifier is given twice or already in the list")
        by_id.update((position.lookup_identifier, position) for position in positions)
        available = PositionState.AVAILABLE
        self._available.update(p.lookup_identifier for p in positions if p.state is available)
        locked = PositionState.LOCKED
        self.peek_locked += sum(1 for p in positions if p.state is locked and allow_peek_when_locked(p.packed))

    def remove(self, position: MessagePosition) -> None:
        """Unlink a position (Message Position Deleted, 3.1.7.2.1); its id keeps Next/Previous defined."""
        key = position.lookup_identifier
        if self._by_id.get(key) is not position:
            return
        del self._by_id[key]
        if position.state is PositionState.AVAILABLE:
            self._available.discard(key)
        elif position.state is PositionState.LOCKED and allow_peek_when_locked(position.packed):
            self.peek_locked -= 1

    def unlink_available(self) -> list[MessagePosition]:
        """remove() of every Available position at once, in list order (Purge Queue, 3.1.7.1.7); their State is kept."""
        available = self._available
        if not available:
            return []
        by_id = self._by_id
        if len(available) == len(by_id):
            removed = list(by_id.values())
            by_id.clear()
        else:
            removed = [by_id[key] for key in available]
            if len(removed) * 8 < len(by_id):
                for key in available:
                    del by_id[key]
            else:       # rebuilding what is left is cheaper than a sorted deletion each
                kept = [(key, position) for key, position in by_id.items()
                        if position.state is not PositionState.AVAILABLE]
                by_id.clear()
                by_id.update(kept)
        available.clear()
        return removed

    def set_state(self, position: MessagePosition, state: PositionState) -> None:
        """Change a position's State, keeping the Available index and the peek-locked count right."""
        old = position.state
        peekable = allow_peek_when_locked(position.packed)
        if old is state:
            return
        key = position.lookup_identifier
        linked = self._by_id.get(key) is position
        if linked and old is PositionState.AVAILABLE:
            self._available.discard(key)
        if linked and old is PositionState.LOCKED and peekable:
            self.peek_locked -= 1
        position.state = state
        if linked and state is PositionState.AVAILABLE:
            self._available.add(key)
        if linked and state is PositionState.LOCKED and peekable:
            self.peek_locked += 1

    def after(self, key: int) -> MessagePosition:
        """The entry following id ``key`` (linked or not), or End."""
        found = _next_after(self._by_id._list, key)
        return self.end if found is None else self._by_id[found]

    def before(self, key: int) -> MessagePosition:
        """The entry preceding id ``key`` (linked or not), or Start."""
        found = _prev_before(self._by_id._list, key)
        return self.start if found is None else self._by_id[found]

    def first_available_after(self, key: int) -> MessagePosition:
        """The first Available position with id > key, or End."""
        found = _next_after(self._available, key)
        return self.end if found is None else self._by_id[found]

    def last_available_before(self, key: int) -> MessagePosition:
        """The last Available position with id < key, or Start."""
        found = _prev_before(self._available, key)
        return self.start if found is None else self._by_id[found]

    def irange_after_values(self, key: int):
        """Linked positions with id > key, in list order."""
        by_id = self._by_id
        for k in by_id.irange(minimum=key, inclusive=(False, False)):
            yield by_id[k]

    def irange_before_values(self, key: int):
        """Linked positions with id < key, in reverse list order."""
        by_id = self._by_id
        for k in by_id.irange(maximum=key, inclusive=(False, False), reverse=True):
            yield by_id[k]


@dataclass(eq=False)
class Queue:
    """Queue (3.1.1.2): the attributes of 3.1.1.2 with the Set Queue Defaults values (3.1.7.1.33)."""
    pathname: str
    identifier: uuid.UUID = field(default_factory=uuid.uuid4)
    queue_type: QueueType = QueueType.PRIVATE
    label: str = ""
    type: uuid.UUID = uuid.UUID(int=0)
    create_time: int = 0
    modify_time: int = 0
    qualified_pathname: str = ""
    private_queue_number: int = 0
    journaling: bool = False
    quota: int = 0xFFFFFFFF
    journal_quota: int = 0xFFFFFFFF
    authentication: bool = False
    privacy_level: str = "Optional"
    transactional: bool = False
    multicast_address: str | None = None
    security: bytes = b""
    base_priority: int = 0
    full_path: str = ""
    directory_path: str = ""
    scope: str = "Enterprise"
    total_bytes: int = 0
    journal_queue_reference: "Queue | None" = None
    queue_manager: object = None
    # OpenQueueDescriptorCollection: a dict used as an insertion-ordered set (a close removes in one step)
    open_queue_descriptor_collection: dict = field(default_factory=dict)
    # SubqueueCollection: a dict used as an insertion-ordered set (a subqueue leaves in one step)
    subqueue_collection: dict = field(default_factory=dict)
    # The inverse of SubqueueCollection: the queue a subqueue belongs to (None for a queue)
    parent_queue: "Queue | None" = None

    def __post_init__(self) -> None:
        self.message_position_list = MessagePositionList(self)
        self.store_identifier = str(self.identifier)       # the Store's queue key (StoredQueue.identifier)
        # The accept_key of every WaitingMessageReadOperation of its descriptors: a position made available can
        # satisfy a reader only if its LookupIdentifier is above the reader's key (START_KEY: any position).
        self.waiting_read_keys = SortedList()
        # Its descriptors that have waiting reads, in OpenQueueDescriptorCollection order (by open_order): the reader
        # loop of Message Position Available visits these, not every open descriptor.
        self.waiting_descriptors = SortedDict()
        # How many of its descriptors each of Open Queue's share-mode branches looks for (3.1.7.1.5), by
        # queue_manager.share_kind: DenyReceive + receive, DenyReceive + peek, DenyNone + receive.
        self.share_counts = [0, 0, 0]
        # The TotalBytes of its subqueues together: Enqueue Message's quota counts them (3.1.7.1.9, our moves rule)
        self.subqueue_bytes = 0

    @property
    def positions(self) -> MessagePositionList:
        """Short alias of MessagePositionList."""
        return self.message_position_list

    @property
    def subqueue_name(self) -> str:
        """The Subqueue part of a subqueue's pathname (MS-MQMQ 2.1.1), or "" for a queue."""
        return self.pathname.partition(";")[2] if self.parent_queue is not None else ""

    @property
    def active(self) -> bool:
        """Active (3.1.1.2): True iff some OpenQueueDescriptor references the queue."""
        return bool(self.open_queue_descriptor_collection)

    @property
    def start(self) -> MessagePosition:
        """The list's reserved Start entry."""
        return self.message_position_list.start

    @property
    def end(self) -> MessagePosition:
        """The list's reserved End entry."""
        return self.message_position_list.end

    def persistent_attributes(self) -> dict:
        """The Persistent attributes as a JSON-able dict (the Store's StoredQueue.attributes)."""
        return {
            "pathname": self.pathname, "queue_type": self.queue_type.value, "label": self.label,
            "type": str(self.type), "create_time": self.create_time, "modify_time": self.modify_time,
            "qualified_pathname": self.qualified_pathname, "private_queue_number": self.private_queue_number,
            "journaling": self.journaling, "quota": self.quota, "journal_quota": self.journal_quota,
            "authentication": self.authentication, "privacy_level": self.privacy_level,
            "transactional": self.transactional, "multicast_address": self.multicast_address,
            "security": self.security.hex(), "base_priority": self.base_priority,
        }

    @classmethod
    def from_attributes(cls, identifier: str, attributes: dict) -> "Queue":
        """Rebuild a Queue from StoredQueue attributes (3.1.3); unknown keys are ignored. ValueError names the first
        attribute that is missing or not of its kind (a hand-edited or damaged store): none reaches the model."""
        if not _is_guid(identifier):
            raise ValueError(f"the queue identifier {identifier!r:.60} is not a GUID")
        a = dict(attributes)
        if "pathname" not in a:
            raise ValueError("no pathname")
        for name, value in a.items():
            check = _STORED_ATTRIBUTES.get(name)
            if check is not None and not check[0](value):
                raise ValueError(f"{name} {value!r:.60} is not {check[1]}")
        return cls(
            pathname=a["pathname"], identifier=uuid.UUID(identifier),
            queue_type=QueueType(a.get("queue_type", "Private")), label=a.get("label", ""),
            type=uuid.UUID(a.get("type", str(uuid.UUID(int=0)))), create_time=a.get("create_time", 0),
            modify_time=a.get("modify_time", 0), qualified_pathname=a.get("qualified_pathname", ""),
            private_queue_number=a.get("private_queue_number", 0), journaling=a.get("journaling", False),
            quota=a.get("quota", 0xFFFFFFFF), journal_quota=a.get("journal_quota", 0xFFFFFFFF),
            authentication=a.get("authentication", False), privacy_level=a.get("privacy_level", "Optional"),
            transactional=a.get("transactional", False), multicast_address=a.get("multicast_address"),
            security=bytes.fromhex(a.get("security", "")), base_priority=a.get("base_priority", 0),
        )


def _is_guid(value: object) -> bool:
    try:
        uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def _is_hex(value: object) -> bool:
    try:
        bytes.fromhex(value)
    except (TypeError, ValueError):
        return False
    return True


def _exactly(kind: type):
    """A predicate: the value is of ``kind`` itself (True is no int here, as JSON tells them apart)."""
    return lambda value: type(value) is kind


_is_int, _is_str, _is_bool = _exactly(int), _exactly(str), _exactly(bool)


# What persistent_attributes() writes, attribute by attribute (3.1.1.2): a predicate and what it wants. Kinds only,
# not ranges: a store holds what the running queue manager accepted (MS-MQCN changes are checked for kind only,
# directory.queue_fields), and a restart must not refuse it.
_STORED_ATTRIBUTES = {
    "pathname": (lambda v: _is_str(v) and v != "", "a non-empty string"),
    "queue_type": (lambda v: v in {t.value for t in QueueType}, "one of " + ", ".join(t.value for t in QueueType)),
    "label": (_is_str, "a string"),
    "type": (_is_guid, "a GUID string"),
    "create_time": (_is_int, "an integer"),
    "modify_time": (_is_int, "an integer"),
    "qualified_pathname": (_is_str, "a string"),
    "private_queue_number": (_is_int, "an integer"),
    "journaling": (_is_bool, "true or false"),
    "quota": (_is_int, "an integer"),
    "journal_quota": (_is_int, "an integer"),
    "authentication": (_is_bool, "true or false"),
    "privacy_level": (_is_str, "a string"),
    "transactional": (_is_bool, "true or false"),
    "multicast_address": (lambda v: v is None or _is_str(v), "a string or null"),
    "security": (_is_hex, "a hexadecimal string"),
    "base_priority": (_is_int, "an integer"),
}


def new_position(queue: Queue, message: Message, state: PositionState) -> MessagePosition:
    """A MessagePosition for ``message`` (its LookupIdentifier already set), not yet linked."""
    return MessagePosition(queue, message.lookup_identifier, state, pack(message))


__all__ = ["Queue", "MessagePosition", "MessagePositionList", "new_position", "body_size", "START_KEY", "END_KEY"]
