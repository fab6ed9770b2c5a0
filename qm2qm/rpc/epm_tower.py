"""Protocol towers of the endpoint mapper (C706 Appendix L; MS-RPCE 2.2.1.2.2, 3.1.3.5.3).

A tower is ``floor_count u16`` then floors of ``lhs_len u16, lhs, rhs_len u16, rhs`` (counts little-endian).
ncacn_ip_tcp uses five floors: interface (0x0D + UUID + major | minor), transfer syntax (same shape),
RPC connection-oriented 0x0B (| minor 0), TCP port 0x07 (| port big-endian), IPv4 0x09 (| address).
"""
from __future__ import annotations

import functools
import ipaddress
import struct
import uuid
from dataclasses import dataclass

PROTOCOL_UUID = 0x0D            # floor 1 and 2 identifier (C706 Appendix I)
PROTOCOL_NCACN = 0x0B           # RPC connection-oriented protocol, minor version in rhs
PROTOCOL_NCADG = 0x0A
PROTOCOL_TCP = 0x07
PROTOCOL_UDP = 0x08
PROTOCOL_IP = 0x09
PROTOCOL_NAMED_PIPE = 0x0F
PROTOCOL_NETBIOS = 0x11
PROTOCOL_HTTP = 0x1F
PROTOCOL_LRPC = 0x10

MAX_FLOORS = 6                  # MS-RPCE 3.1.3.5.3: towers with more floors SHOULD be rejected
MAX_TOWER_LENGTH = 2000         # MS-RPCE 2.2.1.2.2: [range(0,2000)] tower_length

SyntaxId = tuple[uuid.UUID, int, int]


class TowerError(ValueError):
    """The octets are not a well-formed tower (C706 Appendix L)."""


@dataclass(frozen=True)
class Floor:
    """One tower floor: left-hand side (protocol identifier data) and right-hand side (related data)."""
    lhs: bytes
    rhs: bytes

    @property
    def protocol(self) -> int:
        return self.lhs[0]


def parse_floors(octets: bytes) -> list[Floor]:
    """The floors of a tower octet string; TowerError on truncation, trailing octets or > 6 floors."""
    if len(octets) < 2:
        raise TowerError(f"tower of {len(octets)} octets has no floor count")
    (count,) = struct.unpack_from("<H", octets, 0)
    if count > MAX_FLOORS:
        raise TowerError(f"tower has {count} floors; at most {MAX_FLOORS} are accepted (MS-RPCE 3.1.3.5.3)")
    pos = 2
    floors = []
    for index in range(count):
        sides = []
        for side in ("lhs", "rhs"):
            if pos + 2 > len(octets):
                raise TowerError(f"floor {index + 1} {side} length is cut off at octet {pos}")
            (n,) = struct.unpack_from("<H", octets, pos)
            pos += 2
            if pos + n > len(octets):
                raise TowerError(f"floor {index + 1} {side} claims {n} octets, {len(octets) - pos} left")
            sides.append(bytes(octets[pos:pos + n]))
            pos += n
        if not sides[0]:
            raise TowerError(f"floor {index + 1} has an empty protocol identifier")
        floors.append(Floor(sides[0], sides[1]))
    if pos != len(octets):
        raise TowerError(f"{len(octets) - pos} octets follow the last floor")
    return floors


def build_floors(floors: list[Floor]) -> bytes:
    """Tower octets for these floors."""
    out = bytearray(struct.pack("<H", len(floors)))
    for floor in floors:
        out += struct.pack("<H", len(floor.lhs)) + floor.lhs + struct.pack("<H", len(floor.rhs)) + floor.rhs
    return bytes(out)


def syntax_floor(syntax: SyntaxId) -> Floor:
    """Floor 1 or 2: 0x0D + UUID (GUID byte order) + major u16 | minor u16."""
    syntax_uuid, major, minor = syntax
    return Floor(bytes([PROTOCOL_UUID]) + syntax_uuid.bytes_le + struct.pack("<H", major), struct.pack("<H", minor))


def parse_syntax_floor(floor: Floor, which: str) -> SyntaxId:
    """(uuid, major, minor) of floor 1 or 2; TowerError if it is not a UUID floor."""
    if len(floor.lhs) != 19 or floor.lhs[0] != PROTOCOL_UUID or len(floor.rhs) != 2:
        raise TowerError(f"{which} floor is not a UUID floor (lhs {floor.lhs.hex()}, rhs {floor.rhs.hex()})")
    (major,) = struct.unpack_from("<H", floor.lhs, 17)
    (minor,) = struct.unpack("<H", floor.rhs)
    return uuid.UUID(bytes_le=floor.lhs[1:17]), major, minor


@functools.lru_cache(maxsize=1024)          # inputs come from the endpoint map, not from peers
def tcp_tower(interface: SyntaxId, transfer_syntax: SyntaxId, host: str, port: int) -> bytes:
    """The five-floor ncacn_ip_tcp tower for interface at host:port (C706 Appendix L; MS-RPCE 2.1.1.1)."""
    return build_floors([
        syntax_floor(interface),
        syntax_floor(transfer_syntax),
        Floor(bytes([PROTOCOL_NCACN]), b"\x00\x00"),
        Floor(bytes([PROTOCOL_TCP]), struct.pack(">H", port)),
        Floor(bytes([PROTOCOL_IP]), ipaddress.IPv4Address(host).packed),
    ])
