"""asyncio transport and dispatch for connection-oriented DCE/RPC over TCP (C706 12.6.4; MS-RPCE 3.3.3).

One ``RpcConnection`` (an asyncio.Protocol) per TCP connection feeds bytes to the sans-IO
``qm2qm.rpc.connection.Connection`` and acts on its events: binds join association groups
(MS-RPCE 3.3.1.5.7), requests run their operation's lane or handler (inline when it returns bytes, from a
done-callback when it returns an asyncio.Future, as a task when it returns another awaitable), co_cancel / orphaned
cancel that task or Future (C706 12.6.4.6, 12.6.4.8), and a closing connection runs down its group's context
handles when it was the group's last (C706 5.1.6).
"""
from __future__ import annotations

import asyncio
import inspect
import ipaddress
import itertools
import logging
import socket
import time
import uuid
from functools import partial
from operator import attrgetter
from time import perf_counter
from typing import Any, Iterable

from qm2qm.rpc.auth.policy import AuthPolicy
from qm2qm.rpc.auth.security import SecurityProvider
from qm2qm.rpc.connection import Connection
from qm2qm.rpc.events import BindRequest, CallOrphaned, CallRequest, CancelRequest, ConnectionTerminated
from qm2qm.rpc.groups import AssociationGroup, AssociationGroups
from qm2qm.rpc.handles import MAX_CONTEXT_HANDLES, NULL_HANDLE, HandleLimitReached, run_down
from qm2qm.rpc.faults import NCA_S_FAULT_CANCEL, NCA_S_FAULT_UNSPEC, NCA_S_OP_RNG_ERROR, NCA_S_PROTO_ERROR
from qm2qm.rpc.interface import ContextHandleType, Interface, RpcFault
from qm2qm.rpc.mgmt import RpcStatistics, ensure_mgmt_interface
from qm2qm.rpc.batching import WriteBatcher
from qm2qm.rpc.budget import ConnectionSlots, ReassemblyBudget, UnreadAnswerBudget
from qm2qm.rpc.memory import give_back_free_memory
from qm2qm.rpc.observer import RpcObserver

# nca_s_fault_cancel answers a cancelled call (client: RPC_S_CALL_CANCELLED); nca_s_fault_unspec a server-side
# failure (client: RPC_S_CALL_FAILED, MS-RPCE 2.2.2.7 table). Both come from qm2qm.rpc.faults.
BIND_NAK_REASON_NOT_SPECIFIED = 0

# MS-RPCE 3.2.3.5.1: status codes a server MUST NOT send in a fault.
FORBIDDEN_FAULT_STATUSES = frozenset({
    0x00000000, 0x80000001, 0x80000002, 0x80000003, 0xC0000005, 0xC0000006, 0xC000001D, 0xC0000096,
    0xC00000AA, 0xC00000FD, 0xC0000194, 0xC0000235, 0xC0000409, 0xC0000420,
})

DEFAULT_MAX_CONNECTIONS = 1024
# Answer bytes waiting on one connection (the transport's buffer, the turn's held answers, the core's queue) past
# which its further pipelined requests wait to be dispatched until the peer reads: without it, one read of 64
# requests for a 4 MiB message queued 256 MiB of answers before the transport could push back.
MAX_OUTPUT_BACKLOG = 1024 * 1024
# Answers a peer leaves unread before its connection is closed. Calls already running (64 at most on a connection)
# still answer while it is paused, e.g. 64 waiting peeks when a 4 MiB message arrives; a Windows client has one call
# in flight, so it never has more than one answer (at most 4.3 MiB) outstanding.
MAX_UNREAD_ANSWERS = 64 * 1024 * 1024
# An answer this large (it went through the fragmenting path) is not queued while the answers left unread over every
# connection are past --max-unread-mib: what one wave of woken calls can add before their connections close is at
# most this much a connection.
CHECKED_ANSWER_SIZE = 64 * 1024
DEFAULT_IDLE_TIMEOUT_S = 60.0
# MS-RPCE 3.3.3.2.1 <117>: a Windows server turns TCP keep-alives on after 720 s without a packet (the default
# time-out parameter, 5), then probes once a second; without them a peer that vanishes without a FIN or RST (a
# crash, a cut cable) is never noticed and its context handles never run down. 10 unanswered probes end the
# connection (Windows' TcpMaxDataRetransmissions default).
DEFAULT_KEEPALIVE_S = 720
KEEPALIVE_PROBE_INTERVAL_S = 1
KEEPALIVE_PROBES = 10

_CANCEL = "cancel"          # co_cancel: answer with the cancel fault
_ORPHAN = "orphan"          # orphaned: send nothing
_LOST = "lost"              # connection gone: send nothing
_SHUTDOWN = "shutdown"      # server closing: answer with the cancel fault


def _unsent_of(connection: "RpcConnection") -> int:
    return connection.unsent()


def _is_open(connection: "RpcConnection") -> bool:
    return not connection.transport.is_closing()


def _close_the_most_unread(budget: UnreadAnswerBudget) -> None:
    """The answers left unread on every connection pass the server's allowance: close the open connection that
    leaves the most. Until the closed ones' transports let go of their bytes, every further large answer closes
    one more, so no wave of answers (woken peeks of a 4 MiB message) outgrows the allowance by more than one."""
    largest = budget.largest(_is_open)
    if largest is None:
        return
    victim, most = largest
    victim.log(logging.WARNING, "answers left unread on every connection (%d bytes) pass the server's %d "
               "(--max-unread-mib): closing this connection, which leaves the most (%d bytes)",
               budget.held, budget.capacity, most)
    budget.closed += 1
    victim._drop_unsent()


def registry_key(interface: Interface) -> tuple[uuid.UUID, int, int]:
    """The (uuid, major, minor) key the connection core looks interfaces up by."""
    return (interface.uuid, interface.version[0], interface.version[1])


class _Call:
    """An operation running as a task (or the Future its handler returned), and why it was cancelled (None while
    not cancelled)."""
    __slots__ = ("task", "reason", "started")

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.reason: str | None = None
        self.started = False

    def cancel(self) -> None:
        # A task cancelled before its first step never runs its body, so it could neither answer nor
        # clean up; one that has not started yet sees ``reason`` when it does (_run) and ends there.
        if self.started:
            self.task.cancel()


def _forget_unstarted(calls_to_start: set, call: _Call, _task: asyncio.Task) -> None:
    """A call task has ended: it no longer holds later calls back from answering inline (CallState.answer_now)."""
    calls_to_start.discard(call)


def _discard(awaitable) -> None:
    """Drop a handler's awaitable that will never be awaited, without a 'never awaited' warning."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


class CallState:
    """The CallContext of one request (qm2qm/rpc/interface.py): ids, syntax and the group's handle table."""
    __slots__ = ("request", "ndr64", "answer_now", "_connection", "_group")

    # one made per call: what handlers read on every call is a slot, the rest is read from the request on demand
    call_id = property(attrgetter("request.call_id"))
    opnum = property(attrgetter("request.opnum"))
    interface = property(attrgetter("request.interface"))
    principal = property(attrgetter("request.principal"))   # from the call's security context (ANONYMOUS if none)
    auth_level = property(attrgetter("request.auth_level"))
    connection_id = property(attrgetter("_connection.id"))
    peer_host = property(attrgetter("_connection.peer_host"))
    association_group_id = property(attrgetter("_group.id"))

    def __init__(self, connection: "RpcConnection", group: AssociationGroup, request: CallRequest,
                 answer_now: bool = False) -> None:
        # answer_now: no earlier call of this server is still waiting for its task's first step, so a handler
        # may complete this call inline and still act in arrival order (qm2qm/mqqp read fast path).
        self.answer_now = answer_now
        self.request = request
        self.ndr64 = request.ndr64
        self._connection = connection
        self._group = group

    def lookup_handle(self, wire: bytes, handle_type: ContextHandleType) -> Any | None:
        """20-byte wire handle → object (None for NULL); bad handles fault 0x1C00001A (MS-RPCE 3.3.1.4.1)."""
        try:
            return self._group.handles.lookup(wire, handle_type)
        except RpcFault as fault:
            self._connection.log_handle(logging.INFO, "rejected", wire, handle_type.name, self.call_id,
                                        str(fault))
            raise

    def new_handle(self, handle_type: ContextHandleType, obj: Any) -> bytes:
        """Register obj in this call's association group; returns the 20-byte wire handle."""
        try:
            wire = self._group.handles.new(handle_type, obj)
        except HandleLimitReached as refused:
            if self._group.handles.refused == 1:        # once per group: a client at the limit may keep asking
                self._connection.log_refused_handle(handle_type.name, self.call_id, str(refused))
            raise
        self._connection.log_handle(logging.DEBUG, "created", wire, handle_type.name, self.call_id)
        return wire

    def close_handle(self, wire: bytes) -> bytes:
        """Forget a handle (no rundown); returns the NULL handle; bad handles fault 0x1C00001A."""
        try:
            entry = self._group.handles.close(wire)
        except RpcFault as fault:
            self._connection.log_handle(logging.INFO, "rejected", wire, "?", self.call_id, str(fault))
            raise
        self._connection.log_handle(logging.DEBUG, "closed", wire, entry.handle_type.name, self.call_id)
        return NULL_HANDLE


def _keep_alive(sock: Any, idle_s: int) -> None:
    """TCP keep-alives on an accepted connection: the first probe after ``idle_s`` seconds of silence, then one a
    second (MS-RPCE 3.3.3.2.1 <117>); a platform without the per-socket settings keeps its own timing."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_PROBE_INTERVAL_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    except OSError:         # a socket already closed by the peer: connection_lost follows
        pass


def _host_of(address: str) -> str:
    """A peer's address as one host is always named: an IPv4-mapped IPv6 address (a dual-stack listener's view of an
    IPv4 peer) as the IPv4 address, so that a client's connections compare equal whichever socket family took them
    (association groups, OpenQueueDescriptor.opener_host)."""
    try:
        mapped = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    return str(mapped.ipv4_mapped) if mapped.version == 6 and mapped.ipv4_mapped is not None else address


class RpcConnection(asyncio.Protocol):
    """One TCP connection: framing-progress tracking, event dispatch, calls in flight, teardown."""

    def __init__(self, server: "RpcServer") -> None:
        self.server = server
        self.id = 0
        self.peer = "?"
        self.peer_host = ""
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.group: AssociationGroup | None = None
        self.calls: dict[int, _Call] = {}
        self.finished: asyncio.Future | None = None
        self._lost = False
        self._last_progress = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._header = bytearray()          # partial 16-byte PDU header
        self._body_left = 0                 # bytes still missing from the current PDU
        self._clock = time.monotonic        # the server loop's time(), once connected
        self.call_starts: dict[int, tuple[Interface, int, float]] = {}  # call_id -> (interface, opnum, arrival)
        self.held: list[bytes] | None = None   # answers the server's WriteBatcher holds to the turn's end
        self._close_when_released = False
        self._writing_paused = False        # the transport's buffer is over its high-water mark
        self._deferred: list | None = None  # events of a read not dispatched yet: the answers are backlogged
        self._counted = False               # its unsent answers are in the server's unread_budget
        # uvloop keeps every object written whole until its last byte is sent, while get_write_buffer_size() says
        # what is left to send: the bytes of the writes made since the buffer was last empty (asyncio keeps only the
        # rest, so it needs none)
        self._retained = 0
        self._keeps_whole_writes = False
        self._dropped_unsent = False        # closed for its unread answers (_drop_unsent)

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self.server
        self.transport = transport          # type: ignore[assignment]
        self._keeps_whole_writes = type(transport).__module__.startswith("uvloop")
        self.id = next(server._ids)
        peername = transport.get_extra_info("peername")
        if peername:
            self.peer_host = _host_of(str(peername[0]))
            self.peer = f"{peername[0]}:{peername[1]}"
        slots = server.connection_slots
        if not slots.take():
            if slots.refusals.note():
                self.log(logging.WARNING, "connection refused: %d connections open over every listener "
                         "(max_connections); %d refused since the server started", slots.open, slots.refusals.count)
            transport.abort()
            return
        if server.keepalive_s:
            _keep_alive(transport.get_extra_info("socket"), server.keepalive_s)
        loop = asyncio.get_running_loop()
        self.finished = loop.create_future()
        self._clock = (server._loop or loop).time
        if getattr(self._clock, "__func__", None) is asyncio.BaseEventLoop.time:
            self._clock = time.monotonic    # what asyncio's own loop.time() returns, without its Python frame
        self.conn = server._new_connection()
        server.connections[self.id] = self
        self._last_progress = loop.time()
        period = server._idle_period()
        if period is not None:
            self._idle_timer = loop.call_later(period, self._check_idle)
        self.log(logging.INFO, "connection opened")
        if server.observer is not None:
            server.observer.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None or self._lost:
            return
        n = len(data)
        if not self._body_left and not self._header and n >= 16 and data[8] | (data[9] << 8) == n \
                and self._deferred is None:
            self._last_progress = self._clock()         # the common case: one whole PDU
            self.server.statistics.pkts_in += 1
            if not data[2]:
                # A whole plain request skips the core's parsing loop and event list (receive_plain_request), and
                # the runtime's event dispatch; _on_call writes its answer itself, so only what it queued (a
                # fault, a fragmented answer) is left to flush.
                try:
                    request = conn.receive_plain_request(data)
                    if request is not None:
                        self._on_call(request)
                except Exception:
                    self._internal_error()
                    return
                if request is not None:
                    if conn.pending_output:
                        self._flush()
                    return
        else:
            self._track_framing(data)
        try:
            events = conn.receive_data(data)
            if self._deferred is not None:      # behind what waits already (a read that came before the pause)
                self._deferred.extend(events)
            else:
                self._dispatch(events)
        except Exception:
            self._internal_error()
            return
        self._flush()

    def _dispatch(self, events: list) -> None:
        """Handle a read's events in order; past the first call, stop while the answers are backlogged
        (MAX_OUTPUT_BACKLOG) and keep the rest for _drain_deferred."""
        for index, event in enumerate(events):
            kind = type(event)
            if kind is CallRequest:
                if index and self._backlogged():
                    self._defer(events[index:])
                    return
                self._on_call(event)
            elif kind is BindRequest:
                self._on_bind(event)
            elif kind is CancelRequest:
                self._on_cancel(event.call_id, _CANCEL)
            elif kind is CallOrphaned:
                self._on_cancel(event.call_id, _ORPHAN)
            elif kind is ConnectionTerminated:
                self.log(logging.INFO, "connection terminated by the protocol core: %s", event.reason)
            else:
                self.log(logging.ERROR, "unexpected event %r", event)

    def _backlogged(self) -> bool:
        if self._writing_paused:
            return True
        return self.unsent() + len(self.conn.pending_output) >= MAX_OUTPUT_BACKLOG

    def _defer(self, events: list) -> None:
        """Keep undispatched events and stop reading until the peer has taken the answers; the check runs after
        this turn's held answers reach the transport (the WriteBatcher's end of turn was scheduled before it)."""
        self._deferred = events
        self.transport.pause_reading()
        (self.server._loop or asyncio.get_running_loop()).call_soon(self._drain_deferred)

    def _drain_deferred(self) -> None:
        """Dispatch what waits, unless the transport's buffer is still over its mark (resume_writing calls again)."""
        if self._deferred is None or self._lost or self._writing_paused:
            return
        events, self._deferred = self._deferred, None
        try:
            self._dispatch(events)
        except Exception:
            self._internal_error()
            return
        self._flush()
        if self._deferred is None and not self._writing_paused and not self.transport.is_closing():
            self.transport.resume_reading()

    def _internal_error(self) -> None:
        # A defect below us must cost this connection, never the server.
        self.log(logging.ERROR, "internal error while handling received data; closing", exc_info=True)
        try:
            self._flush()
        except Exception:
            pass                        # the core is broken: what it holds need not reach the peer
        self.transport.abort()

    def eof_received(self) -> bool | None:
        conn = self.conn
        if conn is not None and not self._lost:
            try:
                conn.receive_data(b"")
            except Exception:
                self.log(logging.ERROR, "internal error at end of stream", exc_info=True)
            self._flush()
            if self.held is not None:       # the transport closes when this returns: what is held goes first
                self.release_held()
        return False                        # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is None or self._lost:
            return
        self._lost = True
        self._deferred = None
        self.conn.close()
        self._uncount()
        if self._dropped_unsent:
            self.server.give_back_memory_soon()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self.server.connections.pop(self.id, None) is not None:
            self.server.connection_slots.give()
        self.log(logging.INFO, "connection closed%s", f": {exc}" if exc else "")
        if self.server.observer is not None:
            self.server.observer.connection_closed(self)
        tasks = []
        for call in self.calls.values():
            if call.task is not None and not call.task.done():
                if call.reason is None:
                    call.reason = _LOST
                call.cancel()
                tasks.append(call.task)
        self.server._spawn(self._finish(tasks))

    def pause_writing(self) -> None:
        # A peer that does not read its replies stops being read (bounded buffering).
        self._writing_paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._uncount()
        if self._lost:
            return
        if self._deferred is not None:
            self._drain_deferred()
        else:
            self.transport.resume_reading()

    # -- events --

    def _on_bind(self, request: BindRequest) -> None:
        conn = self.conn
        server = self.server
        if request.is_alter_context or self.group is not None:
            if self.group is None:
                self.log(logging.INFO, "alter_context before bind: bind_nak")
                conn.reject_bind(request, BIND_NAK_REASON_NOT_SPECIFIED)
                return
            # alter_context cannot change the group (MS-RPCE 3.3.1.1.2); the core decides about a 2nd bind.
            conn.accept_bind(request, self.group.id, "" if request.is_alter_context else str(server.port))
            return
        if request.assoc_group_id == 0:
            group = server.groups.create(self.id, self.peer_host)
            self.group = group
            self.log(logging.INFO, "association group created")
        else:
            group = server.groups.join(request.assoc_group_id, self.id, self.peer_host)
            if group is None:
                self.log(logging.INFO, "bind to unknown association group 0x%08x: bind_nak",
                         request.assoc_group_id)
                conn.reject_bind(request, BIND_NAK_REASON_NOT_SPECIFIED)
                return
            self.group = group
            self.log(logging.INFO, "joined association group")
        conn.accept_bind(request, group.id, str(server.port))

    def _on_call(self, request: CallRequest) -> None:
        server = self.server
        server.statistics.calls_in += 1
        conn = self.conn
        call_id, _, opnum, _, stub, interface, _, principal, auth_level = request
        start = (interface, opnum, perf_counter())
        op = interface.operations.get(opnum)
        if op is None:
            self._fault(call_id, NCA_S_OP_RNG_ERROR, did_not_execute=True, start=start)
            return
        if self.group is None:
            self._fault(call_id, NCA_S_PROTO_ERROR, did_not_execute=True, start=start)
            return
        if call_id in self.calls:
            self.log(logging.WARNING, "call_id %d reused while in flight: fault", call_id, call_id=call_id)
            conn.send_fault(call_id, NCA_S_PROTO_ERROR, did_not_execute=True)
            return
        if interface.unauthenticated_opnums is not None and opnum not in interface.unauthenticated_opnums \
                and not server.auth.call_allowed(principal.authenticated, auth_level):
            # MS-MQQP 5 / MS-RPCE 3.3.1.5.2: refused before the handler runs
            self.log(logging.INFO, "%s (opnum %d) refused to %s at level %d (auth %s, min level %d)", op.name,
                     opnum, principal.name, auth_level, server.auth.mode,
                     server.auth.min_level, call_id=call_id)
            conn.send_fault(call_id, interface.access_denied_status)
            return
        answer_now = not server.calls_to_start
        try:
            ctx = CallState(self, self.group, request, answer_now)
            lane = interface.lanes.get(opnum) if answer_now else None
            result = lane(ctx, stub) if lane is not None else None
            if result is None:
                result = op.handler(ctx, stub)
        except RpcFault as fault:
            self._fault(call_id, self._fault_status(fault, call_id), start=start)
            return
        except (Exception, asyncio.CancelledError):
            self.log(logging.ERROR, "%s (opnum %d) raised", op.name, request.opnum, call_id=call_id,
                     exc_info=True)
            self._fault(call_id, NCA_S_FAULT_UNSPEC, start=start)
            return
        if type(result) is bytes:               # answered inline: its start never leaves this frame
            self._respond(call_id, result, start)
            return
        self.call_starts[call_id] = start       # for the answer to come (_respond, _fault pop it)
        if isinstance(result, asyncio.Future) and not isinstance(result, asyncio.Task):
            self._await_answer(call_id, op.name, result)
        elif inspect.isawaitable(result):
            call = _Call()
            self.calls[call_id] = call
            call.task = asyncio.get_running_loop().create_task(self._run(call_id, call, op.name, result))
            server.calls_to_start.add(call)
            # a task cancelled before its first step (loop shutdown) never reaches _run's discard
            call.task.add_done_callback(partial(_forget_unstarted, server.calls_to_start, call))
        else:
            self._answer(call_id, op.name, result)

    def _on_cancel(self, call_id: int, reason: str) -> None:
        call = self.calls.get(call_id)
        if call is None or call.task is None or call.task.done():
            return                          # not in flight (or answered inline): ignore (C706 12.6.4.6)
        if call.reason is None or reason == _ORPHAN:
            call.reason = reason
        if reason == _ORPHAN:
            self.call_starts.pop(call_id, None)     # never answered: nothing to observe
        self.log(logging.INFO, "call %s", "cancelled" if reason == _CANCEL else "orphaned", call_id=call_id)
        call.cancel()

    async def _run(self, call_id: int, call: _Call, name: str, awaitable) -> None:
        call.started = True
        self.server.calls_to_start.discard(call)
        result = error = None
        try:
            if call.reason is not None:         # cancelled before this task first ran
                _discard(awaitable)
                raise asyncio.CancelledError
            result = await awaitable
        except asyncio.CancelledError as exc:
            if call.reason is None:
                raise                       # not our cancellation: let it propagate
            error = exc
        except Exception as exc:
            error = exc
        finally:
            self._forget(call_id, call)
        self._conclude(call_id, call.reason, name, result, error)

    def _await_answer(self, call_id: int, name: str, future: asyncio.Future) -> None:
        # A Future's handler has done all its work: no task, and nothing that must start before later calls
        # (calls_to_start); co_cancel, orphaned, a lost connection and shutdown cancel the Future itself.
        call = _Call()
        call.task = future
        call.started = True
        self.calls[call_id] = call
        future.add_done_callback(partial(self._answered, call_id, call, name))

    def _answered(self, call_id: int, call: _Call, name: str, future: asyncio.Future) -> None:
        """A Future's outcome, answered as _run answers its awaitable's."""
        self._forget(call_id, call)
        if future.cancelled():
            self._conclude(call_id, call.reason, name, None, asyncio.CancelledError())
            return
        error = future.exception()
        self._conclude(call_id, call.reason, name, future.result() if error is None else None, error)

    def _forget(self, call_id: int, call: _Call) -> None:
        """A call that ran apart from its request is over: it is no longer in flight."""
        if self.calls.get(call_id) is call:
            del self.calls[call_id]
            if not self.calls:
                self._last_progress = self._clock()

    def _conclude(self, call_id: int, reason: str | None, name: str, result: Any,
                  error: BaseException | None) -> None:
        """Answer a call that ran apart (a task, or the Future its handler returned) with its result or error: the
        cancel fault for co_cancel and shutdown, nothing once orphaned or lost (C706 12.6.4.6, 12.6.4.8)."""
        if isinstance(error, asyncio.CancelledError):
            if reason in (_CANCEL, _SHUTDOWN) and not self._lost:
                self._fault(call_id, NCA_S_FAULT_CANCEL)
                self._flush()
            return
        if error is not None and not isinstance(error, RpcFault):
            self.log(logging.ERROR, "%s raised", name, call_id=call_id, exc_info=error)
        if reason in (_ORPHAN, _LOST) or self._lost:
            return
        if error is None:
            self._answer(call_id, name, result)
        elif isinstance(error, RpcFault):
            self._fault(call_id, self._fault_status(error, call_id))
        else:
            self._fault(call_id, NCA_S_FAULT_UNSPEC)
        self._flush()

    def _answer(self, call_id: int, name: str, result: Any) -> None:
        if isinstance(result, (bytes, bytearray, memoryview)):
            self._respond(call_id, bytes(result))
        else:
            self.log(logging.ERROR, "%s returned %s, not bytes", name, type(result).__name__, call_id=call_id)
            self._fault(call_id, NCA_S_FAULT_UNSPEC)

    def _respond(self, call_id: int, stub: bytes, start: tuple | None = None) -> None:
        """Answer a call; ``start``: its (interface, opnum, arrival) when not in call_starts (an inline answer)."""
        conn = self.conn
        pdu = conn.response_pdu(call_id, stub)
        if pdu is None:
            conn.send_response(call_id, stub)
        elif not self.transport.is_closing():   # the common answer: written as it is, not queued and copied
            self.server.statistics.pkts_out += 1
            self.server.writes.write(self, pdu)
        if start is None:
            start = self.call_starts.pop(call_id, None)
        observer = self.server.observer
        if observer is not None and start is not None:
            observer.call_done(start[0], start[1], None, stub, perf_counter() - start[2])

    def _fault(self, call_id: int, status: int, did_not_execute: bool = False, start: tuple | None = None) -> None:
        """Send a fault for a call; log it with the call's identifiers (one line per fault) and observe it."""
        self.conn.send_fault(call_id, status, did_not_execute=did_not_execute)
        if start is None:
            start = self.call_starts.pop(call_id, None)
            if start is None:
                return
        interface, opnum, t0 = start
        self.log(logging.INFO, "fault 0x%08x: %s opnum %d", status, interface.name, opnum, call_id=call_id,
                 fields={"interface": interface.name, "opnum": opnum, "fault": f"0x{status:08x}"})
        if self.server.observer is not None:
            self.server.observer.call_done(interface, opnum, status, None, perf_counter() - t0)

    def _fault_status(self, fault: RpcFault, call_id: int) -> int:
        status = fault.status & 0xFFFFFFFF
        if status in FORBIDDEN_FAULT_STATUSES or status != fault.status:
            self.log(logging.ERROR, "handler fault status 0x%x must not be sent (MS-RPCE 3.2.3.5.1)",
                     fault.status, call_id=call_id)
            return NCA_S_FAULT_UNSPEC
        return status

    # -- output, idle, teardown --

    def _flush(self) -> None:
        conn = self.conn
        transport = self.transport
        out, pdus = conn.take_output()  # a copy: handing uvloop the bytearray itself made a 4 MiB read 2x slower
        if out and not transport.is_closing():
            if len(out) >= CHECKED_ANSWER_SIZE and self._no_room_for_answers():
                self.log(logging.WARNING, "answers left unread on every connection still pass --max-unread-mib "
                         "while closed connections let go of theirs: closing this one rather than queue %d bytes "
                         "more", len(out))     # its call's handles run down: a received message goes back
                self.server.unread_budget.closed += 1
                self._drop_unsent()
                return
            self.server.statistics.pkts_out += pdus
            if self.held is not None:   # behind the answers held for the turn's end (rpc/batching.py)
                self.held.append(out)
                self._check_unread()    # the answers of one turn (many woken peeks) count before it ends
            else:
                self.write_now(out)
        if conn.closed and not transport.is_closing():
            if self.held is not None:
                self._close_when_released = True
            else:
                transport.close()

    # -- rpc/batching.py Writer --

    def write_now(self, data: bytes) -> None:
        transport = self.transport
        if self._keeps_whole_writes:
            retained = self._retained if transport.get_write_buffer_size() else 0
            transport.write(data)
            self._retained = retained + len(data) if transport.get_write_buffer_size() else 0
        else:
            transport.write(data)
        if self._writing_paused or self._counted:
            self._check_unread()

    def unsent(self) -> int:
        """Bytes of answers the kernel has not taken: the transport's buffer (on uvloop the whole objects it holds)
        and what is held for the turn's end."""
        held = self.held
        buffered = self.transport.get_write_buffer_size()
        if self._keeps_whole_writes:
            buffered = max(buffered, self._retained) if buffered else 0
        return buffered + (sum(map(len, held)) if held else 0)

    def _check_unread(self) -> None:
        """Count what a paused or backlogged connection leaves unsent in the server's UnreadAnswerBudget; close it
        past MAX_UNREAD_ANSWERS, or, when every connection's together pass the budget, the one that leaves the most
        (its handles are run down)."""
        if self.transport.is_closing():
            return                      # counted until connection_lost: uvloop frees its buffer a turn later
        budget = self.server.unread_budget
        unsent = self.unsent()
        if unsent > MAX_UNREAD_ANSWERS:
            self.log(logging.WARNING, "the peer left %d bytes of answers unread (more than %d): closing", unsent,
                     MAX_UNREAD_ANSWERS)
            self._drop_unsent()
        elif self._writing_paused or unsent >= MAX_OUTPUT_BACKLOG:
            self._counted = True
            if budget.note(self, unsent) and budget.recount(_unsent_of):
                _close_the_most_unread(budget)
        elif self._counted:
            self._uncount()

    def _no_room_for_answers(self) -> bool:
        """The budget is still past its capacity, the connections closed for it counted (uvloop lets go of their
        bytes a turn later): one more answer of CHECKED_ANSWER_SIZE or more would only add to it."""
        budget = self.server.unread_budget
        return budget.held > budget.capacity and budget.recount(_unsent_of)

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self.server.unread_budget.forget(self)

    def _drop_unsent(self) -> None:
        """Close at once: what is held or buffered is dropped, not sent (and given back to the system once the
        transport has let go of it: connection_lost)."""
        self._dropped_unsent = True
        if self.held:
            self.held.clear()
        self.transport.abort()

    def release_held(self) -> None:
        held, self.held = self.held, None
        transport = self.transport
        if held and not transport.is_closing():
            if len(held) == 1:
                transport.write(held[0])
            else:
                transport.writelines(held)      # uvloop: one writev, no copy of a large queued answer
        if self._writing_paused or self._counted:
            self._check_unread()
        if self._close_when_released and not transport.is_closing():
            transport.close()

    def _track_framing(self, data: bytes) -> None:
        """Note when a complete PDU arrived (the idle timeout counts from the last one); data_received takes the
        common case, one whole PDU, itself."""
        n = len(data)
        pos = 0
        header = self._header
        completed = False
        stats = self.server.statistics
        while pos < n:
            if self._body_left:
                take = min(self._body_left, n - pos)
                self._body_left -= take
                pos += take
                if not self._body_left:
                    completed = True
                    stats.pkts_in += 1
            else:
                take = 16 - len(header)
                header += data[pos:pos + take]
                pos += take
                if len(header) == 16:
                    self._body_left = max(0, (header[8] | (header[9] << 8)) - 16)
                    header.clear()
                    if not self._body_left:
                        completed = True
                        stats.pkts_in += 1
        if completed:
            self._last_progress = self._clock()

    def _check_idle(self) -> None:
        if self._lost:
            return
        server = self.server
        loop = server._loop
        partial = bool(self._header) or self._body_left > 0
        # Unbound or half-sent connections use idle_timeout_s; a bound one resting at a PDU boundary is
        # legitimate (a Windows peer keeps its association open while it holds context handles), so it only
        # idles out when bound_idle_timeout_s is set.
        limit = server.idle_timeout_s if self.group is None or partial else server.bound_idle_timeout_s
        idle = loop.time() - self._last_progress
        if limit is not None and not self.calls and idle >= limit:
            self.log(logging.INFO, "idle for %.3f s (%s): closing", idle,
                     "half-sent PDU" if partial else "not bound" if self.group is None else "bound")
            self.transport.abort()
            return
        period = server._idle_period()
        delay = period if limit is None or self.calls else min(period, limit - idle)
        self._idle_timer = loop.call_later(max(delay, 0.001), self._check_idle)

    def shutdown(self) -> list[asyncio.Task]:
        """Server closing: cancel in-flight calls (they are answered with the cancel fault)."""
        tasks = []
        for call in self.calls.values():
            if call.task is not None and not call.task.done():
                call.reason = call.reason or _SHUTDOWN
                call.cancel()
                tasks.append(call.task)
        return tasks

    async def _finish(self, tasks: list[asyncio.Task]) -> None:
        try:
            if tasks:
                _, stuck = await asyncio.wait(tasks, timeout=self.server.cancel_wait_s)
                if stuck:
                    self.log(logging.WARNING, "%d handler(s) ignored cancellation for %.1f s; running down anyway",
                             len(stuck), self.server.cancel_wait_s)
            group = self.group
            if group is not None and self.server.groups.leave(group, self.id):
                entries = group.handles.drain()
                if entries:
                    self.log(logging.INFO, "association group's last connection closed: running down %d "
                             "handle(s)", len(entries))
                await run_down(entries, logger=self.server.logger, extra=self._fields())
        finally:
            if self.finished is not None and not self.finished.done():
                self.finished.set_result(None)

    # -- logging --

    def _fields(self, call_id: int | None = None) -> dict:
        fields = {"conn_id": self.id, "peer": self.peer,
                  "assoc_group": self.group.id if self.group is not None else None}
        if call_id is not None:
            fields["call_id"] = call_id
        return fields

    def log(self, level: int, msg: str, *args, call_id: int | None = None, exc_info: bool = False,
            fields: dict | None = None) -> None:
        """Log on "qm2qm.rpc" with extra fields conn_id, peer, assoc_group (and call_id, ``fields``); no
        formatting when off."""
        logger = self.server.logger
        if logger.isEnabledFor(level):
            extra = self._fields(call_id)
            if fields:
                extra.update(fields)
            logger.log(level, "[conn %d %s] " + msg, self.id, self.peer, *args, exc_info=exc_info, extra=extra)

    def log_refused_handle(self, type_name: str, call_id: int, reason: str) -> None:
        """Log (WARNING) a context handle not made because the association group holds its most."""
        fields = self._fields(call_id)
        fields.update(handle_type=type_name, handle_event="refused")
        self.server.logger.warning("[conn %d %s] no new %s handle: %s (serve --max-context-handles)", self.id,
                                   self.peer, type_name, reason, extra=fields)

    def log_handle(self, level: int, event: str, wire: bytes, type_name: str, call_id: int,
                   detail: str = "") -> None:
        """Log a context-handle event (created / closed / rejected) with handle, handle_type, handle_event."""
        logger = self.server.logger
        if logger.isEnabledFor(level):
            fields = self._fields(call_id)
            handle = bytes(wire[4:20]).hex()
            fields.update(handle=handle, handle_type=type_name, handle_event=event)
            logger.log(level, "[conn %d %s] %s handle %s %s%s", self.id, self.peer, type_name, handle, event,
                       f": {detail}" if detail else "", extra=fields)


class RpcServer:
    """A DCE/RPC server on ncacn_ip_tcp serving registered interfaces (C706 12; MS-RPCE 3.3.3)."""

    def __init__(self, interfaces: Iterable[Interface] = (), *, host: str = "127.0.0.1", port: int = 0,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, max_context_handles: int = MAX_CONTEXT_HANDLES,
                 idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
                 bound_idle_timeout_s: float | None = None,
                 logger: logging.Logger | None = None, limits: Any = None,
                 check_group_host: bool = True, cancel_wait_s: float = 5.0, mgmt: bool = True,
                 observer: RpcObserver | None = None, auth: AuthPolicy | None = None,
                 first_connection_id: int = 1, reassembly_budget: ReassemblyBudget | None = None,
                 unread_budget: UnreadAnswerBudget | None = None, security: SecurityProvider | None = None,
                 connection_slots: ConnectionSlots | None = None, keepalive_s: int = DEFAULT_KEEPALIVE_S) -> None:
        """``auth``: the authentication policy (None: ``optional`` without a user file, so every authenticated
        bind is refused with bind_nak 8 and every call is unauthenticated). Connection ids count from
        ``first_connection_id`` (two listeners of one process keep their ids, and so trace sessions, apart).
        ``max_context_handles``: the most one association group may hold (handles.HandleLimitReached).
        ``reassembly_budget``: the allowance for unfinished fragmented requests, shared with the other listeners of
        the process (None: one of the default size for this server alone); ``unread_budget``: likewise, for the
        answers left unread by peers that stopped reading; ``security``: the security-context factory (and its
        bound on live contexts) shared with the other listeners (None: one of ``auth`` for this server alone)."""
        self.host = host
        self.auth = auth if auth is not None else AuthPolicy()
        self.security = security if security is not None else SecurityProvider(self.auth)
        self.requested_port = port
        # shared with the other listeners of the process (None: max_connections for this server alone)
        self.connection_slots = connection_slots if connection_slots is not None else ConnectionSlots(max_connections)
        self.idle_timeout_s = idle_timeout_s              # unbound or half-sent connections
        self.keepalive_s = keepalive_s                    # silence before TCP keep-alives (0: none)
        self.bound_idle_timeout_s = bound_idle_timeout_s  # bound connections quiet at a PDU boundary (opt-in)
        self.logger = logger or logging.getLogger("qm2qm.rpc")
        self.limits = limits
        self.reassembly_budget = reassembly_budget if reassembly_budget is not None else ReassemblyBudget()
        self.unread_budget = unread_budget if unread_budget is not None else UnreadAnswerBudget()
        self.cancel_wait_s = cancel_wait_s      # how long a cancelled handler may take before rundown goes ahead
        self.observer = observer                # per-call and per-connection notifications (qm2qm/rpc/observer.py)
        self.registry: dict[tuple[uuid.UUID, int, int], Interface] = {}
        self.groups = AssociationGroups(check_host=check_group_host, max_context_handles=max_context_handles)
        self.connections: dict[int, RpcConnection] = {}
        self._ids = itertools.count(first_connection_id)
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task] = set()
        self._trim_scheduled = False
        self.calls_to_start: set[_Call] = set()     # call tasks created whose first step has not run yet
        self.writes = WriteBatcher()                # when answers leave: at once, or at the turn's end
        self.statistics = RpcStatistics()           # rpc_mgmt_inq_stats counters (C706 Appendix Q)
        for interface in interfaces:
            self.register(interface)
        if mgmt:                                    # every endpoint answers mgmt, as on Windows (MS-RPCE 2.2.1.3)
            names = {}
            if self.auth.accepts_authentication:
                # every authn service a bind can negotiate (C706 Appendix Q): with a keytab Kerberos (16) and
                # SPNEGO (9) too, without a user file as well
                names = {auth_type: self.auth.server_principal for auth_type in self.security.auth_types}
            ensure_mgmt_interface(self, principal_names=names)

    def register(self, interface: Interface) -> None:
        """Serve another interface (new binds see it at once)."""
        key = registry_key(interface)
        if key in self.registry and self.registry[key] is not interface:
            raise ValueError(f"interface {interface.uuid} v{interface.version[0]}.{interface.version[1]} "
                             "is already registered")
        self.registry[key] = interface

    @property
    def is_listening(self) -> bool:
        """rpc_mgmt_is_server_listening: True while the listening socket accepts connections."""
        return self._server is not None and self._server.is_serving()

    @property
    def port(self) -> int:
        """The port actually listened on (the ephemeral one when started with port 0)."""
        if self._server is None or not self._server.sockets:
            return self.requested_port
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        """Listen on (host, port)."""
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(lambda: RpcConnection(self), self.host,
                                                      self.requested_port)
        self.logger.info("listening on %s:%d", self.host, self.port,
                         extra={"conn_id": None, "peer": None, "assoc_group": None})

    async def close(self, *, grace_s: float = 0.0) -> None:
        """Stop accepting; give in-flight calls grace_s to finish, fault the rest with nca_s_fault_cancel,
        close every connection and run every association group's handles down."""
        if self._server is not None:
            self._server.close()
        pending = [c.task for rc in self.connections.values() for c in rc.calls.values()
                   if c.task is not None and not c.task.done()]
        if pending and grace_s > 0:
            await asyncio.wait(pending, timeout=grace_s)
        cancelled = []
        for rc in list(self.connections.values()):
            cancelled += rc.shutdown()
        if cancelled:
            await asyncio.wait(cancelled, timeout=self.cancel_wait_s)
        self.writes.end_turn()                      # what is held goes before the connections close
        finished = []
        for rc in list(self.connections.values()):
            if rc.finished is not None:
                finished.append(rc.finished)
            if rc.transport is not None and not rc.transport.is_closing():
                rc.transport.close()
        if finished:
            await asyncio.gather(*finished)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _idle_period(self) -> float | None:
        limits = [t for t in (self.idle_timeout_s, self.bound_idle_timeout_s) if t is not None]
        return min(limits) if limits else None

    def _new_connection(self) -> Connection:
        if self.limits is None:
            return Connection(self.registry, security=self.security, budget=self.reassembly_budget)
        return Connection(self.registry, limits=self.limits, security=self.security, budget=self.reassembly_budget)

    def give_back_memory_soon(self) -> None:
        """Once the connections closing in this turn have let go of their answers: memory.give_back_free_memory."""
        if not self._trim_scheduled:
            self._trim_scheduled = True
            asyncio.get_running_loop().call_soon(self._give_back_memory)

    def _give_back_memory(self) -> None:
        self._trim_scheduled = False
        give_back_free_memory()

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def __aenter__(self) -> "RpcServer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
