"""The DCE/RPC management interface (C706 Appendix Q; MS-RPCE 2.2.1.3) through impacket's mgmt client, NDR and
NDR64, on the qm2qm port (with alter_context from qm2qm) and on the endpoint mapper's listener.

Byte layouts are checked two ways: impacket's mgmt structures re-encode our stubs to the same octets (its pad
bytes are 0xAA/0xAB/0xBF/0xCE/0xEE where ours are zero), and hand-written golden stubs from the IDL.
"""
from __future__ import annotations

import asyncio
import struct
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5 import mgmt, transport
from impacket.dcerpc.v5.rpcrt import DCERPCException, rpc_status_codes
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.rpc import epm as E
from qm2qm.rpc import mgmt as M
from qm2qm.rpc.handles import HandleTable
from qm2qm.rpc.interface import RpcFault
from qm2qm.rpc.server import RpcServer

NDR = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64 = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
SYNTAXES = pytest.mark.parametrize("syntax", [NDR, NDR64], ids=["ndr", "ndr64"])
IMPACKET_PADS = {0xAA, 0xAB, 0xBF, 0xCE, 0xEE}
QM2QM = uuidtup_to_bin((str(QM2QM_UUID), "1.0"))

RPC_X_BAD_STUB_DATA = 0x6F7
RPC_X_INVALID_BOUND = 0x6C6
NCA_S_OP_RNG_ERROR = 0x1C010002
NCA_S_FAULT_CONTEXT_MISMATCH = 0x1C00001A


# ---------------------------------------------------------------------------------------------------- helpers

def qm2qm_interface():
    """The real qm2qm Interface (MS-MQQP) over a fresh in-memory QueueManager."""
    from qm2qm.mqqp.interface import build_service, service_interface
    from qm2qm.mqqp.server_config import MqqpConfig
    from shared_adm.clock import ManualScheduler
    from shared_adm.queue_manager import QueueManager
    qm = QueueManager(store=None, scheduler=ManualScheduler())
    qm.initialize()
    return service_interface(build_service(qm, MqqpConfig(qmcomm_port=2103)))


@dataclass
class Endpoints:
    """A qm2qm server (qm2qm + mgmt + epm on one port) and an endpoint-mapper listener (epm + mgmt)."""
    qm: RpcServer
    epm: RpcServer
    registry: E.EndpointRegistry


@pytest.fixture
async def endpoints():
    registry = E.EndpointRegistry()
    qm = RpcServer([qm2qm_interface()], host="127.0.0.1", port=0, idle_timeout_s=None)
    M.ensure_mgmt_interface(qm)
    qm.register(E.build_epm_interface(registry, server=qm))
    await qm.start()
    registry.register_server(qm)
    epm_server = await E.start_epm_listener(registry, host="127.0.0.1", port=0, idle_timeout_s=None)
    yield Endpoints(qm, epm_server, registry)
    await epm_server.close()
    await qm.close()


def connect(port: int, iface: bytes, syntax=NDR):
    """An impacket DCERPC_v5 bound to iface on 127.0.0.1:port."""
    rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]")
    rpc.set_connect_timeout(10)
    dce = rpc.get_dce_rpc()
    dce.connect()
    dce.bind(iface, transfer_syntax=syntax)
    return dce


async def with_dce(port: int, iface: bytes, syntax, fn):
    """Run fn(dce) in a worker thread (impacket is blocking) against a fresh connection; always disconnect."""
    def run():
        dce = connect(port, iface, syntax)
        try:
            return fn(dce)
        finally:
            dce.disconnect()
    return await asyncio.to_thread(run)


def raw_call(dce, opnum: int, stub: bytes) -> bytes:
    dce.call(opnum, stub)
    return dce.recv()


STATUS_BY_NAME = {name: code for code, name in rpc_status_codes.items()}


def fault_of(dce, opnum: int, stub: bytes) -> int:
    """The status of the fault a raw call gets (impacket names it; AssertionError if it got a response)."""
    try:
        answer = raw_call(dce, opnum, stub)
    except DCERPCException as exc:
        text = exc.error_string or ""
        if text in STATUS_BY_NAME:
            return STATUS_BY_NAME[text]
        assert text.startswith("Unknown DCE RPC fault status code: "), text
        return int(text.rsplit(" ", 1)[1], 16)
    raise AssertionError(f"expected a fault, got a response {answer.hex()}")


def assert_same_layout(ours: bytes, theirs: bytes) -> None:
    """Equal octets, except where impacket writes its pad filler and we write zero."""
    assert len(ours) == len(theirs), f"{len(ours)} vs {len(theirs)} octets\n{ours.hex()}\n{theirs.hex()}"
    for offset, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b or (a == 0 and b in IMPACKET_PADS), \
            f"octet {offset}: {a:#x} vs {b:#x}\n{ours.hex()}\n{theirs.hex()}"


class FakeCtx:
    """A CallContext over a real HandleTable, for calling manager routines directly."""

    def __init__(self, ndr64: bool = False) -> None:
        self.ndr64 = ndr64
        self.call_id = 1
        self.opnum = 0
        self.connection_id = 1
        self.association_group_id = 1
        self.handles = HandleTable()

    def lookup_handle(self, wire, handle_type):
        return self.handles.lookup(wire, handle_type)

    def new_handle(self, handle_type, obj):
        return self.handles.new(handle_type, obj)

    def close_handle(self, wire):
        self.handles.close(wire)
        return bytes(20)


class FakeServer:
    """Just what mgmt reads of a server."""

    def __init__(self, keys, *, statistics=None, is_listening=True) -> None:
        self.registry = {k: None for k in keys}
        self.statistics = statistics
        self.is_listening = is_listening


MGMT_KEY = (M.MGMT_UUID, 1, 0)
QM2QM_KEY = (QM2QM_UUID, 1, 0)


# ---------------------------------------------------------------------------------------------- inq_if_ids

@SYNTAXES
async def test_inq_if_ids_lists_every_interface_of_the_qm2qm_endpoint(endpoints, syntax):
    resp = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, mgmt.hinq_if_ids)
    vector = resp["if_id_vector"]
    got = [(uuid.UUID(bytes_le=i["Uuid"]), i["VersMajor"], i["VersMinor"]) for i in vector["if_id"]]
    assert got == [QM2QM_KEY, MGMT_KEY, (E.EPM_UUID, 3, 0)]
    assert vector["count"] == 3 and resp["status"] == 0


@SYNTAXES
async def test_inq_if_ids_on_the_endpoint_mapper_lists_epm_and_mgmt(endpoints, syntax):
    resp = await with_dce(endpoints.epm.port, mgmt.MSRPC_UUID_MGMT, syntax, mgmt.hinq_if_ids)
    got = {(uuid.UUID(bytes_le=i["Uuid"]), i["VersMajor"], i["VersMinor"]) for i in resp["if_id_vector"]["if_id"]}
    assert got == {(E.EPM_UUID, 3, 0), MGMT_KEY}


def test_inq_if_ids_golden_ndr_and_ndr64():
    m = M.MgmtInterface(FakeServer([QM2QM_KEY, MGMT_KEY]))
    ids = QM2QM_UUID.bytes_le + b"\x01\x00\x00\x00" + M.MGMT_UUID.bytes_le + b"\x01\x00\x00\x00"
    ndr = (struct.pack("<IIII", 0x20000, 2, 2, 0x20004) + struct.pack("<I", 0x20008) + ids + bytes(4))
    assert m.inq_if_ids(FakeCtx(False), b"") == ndr
    ndr64 = (struct.pack("<QQI4xQQ", 0x20000, 2, 2, 0x20004, 0x20008) + ids + bytes(4))
    assert m.inq_if_ids(FakeCtx(True), b"") == ndr64


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_inq_if_ids_layout_equals_impacket(ndr64):
    m = M.MgmtInterface(FakeServer([QM2QM_KEY, MGMT_KEY, (uuid.uuid4(), 7, 9)]))
    ours = m.inq_if_ids(FakeCtx(ndr64), b"")
    assert_same_layout(ours, mgmt.inq_if_idsResponse(ours, isNDR64=ndr64).getData())


# ----------------------------------------------------------------------------------------------- inq_stats

class FixedStatistics(M.RpcStatistics):
    """Counters the runtime may bump, reporting fixed values (to see them arrive unchanged)."""

    def as_array(self) -> list[int]:
        return [11, 0, 33, 0xFFFFFFFF]


@SYNTAXES
async def test_inq_stats_returns_the_runtime_counters(endpoints, syntax):
    endpoints.qm.statistics = FixedStatistics()
    resp = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, lambda d: mgmt.hinq_stats(d, 4))
    assert resp["count"] == 4 and list(resp["statistics"]) == [11, 0, 33, 0xFFFFFFFF] and resp["status"] == 0


@SYNTAXES
async def test_inq_stats_counts_calls_and_pdus_live(endpoints, syntax):
    def run(dce):
        return [list(mgmt.hinq_stats(dce, 4)["statistics"]) for _ in range(2)]
    first, second = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, run)
    # one more call in, one more request PDU in, the first response PDU out; no calls out
    assert [b - a for a, b in zip(first, second)] == [1, 0, 1, 1]


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
@pytest.mark.parametrize("count, expected", [(0, []), (2, [5, 6]), (4, [5, 6, 7, 8]), (50, [5, 6, 7, 8])])
def test_inq_stats_count_is_the_array_size_asked_capped_at_four(ndr64, count, expected):
    m = M.MgmtInterface(FakeServer([MGMT_KEY], statistics=M.RpcStatistics(5, 6, 7, 8)))
    ours = m.inq_stats(FakeCtx(ndr64), struct.pack("<I", count))
    resp = mgmt.inq_statsResponse(ours, isNDR64=ndr64)
    assert resp["count"] == len(expected) and list(resp["statistics"]) == expected and resp["status"] == 0
    assert_same_layout(ours, resp.getData())
    n = len(expected)
    golden = (struct.pack("<I4xQ", n, n) if ndr64 else struct.pack("<II", n, n)) + struct.pack(f"<{n}I", *expected)
    assert ours == golden + bytes(4)


@SYNTAXES
async def test_inq_stats_range_and_truncation_faults_keep_the_connection(endpoints, syntax):
    def run(dce):
        return (fault_of(dce, M.OP_INQ_STATS, struct.pack("<I", 51)),
                fault_of(dce, M.OP_INQ_STATS, b"\x04\x00"),
                mgmt.hinq_stats(dce, 4)["count"])
    assert await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, run) == \
        (RPC_X_INVALID_BOUND, RPC_X_BAD_STUB_DATA, 4)


# ------------------------------------------------------------------------------- listening / stop listening

@SYNTAXES
async def test_is_server_listening_answers_status_0_and_true(endpoints, syntax):
    def run(dce):
        return raw_call(dce, M.OP_IS_SERVER_LISTENING, b""), mgmt.his_server_listening(dce)["status"]
    raw, status = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, run)
    assert raw == struct.pack("<II", 0, 1) and status == 0


def test_is_server_listening_false_when_the_runtime_says_so():
    m = M.MgmtInterface(FakeServer([MGMT_KEY], is_listening=False))
    assert m.is_server_listening(FakeCtx(), b"") == struct.pack("<II", 0, 0)


@SYNTAXES
async def test_stop_server_listening_is_refused_and_the_server_keeps_serving(endpoints, syntax):
    def run(dce):
        raw = raw_call(dce, M.OP_STOP_SERVER_LISTENING, b"")
        with pytest.raises(DCERPCException) as info:
            mgmt.hstop_server_listening(dce)
        return raw, info.value.error_code, mgmt.hinq_stats(dce, 4)["status"]
    raw, code, later = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, run)
    assert raw == struct.pack("<I", M.RPC_S_ACCESS_DENIED) and code == 5 and later == 0
    assert (await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, mgmt.hinq_if_ids))["status"] == 0


# ---------------------------------------------------------------------------------------------- princ_name

@SYNTAXES
async def test_inq_princ_name_without_a_registered_service(endpoints, syntax):
    resp = await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax,
                          lambda d: mgmt.hinq_princ_name(d, authn_proto=10, princ_name_size=100))
    assert resp["status"] == M.RPC_S_UNKNOWN_AUTHN_SERVICE and b"".join(resp["princ_name"]) == b"\x00"


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_inq_princ_name_sizes_like_windows(ndr64):
    m = M.MgmtInterface(FakeServer([MGMT_KEY]), principal_names={10: "qm2qm/host"})

    def ask(size):
        ours = m.inq_princ_name(FakeCtx(ndr64), struct.pack("<II", 10, size))
        resp = mgmt.inq_princ_nameResponse(ours, isNDR64=ndr64)
        assert_same_layout(ours, resp.getData())
        return resp["status"], b"".join(resp["princ_name"]), ours

    status, name, ours = ask(11)            # exactly len + NUL
    assert status == 0 and name == b"qm2qm/host\x00"
    counts = struct.pack("<QQQ", 11, 0, 11) if ndr64 else struct.pack("<III", 11, 0, 11)
    assert ours == counts + b"qm2qm/host\x00" + bytes(1) + bytes(4)
    for size in (1, 10):                    # Samba's torture test: 1..len gives WERR_INSUFFICIENT_BUFFER
        assert ask(size)[:2] == (M.ERROR_INSUFFICIENT_BUFFER, b"\x00")
    with pytest.raises(RpcFault) as zero:
        m.inq_princ_name(FakeCtx(ndr64), struct.pack("<II", 10, 0))
    assert zero.value.status == RPC_X_BAD_STUB_DATA
    with pytest.raises(RpcFault) as big:
        m.inq_princ_name(FakeCtx(ndr64), struct.pack("<II", 10, 4097))
    assert big.value.status == RPC_X_INVALID_BOUND
    assert ask(4096)[0] == 0


def test_principal_names_that_cannot_be_sent_are_refused_at_construction():
    with pytest.raises(ValueError):
        M.MgmtInterface(FakeServer([]), principal_names={10: "bad\x00name"})
    with pytest.raises(ValueError):
        M.MgmtInterface(FakeServer([]), principal_names={10: "x" * 4096})


@SYNTAXES
async def test_malformed_mgmt_calls_fault_and_the_connection_lives_on(endpoints, syntax):
    def run(dce):
        return (fault_of(dce, M.OP_INQ_PRINC_NAME, b"\x0a\x00\x00\x00"),
                fault_of(dce, M.OP_INQ_PRINC_NAME, struct.pack("<II", 10, 0)),
                fault_of(dce, M.OP_INQ_PRINC_NAME, struct.pack("<II", 10, 5000)),
                fault_of(dce, 5, b""),
                mgmt.hinq_if_ids(dce)["status"])
    assert await with_dce(endpoints.qm.port, mgmt.MSRPC_UUID_MGMT, syntax, run) == \
        (RPC_X_BAD_STUB_DATA, RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND, NCA_S_OP_RNG_ERROR, 0)


# ------------------------------------------------------------------------------ one association, two interfaces

@SYNTAXES
async def test_bind_qm2qm_then_alter_context_to_mgmt_and_call_both(endpoints, syntax):
    from qm2qm.mqqp import idl

    def run(dce):
        first = dce.request(idl.RemoteQmGetVersion(), checkError=False)
        dce_mgmt = dce.alter_ctx(mgmt.MSRPC_UUID_MGMT)
        ids = mgmt.hinq_if_ids(dce_mgmt)
        again = dce.request(idl.RemoteQmGetVersion(), checkError=False)      # back on p_cont_id 0
        listening = raw_call(dce_mgmt, M.OP_IS_SERVER_LISTENING, b"")
        return first, ids, again, listening, dce_mgmt.transfer_syntax
    first, ids, again, listening, negotiated = await with_dce(endpoints.qm.port, QM2QM, syntax, run)
    assert (first["pMajor"], first["pMinor"]) == (6, 1) and again["pBuildNumber"] == first["pBuildNumber"]
    listed = {uuid.UUID(bytes_le=i["Uuid"]) for i in ids["if_id_vector"]["if_id"]}
    assert {QM2QM_UUID, M.MGMT_UUID} <= listed
    assert listening == struct.pack("<II", 0, 1)
    assert negotiated == uuidtup_to_bin(syntax)


def test_ensure_mgmt_interface_registers_once():
    server = RpcServer([], host="127.0.0.1", port=0)
    first = M.ensure_mgmt_interface(server)
    assert M.ensure_mgmt_interface(server) is first
    assert list(server.registry) == [MGMT_KEY]
    assert sorted(first.operations) == [0, 1, 2, 3, 4]


@settings(max_examples=150, deadline=None)
@given(stub=st.binary(max_size=64), opnum=st.integers(0, 4), ndr64=st.booleans())
def test_any_mgmt_stub_gets_a_response_or_a_fault(stub, opnum, ndr64):
    iface = M.build_mgmt_interface(FakeServer([QM2QM_KEY, MGMT_KEY], statistics=M.RpcStatistics(1, 2, 3, 4)),
                                   principal_names={10: "qm2qm/host"})
    try:
        out = iface.operations[opnum].handler(FakeCtx(ndr64), stub)
    except RpcFault as fault:
        assert fault.status in (RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND)
        return
    assert isinstance(out, bytes) and len(out) >= 4
