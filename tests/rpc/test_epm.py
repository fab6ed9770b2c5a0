"""The endpoint mapper (C706 Appendix O; MS-RPCE 2.2.1.2) through impacket's epm client, NDR and NDR64: towers
naming our port, the not-registered status, ept_lookup paging with its context handle, malformed towers, the
endpoint mapper on the qm2qm port (alter_context), and the listener's bind errors."""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5 import epm
from impacket.dcerpc.v5.ndr import NULL
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.rpc import epm as E
from qm2qm.rpc import mgmt as M
from qm2qm.rpc.epm_tower import (Floor, TowerError, build_floors, parse_floors, parse_syntax_floor, syntax_floor,
                                 tcp_tower)
from qm2qm.rpc.faults import NCA_S_FAULT_REMOTE_NO_MEMORY
from qm2qm.rpc.interface import NDR20, NDR64 as NDR64_ID, RpcFault
from tests.rpc.test_mgmt import (NCA_S_FAULT_CONTEXT_MISMATCH, NCA_S_OP_RNG_ERROR, NDR, NDR64, QM2QM,
                                 RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND, SYNTAXES, FakeCtx, assert_same_layout,
                                 endpoints, fault_of, raw_call, with_dce)

__all__ = ["endpoints"]     # the fixture, imported for use here

MQRR_UUID = uuid.UUID("1a9134dd-7b39-45ba-ad88-44d01ca47f28")       # MS-MQRR: must not be registered
QM2QM_ID = (QM2QM_UUID, 1, 0)
NDR20_ID = (NDR20[0], NDR20[1], 0)
NDR64_SYNTAX_ID = (NDR64_ID[0], NDR64_ID[1], 0)
EPM = epm.MSRPC_UUID_PORTMAP
NDR64_BIN = uuidtup_to_bin(NDR64)


# ---------------------------------------------------------------------------------------------------- helpers

def map_request(if_id=QM2QM_ID, syntax_id=NDR20_ID, *, max_towers=4, handle=None, obj=None, octets=None):
    """An impacket ept_map request for if_id over ncacn_ip_tcp (as hept_map builds it)."""
    req = epm.ept_map()
    req["obj"] = NULL if obj is None else obj.bytes_le
    tower = octets if octets is not None else tcp_tower(if_id, syntax_id, "0.0.0.0", 0)
    req["map_tower"]["tower_length"] = len(tower)
    req["map_tower"]["tower_octet_string"] = tower
    if handle is not None:
        req["entry_handle"] = handle
    req["max_towers"] = max_towers
    return req


def lookup_request(*, inquiry=E.RPC_C_EP_ALL_ELTS, if_id=None, vers=E.RPC_C_VERS_ALL, obj=None, max_ents=500,
                   handle=None):
    req = epm.ept_lookup()
    req["inquiry_type"] = inquiry
    req["object"] = NULL if obj is None else obj.bytes_le
    if if_id is None:
        req["Ifid"] = NULL
    else:
        req["Ifid"]["Uuid"] = if_id[0].bytes_le
        req["Ifid"]["VersMajor"] = if_id[1]
        req["Ifid"]["VersMinor"] = if_id[2]
    req["vers_option"] = vers
    if handle is not None:
        req["entry_handle"] = handle
    req["max_ents"] = max_ents
    return req


def towers_of(resp) -> list[epm.EPMTower]:
    return [epm.EPMTower(b"".join(resp["ITowers"][i]["Data"]["tower_octet_string"]))
            for i in range(resp["num_towers"])]


def port_of(tower) -> int:
    return epm.EPMPortAddr(tower["Floors"][3].getData())["IpPort"]


def lookup_port(entry) -> int:
    """The TCP port in the tower of an ept_entry_t."""
    return port_of(epm.EPMTower(b"".join(entry["tower"]["tower_octet_string"])))


def address_of(tower) -> str:
    return socket.inet_ntoa(epm.EPMHostAddr(tower["Floors"][4].getData())["Ip4addr"])


def encoded(req, syntax) -> bytes:
    """The request stub as dce.request would send it under syntax."""
    if syntax == NDR64:
        req.changeTransferSyntax(NDR64_BIN)
    return req.getData()


def handle_bytes(handle) -> bytes:
    return handle.getData()


def ndr_map_stub(octets: bytes, *, max_count=None, tower_length=None, max_towers=4, handle=bytes(20)) -> bytes:
    """A raw NDR ept_map stub: obj NULL, map_tower (twr_t), entry_handle, max_towers."""
    max_count = len(octets) if max_count is None else max_count
    tower_length = len(octets) if tower_length is None else tower_length
    body = struct.pack("<IIII", 0, 0x20000, max_count, tower_length) + octets
    body += bytes(-len(body) % 4)
    return body + handle + struct.pack("<I", max_towers)


def mapper(registry=None, entries=((QM2QM_ID, 2105, "10.0.0.1"),)) -> E.EndpointMapper:
    if registry is None:
        registry = E.EndpointRegistry()
        for if_id, port, host in entries:
            registry.register(if_id, port, host=host)
    return E.EndpointMapper(registry)


# -------------------------------------------------------------------------------------------------- ept_map

async def test_hept_map_answers_the_qm2qm_port(endpoints):
    def run():
        dce = connect_unbound(endpoints.epm.port)
        try:
            return epm.hept_map("127.0.0.1", QM2QM, protocol="ncacn_ip_tcp", dce=dce)
        finally:
            dce.disconnect()
    assert await asyncio.to_thread(run) == f"ncacn_ip_tcp:127.0.0.1[{endpoints.qm.port}]"


def connect_unbound(port: int):
    from impacket.dcerpc.v5 import transport
    rpc = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]")
    rpc.set_connect_timeout(10)
    dce = rpc.get_dce_rpc()
    dce.connect()
    return dce


@SYNTAXES
@pytest.mark.parametrize("floor2", [NDR20_ID, NDR64_SYNTAX_ID], ids=["floor-ndr", "floor-ndr64"])
async def test_ept_map_tower_names_our_port_interface_and_syntax(endpoints, syntax, floor2):
    resp = await with_dce(endpoints.epm.port, EPM, syntax,
                          lambda d: d.request(map_request(syntax_id=floor2), checkError=False))
    assert resp["status"] == 0 and resp["num_towers"] == 1 and handle_bytes(resp["entry_handle"]) == bytes(20)
    (tower,) = towers_of(resp)
    assert tower["NumberOfFloors"] == 5
    assert str(tower["Floors"][0]) == f"{str(QM2QM_UUID).upper()} v1.0"
    assert tower["Floors"][1]["DataRepUuid"] == floor2[0].bytes_le
    assert tower["Floors"][2]["ProtocolData"] == b"\x0b" and tower["Floors"][2]["RelatedData"] == b"\x00\x00"
    assert port_of(tower) == endpoints.qm.port
    assert address_of(tower) == "127.0.0.1"


@SYNTAXES
@pytest.mark.parametrize("if_id", [(uuid.UUID("12345678-1234-abcd-ef00-0123456789ab"), 1, 0), (MQRR_UUID, 1, 0),
                                   (QM2QM_UUID, 2, 0), (QM2QM_UUID, 1, 1)],
                         ids=["unknown-uuid", "ms-mqrr", "other-major", "newer-minor"])
async def test_ept_map_not_registered(endpoints, syntax, if_id):
    resp = await with_dce(endpoints.epm.port, EPM, syntax,
                          lambda d: d.request(map_request(if_id), checkError=False))
    assert resp["status"] == E.EPT_S_NOT_REGISTERED == 0x16C9A0D6
    assert resp["num_towers"] == 0 and handle_bytes(resp["entry_handle"]) == bytes(20)


async def test_ept_map_not_registered_for_other_protocols_and_short_towers(endpoints):
    np_tower = build_floors([syntax_floor(QM2QM_ID), syntax_floor(NDR20_ID), Floor(b"\x0b", b"\x00\x00"),
                             Floor(b"\x0f", b"\x00"), Floor(b"\x11", b"host\x00")])
    two_floors = build_floors([syntax_floor(QM2QM_ID), syntax_floor(NDR20_ID)])
    not_uuid = build_floors([Floor(b"\x07", b"\x00\x00"), syntax_floor(NDR20_ID), Floor(b"\x0b", b"\x00\x00")])
    foreign_syntax = tcp_tower(QM2QM_ID, (uuid.uuid4(), 1, 0), "0.0.0.0", 0)

    def run(dce):
        return [dce.request(map_request(octets=o), checkError=False)["status"]
                for o in (np_tower, two_floors, not_uuid, foreign_syntax)] + \
               [dce.request(map_request(max_towers=0), checkError=False)["status"]]
    assert await with_dce(endpoints.epm.port, EPM, NDR, run) == [E.EPT_S_NOT_REGISTERED] * 5


@SYNTAXES
async def test_ept_map_pages_with_its_context_handle(endpoints, syntax):
    endpoints.registry.register(QM2QM_ID, 2105, host="10.0.0.1")
    endpoints.registry.register(QM2QM_ID, 2106, host="10.0.0.2")

    def run(dce):
        pages = []
        first = dce.request(map_request(max_towers=1), checkError=False)
        pages.append(first)
        handle = first["entry_handle"]
        while not handle.isNull():
            page = dce.request(map_request(max_towers=1, handle=handle), checkError=False)
            pages.append(page)
            stale, handle = handle, page["entry_handle"]
        closed = fault_of(dce, E.OP_EPT_MAP, encoded(map_request(max_towers=1, handle=stale), syntax))
        return pages, closed
    pages, closed = await with_dce(endpoints.epm.port, EPM, syntax, run)
    assert [p["num_towers"] for p in pages] == [1, 1, 1] and all(p["status"] == 0 for p in pages)
    ports = [port_of(towers_of(p)[0]) for p in pages]
    assert ports == [endpoints.qm.port, 2105, 2106]
    assert [handle_bytes(p["entry_handle"]) == bytes(20) for p in pages] == [False, False, True]
    assert closed == NCA_S_FAULT_CONTEXT_MISMATCH


def test_ept_map_object_uuid_filter():
    registry = E.EndpointRegistry()
    obj_a, obj_b = uuid.uuid4(), uuid.uuid4()
    registry.register(QM2QM_ID, 3000, host="10.0.0.1", object_uuid=obj_a)
    registry.register(QM2QM_ID, 3001, host="10.0.0.1")

    def ports(obj):
        out = E.EndpointMapper(registry).ept_map(FakeCtx(), map_request(obj=obj).getData())
        return [port_of(t) for t in towers_of(epm.ept_mapResponse(out))]
    assert ports(None) == [3000, 3001]
    assert ports(uuid.UUID(int=0)) == [3000, 3001]
    assert ports(obj_a) == [3000, 3001]
    assert ports(obj_b) == [3001]


def test_ept_map_golden_ndr_response():
    out = mapper().ept_map(FakeCtx(), map_request().getData())
    tower = tcp_tower(QM2QM_ID, NDR20_ID, "10.0.0.1", 2105)
    assert len(tower) == 75
    golden = (bytes(20) + struct.pack("<IIIII", 1, 4, 0, 1, 0x20000) + struct.pack("<II", 75, 75) + tower
              + bytes(1) + struct.pack("<I", 0))
    assert out == golden
    assert tower.hex() == ("050013000d80a98810e5ead0118d9b00a02453c3370100020000"
                           "0013000d045d888aeb1cc9119fe808002b104860020002000000"
                           "01000b02000000010007020008390100090400" "0a000001")


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_ept_map_and_lookup_layouts_equal_impacket(ndr64):
    registry = E.EndpointRegistry()
    registry.register(QM2QM_ID, 2105, host="10.0.0.1", annotation="qm2qm")
    registry.register(QM2QM_ID, 2106, host="10.0.0.2", object_uuid=uuid.uuid4(), annotation="")
    registry.register((uuid.uuid4(), 3, 7), 3000, host="10.0.0.3", annotation="x" * 63)
    em = E.EndpointMapper(registry)
    ctx = FakeCtx(ndr64)
    ours = em.ept_map(ctx, encoded(map_request(max_towers=5), NDR64 if ndr64 else NDR))
    resp = epm.ept_mapResponse(ours, isNDR64=ndr64)
    assert resp["num_towers"] == 2
    assert_same_layout(ours, resp.getData())

    ours = em.ept_lookup(ctx, encoded(lookup_request(max_ents=500), NDR64 if ndr64 else NDR))
    resp = epm.ept_lookupResponse(ours, isNDR64=ndr64)
    assert resp["num_ents"] == 3
    assert [b"".join(e["annotation"]) for e in resp["entries"]] == [b"qm2qm\x00", b"\x00", b"x" * 63 + b"\x00"]
    assert_same_layout(ours, resp.getData())


# ----------------------------------------------------------------------------------------- malformed towers

SEVEN_FLOORS = build_floors([syntax_floor(QM2QM_ID), syntax_floor(NDR20_ID)] + [Floor(b"\x0b", b"\0\0")] * 5)
GOOD = tcp_tower(QM2QM_ID, NDR20_ID, "0.0.0.0", 0)


@pytest.mark.parametrize("stub, status", [
    (ndr_map_stub(GOOD[:40]), RPC_X_BAD_STUB_DATA),                       # floor cut in the middle
    (ndr_map_stub(GOOD + b"\x00"), RPC_X_BAD_STUB_DATA),                  # octets after the last floor
    (ndr_map_stub(SEVEN_FLOORS), RPC_X_BAD_STUB_DATA),                    # > 6 floors (MS-RPCE 3.1.3.5.3)
    (ndr_map_stub(b"\x05"), RPC_X_BAD_STUB_DATA),                         # no floor count
    (ndr_map_stub(b"\x01\x00\x00\x00\x00\x00"), RPC_X_BAD_STUB_DATA),     # empty protocol identifier
    (ndr_map_stub(GOOD, max_count=len(GOOD) + 4), RPC_X_BAD_STUB_DATA),   # max_count != tower_length
    (ndr_map_stub(b"\x00" * 2001), RPC_X_INVALID_BOUND),                  # tower_length > 2000
    (ndr_map_stub(GOOD, max_towers=501), RPC_X_INVALID_BOUND),            # max_towers > 500
    (ndr_map_stub(GOOD)[:-6], RPC_X_BAD_STUB_DATA),                       # stub cut in the handle
    (b"", RPC_X_BAD_STUB_DATA),
], ids=["cut-floor", "trailing", "seven-floors", "no-count", "empty-lhs", "max-count", "length-range",
        "max-towers-range", "cut-stub", "empty-stub"])
async def test_malformed_ept_map_faults_and_the_connection_lives_on(endpoints, stub, status):
    def run(dce):
        fault = fault_of(dce, E.OP_EPT_MAP, stub)
        after = dce.request(map_request(), checkError=False)
        return fault, after["status"], port_of(towers_of(after)[0])
    assert await with_dce(endpoints.epm.port, EPM, NDR, run) == (status, 0, endpoints.qm.port)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(octets=st.binary(max_size=120), ndr64=st.booleans())
def test_any_tower_octets_get_a_response_or_a_fault(octets, ndr64):
    try:
        out = mapper().ept_map(FakeCtx(ndr64), encoded(map_request(octets=octets), NDR64 if ndr64 else NDR))
    except RpcFault as fault:
        assert fault.status in (RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND)
        return
    assert epm.ept_mapResponse(out, isNDR64=ndr64)["status"] in (0, E.EPT_S_NOT_REGISTERED)


@settings(max_examples=150, deadline=None)
@given(stub=st.binary(max_size=200), opnum=st.sampled_from([2, 3, 4]), ndr64=st.booleans())
def test_any_stub_gets_a_response_or_a_fault(stub, opnum, ndr64):
    iface = mapper().interface()
    try:
        out = iface.operations[opnum].handler(FakeCtx(ndr64), stub)
    except RpcFault as fault:
        assert fault.status in (RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND, NCA_S_FAULT_CONTEXT_MISMATCH)
        return
    assert isinstance(out, bytes)


def test_tower_floors_round_trip_and_errors():
    octets = tcp_tower(QM2QM_ID, NDR64_SYNTAX_ID, "192.0.2.1", 2105)
    floors = parse_floors(octets)
    assert build_floors(floors) == octets
    assert parse_syntax_floor(floors[0], "interface") == QM2QM_ID
    assert parse_syntax_floor(floors[1], "transfer syntax") == NDR64_SYNTAX_ID
    assert [f.protocol for f in floors[2:]] == [0x0B, 0x07, 0x09]
    assert floors[3].rhs == struct.pack(">H", 2105) and floors[4].rhs == bytes([192, 0, 2, 1])
    with pytest.raises(TowerError, match="not a UUID floor"):
        parse_syntax_floor(floors[2], "interface")
    with pytest.raises(TowerError, match="7 floors"):
        parse_floors(SEVEN_FLOORS)
    with pytest.raises(TowerError, match="claims"):
        parse_floors(octets[:-1])
    assert parse_floors(b"\x00\x00") == []


# ----------------------------------------------------------------------------------------------- ept_lookup

async def test_hept_lookup_lists_qm2qm_with_our_port(endpoints):
    def run():
        dce = connect_unbound(endpoints.epm.port)
        try:
            return epm.hept_lookup(None, dce=dce)
        finally:
            dce.disconnect()
    entries = await asyncio.to_thread(run)
    bindings = {(str(e["tower"]["Floors"][0]), epm.PrintStringBinding(e["tower"]["Floors"])) for e in entries}
    assert bindings == {(f"{str(QM2QM_UUID).upper()} v1.0", f"ncacn_ip_tcp:127.0.0.1[{endpoints.qm.port}]")}
    assert not any(str(MQRR_UUID).upper() in str(e["tower"]["Floors"][0]) for e in entries)


@SYNTAXES
async def test_ept_lookup_pages_and_handle_free(endpoints, syntax):
    for port in (3001, 3002, 3003):
        endpoints.registry.register(QM2QM_ID, port, host="10.0.0.9")

    def run(dce):
        first = dce.request(lookup_request(max_ents=2), checkError=False)
        second = dce.request(lookup_request(max_ents=2, handle=first["entry_handle"]), checkError=False)
        # a new search, freed half-way
        third = dce.request(lookup_request(max_ents=1), checkError=False)
        free_stub = handle_bytes(third["entry_handle"])
        freed = raw_call(dce, E.OP_EPT_LOOKUP_HANDLE_FREE, free_stub)
        reuse = fault_of(dce, E.OP_EPT_LOOKUP, encoded(lookup_request(max_ents=1, handle=third["entry_handle"]),
                                                       syntax))
        free_null = raw_call(dce, E.OP_EPT_LOOKUP_HANDLE_FREE, bytes(20))
        free_unknown = fault_of(dce, E.OP_EPT_LOOKUP_HANDLE_FREE, bytes(4) + uuid.uuid4().bytes)
        return first, second, third, freed, reuse, free_null, free_unknown
    first, second, third, freed, reuse, free_null, free_unknown = await with_dce(
        endpoints.epm.port, EPM, syntax, run)
    assert (first["num_ents"], first["status"], first["entry_handle"].isNull()) == (2, 0, False)
    assert (second["num_ents"], second["status"], second["entry_handle"].isNull()) == (2, 0, True)
    assert (third["num_ents"], third["entry_handle"].isNull()) == (1, False)
    ports = [lookup_port(e) for page in (first, second) for e in list(page["entries"])[:page["num_ents"]]]
    assert ports == [endpoints.qm.port, 3001, 3002, 3003]
    assert freed == bytes(20) + bytes(4)
    assert reuse == NCA_S_FAULT_CONTEXT_MISMATCH
    assert free_null == bytes(24)
    assert free_unknown == NCA_S_FAULT_CONTEXT_MISMATCH


def test_ept_lookup_filters_by_interface_version_and_object():
    registry = E.EndpointRegistry()
    other = uuid.uuid4()
    obj = uuid.uuid4()
    registry.register((other, 1, 0), 1000, host="10.0.0.1")
    registry.register((other, 1, 5), 1015, host="10.0.0.1")
    registry.register((other, 2, 0), 2000, host="10.0.0.1", object_uuid=obj)
    registry.register(QM2QM_ID, 2105, host="10.0.0.1")
    em = E.EndpointMapper(registry)

    def ports(**kw):
        resp = epm.ept_lookupResponse(em.ept_lookup(FakeCtx(), lookup_request(**kw).getData()))
        if resp["status"] != 0:
            return resp["status"]
        return [lookup_port(e) for e in list(resp["entries"])[:resp["num_ents"]]]
    by_if = E.RPC_C_EP_MATCH_BY_IF
    assert ports() == [1000, 1015, 2000, 2105]
    assert ports(inquiry=77) == [1000, 1015, 2000, 2105]          # MS-RPCE <25>: unknown = all
    assert ports(inquiry=by_if, if_id=(other, 1, 3), vers=E.RPC_C_VERS_ALL) == [1000, 1015, 2000]
    assert ports(inquiry=by_if, if_id=(other, 1, 3), vers=E.RPC_C_VERS_COMPATIBLE) == [1015]
    assert ports(inquiry=by_if, if_id=(other, 1, 5), vers=E.RPC_C_VERS_EXACT) == [1015]
    assert ports(inquiry=by_if, if_id=(other, 1, 9), vers=E.RPC_C_VERS_MAJOR_ONLY) == [1000, 1015]
    assert ports(inquiry=by_if, if_id=(other, 1, 4), vers=E.RPC_C_VERS_UPTO) == [1000]
    assert ports(inquiry=by_if, if_id=(MQRR_UUID, 1, 0)) == E.EPT_S_NOT_REGISTERED
    assert ports(inquiry=by_if, if_id=(other, 1, 0), vers=9) == E.EPT_S_CANT_PERFORM_OP
    assert ports(inquiry=by_if, if_id=None) == E.EPT_S_CANT_PERFORM_OP
    assert ports(inquiry=E.RPC_C_EP_MATCH_BY_OBJ, obj=obj) == [2000]
    assert ports(inquiry=E.RPC_C_EP_MATCH_BY_OBJ) == [1000, 1015, 2105]      # NULL object = nil UUID
    assert ports(inquiry=E.RPC_C_EP_MATCH_BY_BOTH, obj=obj, if_id=(other, 2, 0),
                 vers=E.RPC_C_VERS_EXACT) == [2000]
    assert ports(max_ents=0) == E.EPT_S_NOT_REGISTERED
    with pytest.raises(RpcFault) as info:
        em.ept_lookup(FakeCtx(), lookup_request(max_ents=501).getData())
    assert info.value.status == RPC_X_INVALID_BOUND


def test_a_handle_of_ept_lookup_is_not_an_ept_map_handle():
    registry = E.EndpointRegistry()
    for port in (1, 2):
        registry.register(QM2QM_ID, port, host="10.0.0.1")
    em = E.EndpointMapper(registry)
    ctx = FakeCtx()
    resp = epm.ept_lookupResponse(em.ept_lookup(ctx, lookup_request(max_ents=1).getData()))
    with pytest.raises(RpcFault) as info:
        em.ept_map(ctx, map_request(handle=resp["entry_handle"]).getData())
    assert info.value.status == NCA_S_FAULT_CONTEXT_MISMATCH


def test_open_entry_handles_are_bounded_per_association_group(caplog):
    registry = E.EndpointRegistry()
    for port in (1, 2, 3):
        registry.register(QM2QM_ID, port, host="10.0.0.1")
    em = E.EndpointMapper(registry, max_open_cursors=2)
    ctx = FakeCtx()

    def open_one():
        return epm.ept_mapResponse(em.ept_map(ctx, map_request(max_towers=1).getData()))
    first, second, third = open_one(), open_one(), open_one()
    assert [r["status"] for r in (first, second, third)] == [0, 0, E.EPT_S_CANT_PERFORM_OP]
    with caplog.at_level(logging.WARNING, logger=E.logger.name):
        assert all(open_one()["status"] == E.EPT_S_CANT_PERFORM_OP for _ in range(50))
    assert em.cursor_refusals.count == 51 and len(caplog.records) <= 1           # a flood is one line a second
    assert third["num_towers"] == 0 and third["entry_handle"].isNull()
    assert em.open_cursors == {1: 2}
    em.ept_lookup_handle_free(ctx, first["entry_handle"].getData())          # freeing makes room
    assert open_one()["status"] == 0
    page = second                                                           # reading to the end makes room
    while not page["entry_handle"].isNull():
        page = epm.ept_mapResponse(em.ept_map(ctx, map_request(max_towers=1, handle=page["entry_handle"]).getData()))
    assert em.open_cursors == {1: 1}
    for entry in ctx.handles.drain():                                       # the association's rundown
        entry.handle_type.rundown(entry.obj)
    assert em.open_cursors == {}
    other_group = FakeCtx()
    other_group.association_group_id = 2
    assert epm.ept_mapResponse(em.ept_map(other_group, map_request(max_towers=1).getData()))["status"] == 0


def test_an_entry_handle_the_group_cannot_hold_leaves_no_count_behind():
    """A group at max_context_handles is refused the entry handle (the handle table's fault): the mapper's count of
    the group's open cursors must not keep the refused one, or a group gone long ago stays in it forever."""
    registry = E.EndpointRegistry()
    for port in (1, 2, 3):
        registry.register(QM2QM_ID, port, host="10.0.0.1")
    em = E.EndpointMapper(registry)
    ctx = FakeCtx()
    ctx.handles.limit = 1
    held = epm.ept_mapResponse(em.ept_map(ctx, map_request(max_towers=1).getData()))
    assert held["status"] == 0 and not held["entry_handle"].isNull()
    with pytest.raises(RpcFault) as info:
        em.ept_map(ctx, map_request(max_towers=1).getData())
    assert info.value.status == NCA_S_FAULT_REMOTE_NO_MEMORY
    assert em.open_cursors == {1: 1}
    for entry in ctx.handles.drain():                                       # the association's rundown
        entry.handle_type.rundown(entry.obj)
    assert em.open_cursors == {}


# ------------------------------------------------------------------------------------------ other opnums

@pytest.mark.parametrize("opnum, status", [(0, E.EPT_S_CANT_PERFORM_OP), (1, E.EPT_S_CANT_PERFORM_OP),
                                           (5, E.EPT_S_CANT_PERFORM_OP), (6, E.EPT_S_CANT_PERFORM_OP),
                                           (7, NCA_S_OP_RNG_ERROR)])
async def test_removed_methods_raise_cant_perform_op(endpoints, opnum, status):
    assert await with_dce(endpoints.epm.port, EPM, NDR, lambda d: fault_of(d, opnum, b"")) == status


# ------------------------------------------------------------------------------ on the qm2qm port itself

@SYNTAXES
async def test_epm_and_mgmt_answer_on_the_qm2qm_port_through_alter_context(endpoints, syntax):
    def run(dce):
        dce_epm = dce.alter_ctx(EPM)
        mapped = dce_epm.request(map_request(), checkError=False)
        dce_mgmt = dce_epm.alter_ctx(M.MGMT_UUID.bytes_le + b"\x01\x00\x00\x00")
        listening = raw_call(dce_mgmt, M.OP_IS_SERVER_LISTENING, b"")
        return mapped, listening
    mapped, listening = await with_dce(endpoints.qm.port, QM2QM, syntax, run)
    assert mapped["status"] == 0 and port_of(towers_of(mapped)[0]) == endpoints.qm.port
    assert listening == struct.pack("<II", 0, 1)


# ------------------------------------------------------------------------------------------------ registry

def test_registry_register_replace_unregister_and_validate():
    registry = E.EndpointRegistry()
    first = registry.register(QM2QM_ID, 2105, host="10.0.0.1", annotation="a")
    again = registry.register((QM2QM_UUID, (1, 0)), 2105, host="10.0.0.1", annotation="b")
    assert len(registry) == 1 and registry.entries() == (again,) and first.annotation == "a"
    registry.register((str(QM2QM_UUID), 1, 0), 2106)
    assert [e.port for e in registry] == [2105, 2106]
    assert registry.unregister(QM2QM_ID, port=2106) == 1
    assert registry.unregister((MQRR_UUID, 1, 0)) == 0
    assert registry.unregister(QM2QM_ID) == 1 and len(registry) == 0
    for bad in [dict(port=0), dict(port=70000), dict(port=1, host="::1"), dict(port=1, host="example.org"),
                dict(port=1, annotation="x" * 64), dict(port=1, annotation="é"),
                dict(port=1, protocol="ncacn_np")]:
        with pytest.raises(ValueError):
            registry.register(QM2QM_ID, **bad)
    with pytest.raises(ValueError):
        registry.register((QM2QM_UUID, 70000, 0), 1)


async def test_register_server_leaves_mgmt_and_epm_out(endpoints):
    assert [(e.interface, e.port, e.host) for e in endpoints.registry] == \
        [(QM2QM_ID, endpoints.qm.port, "127.0.0.1")]


def test_wildcard_entries_get_the_local_address_of_the_connection():
    class Transport:
        def get_extra_info(self, name):
            return ("192.0.2.7", 135) if name == "sockname" else None

    class Conn:
        transport = Transport()

    class Server:
        connections = {1: Conn()}

    registry = E.EndpointRegistry()
    registry.register(QM2QM_ID, 2105)                   # 0.0.0.0
    out = E.EndpointMapper(registry, Server()).ept_map(FakeCtx(), map_request().getData())
    assert address_of(towers_of(epm.ept_mapResponse(out))[0]) == "192.0.2.7"
    out = E.EndpointMapper(registry).ept_map(FakeCtx(), map_request().getData())
    assert address_of(towers_of(epm.ept_mapResponse(out))[0]) == "0.0.0.0"


# ------------------------------------------------------------------------------------------------ listener

async def test_listener_permission_error_says_what_to_do(monkeypatch):
    async def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(asyncio.get_running_loop(), "create_server", refuse)
    with pytest.raises(E.EpmListenerError) as info:
        await E.start_epm_listener(E.EndpointRegistry(), host="127.0.0.1", port=135)
    assert str(info.value) == ("TCP port 135 needs root or CAP_NET_BIND_SERVICE; use --epm-port 0 to disable "
                               "or a port above 1023")
    assert info.value.errno == errno.EACCES


async def test_listener_port_in_use_is_a_clear_error():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with pytest.raises(E.EpmListenerError) as info:
            await E.start_epm_listener(E.EndpointRegistry(), host="127.0.0.1", port=busy.getsockname()[1])
    finally:
        busy.close()
    assert "already in use" in str(info.value) and info.value.errno == errno.EADDRINUSE


async def test_listener_other_bind_errors_and_bad_ports():
    with pytest.raises(E.EpmListenerError) as info:
        await E.start_epm_listener(E.EndpointRegistry(), host="192.0.2.1", port=0)    # TEST-NET-1: not ours
    assert str(info.value).startswith("cannot listen on 192.0.2.1:0 for the endpoint mapper: ")
    assert info.value.errno == errno.EADDRNOTAVAIL
    with pytest.raises(ValueError):
        await E.start_epm_listener(E.EndpointRegistry(), host="127.0.0.1", port=65536)


def _privileged_ports_restricted() -> bool:
    try:
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
            return int(f.read()) > 135
    except OSError:
        return True


@pytest.mark.skipif(os.geteuid() != 0 or not _privileged_ports_restricted(),
                    reason="needs root (to drop to uid 65534) and privileged ports below 1024")
def test_listener_as_an_unprivileged_user_gets_the_clear_error():
    # Import everything first: the interpreter's own files may not be readable once we are uid 65534.
    code = (
        "import asyncio, os\n"
        "import qm2qm.rpc.server\n"
        "from qm2qm.rpc.epm import EndpointRegistry, EpmListenerError, start_epm_listener\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
        "async def main():\n"
        "    try:\n"
        "        await start_epm_listener(EndpointRegistry(), host='127.0.0.1', port=135)\n"
        "    except EpmListenerError as exc:\n"
        "        print(exc)\n"
        "        return\n"
        "    print('bound')\n"
        "asyncio.run(main())\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.stdout.strip() == ("TCP port 135 needs root or CAP_NET_BIND_SERVICE; use --epm-port 0 to "
                                   "disable or a port above 1023"), done.stderr
