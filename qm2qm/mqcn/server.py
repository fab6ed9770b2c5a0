"""MS-MQCN server role (3.2): consume the notification queue ``private$\\notify_queue$`` and apply each Change
Notification Message to the QueueCollection and LocalQueueManager through shared_adm events (3.2.5.1, 3.2.5.2).

Usage on the server's loop::

    server = ChangeNotificationServer(qm, directory)       # directory: shared_adm.directory.Directory
    await server.start()                                   # Open Queue (3.2.3), then the Dequeue loop as a task
    ...
    await server.stop()

``process(message)`` is the whole of 3.2.5 for one dequeued Message and returns a ``ProcessResult``; nothing
is applied from a message that is dropped (every "disregard the Change Notification Message" rule is checked
before the first update is applied, DECISIONS.md D3). Every drop or skip is logged with its reason.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from qm2qm.logfmt import printable
from qm2qm.mqcn import codec as c
from qm2qm.mqcn.signature import SENDER_ID_QUEUE_MANAGER, SignatureVerifier
from shared_adm import status as st
from shared_adm.clock import INFINITE
from shared_adm.descriptor import PendingRead
from shared_adm.directory import (Directory, DirectoryObject, DirectoryOperationResult, apply_queue_manager_object,
                                  equals, persist_queue, queue_fields, refresh_public_queues)
from shared_adm.enums import QueueAccessType, QueueShareMode, QueueType
from shared_adm.format_name import pathname_key
from shared_adm.message import Message

log = logging.getLogger(__name__)

NOTIFY_QUEUE_NUMBER = 3
AUTHENTICATION_NONE = 0
# 3.2.5.2: the iAttributeList of the Directory Read for Events 1 and 2, and for Event 4.
QUEUE_READ_ATTRIBUTES = ("Type", "Identifier", "BasePriority", "Journal", "Quota", "JournalQuota", "CreateTime",
                         "ModifyTime", "Security", "Pathname", "Label", "Authentication", "PrivacyLevel",
                         "Transactional", "MulticastAddress", "DirectoryPath")
QUEUE_MANAGER_READ_ATTRIBUTES = ("QueueManagerQuota", "JournalQuota", "Security")
_PRIVACY = {0: "None", 1: "Optional", 2: "Body"}                  # PROPID_Q_PRIV_LEVEL (MS-MQMQ 2.3.1.12)
_SCOPE = {0: "Site", 1: "Enterprise"}                             # PROPID_Q_SCOPE (MS-MQMQ 2.3.1.14)


def notify_queue_format_name(identifier: uuid.UUID) -> str:
    """NOTIFY_QUEUE_PRIVATE (1.9): ``PRIVATE=<Queue Manager GUID>\\3``."""
    return f"PRIVATE={identifier}\\{NOTIFY_QUEUE_NUMBER}"


class Drop(Exception):
    """Disregard the whole Change Notification Message (3.2.5.1 / 3.2.5.2); the text is the reason."""


@dataclass
class ProcessResult:
    """What process() did with one message: applied actions, skipped updates, or the reason it was dropped."""
    dropped: str | None = None
    actions: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """True when the message was not disregarded as a whole."""
        return self.dropped is None


# ---------------------------------------------------------------------------------------------- v1 values
def _flag(propid: int, value) -> bool:
    if value not in (0, 1) or isinstance(value, bool):
        raise Drop(f"PROPID {propid} value {value!r} must be 0 or 1 (MS-MQMQ 2.3.1)")
    return bool(value)


def _queue_value(propid: int, value):
    """(Queue field, value) for a v1 queue PROPID (MS-MQCN 3.1.1.3 mapping), validated per MS-MQMQ 2.3.1."""
    if propid == c.PROPID_Q_TYPE:
        return "type", value
    if propid == c.PROPID_Q_BASEPRIORITY:
        return "base_priority", value
    if propid == c.PROPID_Q_JOURNAL:
        return "journaling", _flag(propid, value)
    if propid == c.PROPID_Q_QUOTA:
        return "quota", value
    if propid == c.PROPID_Q_JOURNAL_QUOTA:
        return "journal_quota", value
    if propid == c.PROPID_Q_CREATE_TIME:
        return "create_time", value
    if propid == c.PROPID_Q_MODIFY_TIME:
        return "modify_time", value
    if propid == c.PROPID_Q_SECURITY:
        return "security", bytes(value)
    if propid == c.PROPID_Q_LABEL:
        if len(value) > 124:
            raise Drop(f"PROPID_Q_LABEL of {len(value)} characters exceeds 124 (MS-MQMQ 2.3.1.8)")
        return "label", value
    if propid == c.PROPID_Q_AUTHENTICATE:
        return "authentication", _flag(propid, value)
    if propid == c.PROPID_Q_PRIV_LEVEL:
        if value not in _PRIVACY:
            raise Drop(f"PROPID_Q_PRIV_LEVEL {value!r} must be 0, 1 or 2 (MS-MQMQ 2.3.1.12)")
        return "privacy_level", _PRIVACY[value]
    if propid == c.PROPID_Q_TRANSACTION:
        return "transactional", _flag(propid, value)
    if propid == c.PROPID_Q_SCOPE:
        if value not in _SCOPE:
            raise Drop(f"PROPID_Q_SCOPE {value!r} must be 0 or 1 (MS-MQMQ 2.3.1.14)")
        return "scope", _SCOPE[value]
    return None


CREATE_PROPIDS = (c.PROPID_Q_TYPE, c.PROPID_Q_INSTANCE, c.PROPID_Q_BASEPRIORITY, c.PROPID_Q_JOURNAL,
                  c.PROPID_Q_QUOTA, c.PROPID_Q_JOURNAL_QUOTA, c.PROPID_Q_CREATE_TIME, c.PROPID_Q_MODIFY_TIME,
                  c.PROPID_Q_SECURITY, c.PROPID_Q_PATHNAME, c.PROPID_Q_LABEL, c.PROPID_Q_AUTHENTICATE,
                  c.PROPID_Q_PRIV_LEVEL, c.PROPID_Q_TRANSACTION, c.PROPID_Q_SCOPE)
UPDATE_QUEUE_PROPIDS = (c.PROPID_Q_BASEPRIORITY, c.PROPID_Q_JOURNAL, c.PROPID_Q_QUOTA, c.PROPID_Q_JOURNAL_QUOTA,
                        c.PROPID_Q_SECURITY, c.PROPID_Q_AUTHENTICATE, c.PROPID_Q_PRIV_LEVEL)
UPDATE_MACHINE_PROPIDS = {c.PROPID_QM_QUOTA: "QueueManagerQuota", c.PROPID_QM_JOURNAL_QUOTA: "JournalQuota",
                          c.PROPID_QM_SECURITY: "Security"}


@dataclass
class BatchingPolicy:
    """The Windows XP+ delay of <3>/<13> (a 5.1 DoS mitigation): hold notifications, process them when a timer
    fires — after 1 minute if the last processing was over 14 minutes ago, else at the end of the 15 minutes;
    when 100 or more are held, ignore them and refresh every owned public queue from the directory instead."""
    window_ms: int = 15 * 60_000
    quiet_delay_ms: int = 60_000
    flood_threshold: int = 100


class ChangeNotificationServer:
    """MQCN server (3.2): Open Queue on NOTIFY_QUEUE_PRIVATE, then Dequeue Message and process, for its lifetime."""

    def __init__(self, queue_manager, directory: Directory | None = None, *,
                 verifier: SignatureVerifier | None = None, accepted_versions: tuple[int, ...] = (1, 2),
                 batching: BatchingPolicy | None = None) -> None:
        self.qm = queue_manager
        self.directory = directory
        self.verifier = verifier if verifier is not None else SignatureVerifier(directory)
        self.accepted_versions = accepted_versions        # <4>: (1,) for NT/W2K, (1, 2) later
        self.descriptor = None
        self.processed = 0
        self.dropped = 0
        self.batching = batching                          # None: process at once (NT/W2K behaviour, <3>)
        self.held: list[Message] = []
        self.refreshes = 0
        self._batch_timer = None
        self._last_processed_ms: int | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    # -------------------------------------------------------------- 3.2.3 Initialization and the loop
    def open(self) -> int:
        """Open Queue (3.2.3): NOTIFY_QUEUE_PRIVATE, ReceiveAccess, DenyNone; keeps rOpenQueueDescriptor."""
        status, desc = self.qm.open_queue(notify_queue_format_name(self.qm.identifier),
                                          QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
        if status != st.MQ_OK:
            log.error("MQCN: cannot open the notification queue (status %#010x): the protocol cannot work", status)
            return status
        self.descriptor = desc
        return st.MQ_OK

    async def start(self) -> int:
        """Open the notification queue and start the Dequeue Message loop as a task."""
        status = self.open()
        if status == st.MQ_OK:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mqcn-server")
        return status

    async def _run(self) -> None:
        while not self._stopping:
            result = self.qm.dequeue_message(self.descriptor, INFINITE)
            if isinstance(result, PendingRead):
                result = await result
            if result.status != st.MQ_OK:
                if not self._stopping:
                    log.error("MQCN: Dequeue Message on the notification queue failed (%#010x); loop ends",
                              result.status)
                return
            if self.batching is not None:
                self.hold(result.message)
                continue
            self._process_safely(result.message)
            await self.qm.durable()

    def _process_safely(self, message: Message) -> None:
        try:
            self.process(message)
        except Exception:                   # one bad message must never end the loop
            log.exception("MQCN: unexpected error processing a notification")

    # -------------------------------------------------------------- <3> batching
    def hold(self, message: Message) -> None:
        """Keep a dequeued notification until the batching timer fires (arming it per <3>)."""
        self.held.append(message)
        if self._batch_timer is not None:
            return
        policy, now = self.batching, self.qm.scheduler.now_ms()
        since = None if self._last_processed_ms is None else now - self._last_processed_ms
        if since is None or since > policy.window_ms - policy.quiet_delay_ms:
            delay = policy.quiet_delay_ms
        else:
            delay = policy.window_ms - since
        self._batch_timer = self.qm.scheduler.call_later(delay, self.flush)

    def flush(self) -> None:
        """Batching timer expiry: process everything held, or refresh all public queues after a flood (<3>)."""
        self._batch_timer = None
        held, self.held = self.held, []
        self._last_processed_ms = self.qm.scheduler.now_ms()
        if len(held) >= self.batching.flood_threshold:
            log.warning("MQCN: %d notifications held (>= %d): ignored; refreshing every public queue instead",
                        len(held), self.batching.flood_threshold)
            if self.directory is not None:
                refresh_public_queues(self.qm, self.directory)
            self.refreshes += 1
            return
        for message in held:
            self._process_safely(message)

    async def stop(self) -> None:
        """End the loop: Close Queue cancels the waiting Dequeue Message."""
        self._stopping = True
        if self._batch_timer is not None:           # held notifications were dequeued: apply them now
            self._batch_timer.cancel()
            self.flush()
        if self.descriptor is not None:
            self.qm.close_queue(self.descriptor)
            self.descriptor = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -------------------------------------------------------------- 3.2.5
    def process(self, message: Message) -> ProcessResult:
        """Process one dequeued Message (3.2.5): parse its Body as a Change Notification Message and apply it."""
        result = ProcessResult()
        try:
            try:
                cnm = c.decode_message(message.body)
            except c.MqcnError as exc:
                raise Drop(f"malformed Change Notification Message: {exc}") from None
            if cnm.version not in self.accepted_versions:
                raise Drop(f"version {cnm.version:#04x} not accepted by this queue manager (<4>)")
            if cnm.version == c.VERSION_DIRECTORY_SERVICE:
                self._process_v1(message, cnm, result)
            else:
                self._process_v2(cnm.body, result)
        except Drop as exc:
            result.dropped = str(exc)
            self.dropped += 1
            log.warning("MQCN: notification %s dropped: %s", _message_id(message), printable(str(exc)))
        for reason in result.skipped:
            log.warning("MQCN: notification %s: update skipped: %s", _message_id(message), printable(reason))
        for action in result.actions:
            log.info("MQCN: %s", printable(action))     # names come from the directory
        self.processed += 1
        return result

    # -------------------------------------------------------------- 3.2.5.1
    def _process_v1(self, message: Message, cnm: c.ChangeNotificationMessage, result: ProcessResult) -> None:
        if message.sender_id_type != SENDER_ID_QUEUE_MANAGER:
            raise Drop(f"version 0x01 with SenderIdType {message.sender_id_type}, not QueueManagerIdentifier (3.2.5.1)")
        if message.authentication_level == AUTHENTICATION_NONE:
            raise Drop("version 0x01 with AuthenticationLevel None (3.2.5.1)")
        reason = self.verifier.check(message)
        if reason is not None:
            raise Drop(f"signature check failed: {reason}")
        plans = [self._plan_v1(update, i) for i, update in enumerate(cnm.updates)]
        for plan in plans:
            plan(result)

    def _plan_v1(self, update: c.NotificationUpdate, index: int):
        """Check the 3.2.5.1 "disregard" rules and value ranges of one update; return the closure that applies it."""
        where = f"update {index}"
        if update.command == c.COMMAND_DELETE:
            objtype = c.object_type(update)
            if objtype != c.MQDS_QUEUE:
                raise Drop(f"{where}: deletion with object type {objtype!r}, not MQDS_QUEUE (3.2.5.1)")
            return lambda result: self._delete_queue(update.guid_identifier, where, result)
        objtype = c.object_type(update)
        if objtype not in (1, 2):
            raise Drop(f"{where}: object type {objtype!r} from PropertyId[0] is neither queue nor machine (3.2.5.1)")
        if update.command == c.COMMAND_CREATE and objtype == 1:
            fields = self._create_fields(update, where)
            return lambda result: self._create_queue(fields, where, result)
        if update.command == c.COMMAND_CHANGE and objtype == 1:
            fields = dict(f for f in (_queue_value(p, update.value(p)) for p in UPDATE_QUEUE_PROPIDS
                                      if p in update.property_ids()) if f)
            return lambda result: self._update_queue_v1(update, fields, where, result)
        if update.command == c.COMMAND_CHANGE and objtype == 2:
            attrs = {name: update.value(p) for p, name in UPDATE_MACHINE_PROPIDS.items() if p in update.property_ids()}
            return lambda result: self._update_machine(update, attrs, where, result)
        return lambda result: result.skipped.append(
            f"{where}: creation of a machine object has no rule in 3.2.5.1")

    def _create_fields(self, update: c.NotificationUpdate, where: str) -> dict:
        identifier = update.value(c.PROPID_Q_INSTANCE)
        if identifier is None:
            raise Drop(f"{where}: queue creation without PROPID_Q_INSTANCE (3.3.5.2 requires it)")
        pathname = update.value(c.PROPID_Q_PATHNAME, update.path_name)
        if not pathname:
            raise Drop(f"{where}: queue creation without PROPID_Q_PATHNAME or PathName")
        fields = {"identifier": identifier, "pathname": pathname}
        for propid in CREATE_PROPIDS:
            if propid in update.property_ids():
                pair = _queue_value(propid, update.value(propid))
                if pair:
                    fields[pair[0]] = pair[1]
        return fields

    # -------------------------------------------------------------- 3.2.5.2
    def _process_v2(self, body: c.NotificationBody, result: ProcessResult) -> None:
        log.debug("MQCN: v2 Event %d for %s via %s", body.event, body.object_guid, body.domain_controller)
        if body.event == c.EVENT_DELETE_QUEUE:
            self._delete_queue_v2(body.object_guid, result)
            return
        if body.event == c.EVENT_CHANGE_MACHINE:
            if body.object_guid != self.qm.identifier:
                raise Drop(f"Event 4 for machine {body.object_guid}, not this queue manager ({self.qm.identifier})")
            obj = self._read("QueueManager", body.object_guid, QUEUE_MANAGER_READ_ATTRIBUTES)
            try:
                changed = apply_queue_manager_object(self.qm, obj)
            except ValueError as exc:
                raise Drop(f"Event 4: {exc}") from None
            result.actions.append(f"queue manager {self.qm.identifier} updated from the directory: {changed}")
            return
        obj = self._read("Queue", body.object_guid, QUEUE_READ_ATTRIBUTES)
        owner = obj.attributes.get("QueueManager")
        if owner is not None and owner != self.qm.identifier:
            raise Drop(f"queue {body.object_guid} is owned by {owner}, not this queue manager")
        try:
            directory_fields = queue_fields(obj, QUEUE_READ_ATTRIBUTES)
        except ValueError as exc:
            raise Drop(f"Event {body.event}: {exc}") from None
        if body.event == c.EVENT_CREATE_QUEUE:
            pathname = obj.attributes.get("Pathname")
            if not isinstance(pathname, str) or not pathname:
                raise Drop(f"Event 1: directory object {obj.identifier} has no Pathname")
            self._create_queue({**directory_fields, "identifier": obj.identifier, "pathname": pathname},
                               "Event 1", result)
            return
        queue = self.qm.queue_collection.get(body.object_guid)
        if queue is None or queue.queue_type is not QueueType.PUBLIC:
            result.skipped.append(f"Event 2: no public queue {body.object_guid} in the QueueCollection")
            return
        changed = [name for name, value in directory_fields.items() if getattr(queue, name) != value]
        for name, value in directory_fields.items():
            setattr(queue, name, value)
        path = obj.attributes.get("Pathname")
        key = pathname_key(path) if isinstance(path, str) else None
        if path is not None and (key is None or key[1] != queue.pathname.lower()):
            result.skipped.append(f"Event 2: Pathname change to {path!r} not applied (DECISIONS.md D5)")
        persist_queue(self.qm, queue)
        result.actions.append(f"queue {queue.pathname} updated from the directory: {changed}")

    def _read(self, object_type: str, identifier: uuid.UUID, attributes) -> DirectoryObject:
        """Read Directory (MS-MQDMPR 3.1.7.1.20) with Identifier == ObjectGuid; any failure drops the message."""
        if self.directory is None:
            raise Drop("version 0x02 needs the directory, and none is configured")
        status, obj = self.directory.read_directory(object_type, [equals("Identifier", identifier)], attributes)
        if status is DirectoryOperationResult.ATTRIBUTE_NOT_FOUND:
            status, obj = self.directory.read_directory(object_type, [equals("Identifier", identifier)])
        if status is not DirectoryOperationResult.SUCCESS:
            raise Drop(f"Read Directory {object_type} {identifier}: {status.value}")
        return obj

    def _delete_queue_v2(self, identifier: uuid.UUID, result: ProcessResult) -> None:
        if self.directory is not None:
            status, _ = self.directory.read_directory("Queue", [equals("Identifier", identifier)], ["Identifier"])
            if status is DirectoryOperationResult.SUCCESS:
                raise Drop(f"Event 3 for queue {identifier}, which the directory still holds (DECISIONS.md D6)")
        self._delete_queue(identifier, "Event 3", result)

    # -------------------------------------------------------------- the ADM changes
    def _create_queue(self, fields: dict, where: str, result: ProcessResult) -> None:
        """Create Queue (MS-MQDMPR 3.1.7.1.3, iSkipDirectory True) keeping the given Identifier (DECISIONS.md D4)."""
        identifier = fields["identifier"]
        existing = self.qm.queue_collection.get(identifier)
        if existing is not None:
            if existing.queue_type is not QueueType.PUBLIC:
                result.skipped.append(f"{where}: {identifier} is a local non-public queue; not touched")
                return
            self._apply_fields(existing, fields)
            result.actions.append(f"queue {existing.pathname} ({identifier}) existed: updated as a change")
            return
        pathname = fields["pathname"]
        if "\\private$\\" in "\\" + pathname.lower():
            result.skipped.append(f"{where}: {pathname!r} is a private queue; MQCN covers public queues only (1.6)")
            return
        status, queue = self.qm.create_queue(pathname)
        if status != st.MQ_OK:
            result.skipped.append(f"{where}: Create Queue {pathname!r} failed with {status:#010x}")
            return
        if queue.queue_type is not QueueType.PUBLIC:
            self.qm.delete_queue(queue)
            result.skipped.append(f"{where}: {pathname!r} does not name a public queue")
            return
        self.qm.store.delete_queue(queue.store_identifier)
        del self.qm.queue_collection[queue.identifier]
        queue.identifier = identifier
        queue.store_identifier = str(identifier)
        self.qm.queue_collection[identifier] = queue
        self._apply_fields(queue, fields)
        result.actions.append(f"public queue {queue.pathname} ({identifier}) created")

    def _apply_fields(self, queue, fields: dict) -> None:
        for name, value in fields.items():
            if name not in ("identifier", "pathname"):
                setattr(queue, name, value)
        persist_queue(self.qm, queue)

    def _update_queue_v1(self, update: c.NotificationUpdate, fields: dict, where: str, result: ProcessResult) -> None:
        owner = update.value(c.PROPID_Q_QMID)
        if owner is not None and owner != self.qm.identifier:
            result.skipped.append(f"{where}: PROPID_Q_QMID {owner} is not this queue manager")
            return
        queue = self._find_public_queue(update)
        if queue is None:
            result.skipped.append(f"{where}: no public queue {update.guid_identifier or update.path_name!r}")
            return
        for name, value in fields.items():
            setattr(queue, name, value)
        persist_queue(self.qm, queue)
        result.actions.append(f"queue {queue.pathname} updated: {sorted(fields)}")

    def _find_public_queue(self, update: c.NotificationUpdate):
        if update.guid_identifier is not None:
            queue = self.qm.queue_collection.get(update.guid_identifier)
        else:
            queue = self.qm.queue_by_pathname(update.path_name)
        return queue if queue is not None and queue.queue_type is QueueType.PUBLIC else None

    def _update_machine(self, update: c.NotificationUpdate, attrs: dict, where: str, result: ProcessResult) -> None:
        target = update.guid_identifier if update.guid_identifier is not None else update.value(c.PROPID_QM_MACHINE_ID)
        if target != self.qm.identifier:
            result.skipped.append(f"{where}: machine {target} is not this queue manager")
            return
        changed = apply_queue_manager_object(self.qm, DirectoryObject("QueueManager", target, attrs))
        result.actions.append(f"queue manager {target} updated: {changed}")

    def _delete_queue(self, identifier: uuid.UUID | None, where: str, result: ProcessResult) -> None:
        """Delete Queue (MS-MQDMPR 3.1.7.1.4, iSkipDirectory True) of the public queue with this Identifier."""
        queue = self.qm.queue_collection.get(identifier) if identifier is not None else None
        if queue is None and identifier is not None:
            # [DESIGN] what the notification asks for already holds. The usual case: this queue manager deleted its
            # own public queue, and Delete Directory Object (MS-MQDMPR 3.1.7.1.19) notified the owner, itself.
            result.actions.append(f"{where}: public queue {identifier} is already gone")
            return
        if queue is None or queue.queue_type is not QueueType.PUBLIC:
            result.skipped.append(f"{where}: no public queue {identifier} to delete")
            return
        status = self.qm.delete_queue(queue)
        if status != st.MQ_OK:
            result.skipped.append(f"{where}: Delete Queue {queue.pathname} failed with {status:#010x}")
            return
        result.actions.append(f"public queue {queue.pathname} ({identifier}) deleted")


def _message_id(message: Message) -> str:
    lineage, uniquifier = message.identifier
    return f"{{{lineage}}}\\{uniquifier}"
