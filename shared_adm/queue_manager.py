"""QueueManager (MS-MQDMPR 3.1.1.1) and its events (3.1.3, 3.1.7.1, 3.1.7.2); reads in events_read.py.

How the qm2qm server calls it (everything on the loop thread; statuses are ``shared_adm.status`` ints)::

    qm = QueueManager(store=SqliteStore(path), scheduler=AsyncioScheduler(loop)); qm.initialize()
    status, queue = qm.create_queue(".\\private$\\orders", transactional=False)
    status, desc  = qm.open_queue("DIRECT=OS:host\\private$\\orders", QueueAccessType.RECEIVE_ACCESS,
                                  QueueShareMode.DENY_NONE)          # desc.handle, desc.context_value
    desc = qm.descriptor_by_handle(handle); cursor = qm.open_cursor(desc); qm.cursor_by_handle(cursor.handle)
    r = qm.dequeue_message_begin(desc, timeout_ms, cursor=None, tag=request_id)  # ReadResult | PendingRead
    r = qm.peek_message(desc, timeout_ms, cursor=None, tag=request_id)           # idem
    r = qm.peek_next_message(desc, timeout_ms, cursor, tag=request_id)           # idem
    if isinstance(r, PendingRead): r = await r        # -> ReadResult(status, message, position)
    qm.dequeue_message_end(desc, r.position, delete_message=ack)                  # ACK / NACK -> status
    qm.read_message_by_lookup_identifier(desc, lookup_id, MessageSeekAction.SEEK_NEXT,
                                         peek_operation=False, two_phase_read=True)  # ReadResult, never waits
    qm.cancel_waiting_message_read_request(desc, request_id, status)             # MQ_OK | STATUS_NOT_FOUND
    qm.close_cursor(cursor); qm.close_queue(desc); qm.purge_queue(queue)
    status = qm.enqueue_message(queue, message); await qm.durable()              # 0 ok, 1/2 quota

Defect decisions are numbered as in shared_adm/DEFECTS.md.
"""
from __future__ import annotations

import dataclasses
import gc
import itertools
import secrets
import uuid

from shared_adm import status as st
from shared_adm.clock import AsyncioScheduler, Scheduler
from shared_adm.collector import collector_paused
from shared_adm.compact import body_size, pack, recoverable, unpack
from shared_adm.cursor import Cursor
from shared_adm.descriptor import OpenQueueDescriptor
from shared_adm.enums import (MessageClass, OperationType, PositionState, QueueAccessType, QueueShareMode,
                              QueueType, RemoteReadState)
from shared_adm.events_expiry import ExpiryEvents
from shared_adm.events_read import ReadEvents
from shared_adm.events_transaction import TransactionEvents
from shared_adm.format_name import FormatName, is_subqueue_name, parse, pathname_key
from shared_adm.message import Message
from shared_adm.queue import MessagePosition, Queue
from shared_adm.store.base import MemoryStore, PackedStoredMessage, Snapshot, Store, StoredQueue, StoreError
from shared_adm.subqueues import DEFAULT_MAX_SUBQUEUES, SubqueueEvents, SubqueueLimitReached
from shared_adm.transaction import TransactionalOperation

LOW_7_BYTES = (1 << 56) - 1
U64 = (1 << 64) - 1
RESERVED_PRIVATE_QUEUES = {1: "admin_queue$", 2: "order_queue$", 3: "notify_queue$"}
FIRST_USER_PRIVATE_QUEUE_NUMBER = 4
SYSTEM_QUEUE_PATHS = {"journal": "system$;journal", "deadletter": "system$;deadletter", "deadxact": "system$;deadxact"}
# The same roles (a MachineQueuePath's suffix, MS-MQMQ 2.1.2) -> the QueueManager attribute holding that queue
MACHINE_QUEUE_ATTRIBUTES = {"journal": "system_journal_queue", "deadletter": "system_deadletter_queue",
                            "deadxact": "system_transactional_deadletter_queue"}
DEFAULT_QUEUE_MANAGER_QUOTA_KB = 0x00100000      # 3.1.1.1 says bytes; Windows' MachineQuota is KB (DEFECTS.md extra)
_MAX_HANDLE = 0xFFFFFFFF
FREEZE_AFTER_LOADING = 100_000      # messages loaded at start-up from which they are gc-frozen (initialize)


def _path_key(queue: Queue) -> str | None:
    """The queue's key among the queues found by path name (case-insensitive), or None for a system queue that has no
    private queue number (journal, dead-letter: reached by their own format names)."""
    if queue.queue_type is not QueueType.SYSTEM or queue.private_queue_number:
        return queue.pathname.lower()
    return None


def _packed_batches(messages, size: int = 1024):
    """StoredMessages (a store without load_packed) as load_packed's batches: the Message packed with LookupIdentifier
    = the row's; TTBR looked at for each (3.1.7.1.9)."""
    batch = []
    for stored in messages:
        packed = getattr(stored, "packed", None)
        if packed is None:
            message = stored.message
            message.lookup_identifier = stored.lookup_identifier
            packed = pack(message)
        batch.append((stored.queue_identifier, stored.lookup_identifier, stored.state, packed,
                      getattr(stored, "expires", True), None))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# The most OpenQueueDescriptors opened for remote readers, and Cursors, open at once over every caller (our bounds,
# not the spec's): each costs memory for as long as a caller keeps it, and a remote caller can open them in a loop.
# About 1 KiB a descriptor (with its context handle) and 200 bytes a cursor: the defaults bound each near 256 MiB.
DEFAULT_MAX_OPEN_QUEUES = 262144
DEFAULT_MAX_CURSORS = 1048576


class CursorLimitReached(Exception):
    """Open Cursor refused: the queue manager already holds ``max_cursors`` (answered MQ_ERROR_INSUFFICIENT_RESOURCES
    by the protocols)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the queue manager already holds {limit} cursors")
        self.status = st.MQ_ERROR_INSUFFICIENT_RESOURCES


def share_kind(descriptor: OpenQueueDescriptor) -> int | None:
    """Which of Queue.share_counts counts a descriptor (the ones 3.1.7.1.5's share-mode branches look for), or None."""
    if descriptor.share_mode is QueueShareMode.DENY_RECEIVE:
        if descriptor.access_type is QueueAccessType.RECEIVE_ACCESS:
            return 0
        if descriptor.access_type in (QueueAccessType.PEEK_ACCESS, QueueAccessType.PEEK_ADMIN_ACCESS):
            return 1
    elif descriptor.share_mode is QueueShareMode.DENY_NONE and descriptor.access_type is QueueAccessType.RECEIVE_ACCESS:
        return 2
    return None


class QueueManager(ReadEvents, TransactionEvents, ExpiryEvents, SubqueueEvents):
    """QueueManager (3.1.1.1): the LocalQueueManager with its QueueCollection and events."""

    def __init__(self, store: Store | None = None, scheduler: Scheduler | None = None,
                 identifier: uuid.UUID | None = None, computer_name: str = "qm2qm",
                 queue_manager_quota_kb: int = DEFAULT_QUEUE_MANAGER_QUOTA_KB) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        # A Locked state is not written where the store can skip it: Initialization makes it Available (3.1.3)
        self._note_locked = getattr(self.store, "note_locked", None)
        self.scheduler: Scheduler = scheduler if scheduler is not None else AsyncioScheduler()
        self.identifier = identifier
        self.computer_name = computer_name
        self.queue_manager_quota = queue_manager_quota_kb
        self.queue_manager_state = "Stopped"
        self.throttled = False
        self.allow_anonymous_read = False   # policy of shared_adm.security.check_access (--allow-anonymous-read)
        self.max_open_queues = DEFAULT_MAX_OPEN_QUEUES      # remote readers' opens past it: INSUFFICIENT_RESOURCES
        self.max_cursors = DEFAULT_MAX_CURSORS              # Open Cursor past it: CursorLimitReached
        self.max_subqueues = DEFAULT_MAX_SUBQUEUES          # a new subqueue past it: INSUFFICIENT_RESOURCES
        self.sequential_id = 0
        self.queue_collection: dict[uuid.UUID, Queue] = {}
        self._subqueues: dict[uuid.UUID, Queue] = {}       # every queue's SubqueueCollection, by Identifier
        self._subqueue_names: dict[tuple[uuid.UUID, str], Queue] = {}     # by (queue Identifier, lower-case name)
        self.transaction_collection: dict[bytes, object] = {}
        # id(MessagePositionReference) → the TransactionalOperation naming it: a Locked message's operation without a
        # scan of every transaction (at most one operation names a position: only an Available one is taken)
        self._operation_by_position: dict[int, TransactionalOperation] = {}
        self.system_deadletter_queue: Queue | None = None
        self.system_transactional_deadletter_queue: Queue | None = None
        self.system_journal_queue: Queue | None = None
        self.total_bytes = 0
        self._by_path: dict[str, Queue] = {}
        self._by_number: dict[int, Queue] = {}
        self._descriptors: dict[int, OpenQueueDescriptor] = {}
        self._open_order = itertools.count(1)           # OpenQueueDescriptor.open_order
        self._remote_descriptors: set[int] = set()      # Handles of those opened for a remote reader (max_open_queues)
        self._context_values: set[int] = set()
        self._cursors: dict[int, Cursor] = {}
        self._ttbr_heap: list[tuple[int, int, uuid.UUID]] = []
        self._ttbr_entries: dict[MessagePosition, tuple] = {}   # linked positions → their heap entry
        self._ttbr_timer = None
        self._ttbr_timer_due: int | None = None
        self._ttbr_deferred: set[tuple[uuid.UUID, int]] = set()

    # ------------------------------------------------------------------ 3.1.3 Initialization
    def initialize(self) -> None:
        """Initialization (3.1.3): load the store's Snapshot, release remote locks, create missing system queues."""
        if self.queue_manager_state != "Stopped":
            raise RuntimeError("QueueManager.initialize() called twice")
        self.queue_manager_state = "Initializing"
        # Streamed when the store can: a million stored messages never sit in one list (peak memory at start-up).
        # The collector is off from here to the end of the load (the store's own pause nests inside this one).
        with collector_paused():
            load_packed = getattr(self.store, "load_packed", None)
            snapshot = load_packed() if load_packed else getattr(self.store, "load_stream", self.store.load)()
            try:
                self._load_snapshot(snapshot, load_packed is not None)
            finally:
                # A load stopped by an error (or Ctrl-C) must not leave a streaming store's read transaction and lock
                # held by the suspended iterator: the store's close() would wait for them forever.
                close = getattr(snapshot.messages, "close", None)
                if close is not None:
                    close()
        self._drop_idle_subqueues()
        self._create_system_queues()
        self.queue_manager_state = "Ready"

    def _load_snapshot(self, snapshot: Snapshot, packed: bool) -> None:
        """Initialization (3.1.3), the store's part: the identifier, queues and messages of ``snapshot`` (``packed``:
        its messages are load_packed's batches)."""
        where = getattr(self.store, "path", "the store")
        if snapshot.queue_manager_identifier is not None:      # none stored yet: a new queue manager
            try:
                self.identifier = uuid.UUID(snapshot.queue_manager_identifier)
            except ValueError:
                raise StoreError(f"{where}: corrupt queue manager identifier "
                                 f"{snapshot.queue_manager_identifier!r:.60}") from None
        elif self.identifier is None:
            self.identifier = uuid.uuid4()
        if snapshot.queue_manager_identifier != str(self.identifier):
            self.store.set_queue_manager_identifier(str(self.identifier))
        subqueues = []
        for stored in snapshot.queues:
            try:
                queue = Queue.from_attributes(stored.identifier, stored.attributes)
            except ValueError as exc:
                raise StoreError(f"{where}: corrupt attributes of queue {stored.identifier!r:.60}: {exc}") from None
            if ";" in queue.pathname and queue.queue_type is not QueueType.SYSTEM:     # "Queue;Subqueue"
                if not is_subqueue_name(queue.pathname.partition(";")[2]):
                    raise StoreError(f"{where}: corrupt queue {stored.identifier!r:.60}: {queue.pathname!r:.60} is "
                                     "no subqueue path name")
                subqueues.append((stored.identifier, queue))
                continue
            same = self._same_name_or_number(queue)
            if same is not None:
                raise StoreError(f"{where}: corrupt queue {stored.identifier!r:.60}: {same}")
            self._register_queue(queue)
        self._load_subqueues(subqueues, where)
        batches = snapshot.messages if packed else _packed_batches(snapshot.messages)
        self.sequential_id = self._load_messages(batches, snapshot.sequential_id)
        self._start_late_ttbr_timers(snapshot.expiring)
        if sum(len(q.message_position_list) for q in self.queue_collection.values()) >= FREEZE_AFTER_LOADING:
            # A large store's positions live as long as the queue manager: frozen, no collection walks them (the
            # first after the load would walk them all at once, then each full one again). Still freed by reference
            # counting once unlinked.
            gc.freeze()

    def _load_messages(self, batches, highest: int) -> int:
        """3.1.3: link every stored message as Available (PurgePending ones and orphans are deleted); returns the
        highest sequential id seen. ``batches``: lists of load_packed rows. Any order will do: positions sit in lists
        sorted by LookupIdentifier and TTBR timers in a heap; a run of one queue's rows goes into its list in one
        bulk insert."""
        queues_by_key: dict[str, Queue | None] = {}
        run: list[MessagePosition] = []
        run_queue, run_bytes = None, 0
        available = PositionState.AVAILABLE
        available_name, purge_pending_name = available.value, PositionState.PURGE_PENDING.value
        for batch in batches:
            if not batch:       # the store's rows end before its last step (its parallel check): link them meanwhile
                self._link_run(run_queue, run, run_bytes)
                run, run_queue, run_bytes = [], None, 0
            for key, lookup, state, packed, expires, _ in batch:
                queue = queues_by_key.get(key, self)
                if queue is self:
                    queue = queues_by_key[key] = self.queue_by_identifier(uuid.UUID(key))
                if lookup & LOW_7_BYTES > highest:
                    highest = lookup & LOW_7_BYTES
                if queue is None or state == purge_pending_name:
                    self.store.delete_message(key, lookup)
                    continue
                if queue is not run_queue:
                    self._link_run(run_queue, run, run_bytes)
                    run, run_queue, run_bytes = [], queue, 0
                position = MessagePosition(queue, lookup, available, packed)
                run.append(position)
                run_bytes += body_size(packed)
                if state != available_name:
                    self.store.set_message_state(key, lookup, available_name)
                if expires:
                    self._start_ttbr_timer(position, unpack(packed))
        self._link_run(run_queue, run, run_bytes)
        return highest

    def _start_late_ttbr_timers(self, expiring) -> None:
        """3.1.3 / 3.1.7.1.9: TTBR timers of linked messages the store named only after their rows (Snapshot.expiring);
        rows the load deleted (PurgePending, orphans) are not linked and get none."""
        queues_by_key: dict[str, Queue | None] = {}
        for key, lookup in expiring:
            queue = queues_by_key.get(key, self)
            if queue is self:
                queue = queues_by_key[key] = self.queue_by_identifier(uuid.UUID(key))
            position = queue.message_position_list.get(lookup) if queue is not None else None
            if position is not None:
                self._start_ttbr_timer(position, unpack(position.packed))

    def _link_run(self, queue: Queue | None, run: list[MessagePosition], size: int) -> None:
        """Link a run of one queue's loaded Available positions; TotalBytes counts them (_add_bytes, in one step)."""
        if run:
            queue.message_position_list.insert_many(run)
            self._count_bytes(queue, size)

    def _create_system_queues(self) -> None:
        by_path = {q.pathname: q for q in self.queue_collection.values() if q.queue_type is QueueType.SYSTEM}
        for role, path in SYSTEM_QUEUE_PATHS.items():
            queue = by_path.get(path)
            if queue is None:
                queue = self._new_queue(path, QueueType.SYSTEM, {"transactional": role == "deadxact"})
            setattr(self, MACHINE_QUEUE_ATTRIBUTES[role], queue)
        for number, name in RESERVED_PRIVATE_QUEUES.items():
            if number not in self._by_number:
                self._new_queue("private$\\" + name, QueueType.SYSTEM, {"private_queue_number": number})

    async def durable(self) -> None:
        """Wait until every change recorded so far is durable (group commit of the Store)."""
        await self.store.durable()

    # ------------------------------------------------------------------ lookups for the server
    def descriptor_by_handle(self, handle: int) -> OpenQueueDescriptor | None:
        """The open OpenQueueDescriptor whose Handle is ``handle`` (3.1.1.16), or None."""
        return self._descriptors.get(handle) if isinstance(handle, int) else None

    def open_descriptors(self) -> list[OpenQueueDescriptor]:
        """Every open OpenQueueDescriptor (3.1.1.16), by Handle: on queues, subqueues, and queues deleted since."""
        return [self._descriptors[handle] for handle in sorted(self._descriptors)]

    def cursor_by_handle(self, handle: int) -> Cursor | None:
        """The open Cursor whose Handle is ``handle`` (3.2.1.2), or None."""
        return self._cursors.get(handle) if isinstance(handle, int) else None

    def queue_by_pathname(self, pathname: str) -> Queue | None:
        """The local Queue with this pathname (MS-MQMQ 2.1.1), or the existing subqueue of a "QueueName;Subqueue"
        one, or None."""
        pathname, separator, subqueue = pathname.partition(";")
        if separator and not subqueue:
            return None         # "Name;" names no subqueue (MS-MQMQ 2.1.1: 1 to 32 characters), nor the queue
        key = pathname_key(pathname)
        queue = self._by_path.get(key[1]) if key and self._is_local_host(key[0]) else None
        if queue is None or not subqueue:
            return queue
        return self.subqueue(queue, subqueue)

    def _new_handle(self, in_use) -> int:
        # Random, not sequential: a remote reader holding one handle must not guess another's (MS-MQQP 5.1).
        for _ in range(1 << 20):
            handle = secrets.randbits(32) & _MAX_HANDLE
            if handle and handle not in in_use:
                return handle
        raise RuntimeError("no free handle")

    def _is_local_host(self, host: str) -> bool:
        host = host.lower()
        return host in (".", "localhost", self.computer_name.lower()) or host.split(".")[0] == self.computer_name.lower()

    # ------------------------------------------------------------------ 3.1.7.1.3 / 3.1.7.1.4
    def create_queue(self, pathname: str, **attributes) -> tuple[int, Queue | None]:
        """Create Queue (3.1.7.1.3) with Set Queue Defaults (3.1.7.1.33); MQ_ERROR_ILLEGAL_QUEUE_PATHNAME/QUEUE_EXISTS."""
        key = pathname_key(pathname)
        if key is None or not self._is_local_host(key[0]):
            return st.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, None
        if key[1] in self._by_path:
            return st.MQ_ERROR_QUEUE_EXISTS, None
        allowed = {"label", "type", "journaling", "quota", "journal_quota", "authentication", "privacy_level",
                   "transactional", "multicast_address", "security", "base_priority"}
        unknown = set(attributes) - allowed
        if unknown:
            return st.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, None
        private = key[1].startswith("private$\\")
        if private:
            attributes["private_queue_number"] = max(
                [FIRST_USER_PRIVATE_QUEUE_NUMBER - 1, *self._by_number]) + 1
        queue = self._new_queue(key[1], QueueType.PRIVATE if private else QueueType.PUBLIC, attributes)
        return st.MQ_OK, queue

    def _new_queue(self, pathname: str, queue_type: QueueType, attributes: dict) -> Queue:
        now = int(self.scheduler.wall_time())
        queue = Queue(pathname=pathname, queue_type=queue_type, create_time=now, modify_time=now, **attributes)
        self._register_queue(queue)
        self.store.put_queue(StoredQueue(queue.store_identifier, queue.persistent_attributes()))
        return queue

    def _same_name_or_number(self, queue: Queue) -> str | None:
        """What a stored queue shares with one already loaded that no two queues may (a path name, 3.1.1.2; a
        private queue number), or None."""
        other = self._by_path.get(_path_key(queue))
        if other is not None:
            return f"its path name {queue.pathname!r:.60} is queue {other.store_identifier}'s"
        if queue.private_queue_number:
            other = self._by_number.get(queue.private_queue_number)
            if other is not None:
                return f"its private queue number {queue.private_queue_number} is queue {other.store_identifier}'s"
        return None

    def _register_queue(self, queue: Queue) -> None:
        queue.queue_manager = self
        queue.qualified_pathname = queue.pathname
        queue.journal_queue_reference = Queue(pathname=queue.pathname + ";journal", queue_type=QueueType.SYSTEM)
        self.queue_collection[queue.identifier] = queue
        key = _path_key(queue)
        if key is not None:
            self._by_path[key] = queue
        if queue.private_queue_number:
            self._by_number[queue.private_queue_number] = queue

    def delete_queue(self, queue: Queue) -> int:
        """Delete Queue (3.1.7.1.4): messages deleted (NackQueueDeleted), descriptors lose their queue, waiters end."""
        if self.queue_collection.get(queue.identifier) is not queue:
            return st.MQ_ERROR_QUEUE_NOT_FOUND
        self._delete_subqueues(queue)
        self._delete_contents(queue)
        del self.queue_collection[queue.identifier]
        self._by_path.pop(queue.pathname.lower(), None)
        self._by_number.pop(queue.private_queue_number, None)
        self.store.delete_queue(queue.store_identifier)
        return st.MQ_OK

    def _delete_contents(self, queue: Queue) -> None:
        """Delete Queue's (3.1.7.1.4) part for one queue or subqueue: its messages, then its descriptors' waiters."""
        for position in list(queue.message_position_list):
            self.message_position_deleted(queue, position, MessageClass.NACK_QUEUE_DELETED)
        for desc in list(queue.open_queue_descriptor_collection):
            for op in list(desc.waiting_message_read_operation_collection):
                self._stop_waiting(op, st.MQ_ERROR_QUEUE_DELETED)
            desc.locked_positions.clear()
            desc.queue_reference = None

    # ------------------------------------------------------------------ 3.1.7.1.5 Open Queue
    def open_queue(self, format_name: str, required_access: QueueAccessType, shared_mode: QueueShareMode,
                   remote_read_state: RemoteReadState = RemoteReadState.NONE
                   ) -> tuple[int, OpenQueueDescriptor | None]:
        """Open Queue (3.1.7.1.5), every format-name, access and share-mode check; ShareMode is kept (#10);
        MQ_ERROR_INSUFFICIENT_RESOURCES for a remote reader once ``max_open_queues`` are open for remote readers (the
        queue manager's own opens, such as MS-MQCN's, are not counted nor refused)."""
        if not isinstance(required_access, QueueAccessType) or not isinstance(shared_mode, QueueShareMode):
            return st.MQ_ERROR_INVALID_PARAMETER, None
        if remote_read_state is not RemoteReadState.NONE and len(self._remote_descriptors) >= self.max_open_queues:
            return st.MQ_ERROR_INSUFFICIENT_RESOURCES, None
        name = parse(format_name)
        if name.kind == "illegal":
            return st.MQ_ERROR_ILLEGAL_FORMATNAME, None
        if name.kind == "dl":
            return st.MQ_ERROR_NO_DS, None           # Expand Format Name needs the directory (3.1.7.3.8)
        send = required_access is QueueAccessType.SEND_ACCESS
        if name.kind == "multiple":
            if not send:
                return st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None
            if shared_mode is not QueueShareMode.DENY_NONE:
                return st.MQ_ERROR_UNSUPPORTED_ACCESS_MODE, None
            parent = self._new_descriptor(required_access, shared_mode, None, format_name, True, RemoteReadState.NONE)
            for element in name.elements:
                status, child = self.open_queue(element.text, QueueAccessType.SEND_ACCESS, QueueShareMode.DENY_NONE)
                if status != st.MQ_OK:
                    self.close_queue(parent)
                    return status, None
                parent.open_queue_descriptor_collection.append(child)
            return st.MQ_OK, parent
        if name.kind == "direct" and name.protocol in ("HTTP", "HTTPS") and not send:
            return st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None
        if send and (name.kind == "machine" or name.kind == "direct" and (name.path.lower() == "system$"
                                                                          or name.subqueue)):
            return st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None     # messages reach a subqueue by moves only
        if name.kind == "multicast" and not send:
            return st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None
        try:
            queue_obj = self._find_queue(name)
        except SubqueueLimitReached as refused:
            return refused.status, None
        if queue_obj is None:
            if not send or self._names_this_queue_manager(name):
                return st.MQ_ERROR_QUEUE_NOT_FOUND, None
            return st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, None   # no OutgoingQueue here (no transport)
        if remote_read_state is not RemoteReadState.NONE and self._is_reserved_private_queue(queue_obj):
            return st.MQ_ERROR_ACCESS_DENIED, None      # internal queues are never remote-readable (MS-MQCN 3.2.3)
        status = self._share_mode_check(queue_obj, required_access, shared_mode)
        if status != st.MQ_OK:
            return status, None         # (a subqueue refused here has the descriptor that refused it: it stays)
        desc = self._new_descriptor(required_access, shared_mode, queue_obj, format_name, False, remote_read_state)
        queue_obj.open_queue_descriptor_collection[desc] = None
        desc.open_order = next(self._open_order)
        kind = share_kind(desc)
        if kind is not None:
            queue_obj.share_counts[kind] += 1
        return st.MQ_OK, desc

    @staticmethod
    def _is_reserved_private_queue(queue: Queue) -> bool:
        """admin_queue$, order_queue$ and notify_queue$ (private queues 1–3) serve the queue manager itself."""
        number = queue.private_queue_number
        return queue.queue_type is QueueType.SYSTEM and RESERVED_PRIVATE_QUEUES.get(number) is not None \
            and queue.pathname.lower().endswith(RESERVED_PRIVATE_QUEUES[number])

    @staticmethod
    def _share_mode_check(queue: Queue, access: QueueAccessType, share: QueueShareMode) -> int:
        """The three ordered share-mode branches of 3.1.7.1.5, on the queue's counts of the descriptors each looks for
        (a scan of every descriptor made each open cost O(open descriptors): 5 ms an open at 8,000)."""
        deny_receive_readers, deny_receive_peekers, shared_readers = queue.share_counts
        receive = QueueAccessType.RECEIVE_ACCESS
        if deny_receive_readers:
            if share is QueueShareMode.DENY_RECEIVE or access is receive:
                return st.MQ_ERROR_SHARING_VIOLATION
        elif deny_receive_peekers:
            if access is receive:
                return st.MQ_ERROR_SHARING_VIOLATION
        elif shared_readers:
            if share is QueueShareMode.DENY_RECEIVE:
                return st.MQ_ERROR_SHARING_VIOLATION
        return st.MQ_OK

    def _new_descriptor(self, access, share, queue, format_name, multiple, remote_read_state) -> OpenQueueDescriptor:
        handle = self._new_handle(self._descriptors)
        context_value = self._new_handle(self._context_values)
        desc = OpenQueueDescriptor(handle=handle, context_value=context_value, access_type=access, share_mode=share,
                                   queue_reference=queue, format_name=format_name, multiple=multiple,
                                   remote_read_state=remote_read_state)
        self._descriptors[handle] = desc
        self._context_values.add(context_value)
        if remote_read_state is not RemoteReadState.NONE:
            self._remote_descriptors.add(handle)
        return desc

    def queue_for_access_check(self, format_name: str) -> Queue | None:
        """The queue whose Security governs opening ``format_name``: found as Open Queue finds it, creating nothing
        (a subqueue not made yet answers with its queue, whose Security it shares); None where Open Queue finds no
        single queue. A protocol can so refuse a caller before Open Queue makes and stores a subqueue for it."""
        name = parse(format_name)
        if name.kind in ("illegal", "dl", "multiple"):
            return None
        found = self._find_queue(name, create_subqueue=False)
        if found is not None and name.suffix == "journal" and found.queue_type is QueueType.SYSTEM \
                and found is not self.system_journal_queue:
            # [DESIGN] a queue's journal is governed by the queue's own descriptor (MSMQ's journal rights are
            # rights on the queue); the journal Queue object has none of its own
            return self._find_queue(dataclasses.replace(name, suffix="", subqueue=""), create_subqueue=False)
        return found

    def _find_queue(self, name: FormatName, create_subqueue: bool = True) -> Queue | None:
        queue = None
        if name.kind == "direct":
            if name.protocol == "OS" and not self._is_local_host(name.host):
                return None
            path = name.path.lower()
            if path == "system$":       # MS-MQMQ 2.1.2 MachineQueuePath: \SYSTEM$;JOURNAL, DEADLETTER or DEADXACT
                return self._machine_queue(name.suffix)
            if "\\" not in path.replace("private$\\", "", 1) and path.count("\\") <= 1:
                queue = self._by_path.get(path)
        elif name.kind == "private" and name.guid == self.identifier:
            queue = self._by_number.get(name.number)
        elif name.kind == "public":
            queue = self.queue_collection.get(name.guid)
            queue = queue if queue is not None and queue.queue_type is QueueType.PUBLIC else None
        elif name.kind == "machine" and name.guid == self.identifier:
            return self._machine_queue(name.suffix)
        if queue is None or not name.suffix:
            return queue
        if name.subqueue:           # the first Open Queue naming a subqueue creates it (subqueues.py)
            if not create_subqueue:
                found = self.subqueue(queue, name.subqueue)
                return found if found is not None or not self.may_have_subqueue(queue, name.subqueue) else queue
            return self.subqueue(queue, name.subqueue, create=True)
        return queue.journal_queue_reference if name.suffix == "journal" else None

    def _machine_queue(self, suffix: str) -> Queue | None:
        """The computer journal, dead-letter or transactional dead-letter queue (MS-MQMQ 2.1.2, 2.1.5), by suffix."""
        attribute = MACHINE_QUEUE_ATTRIBUTES.get(suffix)
        return getattr(self, attribute) if attribute is not None else None

    def machine_queue_by_pathname(self, pathname: str) -> Queue | None:
        """The computer journal or a dead-letter queue by its path name, Computer\\system$;deadletter (MS-MQMQ 2.1.1;
        Open Queue reaches them by format name only, so queue_by_pathname does not), or None."""
        host, _, path = pathname.partition("\\")
        path = path.lower()
        role = next((role for role, system_path in SYSTEM_QUEUE_PATHS.items() if system_path == path), None)
        return self._machine_queue(role) if role is not None and self._is_local_host(host) else None

    def is_machine_queue(self, queue: Queue) -> bool:
        """The computer journal or a dead-letter queue (MS-MQMQ 2.1.2 MachineQueuePath): read only."""
        return any(queue is getattr(self, attribute) for attribute in MACHINE_QUEUE_ATTRIBUTES.values())

    def _names_this_queue_manager(self, name: FormatName) -> bool:
        if name.kind == "direct":
            return name.protocol == "OS" and self._is_local_host(name.host)
        return name.kind in ("private", "machine") and name.guid == self.identifier

    # ------------------------------------------------------------------ 3.1.7.1.6 Close Queue, 3.1.7.1.1-2 cursors
    def close_queue(self, descriptor: OpenQueueDescriptor) -> int:
        """Close Queue (3.1.7.1.6): cancels every waiter (#8, #9), closes cursors, releases two-phase locks."""
        if self._descriptors.get(descriptor.handle) is not descriptor:
            return st.MQ_ERROR_INVALID_HANDLE
        del self._descriptors[descriptor.handle]
        self._remote_descriptors.discard(descriptor.handle)
        self._context_values.discard(descriptor.context_value)
        if descriptor.multiple:
            for child in descriptor.open_queue_descriptor_collection:
                self.close_queue(child)
            return st.MQ_OK
        for op in list(descriptor.waiting_message_read_operation_collection):
            self._stop_waiting(op, st.MQ_ERROR_OPERATION_CANCELLED)
        for cursor in list(descriptor.cursor_collection.values()):
            self.close_cursor(cursor)
        queue = descriptor.queue_reference
        if queue is None:
            return st.MQ_OK
        for position in list(descriptor.locked_positions.values()):
            self._end_two_phase(descriptor, position, delete_message=False)
        del queue.open_queue_descriptor_collection[descriptor]
        kind = share_kind(descriptor)
        if kind is not None:
            queue.share_counts[kind] -= 1
        if queue.parent_queue is not None:
            self.drop_subqueue_if_idle(queue)
        return st.MQ_OK

    def open_cursor(self, descriptor: OpenQueueDescriptor) -> Cursor | None:
        """Open Cursor (3.1.7.1.1): a new Cursor at the queue's Start, or None without a queue; CursorLimitReached
        when ``max_cursors`` are open."""
        if self._descriptors.get(descriptor.handle) is not descriptor or descriptor.queue_reference is None:
            return None
        if len(self._cursors) >= self.max_cursors:
            raise CursorLimitReached(self.max_cursors)
        cursor = Cursor(self._new_handle(self._cursors), descriptor)
        cursor.initialize()
        descriptor.cursor_collection[cursor.handle] = cursor
        self._cursors[cursor.handle] = cursor
        return cursor

    def close_cursor(self, cursor: Cursor) -> int:
        """Close Cursor (3.1.7.1.2): its waiting reads end with MQ_ERROR_OPERATION_CANCELLED (#9)."""
        if self._cursors.get(cursor.handle) is not cursor:
            return st.MQ_ERROR_INVALID_HANDLE
        descriptor = cursor.open_queue_descriptor_reference
        if cursor.waiting_read is not None:         # a cursor has one wait at most (a second read is refused)
            self._stop_waiting(cursor.waiting_read, st.MQ_ERROR_OPERATION_CANCELLED)
        descriptor.cursor_collection.pop(cursor.handle, None)
        del self._cursors[cursor.handle]
        return st.MQ_OK

    # ------------------------------------------------------------------ 3.1.7.1.7 Purge Queue
    def purge_queue(self, queue: Queue) -> int:
        """Purge Queue (3.1.7.1.7): Available → deleted (NackQueuePurged), anything else → PurgePending."""
        self._delete_all_available(queue)
        for position in list(queue.message_position_list):         # none of them Available now
            if position.state is not PositionState.PURGE_PENDING:
                self._set_state(queue, position, PositionState.PURGE_PENDING)
        if queue.parent_queue is not None:
            self.drop_subqueue_if_idle(queue)
        return st.MQ_OK

    def _delete_all_available(self, queue: Queue) -> None:
        """Message Position Deleted (3.1.7.2.1) of every Available position, as _remove() of each but in bulk: a purge
        of 300,000 messages holds the loop (every other client) for tenths of a second instead of seconds."""
        removed = queue.message_position_list.unlink_available()
        if not removed:
            return
        size = 0
        stored = []
        deleted = PositionState.DELETED
        for position in removed:
            position.state = deleted
            packed = position.packed
            size += body_size(packed)
            if recoverable(packed):
                stored.append(position.lookup_identifier)
        self._count_bytes(queue, -size)
        if self._ttbr_deferred:
            self._ttbr_deferred.difference_update((queue.identifier, p.lookup_identifier) for p in removed)
        if self._ttbr_entries:
            forget = self._ttbr_entries.pop
            for position in removed:
                forget(position, None)
        if stored:
            self.store.delete_messages(queue.store_identifier, stored)

    # ------------------------------------------------------------------ 3.1.7.1.9 Enqueue Message
    def enqueue_message(self, queue: Queue, message: Message, transaction=None) -> int:
        """Enqueue Message (3.1.7.1.9): 0 ok, 1 queue quota, 2 queue manager quota/throttled; LookupIdentifier per #12."""
        if not isinstance(message, Message):
            raise TypeError("enqueue_message needs a shared_adm.message.Message")
        if not (isinstance(message.priority, int) and 0 <= message.priority <= 7):
            raise ValueError(f"Message.Priority must be 0..7, got {message.priority!r}")
        if transaction is not None and self.transaction_collection.get(transaction.identifier) is not transaction:
            raise ValueError("enqueue_message: transaction is not in TransactionCollection")
        if self.queue_collection.get(queue.identifier) is not queue:
            raise ValueError(f"enqueue_message: queue {queue.pathname!r} is not in QueueCollection")
        before = self.sequential_id
        high = (7 - message.priority) << 56
        linked = queue.message_position_list.get
        while True:             # more than once only past the 7 bytes' wrap (DEFECTS.md)
            self.sequential_id = (self.sequential_id + 1) & U64         # a 64-bit unsigned integer (3.1.1.1)
            message.lookup_identifier = high | (self.sequential_id & LOW_7_BYTES)
            if linked(message.lookup_identifier) is None:
                break
        message.arrival_time = int(self.scheduler.wall_time())
        blob = pack(message)
        size_kb = (self.total_bytes + len(blob) + 1023) // 1024
        if self.throttled or size_kb > self.queue_manager_quota:
            self.sequential_id = before
            return 2
        family_bytes = queue.total_bytes + queue.subqueue_bytes     # moves to and from subqueues keep its quota
        if (family_bytes + len(blob) + 1023) // 1024 > queue.quota:
            self.sequential_id = before
            return 1
        position = MessagePosition(queue, message.lookup_identifier, PositionState.LOCKED, blob)
        queue.message_position_list.insert(position)
        self.store.set_sequential_id(self.sequential_id)
        self._start_ttbr_timer(position, message)
        if transaction is not None:
            self._add_operation(transaction, TransactionalOperation(OperationType.ENQUEUE, position))
            return 0
        if recoverable(blob):
            self.store.put_message(PackedStoredMessage(queue.store_identifier, position.lookup_identifier,
                                                       PositionState.AVAILABLE.value, blob))
        self._make_available(queue, position, record=False)
        return 0

    # ------------------------------------------------------------------ 3.1.7.1.16 Move Message
    def move_message(self, message_position: MessagePosition, target_queue: Queue, transaction=None) -> int:
        """Move Message (3.1.7.1.16): same Message, new position in the target queue (Locked + op in a transaction)."""
        source = message_position.queue
        if message_position not in source.message_position_list or not self.is_live_queue(target_queue):
            return st.MQ_ERROR_MESSAGE_NOT_FOUND
        if transaction is not None:
            if target_queue.queue_type is QueueType.SYSTEM:
                return st.MQ_ERROR_TRANSACTION_USAGE
            self._set_state(source, message_position, PositionState.LOCKED)
            self._add_operation(transaction, TransactionalOperation(OperationType.MOVE, message_position,
                                                                    target_queue_reference=target_queue))
            return st.MQ_OK
        self._move_now(message_position, target_queue)
        return st.MQ_OK

    def _move_now(self, position: MessagePosition, target: Queue) -> MessagePosition:
        source = position.queue
        if target is source:        # a move within one queue (R_MoveMessage between two handles of a subqueue)
            self._make_available(source, position, record=True)
            return position
        expired = (source.identifier, position.lookup_identifier) in self._ttbr_deferred
        self._remove(source, position, PositionState.DELETED)
        moved = MessagePosition(target, position.lookup_identifier, PositionState.LOCKED, position.packed)
        target.message_position_list.insert(moved)
        if recoverable(moved.packed):
            self.store.put_message(PackedStoredMessage(target.store_identifier, moved.lookup_identifier,
                                                       PositionState.AVAILABLE.value, moved.packed))
        if target.queue_type is QueueType.SYSTEM:
            target.message_position_list.set_state(moved, PositionState.AVAILABLE)
            self._add_bytes(target, moved, +1)
        else:
            if expired:     # its time passed while a transaction held it: it expires in the target, unseen (#14)
                self._ttbr_deferred.add((target.identifier, moved.lookup_identifier))
            else:
                self._start_ttbr_timer(moved, unpack(moved.packed))  # the source's timer no longer finds it
            self._make_available(target, moved, record=False)
        return moved

    # ------------------------------------------------------------------ 3.1.7.2.1 / 3.1.7.2.2
    def message_position_deleted(self, queue: Queue, position: MessagePosition, reason: MessageClass) -> None:
        """Message Position Deleted (3.1.7.2.1): TotalBytes down, State Deleted, unlinked; the store forgets it."""
        if position not in queue.message_position_list:
            position.state = PositionState.DELETED
            return
        self._remove(queue, position, PositionState.DELETED)

    def _remove(self, queue: Queue, position: MessagePosition, state: PositionState, record: bool = True) -> None:
        if position.state is PositionState.AVAILABLE:
            self._add_bytes(queue, position, -1)
        queue.message_position_list.remove(position)
        position.state = state
        self._ttbr_deferred.discard((queue.identifier, position.lookup_identifier))
        if self._ttbr_entries:
            self._ttbr_entries.pop(position, None)          # its heap entry, if any, is stale from now on
        if record and recoverable(position.packed):
            self.store.delete_message(queue.store_identifier, position.lookup_identifier)
        if queue.parent_queue is not None:
            self.drop_subqueue_if_idle(queue)

    def message_position_available(self, queue: Queue, position: MessagePosition) -> None:
        """Message Position Available (3.1.7.2.2): State Available, then waiting readers are offered it (#7, #13)."""
        self._make_available(queue, position, record=True)

    def _make_available(self, queue: Queue, position: MessagePosition, record: bool) -> None:
        if (queue.identifier, position.lookup_identifier) in self._ttbr_deferred:
            self._ttbr_deferred.discard((queue.identifier, position.lookup_identifier))
            self._expire(queue, position)                 # #14: the deferred expiry happens now
            return
        if position.state is PositionState.AVAILABLE:
            return
        self._set_state(queue, position, PositionState.AVAILABLE, record=record)
        self._offer(queue, position)

    def _set_state(self, queue: Queue, position: MessagePosition, state: PositionState, record: bool = True) -> None:
        was_available = position.state is PositionState.AVAILABLE
        queue.message_position_list.set_state(position, state)
        if was_available and state is not PositionState.AVAILABLE:
            self._add_bytes(queue, position, -1)
        elif not was_available and state is PositionState.AVAILABLE:
            self._add_bytes(queue, position, +1)
        if record and recoverable(position.packed):
            if state is PositionState.LOCKED and self._note_locked is not None:
                self._note_locked(queue.store_identifier, position.lookup_identifier)
            else:
                self.store.set_message_state(queue.store_identifier, position.lookup_identifier, state.value)

    def _add_bytes(self, queue: Queue, position: MessagePosition, sign: int) -> None:
        """TotalBytes counts Available messages only, so Lock/NACK cycles cannot inflate it (#13)."""
        self._count_bytes(queue, body_size(position.packed) * sign)

    def _count_bytes(self, queue: Queue, size: int) -> None:
        """TotalBytes of the queue and of the queue manager change by ``size``; a subqueue's also counts in its queue's
        subqueue_bytes (the quota of a send to that queue)."""
        queue.total_bytes += size
        self.total_bytes += size
        if queue.parent_queue is not None:
            queue.parent_queue.subqueue_bytes += size

    def release_next_reader(self, queue: Queue) -> None:
        """Release Next Reader (3.1.7.3.7): a satisfied peek hands the message to the next reader at once (#7)."""
        # Offering in _offer never blocks on a peeker, so there is nothing left to release.
        return None
