"""The endpoint mapper (C706 Appendix O; MS-RPCE 2.2.1.2): ept_lookup, ept_map, ept_lookup_handle_free.

``EndpointRegistry`` holds what this process serves: interface (uuid, major, minor) -> ncacn_ip_tcp host/port
entries. ``build_epm_interface(registry)`` returns the epm Interface (e1af8308-5d1f-11c9-91a4-08002b14a0fa v3.0)
over NDR and NDR64; ``start_epm_listener(registry, port=135)`` serves it (with mgmt) on its own listener.
"""
from __future__ import annotations

import errno
import ipaddress
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from qm2qm.logfmt import Refusals
from qm2qm.rpc.epm_tower import (MAX_TOWER_LENGTH, PROTOCOL_NCACN, PROTOCOL_TCP, SyntaxId, TowerError,
                                 parse_floors, parse_syntax_floor, tcp_tower)
from qm2qm.rpc.interface import NDR20, NDR64, CallContext, ContextHandleType, Interface, Operation, RpcFault
from qm2qm.rpc.mgmt import MGMT_UUID, ensure_mgmt_interface
from qm2qm.rpc.ndr_codec import NULL_CONTEXT_HANDLE, NdrReader, NdrWriter, bad_stub, check_range

EPM_UUID = uuid.UUID("e1af8308-5d1f-11c9-91a4-08002b14a0fa")
EPM_VERSION = (3, 0)
EPM_PORT = 135                              # MS-RPCE 2.1.1.1: well-known endpoint of ncacn_ip_tcp

OP_EPT_INSERT = 0
OP_EPT_DELETE = 1
OP_EPT_LOOKUP = 2
OP_EPT_MAP = 3
OP_EPT_LOOKUP_HANDLE_FREE = 4
OP_EPT_INQ_OBJECT = 5
OP_EPT_MGMT_DELETE = 6

EPT_S_OK = 0
EPT_S_NOT_REGISTERED = 0x16C9A0D6           # MS-RPCE 2.2.1.2.4/2.2.1.2.5: no elements match
EPT_S_CANT_PERFORM_OP = 0x000006D8          # MS-RPCE 2.2.1.2.1
NCA_S_FAULT_CONTEXT_MISMATCH = 0x1C00001A

MAX_ENTS = 500                              # [range(0,500)] max_ents / max_towers
MAX_OPEN_CURSORS = 256                      # open entry handles per association group (our bound, not the spec's)
MAX_ANNOTATION = 64                         # ept_max_annotation_size, terminator included (C706 Appendix O)

# ept_lookup inquiry_type and vers_option (MS-RPCE 2.2.1.2.4)
RPC_C_EP_ALL_ELTS, RPC_C_EP_MATCH_BY_IF, RPC_C_EP_MATCH_BY_OBJ, RPC_C_EP_MATCH_BY_BOTH = 0, 1, 2, 3
RPC_C_VERS_ALL, RPC_C_VERS_COMPATIBLE, RPC_C_VERS_EXACT, RPC_C_VERS_MAJOR_ONLY, RPC_C_VERS_UPTO = 1, 2, 3, 4, 5

NIL_UUID = uuid.UUID(int=0)
WILDCARD_HOSTS = frozenset({"", "0.0.0.0"})
NDR20_SYNTAX: SyntaxId = (NDR20[0], NDR20[1], 0)

logger = logging.getLogger("qm2qm.rpc.epm")


# ---------------------------------------------------------------------------------------------------------------
# The endpoint map


@dataclass(frozen=True)
class EndpointEntry:
    """One element of the endpoint map: an interface reachable over ncacn_ip_tcp at host:port (C706 O)."""
    interface: SyntaxId
    host: str
    port: int
    object_uuid: uuid.UUID = NIL_UUID
    annotation: str = ""
    transfer_syntaxes: tuple[tuple[uuid.UUID, int], ...] = (NDR20, NDR64)
    protocol: str = "ncacn_ip_tcp"


def _interface_id(interface: Interface | SyntaxId | tuple) -> SyntaxId:
    if isinstance(interface, Interface):
        return (interface.uuid, interface.version[0], interface.version[1])
    if len(interface) == 2:                         # (uuid, (major, minor))
        if_uuid, (major, minor) = interface
    else:
        if_uuid, major, minor = interface
    if not isinstance(if_uuid, uuid.UUID):
        if_uuid = uuid.UUID(str(if_uuid))
    if not (0 <= major <= 0xFFFF and 0 <= minor <= 0xFFFF):
        raise ValueError(f"interface version {major}.{minor} does not fit u16.u16")
    return (if_uuid, int(major), int(minor))


class EndpointRegistry:
    """The endpoint map of this process: what ept_map and ept_lookup answer (MS-RPCE 3.3.3.3.1.4)."""

    def __init__(self) -> None:
        self._entries: list[EndpointEntry] = []

    def register(self, interface: Interface | SyntaxId | tuple, port: int, *, host: str = "0.0.0.0",
                 object_uuid: uuid.UUID | None = None, annotation: str = "",
                 transfer_syntaxes: Iterable[tuple[uuid.UUID, int]] | None = None,
                 protocol: str = "ncacn_ip_tcp") -> EndpointEntry:
        """Add (or replace) the entry for interface at host:port; returns it. Only ncacn_ip_tcp over IPv4."""
        if protocol != "ncacn_ip_tcp":
            raise ValueError(f"protocol {protocol!r} is not served; only ncacn_ip_tcp")
        if not 1 <= port <= 0xFFFF:
            raise ValueError(f"port {port} is not a TCP port (1..65535); register after the listener started")
        host = host or "0.0.0.0"
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"host {host!r} is not an IPv4 address (ncacn_ip_tcp towers carry IPv4 only)") from None
        encoded = annotation.encode("ascii")
        if b"\x00" in encoded or len(encoded) + 1 > MAX_ANNOTATION:
            raise ValueError(f"annotation {annotation!r} must be ASCII, at most {MAX_ANNOTATION - 1} characters")
        if isinstance(interface, Interface) and transfer_syntaxes is None:
            transfer_syntaxes = interface.transfer_syntaxes
        entry = EndpointEntry(_interface_id(interface), host, port, object_uuid or NIL_UUID, annotation,
                              tuple(transfer_syntaxes or (NDR20, NDR64)), protocol)
        key = self._key(entry)
        for index, old in enumerate(self._entries):
            if self._key(old) == key:
                self._entries[index] = entry
                return entry
        self._entries.append(entry)
        return entry

    def unregister(self, interface: Interface | SyntaxId | tuple, *, port: int | None = None,
                   host: str | None = None, object_uuid: uuid.UUID | None = None) -> int:
        """Remove the interface's entries (optionally only those at port / host / object); returns how many."""
        if_id = _interface_id(interface)
        keep = [e for e in self._entries
                if not (e.interface == if_id and (port is None or e.port == port)
                        and (host is None or e.host == host)
                        and (object_uuid is None or e.object_uuid == object_uuid))]
        removed = len(self._entries) - len(keep)
        self._entries = keep
        return removed

    def register_server(self, server: Any, *, host: str | None = None,
                        exclude: Iterable[uuid.UUID] = (MGMT_UUID, EPM_UUID)) -> list[EndpointEntry]:
        """Register every interface ``server.registry`` serves at ``server.port`` (call after start);
        mgmt and epm are left out as Windows does. Returns the entries."""
        skip = set(exclude)
        bind_host = server.host if host is None else host
        if bind_host in ("", "0.0.0.0", "::", None) or ":" in str(bind_host):
            bind_host = "0.0.0.0"
        return [self.register(iface, server.port, host=bind_host)
                for iface in list(server.registry.values()) if iface.uuid not in skip]

    def entries(self) -> tuple[EndpointEntry, ...]:
        return tuple(self._entries)

    def __iter__(self) -> Iterator[EndpointEntry]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _key(entry: EndpointEntry) -> tuple:
        return (entry.interface, entry.object_uuid, entry.protocol, entry.host, entry.port)


# ---------------------------------------------------------------------------------------------------------------
# The epm interface


@dataclass(eq=False)
class _Cursor:
    """What an ept_lookup_handle_t stands for: the elements not yet returned (C706 Appendix O)."""
    operation: str                          # "ept_map" or "ept_lookup"
    remaining: list = field(default_factory=list)
    group: int = 0
    open_cursors: dict | None = None        # the mapper's per-group count, decremented once on release

    def release(self) -> None:
        self.remaining.clear()
        counts, self.open_cursors = self.open_cursors, None
        if counts is not None:
            counts[self.group] -= 1
            if not counts[self.group]:
                del counts[self.group]


def _rundown_cursor(cursor: _Cursor) -> None:
    cursor.release()


EPT_LOOKUP_HANDLE = ContextHandleType("ept_lookup_handle_t", _rundown_cursor)


def _version_matches(option: int, entry: SyntaxId, wanted: SyntaxId) -> bool | None:
    """vers_option test of MS-RPCE 2.2.1.2.4; None for an unknown option."""
    _, e_major, e_minor = entry
    _, w_major, w_minor = wanted
    if option == RPC_C_VERS_ALL:
        return True
    if option == RPC_C_VERS_COMPATIBLE:
        return e_major == w_major and e_minor >= w_minor
    if option == RPC_C_VERS_EXACT:
        return e_major == w_major and e_minor == w_minor
    if option == RPC_C_VERS_MAJOR_ONLY:
        return e_major == w_major
    if option == RPC_C_VERS_UPTO:
        return (e_major, e_minor) <= (w_major, w_minor)
    return None


class EndpointMapper:
    """The manager routines of the epm interface over one EndpointRegistry (MS-RPCE 2.2.1.2)."""

    def __init__(self, registry: EndpointRegistry, server: Any = None, *,
                 max_open_cursors: int = MAX_OPEN_CURSORS) -> None:
        self.registry = registry
        self.server = server                # optional: gives the local address for wildcard entries
        self.max_open_cursors = max_open_cursors
        self.open_cursors: dict[int, int] = {}      # association group id -> live entry handles
        self.cursor_refusals = Refusals()           # entry handles refused for max_open_cursors

    def interface(self) -> Interface:
        ops = {OP_EPT_INSERT: ("ept_insert", self.removed_method),
               OP_EPT_DELETE: ("ept_delete", self.removed_method),
               OP_EPT_LOOKUP: ("ept_lookup", self.ept_lookup),
               OP_EPT_MAP: ("ept_map", self.ept_map),
               OP_EPT_LOOKUP_HANDLE_FREE: ("ept_lookup_handle_free", self.ept_lookup_handle_free),
               OP_EPT_INQ_OBJECT: ("ept_inq_object", self.removed_method),
               OP_EPT_MGMT_DELETE: ("ept_mgmt_delete", self.removed_method)}
        return Interface(uuid=EPM_UUID, version=EPM_VERSION, name="epm",
                         operations={n: Operation(n, name, f) for n, (name, f) in ops.items()},
                         handle_types=(EPT_LOOKUP_HANDLE,))

    # -- helpers --

    def _cursor(self, ctx: CallContext, wire: bytes, operation: str) -> _Cursor | None:
        """The cursor of a non-NULL entry_handle (runtime check: unknown handles fault 0x1C00001A)."""
        if wire == NULL_CONTEXT_HANDLE:
            return None
        cursor = ctx.lookup_handle(wire, EPT_LOOKUP_HANDLE)
        if cursor is None:
            return None
        if cursor.operation != operation:
            raise RpcFault(NCA_S_FAULT_CONTEXT_MISMATCH, f"entry_handle belongs to {cursor.operation}")
        return cursor

    def _take(self, ctx: CallContext, wire: bytes, cursor: _Cursor, maximum: int) -> tuple[bytes, list] | None:
        """Up to ``maximum`` elements and the handle to return: NULL once all are returned (Windows and Samba
        do the same). None when a new handle is needed but the group already holds max_open_cursors."""
        if wire == NULL_CONTEXT_HANDLE and len(cursor.remaining) > maximum:
            group = ctx.association_group_id
            if self.open_cursors.get(group, 0) >= self.max_open_cursors:
                if self.cursor_refusals.note():
                    logger.warning("association group 0x%x holds %d open ept_lookup handles: refusing another "
                                   "(%d refused since the server started)", group, self.max_open_cursors,
                                   self.cursor_refusals.count)
                return None
            wire = ctx.new_handle(EPT_LOOKUP_HANDLE, cursor)     # counted once it exists: a refused one is not
            self.open_cursors[group] = self.open_cursors.get(group, 0) + 1
            cursor.group, cursor.open_cursors = group, self.open_cursors
        batch = cursor.remaining[:maximum]
        del cursor.remaining[:maximum]
        if cursor.remaining:
            return wire, batch
        if wire != NULL_CONTEXT_HANDLE:
            ctx.close_handle(wire)
            cursor.release()
        return NULL_CONTEXT_HANDLE, batch

    def _host(self, ctx: CallContext, entry: EndpointEntry) -> str:
        if entry.host not in WILDCARD_HOSTS or self.server is None:
            return entry.host or "0.0.0.0"
        rc = getattr(self.server, "connections", {}).get(ctx.connection_id)
        transport = getattr(rc, "transport", None)
        sockname = transport.get_extra_info("sockname") if transport is not None else None
        if sockname:
            try:
                return str(ipaddress.IPv4Address(sockname[0]))
            except ValueError:
                pass
        return "0.0.0.0"

    def _tower(self, ctx: CallContext, entry: EndpointEntry, syntax: SyntaxId) -> bytes:
        return tcp_tower(entry.interface, syntax, self._host(ctx, entry), entry.port)

    @staticmethod
    def _read_twr(r: NdrReader) -> bytes:
        """twr_t: conformant struct { [range(0,2000)] tower_length; [size_is(tower_length)] octets[] }."""
        max_count = r.count()
        tower_length = check_range("tower_length", r.u32(), 0, MAX_TOWER_LENGTH)
        if max_count != tower_length:
            raise bad_stub(f"twr_t max_count {max_count} differs from tower_length {tower_length}")
        return r.raw(tower_length)

    @staticmethod
    def _write_twr(w: NdrWriter, octets: bytes) -> None:
        w.count(len(octets))
        w.u32(len(octets))
        w.raw(octets)

    # -- opnum 3 --

    def ept_map(self, ctx: CallContext, stub: bytes) -> bytes:
        """ept_map (MS-RPCE 2.2.1.2.5): towers for the interface, transfer syntax and protocol of map_tower."""
        r = NdrReader(stub, ctx.ndr64)
        obj = r.uuid() if r.referent() else None
        octets = self._read_twr(r) if r.referent() else None
        wire = r.context_handle()
        max_towers = check_range("max_towers", r.u32(), 0, MAX_ENTS)
        cursor = self._cursor(ctx, wire, "ept_map")

        status = EPT_S_OK
        towers: list[bytes] = []
        if cursor is None:
            matches = self._map_matches(ctx, obj, octets)
            if not matches or max_towers == 0:
                status = EPT_S_NOT_REGISTERED
            elif (taken := self._take(ctx, wire, _Cursor("ept_map", matches), max_towers)) is None:
                status = EPT_S_CANT_PERFORM_OP
            else:
                wire, towers = taken
        elif max_towers == 0:
            status = EPT_S_NOT_REGISTERED           # nothing returned; the handle stays as it was
        else:
            wire, towers = self._take(ctx, wire, cursor, max_towers)

        w = NdrWriter(ctx.ndr64)
        w.context_handle(wire)
        w.u32(len(towers))
        w.count(max_towers)                 # ITowers: [size_is(max_towers), length_is(*num_towers)]
        w.count(0)
        w.count(len(towers))
        for _ in towers:
            w.referent()
        for octets_out in towers:
            self._write_twr(w, octets_out)
        w.u32(status)
        return w.getvalue()

    def _map_matches(self, ctx: CallContext, obj: uuid.UUID | None, octets: bytes | None) -> list[bytes]:
        if octets is None:
            return []
        try:
            floors = parse_floors(octets)
        except TowerError as exc:
            raise bad_stub(f"map_tower: {exc}") from None
        if len(floors) < 3:
            return []
        try:
            wanted = parse_syntax_floor(floors[0], "interface")
            syntax = parse_syntax_floor(floors[1], "transfer syntax")
        except TowerError:
            return []                       # not a UUID floor: no element can match it
        if [f.protocol for f in floors[2:4]] != [PROTOCOL_NCACN, PROTOCOL_TCP]:
            return []                       # only ncacn_ip_tcp is served
        if syntax[2] != 0:
            return []
        if obj == NIL_UUID:
            obj = None
        out = []
        for entry in self.registry:
            e_uuid, e_major, e_minor = entry.interface
            if e_uuid != wanted[0] or e_major != wanted[1] or e_minor < wanted[2]:
                continue
            if (syntax[0], syntax[1]) not in entry.transfer_syntaxes:
                continue
            if obj is not None and entry.object_uuid not in (NIL_UUID, obj):
                continue
            out.append(self._tower(ctx, entry, syntax))
        return out

    # -- opnum 2 --

    def ept_lookup(self, ctx: CallContext, stub: bytes) -> bytes:
        """ept_lookup (MS-RPCE 2.2.1.2.4): the map's elements matching inquiry_type / Ifid / vers_option."""
        r = NdrReader(stub, ctx.ndr64)
        inquiry_type = r.u32()
        obj = r.uuid() if r.referent() else None
        if_id = None
        if r.referent():
            if_uuid = r.uuid()
            if_id = (if_uuid, r.u16(), r.u16())
        vers_option = r.u32()
        wire = r.context_handle()
        max_ents = check_range("max_ents", r.u32(), 0, MAX_ENTS)
        cursor = self._cursor(ctx, wire, "ept_lookup")

        status = EPT_S_OK
        entries: list[tuple[EndpointEntry, bytes]] = []
        if cursor is None:
            matches = self._lookup_matches(ctx, inquiry_type, obj, if_id, vers_option)
            if matches is None:
                status = EPT_S_CANT_PERFORM_OP
            elif not matches or max_ents == 0:
                status = EPT_S_NOT_REGISTERED
            elif (taken := self._take(ctx, wire, _Cursor("ept_lookup", matches), max_ents)) is None:
                status = EPT_S_CANT_PERFORM_OP
            else:
                wire, entries = taken
        elif max_ents == 0:
            status = EPT_S_NOT_REGISTERED
        else:
            wire, entries = self._take(ctx, wire, cursor, max_ents)

        w = NdrWriter(ctx.ndr64)
        w.context_handle(wire)
        w.u32(len(entries))
        w.count(max_ents)                   # entries: [size_is(max_ents), length_is(*num_ents)]
        w.count(0)
        w.count(len(entries))
        for entry, _ in entries:            # ept_entry_t scalars: object, tower referent, annotation
            w.align(8 if w.ndr64 else 4)
            w.uuid(entry.object_uuid)
            w.referent()
            text = entry.annotation.encode("ascii") + b"\x00"
            w.count(0)
            w.count(len(text))
            w.raw(text)
        if w.ndr64 and entries:
            w.align(8)
        for _, octets in entries:           # then the deferred towers, in order
            self._write_twr(w, octets)
        w.u32(status)
        return w.getvalue()

    def _lookup_matches(self, ctx: CallContext, inquiry_type: int, obj: uuid.UUID | None,
                        if_id: SyntaxId | None, vers_option: int) -> list | None:
        if inquiry_type not in (RPC_C_EP_MATCH_BY_IF, RPC_C_EP_MATCH_BY_OBJ, RPC_C_EP_MATCH_BY_BOTH):
            inquiry_type = RPC_C_EP_ALL_ELTS            # MS-RPCE <25>: other values count as 0
        by_if = inquiry_type in (RPC_C_EP_MATCH_BY_IF, RPC_C_EP_MATCH_BY_BOTH)
        by_obj = inquiry_type in (RPC_C_EP_MATCH_BY_OBJ, RPC_C_EP_MATCH_BY_BOTH)
        if by_if and (if_id is None or _version_matches(vers_option, if_id, if_id) is None):
            return None
        out = []
        for entry in self.registry:
            if by_if and (entry.interface[0] != if_id[0]
                          or not _version_matches(vers_option, entry.interface, if_id)):
                continue
            if by_obj and entry.object_uuid != (obj or NIL_UUID):
                continue
            syntax = NDR20_SYNTAX if NDR20 in entry.transfer_syntaxes else (*entry.transfer_syntaxes[0], 0)
            out.append((entry, self._tower(ctx, entry, syntax)))
        return out

    # -- opnum 4 --

    def ept_lookup_handle_free(self, ctx: CallContext, stub: bytes) -> bytes:
        """ept_lookup_handle_free (MS-RPCE 2.2.1.2.8): close the handle; status 0."""
        r = NdrReader(stub, ctx.ndr64)
        wire = r.context_handle()
        if wire != NULL_CONTEXT_HANDLE:
            cursor = ctx.lookup_handle(wire, EPT_LOOKUP_HANDLE)
            wire = ctx.close_handle(wire)
            cursor.release()
        w = NdrWriter(ctx.ndr64)
        w.context_handle(wire)
        w.u32(EPT_S_OK)
        return w.getvalue()

    # -- opnums 0, 1, 5, 6 --

    def removed_method(self, ctx: CallContext, stub: bytes) -> bytes:
        """ept_insert, ept_delete, ept_inq_object, ept_mgmt_delete: fault EPT_S_CANT_PERFORM_OP (MS-RPCE <28>-<31>)."""
        raise RpcFault(EPT_S_CANT_PERFORM_OP, "method removed by MS-RPCE 2.2.1.2")


def build_epm_interface(registry: EndpointRegistry, *, server: Any = None) -> Interface:
    """The epm Interface answering from ``registry``; ``server`` (optional, the RpcServer it is registered on)
    supplies the local address put in towers of entries registered on 0.0.0.0."""
    return EndpointMapper(registry, server).interface()


# ---------------------------------------------------------------------------------------------------------------
# The listener


class EpmListenerError(OSError):
    """The endpoint mapper's port could not be bound; the message says what to do."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.errno = code


async def start_epm_listener(registry: EndpointRegistry, *, host: str = "0.0.0.0", port: int = EPM_PORT,
                             **server_kwargs: Any):
    """Start an RpcServer serving epm and mgmt on host:port and return it (MS-RPCE 2.1.1.1).
    Port 0 picks an ephemeral port (tests); the CLI's ``--epm-port 0`` means: do not call this at all."""
    from qm2qm.rpc.server import RpcServer
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"endpoint mapper port {port} is not a TCP port (0..65535)")
    server = RpcServer((), host=host, port=port, **server_kwargs)
    server.register(build_epm_interface(registry, server=server))
    ensure_mgmt_interface(server)
    try:
        await server.start()
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
            raise EpmListenerError(
                exc.errno or errno.EACCES,
                f"TCP port {port} needs root or CAP_NET_BIND_SERVICE; use --epm-port 0 to disable "
                f"or a port above 1023") from exc
        if exc.errno == errno.EADDRINUSE:
            raise EpmListenerError(
                errno.EADDRINUSE,
                f"TCP port {port} on {host} is already in use (another endpoint mapper, e.g. Samba's or rpcbind?); "
                f"use --epm-port 0 to disable or another port") from exc
        raise EpmListenerError(exc.errno or 0, f"cannot listen on {host}:{port} for the endpoint mapper: "
                                               f"{exc.strerror or exc}") from exc
    return server
