"""The fuzzer's seed table: valid stubs of every opnum of every hosted interface, NDR and NDR64 (MS-RPCE 2.2.5).

One ``InterfaceSeeds`` entry per interface: its UUID/version, its listener and a ``build(ndr64)`` returning
{opnum: [stub, ...]} made from its impacket declarations (qmcomm / qmcomm2: seeds_qmcomm.py, MS-MQRR:
seeds_mqrr.py). Stubs may carry the placeholders ``SESSION`` (the context handle the conversation's ``Opener``
got back: PCTX_RRSESSION_HANDLE, PCTX_OPENREMOTE_HANDLE_TYPE, QUEUE_CONTEXT_HANDLE) and ``QUEUE_HANDLE`` (the
admin-opened hRemoteQueue, or qmcomm's phQueue); the fuzzer substitutes the live values.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Callable

from impacket.dcerpc.v5 import epm, mgmt
from impacket.dcerpc.v5.ndr import NULL
from impacket.uuid import uuidtup_to_bin

from soak import seeds_mqrr, seeds_qmcomm

from soak.seeds_common import QUEUE_HANDLE, QUEUE_HANDLE_BYTES, SESSION, ndr, repeatable  # noqa: F401


@repeatable
def _qm2qm(ndr64: bool) -> dict[int, list[bytes]]:
    """MS-MQQP opnums 0-10 (qm2qm.mqqp.idl), as qm2qm.client fills them."""
    from qm2qm.client import Qm2qmClient
    from qm2qm.mqqp import idl
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE, RR_ACK, RR_NACK

    def desc(action: int, timeout: int = 0, buffer: bytes | None = None):
        if buffer is None:
            return Qm2qmClient._desc(QUEUE_HANDLE, action, timeout, 0, 7, None)
        d = idl.REMOTEREADDESC()        # a fresh one: impacket keeps a pointer set to NULL once as NULL
        for key, value in (("hRemoteQueue", QUEUE_HANDLE), ("hCursor", 0), ("ulAction", action),
                           ("ulTimeout", timeout), ("dwSize", len(buffer)), ("dwQueue", QUEUE_HANDLE),
                           ("dwRequestID", 7), ("Reserved", 0), ("dwArriveTime", 0), ("eAckNack", 0),
                           ("lpBuffer", buffer)):
            d[key] = value
        return d

    out: dict[int, list[bytes]] = {}
    for action in (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE):
        for buffer in (None, b"soak"):
            r0 = idl.RemoteQMStartReceive()
            r0["lpRemoteReadDesc"] = desc(action, 0, buffer)
            out.setdefault(0, []).append(ndr(r0, ndr64))
            r9 = idl.RemoteQMStartReceive2()
            r9["lpRemoteReadDesc2"]["pRemoteReadDesc"] = desc(action, 50, buffer)
            r9["lpRemoteReadDesc2"]["SequentialId"] = 0
            out.setdefault(9, []).append(ndr(r9, ndr64))
            r10 = idl.RemoteQMStartReceiveByLookupId()
            r10["LookupId"] = 0x0300000000000001
            r10["lpRemoteReadDesc2"]["pRemoteReadDesc"] = desc(action, 0, buffer)
            r10["lpRemoteReadDesc2"]["SequentialId"] = 0
            out.setdefault(10, []).append(ndr(r10, ndr64))
    for ack in (RR_ACK, RR_NACK):
        r1 = idl.RemoteQMEndReceive()
        r1["pphContext"] = SESSION
        r1["dwAck"] = ack
        out.setdefault(1, []).append(ndr(r1, ndr64))
    r2 = idl.RemoteQMOpenQueue()
    r2["pLicGuid"] = uuid.UUID(int=0x50AC).bytes_le
    r2["dwMQS"] = 0
    r2["hQueue"] = r2["pQueue"] = r2["dwpContext"] = QUEUE_HANDLE
    out[2] = [ndr(r2, ndr64)]
    r3 = idl.RemoteQMCloseQueue()
    r3["pphContext"] = SESSION
    out[3] = [ndr(r3, ndr64)]
    r4 = idl.RemoteQMCloseCursor()
    r4["hQueue"], r4["hCursor"] = QUEUE_HANDLE, 1
    out[4] = [ndr(r4, ndr64)]
    r5 = idl.RemoteQMCancelReceive()
    r5["hQueue"] = r5["pQueue"] = QUEUE_HANDLE
    r5["dwRequestID"] = 7
    out[5] = [ndr(r5, ndr64)]
    r6 = idl.RemoteQMPurgeQueue()
    r6["hQueue"] = QUEUE_HANDLE
    out[6] = [ndr(r6, ndr64)]
    out[7] = []
    for port_type in (0, 1, 2):
        r7 = idl.RemoteQMGetQMQMServerPort()
        r7["dwPortType"] = port_type
        out[7].append(ndr(r7, ndr64))
    out[8] = [ndr(idl.RemoteQmGetVersion(), ndr64)]
    return out


@repeatable
def _mgmt(ndr64: bool) -> dict[int, list[bytes]]:
    """rpc_mgmt opnums 0-4 (MS-RPCE 2.2.1.3), from impacket.dcerpc.v5.mgmt."""
    princ = mgmt.inq_princ_name()
    princ["authn_proto"], princ["princ_name_size"] = 10, 256
    return {0: [ndr(mgmt.inq_if_ids(), ndr64)], 1: [ndr(mgmt.inq_stats(), ndr64)],
            2: [ndr(mgmt.is_server_listening(), ndr64)], 3: [ndr(mgmt.stop_server_listening(), ndr64)],
            4: [ndr(princ, ndr64)]}


def _tower(if_bin: bytes) -> bytes:
    t = epm.EPMTower()
    i = epm.EPMRPCInterface()
    i["InterfaceUUID"] = if_bin[:16]
    i["MajorVersion"], i["MinorVersion"] = struct.unpack("<HH", if_bin[16:20])
    d = epm.EPMRPCDataRepresentation()
    d["DataRepUuid"] = uuidtup_to_bin(("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0"))[:16]
    d["MajorVersion"], d["MinorVersion"] = 2, 0
    p = epm.EPMProtocolIdentifier()
    p["ProtIdentifier"] = epm.FLOOR_RPCV5_IDENTIFIER
    port, host = epm.EPMPortAddr(), epm.EPMHostAddr()
    port["IpPort"], host["Ip4addr"] = 0, b"\x00" * 4
    t["NumberOfFloors"] = 5
    t["Floors"] = i.getData() + d.getData() + p.getData() + port.getData() + host.getData()
    return t.getData()


@repeatable
def _epm(ndr64: bool) -> dict[int, list[bytes]]:
    """ept_* opnums 0-6 (C706 appendix O, MS-RPCE 2.2.1.2), from impacket.dcerpc.v5.epm where it declares them."""
    look = epm.ept_lookup()
    look["inquiry_type"], look["object"], look["Ifid"] = epm.RPC_C_EP_ALL_ELTS, NULL, NULL
    look["vers_option"], look["max_ents"] = epm.RPC_C_VERS_ALL, 10
    m = epm.ept_map()
    tower = epm.twr_t()
    data = _tower(uuidtup_to_bin(("1088a980-eae5-11d0-8d9b-00a02453c337", "1.0")))
    tower["tower_octet_string"], tower["tower_length"] = data, len(data)
    m["obj"], m["map_tower"], m["max_towers"] = NULL, tower, 4
    free = ndr(_HandleOnly(), ndr64)
    removed = [b"", b"\x00" * 32]            # ept_insert / delete / inq_object / mgmt_delete: removed methods
    return {0: removed, 1: removed, 2: [ndr(look, ndr64)], 3: [ndr(m, ndr64)], 4: [free], 5: removed,
            6: removed}


class _HandleOnly(epm.NDRCALL):
    """ept_lookup_handle_free([in, out] ept_lookup_handle_t *entry_handle): impacket does not declare it."""
    opnum = 4
    structure = (("entry_handle", epm.ept_lookup_handle_t),)


def _qm2qm_open(handle: int, format_name: str, ndr64: bool) -> bytes:
    """RemoteQMOpenQueue (MS-MQQP 3.1.4.2) on the admin-opened descriptor ``handle``."""
    from soak.fuzz import substitute
    return substitute(_qm2qm(ndr64)[2][0], bytes(20), handle)


@dataclass(frozen=True)
class Opener:
    """The real open a stateful conversation runs first: its opnum, its stub (from the admin-opened handle and
    the queue's format name) and, from the response, the u32 that replaces ``QUEUE_HANDLE`` (``SESSION`` takes
    the response's leading 20-byte context handle)."""
    opnum: int
    stub: Callable[[int, str, bool], bytes]
    queue_handle: Callable[[bytes, int], int]
    needs_admin_handle: bool = False


QM2QM_OPENER = Opener(2, _qm2qm_open, lambda response, handle: handle, needs_admin_handle=True)
QMCOMM_OPENER = Opener(seeds_qmcomm.OPEN_OPNUM, lambda h, name, n64: seeds_qmcomm.open_remote_queue(name, n64),
                       lambda response, handle: seeds_qmcomm.opened_handle(response))
MQRR_OPENER = Opener(seeds_mqrr.OPEN_OPNUM, lambda h, name, n64: seeds_mqrr.open_queue(name, n64),
                     lambda response, handle: handle)


@dataclass(frozen=True)
class InterfaceSeeds:
    """One hosted interface: its abstract syntax, the seed stubs of each opnum, the listener it is served on
    ("rpc": --port, "qmcomm": --qmcomm-port) and the open its stateful conversations start with."""
    name: str
    uuid: str
    version: str
    build: Callable[[bool], dict[int, list[bytes]]]
    listener: str = "rpc"
    opener: Opener | None = None

    @property
    def syntax(self) -> bytes:
        return uuidtup_to_bin((self.uuid, self.version))


SEED_TABLE = (
    InterfaceSeeds("qm2qm", "1088a980-eae5-11d0-8d9b-00a02453c337", "1.0", _qm2qm, opener=QM2QM_OPENER),
    InterfaceSeeds("mgmt", "afa8bd80-7d8a-11c9-bef4-08002b102989", "1.0", _mgmt),
    InterfaceSeeds("epm", "e1af8308-5d1f-11c9-91a4-08002b14a0fa", "3.0", _epm),
    InterfaceSeeds("qmcomm", "fdb3a030-065f-11d1-bb9b-00a024ea5525", "1.0",        # MS-MQMP 3.1.4
                   seeds_qmcomm.build_qmcomm, listener="qmcomm", opener=QMCOMM_OPENER),
    InterfaceSeeds("qmcomm2", "76d12b80-3467-11d3-91ff-0090272f9ea3", "1.0",       # MS-MQMP 3.1.5
                   seeds_qmcomm.build_qmcomm2, listener="qmcomm"),
    InterfaceSeeds("mqrr", "1a9134dd-7b39-45ba-ad88-44d01ca47f28", "1.0",          # MS-MQRR 3.1.4
                   seeds_mqrr.build, opener=MQRR_OPENER),
)


def by_name() -> dict[str, InterfaceSeeds]:
    return {entry.name: entry for entry in SEED_TABLE}


def by_syntax() -> dict[tuple[str, int, int], InterfaceSeeds]:
    """(uuid, major, minor) -> entry, to match what mgmt inq_if_ids says the server hosts."""
    out = {}
    for entry in SEED_TABLE:
        major, minor = entry.version.split(".")
        out[(entry.uuid.lower(), int(major), int(minor))] = entry
    return out
