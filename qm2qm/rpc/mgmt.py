"""The DCE/RPC remote management interface served on every endpoint (C706 Appendix Q; MS-RPCE 2.2.1.3).

``build_mgmt_interface(server)`` returns the ``mgmt`` Interface (afa8bd80-7d8a-11c9-bef4-08002b102989 v1.0)
with its five operations, NDR and NDR64. ``server`` is the RpcServer (or anything with its ``registry``,
``statistics`` and ``is_listening``).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from qm2qm.rpc.interface import CallContext, Interface, Operation
from qm2qm.rpc.ndr_codec import NdrReader, NdrWriter, bad_stub, check_range

MGMT_UUID = uuid.UUID("afa8bd80-7d8a-11c9-bef4-08002b102989")
MGMT_VERSION = (1, 0)

OP_INQ_IF_IDS = 0
OP_INQ_STATS = 1
OP_IS_SERVER_LISTENING = 2
OP_STOP_SERVER_LISTENING = 3
OP_INQ_PRINC_NAME = 4

RPC_S_OK = 0
RPC_S_ACCESS_DENIED = 0x00000005          # default authorization of remote stop listening (RpcMgmtSetAuthorizationFn)
ERROR_INSUFFICIENT_BUFFER = 0x0000007A    # princ_name_size too small for the name + NUL (Samba torture vs Windows)
RPC_S_UNKNOWN_AUTHN_SERVICE = 0x000006D3  # no principal name registered for that authentication service

# rpc_c_stats_* indexes of the statistics array (C706 Appendix Q; rpcdce.h RPC_C_STATS_*)
STATS_CALLS_IN, STATS_CALLS_OUT, STATS_PKTS_IN, STATS_PKTS_OUT = range(4)
STATS_ARRAY_MAX_SIZE = 4
STATISTICS_COUNT_MAX = 50                 # MS-RPCE 2.2.1.3.2 StatisticsCount [range(0,50)]
PRINC_NAME_SIZE_MAX = 4096                # MS-RPCE 2.2.1.3.4 [range(0,4096)] princ_name_size

logger = logging.getLogger("qm2qm.rpc.mgmt")


@dataclass
class RpcStatistics:
    """The four counters rpc_mgmt_inq_stats reports (C706 Appendix Q rpc_c_stats_*)."""
    calls_in: int = 0
    calls_out: int = 0
    pkts_in: int = 0
    pkts_out: int = 0

    def as_array(self) -> list[int]:
        return [self.calls_in, self.calls_out, self.pkts_in, self.pkts_out]


class MgmtInterface:
    """The manager routines of the mgmt interface for one server (C706 Appendix Q)."""

    def __init__(self, server: Any, principal_names: Mapping[int, str] | None = None) -> None:
        self.server = server
        self.principal_names: dict[int, bytes] = {}
        for authn_proto, name in (principal_names or {}).items():
            encoded = name.encode("ascii")
            if b"\x00" in encoded or len(encoded) + 1 > PRINC_NAME_SIZE_MAX:
                raise ValueError(f"principal name {name!r} for authn service {authn_proto} cannot be sent")
            self.principal_names[authn_proto] = encoded

    def interface(self) -> Interface:
        ops = {OP_INQ_IF_IDS: ("rpc_mgmt_inq_if_ids", self.inq_if_ids),
               OP_INQ_STATS: ("rpc_mgmt_inq_stats", self.inq_stats),
               OP_IS_SERVER_LISTENING: ("rpc_mgmt_is_server_listening", self.is_server_listening),
               OP_STOP_SERVER_LISTENING: ("rpc_mgmt_stop_server_listening", self.stop_server_listening),
               OP_INQ_PRINC_NAME: ("rpc_mgmt_inq_princ_name", self.inq_princ_name)}
        return Interface(uuid=MGMT_UUID, version=MGMT_VERSION, name="mgmt",
                         operations={n: Operation(n, name, f) for n, (name, f) in ops.items()})

    # -- opnum 0 --

    def inq_if_ids(self, ctx: CallContext, stub: bytes) -> bytes:
        """rpc_mgmt_inq_if_ids: [out] rpc_if_id_vector_p_t *if_id_vector, [out] status (MS-RPCE 2.2.1.3.1)."""
        ids = list(self.server.registry.keys())
        w = NdrWriter(ctx.ndr64)
        w.referent()                        # the unique rpc_if_id_vector_p_t
        w.count(len(ids))                   # conformant struct: max_count first
        if w.ndr64:
            w.align(8)
        w.u32(len(ids))                     # Count
        for _ in ids:
            w.referent()                    # RPC_IF_ID *IfId[i]
        for if_uuid, major, minor in ids:
            w.uuid(if_uuid)
            w.u16(major)
            w.u16(minor)
        w.u32(RPC_S_OK)
        return w.getvalue()

    # -- opnum 1 --

    def inq_stats(self, ctx: CallContext, stub: bytes) -> bytes:
        """rpc_mgmt_inq_stats: [in,out] StatisticsCount *count, [out, size_is(*count)] statistics[] (2.2.1.3.3)."""
        r = NdrReader(stub, ctx.ndr64)
        requested = check_range("count", r.u32(), 0, STATISTICS_COUNT_MAX)
        values = self._statistics()[:requested]
        w = NdrWriter(ctx.ndr64)
        w.u32(len(values))
        w.count(len(values))
        for value in values:
            w.u32(value & 0xFFFFFFFF)
        w.u32(RPC_S_OK)
        return w.getvalue()

    def _statistics(self) -> list[int]:
        values = self.server.statistics.as_array()
        return [int(v) for v in values[:STATS_ARRAY_MAX_SIZE]]

    # -- opnum 2 --

    def is_server_listening(self, ctx: CallContext, stub: bytes) -> bytes:
        """boolean32 rpc_mgmt_is_server_listening([out] error_status_t *status) (C706 Appendix Q)."""
        w = NdrWriter(ctx.ndr64)
        w.u32(RPC_S_OK)
        w.u32(1 if self._listening() else 0)
        return w.getvalue()

    def _listening(self) -> bool:
        return bool(self.server.is_listening)

    # -- opnum 3 --

    def stop_server_listening(self, ctx: CallContext, stub: bytes) -> bytes:
        """rpc_mgmt_stop_server_listening: refused with rpc_s_access_denied, Windows' default authorization."""
        w = NdrWriter(ctx.ndr64)
        w.u32(RPC_S_ACCESS_DENIED)
        return w.getvalue()

    # -- opnum 4 --

    def inq_princ_name(self, ctx: CallContext, stub: bytes) -> bytes:
        """rpc_mgmt_inq_princ_name: [in] authn_proto, [in, range(0,4096)] princ_name_size,
        [out, string, size_is(princ_name_size)] char princ_name[], [out] status (MS-RPCE 2.2.1.3.4)."""
        r = NdrReader(stub, ctx.ndr64)
        authn_proto = r.u32()
        size = check_range("princ_name_size", r.u32(), 0, PRINC_NAME_SIZE_MAX)
        if size == 0:
            raise bad_stub("princ_name_size 0 leaves no room for the [string] terminator")
        name = self.principal_names.get(authn_proto)
        if name is None:
            status, text = RPC_S_UNKNOWN_AUTHN_SERVICE, b""
        elif len(name) + 1 > size:
            status, text = ERROR_INSUFFICIENT_BUFFER, b""
        else:
            status, text = RPC_S_OK, name
        w = NdrWriter(ctx.ndr64)
        w.count(size)                       # max_count = size_is(princ_name_size)
        w.count(0)                          # offset
        w.count(len(text) + 1)              # actual_count, terminator included
        w.raw(text + b"\x00")
        w.u32(status)
        return w.getvalue()


def build_mgmt_interface(server: Any, *, principal_names: Mapping[int, str] | None = None) -> Interface:
    """The mgmt Interface answering for ``server`` (C706 Appendix Q); register it on that same server."""
    return MgmtInterface(server, principal_names).interface()


def ensure_mgmt_interface(server: Any, *, principal_names: Mapping[int, str] | None = None) -> Interface:
    """Register mgmt on ``server`` unless it already serves it (the runtime may register it itself);
    returns the registered mgmt Interface."""
    for key, interface in server.registry.items():
        if key[0] == MGMT_UUID:
            return interface
    interface = build_mgmt_interface(server, principal_names=principal_names)
    server.register(interface)
    return interface
