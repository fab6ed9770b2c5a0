"""`qm2qm rpcdump HOST[:PORT]`: list what an endpoint mapper advertises (ept_lookup, MS-RPCE 2.2.1.2.4).

Works against ours or any (Windows, Samba): binds epm over NDR (or NDR64 with --ndr64), pages through
ept_lookup with its context handle and prints the entries grouped by interface, like impacket's rpcdump.
"""
from __future__ import annotations

import json
import socket
import struct
import sys
import uuid
from dataclasses import dataclass

import click

from qm2qm.cli._common import seconds_above_zero
from qm2qm.rpc.epm_tower import (PROTOCOL_HTTP, PROTOCOL_IP, PROTOCOL_LRPC, PROTOCOL_NAMED_PIPE, PROTOCOL_NCACN,
                                 PROTOCOL_NCADG, PROTOCOL_NETBIOS, PROTOCOL_TCP, PROTOCOL_UDP, TowerError,
                                 parse_floors, parse_syntax_floor)

NDR = ("8a885d04-1ceb-11c9-9fe8-08002b104860", "2.0")
NDR64 = ("71710533-BEBA-4937-8319-B5DBEF9CCC36", "1.0")
EPT_S_NOT_REGISTERED = 0x16C9A0D6
MAX_ENTS = 500
MAX_PAGES = 200                 # a mapper that never closes its handle is cut off here (100 000 entries)


class RpcdumpError(Exception):
    """A failure worth one line on stderr."""


@dataclass
class Entry:
    """One ept_entry_t as printed."""
    interface: str              # "UUID vMAJOR.MINOR" (upper-case UUID, as impacket prints it)
    uuid: str
    version: str
    object: str
    annotation: str
    binding: str
    tower: str                  # hex of the tower octets

    def as_dict(self) -> dict:
        return {"uuid": self.uuid, "version": self.version, "object": self.object, "annotation": self.annotation,
                "binding": self.binding, "tower": self.tower}


def parse_target(target: str) -> tuple[str, int]:
    """HOST, HOST:PORT, [V6]:PORT → (host, port); port 135 when absent."""
    host, port = target, "135"
    if target.startswith("["):
        close = target.find("]")
        if close < 0:
            raise click.BadParameter(f"{target!r}: missing ']'", param_hint="HOST[:PORT]")
        host, rest = target[1:close], target[close + 1:]
        if rest:
            if not rest.startswith(":"):
                raise click.BadParameter(f"{target!r}: expected ':PORT' after ']'", param_hint="HOST[:PORT]")
            port = rest[1:]
    elif target.count(":") == 1:
        host, port = target.split(":")
    if not host:
        raise click.BadParameter(f"{target!r}: no host", param_hint="HOST[:PORT]")
    if not (port.isascii() and port.isdigit() and len(port) <= 5) or not 1 <= int(port) <= 65535:   # not '²'
        raise click.BadParameter(f"{target!r}: port must be 1..65535", param_hint="HOST[:PORT]")
    return host, int(port)


def binding_string(floors, host: str) -> str:
    """A string binding for the protocol floors (C706 Appendix L / I), e.g. ncacn_ip_tcp:10.0.0.1[49152]."""
    ids = [f.protocol for f in floors]
    addr = next((f.rhs for f in floors if f.protocol == PROTOCOL_IP and len(f.rhs) == 4), None)
    address = socket.inet_ntoa(addr) if addr is not None else host

    def text(rhs: bytes) -> str:
        return rhs.split(b"\x00", 1)[0].decode("latin-1")

    def port_of(protocol: int) -> int | None:
        rhs = next((f.rhs for f in floors if f.protocol == protocol and len(f.rhs) == 2), None)
        return None if rhs is None else struct.unpack(">H", rhs)[0]

    if ids[:2] == [PROTOCOL_NCACN, PROTOCOL_TCP]:
        return f"ncacn_ip_tcp:{address}[{port_of(PROTOCOL_TCP)}]"
    if ids[:2] == [PROTOCOL_NCACN, PROTOCOL_HTTP]:
        return f"ncacn_http:{address}[{port_of(PROTOCOL_HTTP)}]"
    if ids[:2] == [PROTOCOL_NCADG, PROTOCOL_UDP]:
        return f"ncadg_ip_udp:{address}[{port_of(PROTOCOL_UDP)}]"
    if ids[:2] == [PROTOCOL_NCACN, PROTOCOL_NAMED_PIPE]:
        pipe = text(floors[1].rhs)
        server = next((text(f.rhs) for f in floors if f.protocol == PROTOCOL_NETBIOS), "") or host
        return f"ncacn_np:{server}[{pipe}]"
    if ids[:1] == [PROTOCOL_LRPC] or ids[1:2] == [PROTOCOL_LRPC]:
        lrpc = next(f for f in floors if f.protocol == PROTOCOL_LRPC)
        return f"ncalrpc:[{text(lrpc.rhs)}]"
    return "unknown:" + "/".join(f"0x{p:02x}" for p in ids)


def decode_entry(obj: bytes, annotation: bytes, octets: bytes, host: str) -> Entry:
    """One ept_entry_t (already NDR-decoded) as an Entry; towers that do not parse are shown raw."""
    object_uuid = str(uuid.UUID(bytes_le=bytes(obj))).upper()
    note = bytes(annotation).split(b"\x00", 1)[0].decode("latin-1")
    try:
        floors = parse_floors(octets)
        if_uuid, major, minor = parse_syntax_floor(floors[0], "interface")
        binding = binding_string(floors[2:], host)
    except (TowerError, IndexError, StopIteration) as exc:
        return Entry("?", "?", "?", object_uuid, note, f"unparseable tower: {exc}", octets.hex())
    version = f"{major}.{minor}"
    up = str(if_uuid).upper()
    return Entry(f"{up} v{version}", up, version, object_uuid, note, binding, octets.hex())


def lookup(host: str, port: int, *, ndr64: bool = False, timeout: float = 10.0) -> list[Entry]:
    """Every entry the endpoint mapper at host:port returns for ept_lookup(RPC_C_EP_ALL_ELTS)."""
    from impacket.dcerpc.v5 import epm, transport
    from impacket.dcerpc.v5.ndr import NULL
    from impacket.dcerpc.v5.rpcrt import DCERPCException

    binding = f"ncacn_ip_tcp:{host}[{port}]"
    rpc = transport.DCERPCTransportFactory(binding)
    rpc.set_connect_timeout(timeout)
    dce = rpc.get_dce_rpc()
    try:
        dce.connect()
    except (OSError, socket.error) as exc:
        raise RpcdumpError(f"cannot connect to {host}:{port}: {exc}") from None
    except Exception as exc:        # impacket wraps socket errors in its own exceptions
        raise RpcdumpError(f"cannot connect to {host}:{port}: {exc}") from None
    entries: list[Entry] = []
    try:
        try:
            dce.bind(epm.MSRPC_UUID_PORTMAP, transfer_syntax=NDR64 if ndr64 else NDR)
        except Exception as exc:
            raise RpcdumpError(f"{host}:{port} refused the endpoint mapper bind: {exc}") from None
        handle = epm.ept_lookup_handle_t()
        for _ in range(MAX_PAGES):
            request = epm.ept_lookup()
            request["inquiry_type"] = epm.RPC_C_EP_ALL_ELTS
            request["object"] = NULL
            request["Ifid"] = NULL
            request["vers_option"] = epm.RPC_C_VERS_ALL
            request["entry_handle"] = handle
            request["max_ents"] = MAX_ENTS
            try:
                response = dce.request(request, checkError=False)
            except DCERPCException as exc:
                raise RpcdumpError(f"ept_lookup failed: {exc}") from None
            except Exception as exc:
                raise RpcdumpError(f"ept_lookup answer could not be decoded: {exc!r}") from None
            status = response["status"]
            if status not in (0, EPT_S_NOT_REGISTERED):
                raise RpcdumpError(f"ept_lookup returned status 0x{status:08x}")
            for i in range(response["num_ents"]):
                element = response["entries"][i]
                octets = b"".join(element["tower"]["tower_octet_string"])
                entries.append(decode_entry(element["object"], b"".join(element["annotation"]), octets, host))
            handle = response["entry_handle"]
            if status == EPT_S_NOT_REGISTERED or handle.isNull() or response["num_ents"] == 0:
                break
        else:
            raise RpcdumpError(f"the endpoint mapper still had entries after {MAX_PAGES} pages; giving up")
    finally:
        try:
            dce.disconnect()
        except Exception:
            pass
    return entries


def render(entries: list[Entry]) -> str:
    """Entries grouped by interface as impacket's rpcdump prints them."""
    from impacket.dcerpc.v5 import epm
    from impacket.uuid import string_to_uuidtup, uuidtup_to_bin

    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.interface, []).append(entry)
    lines = []
    for interface, members in groups.items():
        first = members[0]
        protocol = epm.KNOWN_PROTOCOLS.get(first.uuid, "N/A")
        provider = "N/A"
        if first.uuid != "?":
            provider = epm.KNOWN_UUIDS.get(uuidtup_to_bin(string_to_uuidtup(interface))[:18], "N/A")
        lines += [f"Protocol: {protocol} ", f"Provider: {provider} ", f"UUID    : {interface} {first.annotation}",
                  "Bindings: "]
        lines += [f"          {m.binding}" for m in members]
        lines.append("")
    lines.append(f"{len(entries)} endpoint(s).")
    return "\n".join(lines)


@click.command("rpcdump")
@click.argument("target", metavar="HOST[:PORT]")
@click.option("--ndr64", is_flag=True, help="Bind the endpoint mapper with NDR64 instead of NDR 2.0.")
@click.option("--timeout", type=float, default=10.0, show_default=True, callback=seconds_above_zero,
              help="Socket timeout in seconds (more than 0).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of entries instead of text.")
def rpcdump_command(target: str, ndr64: bool, timeout: float, as_json: bool) -> None:
    """List the endpoints an endpoint mapper advertises (default port 135)."""
    host, port = parse_target(target)
    try:
        entries = lookup(host, port, ndr64=ndr64, timeout=timeout)
    except RpcdumpError as exc:
        click.echo(f"qm2qm: error: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps([e.as_dict() for e in entries], indent=2))
    else:
        click.echo(render(entries))
