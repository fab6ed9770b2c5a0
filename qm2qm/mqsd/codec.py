"""MS-MQSD 2.2 packets: TopologyPacketHeader, TopologyClientRequest, TopologyServerReply (all little-endian)."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

MQSD_PORT = 1801                     # 2.1 / <5>: MsmqIpPort default
TYPE_CLIENT_REQUEST = 0x01
TYPE_SERVER_REPLY = 0x02
HEADER_SIZE = 4
IP_REQUEST_SIZE = 52                 # header + EnterpriseID + RequestID + SiteID
MAX_NETWORKS = 32                    # 2.2.2 IPXNetworkCount, 2.2.3 ConnectedNetworkCount: 1..32
_COMMA = ","
_UINT32 = struct.Struct("<I")


class MqsdError(ValueError):
    """A packet that does not follow MS-MQSD 2.2; the message says which rule it breaks."""


@dataclass(frozen=True)
class ServerEntry:
    """One DirectoryServiceServerArray entry (2.2.3): IP flag, IPX flag, NetBIOS name."""
    name: str
    ip: bool = True
    ipx: bool = False


@dataclass(frozen=True)
class TopologyClientRequest:
    """TopologyClientRequest (2.2.2); ipx_networks is None on IP (the IPX fields absent)."""
    enterprise_id: uuid.UUID
    request_id: uuid.UUID
    site_id: uuid.UUID
    ipx_networks: tuple[int, ...] | None = None
    version: int = 0
    reserved: int = 0


@dataclass(frozen=True)
class TopologyServerReply:
    """TopologyServerReply (2.2.3); servers is None when DirectoryServiceServerSize is 0 (same site)."""
    correlation_id: uuid.UUID
    connected_networks: tuple[uuid.UUID, ...]
    connected_network_mask: int = 0
    responding_site_id: uuid.UUID | None = None
    servers: tuple[ServerEntry, ...] | None = None
    version: int = 0
    reserved: int = 0
    raw_server_array: bytes = field(default=b"", compare=False)

    @property
    def directory_service_server_size(self) -> int:
        """DirectoryServiceServerSize: byte length of the array, terminator included (section 4 vector)."""
        return 0 if self.servers is None else len(encode_server_array(self.servers))


def _header(packet_type: int, version: int = 0, reserved: int = 0) -> bytes:
    return struct.pack("<BBH", version, packet_type, reserved)


def encode_server_array(servers: tuple[ServerEntry, ...] | list[ServerEntry]) -> bytes:
    """DirectoryServiceServerArray (2.2.3 ABNF): Entry *(Delim Entry) EndList, UTF-16LE."""
    if not servers:
        raise MqsdError("DirectoryServiceServerArray needs at least one Entry (2.2.3 ABNF)")
    parts = []
    for entry in servers:
        if not entry.name or _COMMA in entry.name or "\x00" in entry.name:
            raise MqsdError(f"server name {entry.name!r} is empty or holds a comma/NUL (2.2.3)")
        parts.append(("1" if entry.ip else "0") + ("1" if entry.ipx else "0") + entry.name)
    return (_COMMA.join(parts) + "\x00").encode("utf-16-le")


def decode_server_array(data: bytes) -> tuple[ServerEntry, ...]:
    """Parse a DirectoryServiceServerArray strictly by the 2.2.3 ABNF."""
    if len(data) % 2:
        raise MqsdError(f"DirectoryServiceServerArray has odd length {len(data)} (UTF-16 code units)")
    if len(data) < 2 or data[-2:] != b"\x00\x00":
        raise MqsdError("DirectoryServiceServerArray does not end with EndList 0x0000")
    text = data[:-2].decode("utf-16-le", errors="surrogatepass")
    if "\x00" in text:
        raise MqsdError("DirectoryServiceServerArray holds a NUL before its end")
    entries = []
    for item in text.split(_COMMA):
        if len(item) < 3:
            raise MqsdError(f"entry {item!r} is shorter than IP IPX 1*NameChar (2.2.3)")
        if item[0] not in "01" or item[1] not in "01":
            raise MqsdError(f"entry {item!r}: IP/IPX flags must be '0' or '1' (2.2.3)")
        entries.append(ServerEntry(item[2:], item[0] == "1", item[1] == "1"))
    return tuple(entries)


def encode_request(req: TopologyClientRequest) -> bytes:
    """Serialize a TopologyClientRequest (2.2.2)."""
    out = [_header(TYPE_CLIENT_REQUEST, req.version, req.reserved), req.enterprise_id.bytes_le,
           req.request_id.bytes_le, req.site_id.bytes_le]
    if req.ipx_networks is not None:
        if not 1 <= len(req.ipx_networks) <= MAX_NETWORKS:
            raise MqsdError(f"IPXNetworkCount {len(req.ipx_networks)} outside 1..32 (2.2.2)")
        out.append(struct.pack(f"<I{len(req.ipx_networks)}I", len(req.ipx_networks), *req.ipx_networks))
    return b"".join(out)


def _check_header(data: bytes, want: int) -> tuple[int, int]:
    if len(data) < HEADER_SIZE:
        raise MqsdError(f"packet of {len(data)} bytes is shorter than the 4-byte TopologyPacketHeader")
    version, packet_type, reserved = struct.unpack_from("<BBH", data)
    if packet_type != want:
        raise MqsdError(f"TopologyPacketHeader.Type {packet_type:#04x}, expected {want:#04x} (2.2.1)")
    return version, reserved


def decode_request(data: bytes) -> TopologyClientRequest:
    """Parse a TopologyClientRequest as a server does (3.2.5.1): Version/Reserved ignored, short IPX tail ignored."""
    version, reserved = _check_header(data, TYPE_CLIENT_REQUEST)
    if len(data) < IP_REQUEST_SIZE:
        raise MqsdError(f"TopologyClientRequest of {len(data)} bytes, needs {IP_REQUEST_SIZE} (2.2.2)")
    ent, req, site = (uuid.UUID(bytes_le=data[o:o + 16]) for o in (4, 20, 36))
    networks = None
    # 3.2.5.1: shorter than request + IPXNetworkCount + one entry -> the IPX fields are "not present".
    if len(data) >= IP_REQUEST_SIZE + 8:
        count = _UINT32.unpack_from(data, IP_REQUEST_SIZE)[0]
        if not 1 <= count <= MAX_NETWORKS:
            raise MqsdError(f"IPXNetworkCount {count} outside 1..32 (2.2.2)")
        end = IP_REQUEST_SIZE + 4 + 4 * count
        if len(data) < end:
            raise MqsdError(f"IPXNetworkCount {count} needs {end} bytes, packet has {len(data)} (2.2.2)")
        networks = struct.unpack_from(f"<{count}I", data, IP_REQUEST_SIZE + 4)
    return TopologyClientRequest(ent, req, site, networks, version, reserved)


def encode_reply(reply: TopologyServerReply) -> bytes:
    """Serialize a TopologyServerReply (2.2.3)."""
    count = len(reply.connected_networks)
    if not 1 <= count <= MAX_NETWORKS:
        raise MqsdError(f"ConnectedNetworkCount {count} outside 1..32 (2.2.3)")
    array = b"" if reply.servers is None else encode_server_array(reply.servers)
    if reply.servers is not None and reply.responding_site_id is None:
        raise MqsdError("RespondingSiteID is required when DirectoryServiceServerSize is not zero (2.2.3)")
    out = [_header(TYPE_SERVER_REPLY, reply.version, reply.reserved), reply.correlation_id.bytes_le,
           struct.pack("<III", count, reply.connected_network_mask & 0xFFFFFFFF, len(array)),
           b"".join(n.bytes_le for n in reply.connected_networks)]
    if array:
        out += [reply.responding_site_id.bytes_le, array]
    return b"".join(out)


def decode_reply(data: bytes) -> TopologyServerReply:
    """Parse a TopologyServerReply strictly (the client discards what fails, 3.1.5.2)."""
    version, reserved = _check_header(data, TYPE_SERVER_REPLY)
    if len(data) < 32:
        raise MqsdError(f"TopologyServerReply of {len(data)} bytes is shorter than its 32-byte fixed part")
    correlation = uuid.UUID(bytes_le=data[4:20])
    count, mask, size = struct.unpack_from("<III", data, 20)
    if not 1 <= count <= MAX_NETWORKS:
        raise MqsdError(f"ConnectedNetworkCount {count} outside 1..32 (2.2.3)")
    end = 32 + 16 * count
    if len(data) < end:
        raise MqsdError(f"ConnectedNetworkArray of {count} GUIDs needs {end} bytes, packet has {len(data)}")
    networks = tuple(uuid.UUID(bytes_le=data[o:o + 16]) for o in range(32, end, 16))
    if mask and bin(mask).count("1") != count:
        raise MqsdError(f"ConnectedNetworkMask {mask:#010x} has not {count} bits set (2.2.3)")
    if size == 0:
        if len(data) != end:
            raise MqsdError(f"{len(data) - end} bytes after a same-site reply (Size 0: nothing follows, 2.2.3)")
        return TopologyServerReply(correlation, networks, mask, None, None, version, reserved)
    if len(data) != end + 16 + size:
        raise MqsdError(f"DirectoryServiceServerSize {size} disagrees with packet length {len(data)} (2.2.3)")
    site = uuid.UUID(bytes_le=data[end:end + 16])
    raw = data[end + 16:]
    return TopologyServerReply(correlation, networks, mask, site, decode_server_array(raw), version, reserved, raw)
