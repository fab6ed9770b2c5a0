"""Directory access events of MS-MQDMPR 3.1.7.1.18–3.1.7.1.25 over a pluggable ``DirectoryBackend``.

``Directory`` is the queue manager's side (the events, DirectoryOffline, the Directory Online Timer 3.1.2.5 and
the Send Change Notification hooks of MS-MQCN 3.3.4.1). A backend is what MS-MQDSSM would be: the embedded
``SqliteDirectory`` (table ``directory_objects`` in the store's own SQLite file), ``MemoryDirectory`` for tests,
and later an LDAP backend implementing the same four methods. Attribute names are the MS-MQDMPR ADM names
("Identifier", "Pathname", "QueueManagerQuota", ...); values are JSON-able plus ``uuid.UUID`` and ``bytes``.
"""
from __future__ import annotations

import enum
import json
import logging
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from shared_adm import status as st

log = logging.getLogger(__name__)

OBJECT_TYPES = ("Queue", "QueueManager", "Enterprise", "Site", "ConnectedNetwork", "RoutingLink", "User")
DIRECTORY_ONLINE_TIMER_MS = 60_000          # 3.1.2.5: "MUST expire in one minute"


class DirectoryOperationResult(enum.Enum):
    """DirectoryOperationResult (MS-MQDMPR 2.2 enumerations)."""
    SUCCESS = "Success"
    GENERIC_ERROR = "GenericError"
    DIRECTORY_NOT_CONNECTED = "DirectoryNotConnected"
    OBJECT_NOT_FOUND = "ObjectNotFound"
    ATTRIBUTE_NOT_FOUND = "AttributeNotFound"
    END_OF_DATA = "EndOfData"
    OBJECT_ALREADY_EXISTS = "ObjectAlreadyExists"


class FilterOperator(enum.Enum):
    """The operators of an attribute-filter expression (3.1.7.1.20)."""
    EQUALS = "EQUALS"
    NOT_EQUALS = "NOT-EQUALS"
    LESS_THAN = "LESS-THAN"
    GREATER_THAN = "GREATER-THAN"
    LESS_THAN_OR_EQUAL = "LESS-THAN-OR-EQUAL"
    GREATER_THAN_OR_EQUAL = "GREATER-THAN-OR-EQUAL"


_COMPARE: dict[FilterOperator, Callable[[Any, Any], bool]] = {
    FilterOperator.EQUALS: lambda a, b: a == b,
    FilterOperator.NOT_EQUALS: lambda a, b: a != b,
    FilterOperator.LESS_THAN: lambda a, b: a < b,
    FilterOperator.GREATER_THAN: lambda a, b: a > b,
    FilterOperator.LESS_THAN_OR_EQUAL: lambda a, b: a <= b,
    FilterOperator.GREATER_THAN_OR_EQUAL: lambda a, b: a >= b,
}


@dataclass(frozen=True)
class AttributeFilter:
    """One attribute-filter expression (3.1.7.1.20): attribute name, operator, value."""
    attribute: str
    operator: FilterOperator
    value: Any

    def matches(self, obj: "DirectoryObject") -> bool:
        """True when the object's attribute satisfies the comparison; a missing attribute or a type clash never does."""
        if self.attribute not in obj.attributes and self.attribute != "Identifier":
            return False
        try:
            return bool(_COMPARE[self.operator](obj.get(self.attribute), self.value))
        except TypeError:
            return False


def equals(attribute: str, value: Any) -> AttributeFilter:
    """Shorthand for ``attribute EQUALS value``."""
    return AttributeFilter(attribute, FilterOperator.EQUALS, value)


@dataclass
class DirectoryObject:
    """DirectoryObject (MS-MQDMPR 3.1.1.x, Directory attributes): object type, Identifier and attributes."""
    object_type: str
    identifier: uuid.UUID
    attributes: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """An attribute value; "Identifier" is the object's identifier."""
        return self.identifier if name == "Identifier" else self.attributes.get(name, default)

    def restricted(self, attribute_list: Iterable[str] | None) -> "DirectoryObject":
        """A copy holding only ``attribute_list`` (all when None), as iAttributeList asks (3.1.7.1.20)."""
        attrs = dict(self.attributes) if attribute_list is None else {
            k: self.attributes[k] for k in attribute_list if k in self.attributes}
        return DirectoryObject(self.object_type, self.identifier, attrs)


class DirectoryNotConnected(Exception):
    """Raised by a backend that cannot reach its directory (DirectoryOperationResult.DirectoryNotConnected)."""


class DirectoryBackend(Protocol):
    """The MS-MQDSSM side (3.1.6.1–3.1.6.7): embedded, in-memory, or LDAP later. May raise DirectoryNotConnected."""

    def create(self, obj: DirectoryObject) -> DirectoryOperationResult: ...
    def delete(self, object_type: str, identifier: uuid.UUID) -> DirectoryOperationResult: ...
    def objects(self, object_type: str) -> list[DirectoryObject]: ...
    def write(self, obj: DirectoryObject, attribute_list: list[str] | None) -> DirectoryOperationResult: ...
    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------- value encoding
def encode_value(value: Any) -> Any:
    """A JSON-able form of an attribute value: UUID and bytes are tagged, lists/dicts recurse."""
    if isinstance(value, uuid.UUID):
        return {"$guid": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$hex": bytes(value).hex()}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {"$map": {str(k): encode_value(v) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"directory attribute value of type {type(value).__name__} is not storable")


def decode_value(value: Any) -> Any:
    """Inverse of ``encode_value``."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$guid"}:
            return uuid.UUID(value["$guid"])
        if set(value) == {"$hex"}:
            return bytes.fromhex(value["$hex"])
        if set(value) == {"$map"}:
            return {k: decode_value(v) for k, v in value["$map"].items()}
        raise ValueError(f"unknown tagged directory value {sorted(value)}")
    return value


def _check_object(obj: DirectoryObject) -> None:
    if obj.object_type not in OBJECT_TYPES:
        raise ValueError(f"unknown directory object type {obj.object_type!r}; one of {', '.join(OBJECT_TYPES)}")
    if not isinstance(obj.identifier, uuid.UUID):
        raise ValueError(f"directory object Identifier must be a GUID, got {obj.identifier!r}")
    encode_value(obj.attributes)


# ---------------------------------------------------------------------------------------------- backends
class MemoryDirectory:
    """A volatile DirectoryBackend (tests); ``connected=False`` makes every call DirectoryNotConnected."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, uuid.UUID], dict] = {}
        self.connected = True

    def _online(self) -> None:
        if not self.connected:
            raise DirectoryNotConnected("memory directory set offline")

    def create(self, obj: DirectoryObject) -> DirectoryOperationResult:
        """Create Directory Object (MS-MQDSSM 3.1.6.1 role)."""
        self._online()
        key = (obj.object_type, obj.identifier)
        if key in self._objects:
            return DirectoryOperationResult.OBJECT_ALREADY_EXISTS
        self._objects[key] = decode_value(encode_value(obj.attributes))
        return DirectoryOperationResult.SUCCESS

    def delete(self, object_type: str, identifier: uuid.UUID) -> DirectoryOperationResult:
        """Delete Directory Object (MS-MQDSSM 3.1.6.2 role)."""
        self._online()
        if self._objects.pop((object_type, identifier), None) is None:
            return DirectoryOperationResult.OBJECT_NOT_FOUND
        return DirectoryOperationResult.SUCCESS

    def objects(self, object_type: str) -> list[DirectoryObject]:
        """Every object of a type (what Read Directory filters, MS-MQDSSM 3.1.6.3 role)."""
        self._online()
        return [DirectoryObject(t, i, decode_value(encode_value(a)))
                for (t, i), a in self._objects.items() if t == object_type]

    def write(self, obj: DirectoryObject, attribute_list: list[str] | None) -> DirectoryOperationResult:
        """Write Directory (MS-MQDSSM 3.1.6.7 role): only the listed attributes, all present or none written."""
        self._online()
        current = self._objects.get((obj.object_type, obj.identifier))
        if current is None:
            return DirectoryOperationResult.OBJECT_NOT_FOUND
        names = list(obj.attributes) if attribute_list is None else attribute_list
        for name in names:
            if name not in obj.attributes:
                return DirectoryOperationResult.ATTRIBUTE_NOT_FOUND
        for name in names:
            current[name] = decode_value(encode_value(obj.attributes[name]))
        return DirectoryOperationResult.SUCCESS

    def close(self) -> None:
        """Nothing to release."""


class DirectoryStoreError(RuntimeError):
    """The embedded directory cannot use its SQLite file; the message names the file."""


class SqliteDirectory:
    """The embedded default DirectoryBackend: table ``directory_objects`` in the store's SQLite file (WAL).

    It opens its own connection; open it after the SqliteStore has created its schema in that file."""

    _TABLE = ("CREATE TABLE IF NOT EXISTS directory_objects (object_type TEXT NOT NULL, identifier TEXT NOT NULL,"
              " attributes TEXT NOT NULL, PRIMARY KEY (object_type, identifier)) WITHOUT ROWID")

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if path.is_dir():
            path = path / "qm2qm.sqlite3"
        self.path = path
        if not path.is_file():
            raise DirectoryStoreError(f"{path}: no qm2qm store here (open the SqliteStore first)")
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "schema_version" not in tables:
                self._conn.close()
                raise DirectoryStoreError(f"{path}: not a qm2qm store (no schema_version table)")
            self._conn.execute(self._TABLE)
        except sqlite3.Error as exc:
            raise DirectoryStoreError(f"{path}: {exc}") from None

    def _run(self, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise DirectoryNotConnected(f"{self.path}: {exc}") from None

    def _load(self, object_type: str, identifier: uuid.UUID) -> dict | None:
        rows = self._run("SELECT attributes FROM directory_objects WHERE object_type=? AND identifier=?",
                         (object_type, str(identifier)))
        return self._decode(rows[0][0]) if rows else None

    def _decode(self, text: str) -> dict:
        try:
            value = decode_value(json.loads(text))
        except (ValueError, TypeError) as exc:
            raise DirectoryStoreError(f"{self.path}: corrupt directory_objects row: {exc}") from None
        if not isinstance(value, dict):
            raise DirectoryStoreError(f"{self.path}: corrupt directory_objects row: attributes are not a map")
        return value

    def create(self, obj: DirectoryObject) -> DirectoryOperationResult:
        """Create Directory Object (MS-MQDSSM 3.1.6.1 role)."""
        if self._load(obj.object_type, obj.identifier) is not None:
            return DirectoryOperationResult.OBJECT_ALREADY_EXISTS
        self._run("INSERT INTO directory_objects VALUES (?, ?, ?)",
                  (obj.object_type, str(obj.identifier), json.dumps(encode_value(obj.attributes))))
        return DirectoryOperationResult.SUCCESS

    def delete(self, object_type: str, identifier: uuid.UUID) -> DirectoryOperationResult:
        """Delete Directory Object (MS-MQDSSM 3.1.6.2 role)."""
        if self._load(object_type, identifier) is None:
            return DirectoryOperationResult.OBJECT_NOT_FOUND
        self._run("DELETE FROM directory_objects WHERE object_type=? AND identifier=?", (object_type, str(identifier)))
        return DirectoryOperationResult.SUCCESS

    def objects(self, object_type: str) -> list[DirectoryObject]:
        """Every object of a type, ordered by Identifier."""
        rows = self._run("SELECT identifier, attributes FROM directory_objects WHERE object_type=? ORDER BY identifier",
                         (object_type,))
        return [DirectoryObject(object_type, uuid.UUID(i), self._decode(a)) for i, a in rows]

    def write(self, obj: DirectoryObject, attribute_list: list[str] | None) -> DirectoryOperationResult:
        """Write Directory (MS-MQDSSM 3.1.6.7 role): only the listed attributes, all present or none written."""
        current = self._load(obj.object_type, obj.identifier)
        if current is None:
            return DirectoryOperationResult.OBJECT_NOT_FOUND
        names = list(obj.attributes) if attribute_list is None else attribute_list
        if any(name not in obj.attributes for name in names):
            return DirectoryOperationResult.ATTRIBUTE_NOT_FOUND
        current.update({name: obj.attributes[name] for name in names})
        self._run("UPDATE directory_objects SET attributes=? WHERE object_type=? AND identifier=?",
                  (json.dumps(encode_value(current)), obj.object_type, str(obj.identifier)))
        return DirectoryOperationResult.SUCCESS

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


# ---------------------------------------------------------------------------------------------- ADM mapping
# Queue (3.1.1.2) Directory attributes <-> shared_adm.queue.Queue fields. MS-MQCN 3.2.5.1 says "Journal" where
# 3.1.1.2 says "Journaling": both names are accepted on input, "Journaling" is written.
QUEUE_ATTRIBUTES = {
    "Type": "type", "Pathname": "pathname", "Label": "label", "BasePriority": "base_priority",
    "Journaling": "journaling", "Quota": "quota", "JournalQuota": "journal_quota", "CreateTime": "create_time",
    "ModifyTime": "modify_time", "Security": "security", "Authentication": "authentication",
    "PrivacyLevel": "privacy_level", "Transactional": "transactional", "MulticastAddress": "multicast_address",
    "DirectoryPath": "directory_path", "Scope": "scope", "FullPath": "full_path",
}
QUEUE_ATTRIBUTE_ALIASES = {"Journal": "Journaling", "PathName": "Pathname"}
# QueueManager (3.1.1.1) attributes MS-MQCN changes (3.1.1.2.1) <-> QueueManager instance attributes.
QUEUE_MANAGER_ATTRIBUTES = {"QueueManagerQuota": "queue_manager_quota", "JournalQuota": "journal_quota",
                            "Security": "security"}


def queue_to_directory_object(queue) -> DirectoryObject:
    """The Directory attributes of a local Queue (3.1.1.2) as a "Queue" DirectoryObject."""
    attrs = {name: getattr(queue, f) for name, f in QUEUE_ATTRIBUTES.items()}
    attrs["QueueType"] = queue.queue_type.value
    qm = queue.queue_manager
    if getattr(qm, "identifier", None) is not None:
        attrs["QueueManager"] = qm.identifier
    if getattr(qm, "computer_name", None):          # PROPID_Q_PATHNAME form: Computer "\" QueueName
        attrs["Pathname"] = f"{qm.computer_name}\\{queue.pathname}"
    return DirectoryObject("Queue", queue.identifier, attrs)


def queue_manager_to_directory_object(qm) -> DirectoryObject:
    """The LocalQueueManager (3.1.1.1) as a "QueueManager" DirectoryObject."""
    attrs = {name: getattr(qm, f) for name, f in QUEUE_MANAGER_ATTRIBUTES.items() if hasattr(qm, f)}
    attrs["ComputerName"] = qm.computer_name
    return DirectoryObject("QueueManager", qm.identifier, attrs)


def queue_fields(obj: DirectoryObject, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The Queue field values of a directory object's attributes (only ``names`` when given, only those present).

    Values are coerced to the Queue field's type; any value of the wrong type raises ValueError naming it, so a
    caller can refuse the whole object before changing anything. Pathname is never included (it keys the queue)."""
    from shared_adm.queue import Queue
    template = Queue(pathname="template")
    fields: dict[str, Any] = {}
    for raw in (obj.attributes if names is None else names):
        name = QUEUE_ATTRIBUTE_ALIASES.get(raw, raw)
        field_name = QUEUE_ATTRIBUTES.get(name)
        source = raw if raw in obj.attributes else name
        if field_name is None or source not in obj.attributes or field_name == "pathname":
            continue
        fields[field_name] = _coerce(name, obj.attributes[source], getattr(template, field_name))
    return fields


def apply_queue_attributes(queue, obj: DirectoryObject, names: Iterable[str] | None = None) -> list[str]:
    """Copy a directory object's attributes onto a Queue, all or nothing (see ``queue_fields``); returns the
    names of the fields that changed."""
    changed = []
    for field_name, value in queue_fields(obj, names).items():
        if getattr(queue, field_name) != value:
            setattr(queue, field_name, value)
            changed.append(field_name)
    return changed


def _coerce(name: str, value: Any, current: Any) -> Any:
    if isinstance(current, bool):
        if isinstance(value, bool) or value in (0, 1):
            return bool(value)
    elif isinstance(current, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(current, uuid.UUID):
        if isinstance(value, uuid.UUID):
            return value
        if isinstance(value, str):
            try:
                return uuid.UUID(value)
            except ValueError:
                pass
    elif isinstance(current, bytes):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
    elif current is None or isinstance(current, str):
        if value is None or isinstance(value, str):
            return value
    raise ValueError(f"directory attribute {name}={value!r} does not fit the ADM attribute")


def persist_queue(qm, queue) -> None:
    """Record a Queue's Persistent attributes in the QueueManager's Store after an in-place change."""
    from shared_adm.store.base import StoredQueue
    qm.store.put_queue(StoredQueue(queue.store_identifier, queue.persistent_attributes()))


def apply_queue_manager_object(qm, obj: DirectoryObject, names: Iterable[str] | None = None) -> list[str]:
    """Copy QueueManagerQuota, JournalQuota, Security (only those present) onto the QueueManager (MS-MQCN 3.1.1.2.1)."""
    values = {}
    for name in (QUEUE_MANAGER_ATTRIBUTES if names is None else names):
        field_name = QUEUE_MANAGER_ATTRIBUTES.get(name)
        if field_name is None or name not in obj.attributes:
            continue
        value = obj.attributes[name]
        ok = (isinstance(value, (bytes, bytearray)) if name == "Security"
              else isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFFFF)
        if not ok:
            raise ValueError(f"directory attribute {name}={value!r} does not fit the QueueManager")
        values[field_name] = bytes(value) if name == "Security" else value
    for field_name, value in values.items():
        setattr(qm, field_name, value)
    return [name for name, f in QUEUE_MANAGER_ATTRIBUTES.items() if f in values]


def refresh_public_queues(qm, directory: "Directory") -> int:
    """Update every local PublicQueue from its directory object (3.1.7.1.25); returns how many were read."""
    count = 0
    for queue in [q for q in qm.queue_collection.values() if q.queue_type.value == "Public"]:
        result, obj = directory.read_directory("Queue", [equals("Identifier", queue.identifier)])
        if result is DirectoryOperationResult.SUCCESS:
            try:
                if apply_queue_attributes(queue, obj):
                    persist_queue(qm, queue)
                count += 1
            except ValueError as exc:
                log.warning("public queue %r not refreshed: %s", queue.pathname, exc)   # %r: a name from the directory
    return count


# ---------------------------------------------------------------------------------------------- the events
class ChangeOperation(enum.Enum):
    """iOperation of Send Change Notification (MS-MQCN 3.3.4.1)."""
    QUEUE_CREATION = "QueueCreation"
    QUEUE_UPDATE = "QueueUpdate"
    QUEUE_DELETION = "QueueDeletion"
    QUEUE_MANAGER_UPDATE = "QueueManagerUpdate"


ChangeNotifier = Callable[[ChangeOperation, DirectoryObject], None]


def _is_public_queue(obj: DirectoryObject) -> bool:
    return obj.object_type == "Queue" and obj.attributes.get("QueueType", "Public") == "Public"


class Directory:
    """The queue manager's directory events (MS-MQDMPR 3.1.7.1.18–25) with DirectoryOffline and its timer."""

    def __init__(self, backend: DirectoryBackend, *, send_change_notification: ChangeNotifier | None = None,
                 scheduler=None, online_timer_ms: int = DIRECTORY_ONLINE_TIMER_MS, local_queue_manager=None) -> None:
        self.backend = backend
        self.send_change_notification = send_change_notification
        self.scheduler = scheduler
        self.online_timer_ms = online_timer_ms
        self.local_queue_manager = local_queue_manager
        self.directory_offline = False
        self._online_timer = None
        self._queries: dict[int, list[DirectoryObject]] = {}
        self._next_query = 1

    # -------------------------------------------------------------- helpers
    def _not_connected(self, exc: Exception) -> DirectoryOperationResult:
        log.warning("directory not connected: %s", exc)
        self.directory_offline = True
        if self.scheduler is not None and self._online_timer is None:
            self._online_timer = self.scheduler.call_later(self.online_timer_ms, self._online_timer_expired)
        return DirectoryOperationResult.DIRECTORY_NOT_CONNECTED

    def _online_timer_expired(self) -> None:
        """Directory Online Timer (3.1.2.5) expiry: raise Check Directory Online."""
        self._online_timer = None
        self.check_directory_online()

    def _notify(self, operation: ChangeOperation, obj: DirectoryObject) -> None:
        if self.send_change_notification is None:
            return
        try:
            self.send_change_notification(operation, obj)
        except Exception:                 # a notification must never undo the directory operation
            log.exception("Send Change Notification %s for %s failed", operation.value, obj.identifier)

    # -------------------------------------------------------------- 3.1.7.1.18
    def create_directory_object(self, directory_object: DirectoryObject, attribute_list: list[str] | None = None
                                ) -> tuple[DirectoryOperationResult, uuid.UUID | None]:
        """Create Directory Object (3.1.7.1.18): QueueCreation notification for a public Queue, then create."""
        _check_object(directory_object)
        if _is_public_queue(directory_object):
            self._notify(ChangeOperation.QUEUE_CREATION, directory_object)
        try:
            result = self.backend.create(directory_object.restricted(attribute_list))
        except DirectoryNotConnected as exc:
            return self._not_connected(exc), None
        return result, directory_object.identifier if result is DirectoryOperationResult.SUCCESS else None

    # -------------------------------------------------------------- 3.1.7.1.19
    def delete_directory_object(self, directory_object: DirectoryObject) -> DirectoryOperationResult:
        """Delete Directory Object (3.1.7.1.19): QueueDeletion notification for a public Queue, then delete."""
        if _is_public_queue(directory_object):
            self._notify(ChangeOperation.QUEUE_DELETION, directory_object)
        try:
            return self.backend.delete(directory_object.object_type, directory_object.identifier)
        except DirectoryNotConnected as exc:
            return self._not_connected(exc)

    # -------------------------------------------------------------- 3.1.7.1.20
    def read_directory(self, directory_object_type: str, filter: Iterable[AttributeFilter] | None = None,
                       attribute_list: Iterable[str] | None = None, force_directory_read: bool = False
                       ) -> tuple[DirectoryOperationResult, DirectoryObject | None]:
        """Read Directory (3.1.7.1.20): the first object of the type matching every filter expression."""
        filters = list(filter or ())
        attrs = None if attribute_list is None else list(attribute_list)
        if self.directory_offline and not force_directory_read:
            return self._read_offline(directory_object_type, filters, attrs)
        try:
            candidates = self.backend.objects(directory_object_type)
        except DirectoryNotConnected as exc:
            if force_directory_read:
                return DirectoryOperationResult.DIRECTORY_NOT_CONNECTED, None
            return self._not_connected(exc), None
        for obj in candidates:
            if all(f.matches(obj) for f in filters):
                if attrs is not None and any(a not in obj.attributes and a != "Identifier" for a in attrs):
                    return DirectoryOperationResult.ATTRIBUTE_NOT_FOUND, None
                return DirectoryOperationResult.SUCCESS, obj.restricted(attrs)
        return DirectoryOperationResult.OBJECT_NOT_FOUND, None

    def _read_offline(self, object_type, filters, attrs):
        """The DirectoryOffline branch of 3.1.7.1.20: answer from the local QueueCollection / LocalQueueManager."""
        qm = self.local_queue_manager
        if qm is not None and object_type == "Queue":
            for queue in qm.queue_collection.values():
                obj = queue_to_directory_object(queue)
                if all(f.matches(obj) for f in filters):
                    return DirectoryOperationResult.SUCCESS, obj.restricted(attrs)
            return DirectoryOperationResult.OBJECT_NOT_FOUND, None
        if qm is not None and object_type == "QueueManager":
            obj = queue_manager_to_directory_object(qm)
            if all(f.matches(obj) for f in filters):
                return DirectoryOperationResult.SUCCESS, obj.restricted(attrs)
        return DirectoryOperationResult.DIRECTORY_NOT_CONNECTED, None

    # -------------------------------------------------------------- 3.1.7.1.21–23
    def read_directory_begin(self, directory_object_type: str, filter: Iterable[AttributeFilter] | None = None,
                             attribute_list: Iterable[str] | None = None,
                             attribute_sort_order: Iterable[tuple[int, bool]] | None = None
                             ) -> tuple[DirectoryOperationResult, int | None]:
        """Read Directory Begin (3.1.7.1.21): a query handle over every matching object, sorted as asked."""
        filters = list(filter or ())
        attrs = None if attribute_list is None else list(attribute_list)
        try:
            found = [o for o in self.backend.objects(directory_object_type) if all(f.matches(o) for f in filters)]
        except DirectoryNotConnected as exc:
            return self._not_connected(exc), None
        if attrs and attribute_sort_order:
            keyed = sorted(zip(attrs, attribute_sort_order), key=lambda p: -p[1][0])
            for name, (priority, ascending) in reversed(keyed):
                if priority:
                    found.sort(key=lambda o, n=name: (o.get(n) is None, o.get(n)), reverse=not ascending)
        handle = self._next_query
        self._next_query += 1
        self._queries[handle] = [o.restricted(attrs) for o in found]
        return DirectoryOperationResult.SUCCESS, handle

    def read_directory_next(self, query_handle: int) -> tuple[DirectoryOperationResult, DirectoryObject | None]:
        """Read Directory Next (3.1.7.1.22): the next object, or EndOfData."""
        pending = self._queries.get(query_handle)
        if pending is None:
            return DirectoryOperationResult.GENERIC_ERROR, None
        if not pending:
            return DirectoryOperationResult.END_OF_DATA, None
        return DirectoryOperationResult.SUCCESS, pending.pop(0)

    def read_directory_end(self, query_handle: int) -> DirectoryOperationResult:
        """Read Directory End (3.1.7.1.23): forget the query handle."""
        if self._queries.pop(query_handle, None) is None:
            return DirectoryOperationResult.GENERIC_ERROR
        return DirectoryOperationResult.SUCCESS

    # -------------------------------------------------------------- 3.1.7.1.24
    def write_directory(self, directory_object: DirectoryObject, attribute_list: list[str] | None = None
                        ) -> DirectoryOperationResult:
        """Write Directory (3.1.7.1.24): on Success, QueueUpdate (public Queue) or QueueManagerUpdate notification."""
        _check_object(directory_object)
        try:
            result = self.backend.write(directory_object, attribute_list)
        except DirectoryNotConnected as exc:
            return self._not_connected(exc)
        if result is DirectoryOperationResult.SUCCESS:
            if _is_public_queue(directory_object):
                self._notify(ChangeOperation.QUEUE_UPDATE, directory_object)
            elif directory_object.object_type == "QueueManager":
                self._notify(ChangeOperation.QUEUE_MANAGER_UPDATE, directory_object)
        return result

    # -------------------------------------------------------------- 3.1.7.1.25
    def check_directory_online(self) -> None:
        """Check Directory Online (3.1.7.1.25): a forced read of the LocalQueueManager clears DirectoryOffline."""
        qm = self.local_queue_manager
        filters = [equals("Identifier", qm.identifier)] if qm is not None else None
        result, obj = self.read_directory("QueueManager", filters, None, force_directory_read=True)
        if result is DirectoryOperationResult.SUCCESS:
            self.directory_offline = False
            if qm is not None:
                apply_queue_manager_object(qm, obj)
                refresh_public_queues(qm, self)
        elif self.scheduler is not None and self._online_timer is None:
            self._online_timer = self.scheduler.call_later(self.online_timer_ms, self._online_timer_expired)

    def close(self) -> None:
        """Cancel the Directory Online Timer and close the backend."""
        if self._online_timer is not None:
            self._online_timer.cancel()
            self._online_timer = None
        self.backend.close()


# ---------------------------------------------------------------------------------------------- QM -> directory
_RESULT_STATUS = {DirectoryOperationResult.DIRECTORY_NOT_CONNECTED: st.MQ_ERROR_NO_DS,
                  DirectoryOperationResult.OBJECT_ALREADY_EXISTS: st.MQ_ERROR_QUEUE_EXISTS,
                  DirectoryOperationResult.OBJECT_NOT_FOUND: st.MQ_ERROR_QUEUE_NOT_FOUND}


def status_of(result: DirectoryOperationResult) -> int:
    """The MQ status (MS-MQMQ 2.4) a queue operation answers for a failed directory operation."""
    return 0 if result is DirectoryOperationResult.SUCCESS else _RESULT_STATUS.get(result, st.MQ_ERROR_DS_ERROR)


def create_public_queue(qm, directory: Directory, pathname: str, **attributes) -> tuple[int, Any]:
    """Create Queue (MS-MQDMPR 3.1.7.1.3) of a public queue with iSkipDirectory False: Create Directory Object
    (which sends the QueueCreation notification), then FullPath/DirectoryPath read back. If the directory
    refuses, the queue is not kept and the mapped status is returned."""
    status, queue = qm.create_queue(pathname, **attributes)
    if status != 0:
        return status, None
    if queue.queue_type.value != "Public":
        qm.delete_queue(queue)
        return st.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, None
    result, _ = directory.create_directory_object(queue_to_directory_object(queue))
    if result is not DirectoryOperationResult.SUCCESS:
        qm.delete_queue(queue)
        return status_of(result), None
    result, obj = directory.read_directory("Queue", [equals("Identifier", queue.identifier)],
                                           ["FullPath", "DirectoryPath"])
    if result is DirectoryOperationResult.SUCCESS:
        apply_queue_attributes(queue, obj)
        persist_queue(qm, queue)
    return 0, queue


def delete_public_queue(qm, directory: Directory, queue) -> int:
    """Delete Queue (MS-MQDMPR 3.1.7.1.4) with iSkipDirectory False: then Delete Directory Object (QueueDeletion)."""
    obj = queue_to_directory_object(queue)
    status = qm.delete_queue(queue)
    if status != 0 or queue.queue_type.value != "Public":
        return status
    return status_of(directory.delete_directory_object(obj))


def publish_queue(directory: Directory, queue, attribute_list: list[str] | None = None) -> int:
    """Write Directory (3.1.7.1.24) of a local queue's attributes (QueueUpdate notification for a public one)."""
    return status_of(directory.write_directory(queue_to_directory_object(queue), attribute_list))


def publish_queue_manager(directory: Directory, qm, attribute_list: list[str] | None = None) -> int:
    """Write Directory (3.1.7.1.24) of the LocalQueueManager (QueueManagerUpdate notification)."""
    return status_of(directory.write_directory(queue_manager_to_directory_object(qm), attribute_list))
