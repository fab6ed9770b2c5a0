"""`qm2qm rpcdump HOST[:PORT]` (qm2qm/cli/rpcdump.py) against our endpoint mapper: text like impacket's rpcdump,
JSON, NDR64, paging through ept_lookup's handle, and the errors a tester meets (refused, not a mapper, bad target)."""
from __future__ import annotations

import asyncio
import json
import struct
import uuid

import pytest
from click.testing import CliRunner

from qm2qm.cli import rpcdump as R
from qm2qm.mqqp.constants import QM2QM_UUID
from qm2qm.rpc import epm as E
from qm2qm.rpc.epm_tower import Floor, build_floors, parse_floors, syntax_floor
from qm2qm.rpc.interface import Interface, Operation
from qm2qm.rpc.ndr_codec import NdrReader, NdrWriter
from qm2qm.rpc.server import RpcServer
from qm2qm.rpc.testing import Probe
from tests.rpc.test_mgmt import endpoints

__all__ = ["endpoints"]

QM2QM_ID = (QM2QM_UUID, 1, 0)
NDR20_ID = (uuid.UUID("8a885d04-1ceb-11c9-9fe8-08002b104860"), 2, 0)


async def rpcdump(*args: str):
    """Invoke the command in a worker thread (it is a blocking client; the servers run on this loop)."""
    return await asyncio.to_thread(CliRunner().invoke, R.rpcdump_command, list(args))


@pytest.mark.parametrize("extra", [[], ["--ndr64"]], ids=["ndr", "ndr64"])
async def test_rpcdump_lists_qm2qm_like_impackets_rpcdump(endpoints, extra):
    result = await rpcdump(f"127.0.0.1:{endpoints.epm.port}", *extra)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Protocol: [MS-MQQP]: Message Queuing (MSMQ): ",
        "Provider: mqqm.dll ",
        "UUID    : 1088A980-EAE5-11D0-8D9B-00A02453C337 v1.0 ",
        "Bindings: ",
        f"          ncacn_ip_tcp:127.0.0.1[{endpoints.qm.port}]",
        "",
        "1 endpoint(s).",
    ]


async def test_rpcdump_json_and_paging(endpoints, monkeypatch):
    monkeypatch.setattr(R, "MAX_ENTS", 2)                  # 5 entries → 3 ept_lookup pages
    other = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    for port in (4001, 4002):
        endpoints.registry.register(QM2QM_ID, port, host="10.0.0.1", annotation="extra qm2qm")
    endpoints.registry.register((other, 2, 1), 4003, host="10.0.0.2")
    endpoints.registry.register((other, 2, 1), 4004, host="10.0.0.3", object_uuid=other)
    result = await rpcdump(f"127.0.0.1:{endpoints.epm.port}", "--json")
    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)
    assert [(e["uuid"], e["version"], e["binding"], e["annotation"]) for e in entries] == [
        (str(QM2QM_UUID).upper(), "1.0", f"ncacn_ip_tcp:127.0.0.1[{endpoints.qm.port}]", ""),
        (str(QM2QM_UUID).upper(), "1.0", "ncacn_ip_tcp:10.0.0.1[4001]", "extra qm2qm"),
        (str(QM2QM_UUID).upper(), "1.0", "ncacn_ip_tcp:10.0.0.1[4002]", "extra qm2qm"),
        (str(other).upper(), "2.1", "ncacn_ip_tcp:10.0.0.2[4003]", ""),
        (str(other).upper(), "2.1", "ncacn_ip_tcp:10.0.0.3[4004]", ""),
    ]
    assert entries[4]["object"] == str(other).upper()
    assert len(parse_floors(bytes.fromhex(entries[0]["tower"]))) == 5


async def test_rpcdump_of_an_empty_map(endpoints):
    endpoints.registry.unregister(QM2QM_ID)
    result = await rpcdump(f"127.0.0.1:{endpoints.epm.port}")
    assert (result.exit_code, result.output) == (0, "0 endpoint(s).\n")


async def test_rpcdump_connection_refused():
    probe = socket_port_without_listener()
    result = await rpcdump(f"127.0.0.1:{probe}", "--timeout", "5")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"qm2qm: error: cannot connect to 127.0.0.1:{probe}")


def socket_port_without_listener() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_rpcdump_of_a_server_without_an_endpoint_mapper():
    server = RpcServer([Probe().interface], host="127.0.0.1", port=0, idle_timeout_s=None)
    await server.start()
    try:
        result = await rpcdump(f"127.0.0.1:{server.port}")
    finally:
        await server.close()
    assert result.exit_code == 1
    assert "refused the endpoint mapper bind" in result.stderr


async def test_rpcdump_stops_a_mapper_that_never_closes_its_handle(monkeypatch):
    """A hostile mapper: every ept_lookup answers one entry and a fresh handle."""
    monkeypatch.setattr(R, "MAX_PAGES", 3)
    tower = build_floors([syntax_floor(QM2QM_ID), syntax_floor(NDR20_ID), Floor(b"\x0b", b"\0\0"),
                          Floor(b"\x07", b"\x08\x39"), Floor(b"\x09", b"\x0a\0\0\x01")])
    handle_type = E.EPT_LOOKUP_HANDLE

    def endless(ctx, stub):
        r = NdrReader(stub, ctx.ndr64)
        r.u32(); r.referent(); r.referent(); r.u32()
        w = NdrWriter(ctx.ndr64)
        w.context_handle(ctx.new_handle(handle_type, object()))
        w.u32(1)
        w.count(1); w.count(0); w.count(1)
        w.uuid(uuid.UUID(int=0)); w.referent(); w.count(0); w.count(1); w.raw(b"\0")
        w.count(len(tower)); w.u32(len(tower)); w.raw(tower)
        w.u32(0)
        return w.getvalue()
    hostile = Interface(E.EPM_UUID, E.EPM_VERSION, "epm", {2: Operation(2, "ept_lookup", endless)},
                        handle_types=(handle_type,))
    server = RpcServer([hostile], host="127.0.0.1", port=0, idle_timeout_s=None)
    await server.start()
    try:
        result = await rpcdump(f"127.0.0.1:{server.port}")
    finally:
        await server.close()
    assert result.exit_code == 1
    assert "still had entries after 3 pages" in result.stderr


@pytest.mark.parametrize("target", ["a:b", "host:0", "host:70000", ":135", "[::1", "[::1]x", ""])
def test_rpcdump_rejects_bad_targets(target):
    result = CliRunner().invoke(R.rpcdump_command, [target])
    assert result.exit_code == 2 and "HOST[:PORT]" in result.output + result.stderr


@pytest.mark.parametrize("target, expected", [("host", ("host", 135)), ("10.0.0.1:2105", ("10.0.0.1", 2105)),
                                              ("[::1]:135", ("::1", 135)), ("[fe80::1]", ("fe80::1", 135)),
                                              ("fe80::1", ("fe80::1", 135))])
def test_parse_target(target, expected):
    assert R.parse_target(target) == expected


@pytest.mark.parametrize("floors, expected", [
    ([Floor(b"\x0b", b"\0\0"), Floor(b"\x0f", b"\\PIPE\\epmapper\0"), Floor(b"\x11", b"SRV\0")],
     "ncacn_np:SRV[\\PIPE\\epmapper]"),
    ([Floor(b"\x0a", b"\0\0"), Floor(b"\x08", struct.pack(">H", 135)), Floor(b"\x09", b"\x7f\0\0\x01")],
     "ncadg_ip_udp:127.0.0.1[135]"),
    ([Floor(b"\x0b", b"\0\0"), Floor(b"\x1f", struct.pack(">H", 593)), Floor(b"\x09", b"\0\0\0\0")],
     "ncacn_http:0.0.0.0[593]"),
    ([Floor(b"\x0c", b"\0\0"), Floor(b"\x10", b"LRPC-1234\0")], "ncalrpc:[LRPC-1234]"),
    ([Floor(b"\x0b", b"\0\0"), Floor(b"\x07", struct.pack(">H", 2105))], "ncacn_ip_tcp:target[2105]"),
    ([Floor(b"\x42", b"")], "unknown:0x42"),
])
def test_binding_strings(floors, expected):
    assert R.binding_string(floors, "target") == expected


def test_an_unparseable_tower_is_shown_raw():
    entry = R.decode_entry(bytes(16), b"note\0", b"\x01\x00\x05", "h")
    assert entry.binding.startswith("unparseable tower:") and entry.tower == "010005" and entry.annotation == "note"
    assert "UUID    : ? " in R.render([entry])


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_rpcdump_timeout_must_be_above_zero(value):
    # 0 set a non-blocking socket: "Operation now in progress" named no option
    result = CliRunner().invoke(R.rpcdump_command, ["127.0.0.1", "--timeout", value])
    assert result.exit_code == 2 and "Invalid value for '--timeout'" in result.output
