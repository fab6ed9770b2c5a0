"""pcap and pcapng containers (libpcap format; IETF draft-ietf-opsawg-pcapng) read with exact file offsets,
and link layers decoded to IP/TCP with dpkt (Ethernet, Linux SLL/SLL2, BSD loopback, raw IP)."""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import BinaryIO, Collection, Iterator

import dpkt

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1_000_000), b"\xa1\xb2\xc3\xd4": (">", 1_000_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1_000_000_000), b"\xa1\xb2\x3c\x4d": (">", 1_000_000_000),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
# pcapng block types
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
# A record larger than this is not a packet but a damaged length field (tcpdump's MAXIMUM_SNAPLEN is 262144).
MAX_RECORD = 16 * 1024 * 1024
READ_CHUNK = 1 << 20

# LINKTYPE_* values (tcpdump.org/linktypes.html)
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
LINKTYPE_LOOP = 108
SUPPORTED_LINKTYPES = {LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, 12, 14, LINKTYPE_LINUX_SLL, LINKTYPE_IPV4,
                       LINKTYPE_IPV6, LINKTYPE_LINUX_SLL2, LINKTYPE_LOOP}


# the call table's times are int64 epoch microseconds (schema.CALL_SCHEMA)
MAX_TIME_US = 2 ** 63 - 1


class CaptureError(Exception):
    """A capture file that cannot be read on; carries the byte offset where reading stopped."""

    def __init__(self, kind: str, offset: int, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.offset = offset


@dataclass(slots=True)
class Frame:
    """One captured packet: time (epoch microseconds), link type, bytes, and where its record starts."""
    time_us: int
    linktype: int
    data: bytes
    offset: int


def sniff(head: bytes) -> str | None:
    """'pcap', 'pcapng' or None from the first 4 bytes."""
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_SHB:
        return "pcapng"
    return None


class _EveryFlow:
    """``keep`` of a part whose byte range holds only its own connections' frames (split.Part.exclusive)."""

    def __contains__(self, key: object) -> bool:
        return True


EVERY_FLOW: Collection = _EveryFlow()      # type: ignore[assignment]


def read_frames(fh: BinaryIO, start: int | None = None, stop: int | None = None,
                keep: Collection | None = None) -> Iterator[Frame]:
    """Every packet record of a pcap or pcapng stream; raises CaptureError at the first unreadable record.
    ``start``/``stop``: file offsets of the first and last records wanted (a pcap is read from ``start`` on; a
    pcapng from its beginning, its interface blocks being needed). ``keep``: only the frames whose flow_key is in
    it (a pcap's Ethernet/IPv4 frames are tested in the read buffer, before a Frame is made; EVERY_FLOW: no test)."""
    if keep is EVERY_FLOW:
        keep = None
    head = fh.read(4)
    kind = sniff(head)
    if kind == "pcap":
        yield from _read_pcap(fh, head, start, stop, keep)
        return
    if kind != "pcapng":
        raise CaptureError("not_capture", 0, f"not a pcap or pcapng file (magic {head.hex() or 'empty'})")
    for frame in _read_pcapng(fh, head):
        if stop is not None and frame.offset > stop:
            return
        if (start is None or frame.offset >= start) and (keep is None or flow_key(frame) in keep):
            yield frame


def _need(fh: BinaryIO, n: int, offset: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise CaptureError("truncated", offset, f"truncated {what}: {len(data)} of {n} bytes")
    return data


class PcapRecords:
    """The records of a pcap file walked in its read buffer (no Frame, no copy): ``linktype``, ``per_second``
    and records() yielding (buffer, data start, data end, file offset, seconds, fraction)."""

    def __init__(self, fh: BinaryIO, magic: bytes) -> None:
        self.fh = fh
        self.order, self.per_second = PCAP_MAGICS[magic]
        rest = _need(fh, 20, 4, "pcap file header")
        self.linktype = struct.unpack(self.order + "HHiIII", rest)[5] & 0xFFFF

    def records(self, start: int | None = None) -> Iterator[tuple[bytes, int, int, int, int, int]]:
        """Every record from file offset ``start`` (a record boundary) on; CaptureError at an unreadable one."""
        fh = self.fh
        unpack = struct.Struct(self.order + "IIII").unpack_from
        # Records are cut out of 1 MiB reads: one read() per record was a fifth of the ingest time (cProfile).
        buf, pos, base = b"", 0, 24                     # base: file offset of buf[0]
        if start is not None and start > base:
            fh.seek(start)
            base = start
        while True:
            if len(buf) - pos < 16:
                buf, pos, base = _refill(fh, buf, pos, base, 16)
                if len(buf) == pos:
                    return
                if len(buf) - pos < 16:
                    raise CaptureError("truncated", base + pos,
                                       f"truncated packet record header: {len(buf) - pos} of 16 bytes")
            sec, frac, caplen, _origlen = unpack(buf, pos)
            offset = base + pos
            if caplen > MAX_RECORD:
                raise CaptureError("damaged", offset, f"packet record length {caplen} is not plausible")
            end = pos + 16 + caplen
            if end > len(buf):
                buf, pos, base = _refill(fh, buf, pos, base, 16 + caplen)
                end = 16 + caplen
                if end > len(buf):
                    raise CaptureError("truncated", offset,
                                       f"truncated packet record: {len(buf) - 16} of {caplen} bytes")
            yield buf, pos + 16, end, offset, sec, frac
            pos = end


def _read_pcap(fh: BinaryIO, magic: bytes, start: int | None = None, stop: int | None = None,
               keep: Collection | None = None) -> Iterator[Frame]:
    records = PcapRecords(fh, magic)
    linktype, per_second = records.linktype, records.per_second
    for buf, begin, end, offset, sec, frac in records.records(start):
        if stop is not None and offset > stop:
            return
        key = None
        if keep is not None and linktype == LINKTYPE_ETHERNET:
            key = raw_flow_key(buf, begin, end)         # read in the buffer: no Frame for another part's frames
            if key is not None and key not in keep:
                continue
        frame = Frame(sec * 1_000_000 + frac * 1_000_000 // per_second, linktype, buf[begin:end], offset)
        if keep is None or key is not None or flow_key(frame) in keep:
            yield frame


def _refill(fh: BinaryIO, buf: bytes, pos: int, base: int, need: int) -> tuple[bytes, int, int]:
    """(buffer, 0, its file offset) holding buf[pos:] and at least ``need`` bytes unless the file ends first."""
    parts = [buf[pos:]]
    have = len(parts[0])
    while have < need:
        more = fh.read(max(READ_CHUNK, need - have))
        if not more:
            break
        parts.append(more)
        have += len(more)
    return b"".join(parts), 0, base + pos


def _read_pcapng(fh: BinaryIO, head: bytes) -> Iterator[Frame]:
    offset = 0
    order = "<"
    interfaces: list[tuple[int, int]] = []          # (linktype, units per second)
    block_type = head
    while True:
        if block_type is None:
            block_type = fh.read(4)
            if not block_type:
                return
        if len(block_type) < 4:
            raise CaptureError("truncated", offset, "truncated pcapng block header")
        raw_len = _need(fh, 4, offset, "pcapng block header")
        if block_type == PCAPNG_SHB:
            bom = _need(fh, 4, offset, "pcapng section header")
            order = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else None
            if order is None:
                raise CaptureError("damaged", offset, f"pcapng byte-order magic {bom.hex()} is wrong")
            length = struct.unpack(order + "I", raw_len)[0]
            body = b"\x00" * 4 + _need(fh, max(length - 16, 0), offset, "pcapng section header")
            interfaces = []
        else:
            length = struct.unpack(order + "I", raw_len)[0]
            if length < 12 or length % 4 or length > MAX_RECORD:
                raise CaptureError("damaged", offset, f"pcapng block length {length} is not plausible")
            body = _need(fh, length - 12, offset, "pcapng block")
        trailer = _need(fh, 4, offset, "pcapng block trailer")
        if struct.unpack(order + "I", trailer)[0] != length:
            raise CaptureError("damaged", offset, "pcapng block trailer length differs from its header")
        btype = struct.unpack(order + "I", block_type)[0]
        if btype == _IDB:
            interfaces.append(_interface(body, order, offset))
        elif btype in (_EPB, _PB):
            frame = _packet_block(btype, body, order, interfaces, offset)
            if frame is not None:
                yield frame
        elif btype == _SPB and interfaces:
            if len(body) < 4:
                raise CaptureError("damaged", offset, "simple packet block shorter than 4 bytes")
            origlen = struct.unpack_from(order + "I", body)[0]
            linktype = interfaces[0][0]
            yield Frame(0, linktype, body[4:4 + origlen], offset)
        offset += length
        block_type = None


def _interface(body: bytes, order: str, offset: int) -> tuple[int, int]:
    """(link type, timestamp units per second) of an Interface Description Block (pcapng 4.2)."""
    if len(body) < 8:
        raise CaptureError("damaged", offset, "interface description block shorter than 8 bytes")
    linktype = struct.unpack_from(order + "H", body)[0]
    resolution = 1_000_000
    pos = 8
    while pos + 4 <= len(body):
        code, size = struct.unpack_from(order + "HH", body, pos)
        if code == 0:
            break
        if pos + 4 + size > len(body):
            raise CaptureError("damaged", offset, f"interface description block option {code} of {size} bytes "
                                                  f"runs past the block")
        if code == 9 and size >= 1:      # if_tsresol
            value = body[pos + 4]
            resolution = 2 ** (value & 0x7F) if value & 0x80 else 10 ** value
        pos += 4 + size + (-size % 4)
    return linktype, resolution


def _packet_block(btype: int, body: bytes, order: str, interfaces: list, offset: int) -> Frame | None:
    if btype == _EPB:
        if len(body) < 20:
            raise CaptureError("damaged", offset, "enhanced packet block shorter than 20 bytes")
        iface, high, low, caplen, _orig = struct.unpack_from(order + "IIIII", body)
        start = 20
    else:
        if len(body) < 20:
            raise CaptureError("damaged", offset, "packet block shorter than 20 bytes")
        iface, _drops, high, low, caplen, _orig = struct.unpack_from(order + "HHIIII", body)
        start = 20
    if iface >= len(interfaces):
        raise CaptureError("damaged", offset, f"packet block names interface {iface}, only {len(interfaces)} defined")
    if start + caplen > len(body):
        raise CaptureError("damaged", offset, f"packet block captured length {caplen} exceeds the block")
    linktype, resolution = interfaces[iface]
    time_us = ((high << 32) | low) * 1_000_000 // resolution
    if time_us > MAX_TIME_US:
        raise CaptureError("damaged", offset, f"packet block timestamp {(high << 32) | low} (units of 1/{resolution} s)"
                                              f" does not fit the call table's int64 microseconds")
    return Frame(time_us, linktype, body[start:start + caplen], offset)


@dataclass(slots=True)
class Segment:
    """A TCP segment with its addresses (strings) and payload."""
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    flags: int
    payload: bytes


def _ip_of(frame: Frame) -> object | None:
    lt, data = frame.linktype, frame.data
    if lt == LINKTYPE_ETHERNET:
        pkt = dpkt.ethernet.Ethernet(data)
        return pkt.data
    if lt in (LINKTYPE_NULL, LINKTYPE_LOOP):
        return dpkt.loopback.Loopback(data).data
    if lt == LINKTYPE_LINUX_SLL:
        return dpkt.sll.SLL(data).data
    if lt == LINKTYPE_LINUX_SLL2:
        return dpkt.sll2.SLL2(data).data
    if lt in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not data:
            return None
        return dpkt.ip.IP(data) if data[0] >> 4 == 4 else dpkt.ip6.IP6(data)
    return None


def tcp_segment(frame: Frame) -> Segment | None:
    """The TCP segment carried by a frame, or None (not TCP, IP fragment, unreadable); never raises."""
    if frame.linktype == LINKTYPE_ETHERNET:
        data = frame.data
        if data[12:14] == b"\x08\x00" and len(data) >= 54 and data[14] >> 4 == 4:
            return _ipv4_tcp(data, 14)
    try:
        ip = _ip_of(frame)
    except (dpkt.UnpackError, struct.error, ValueError, IndexError):
        return None
    if isinstance(ip, dpkt.ip.IP):
        if ip.mf or ip.offset:
            return None
        src, dst = address_text(socket.AF_INET, ip.src), address_text(socket.AF_INET, ip.dst)
    elif isinstance(ip, dpkt.ip6.IP6):
        src, dst = address_text(socket.AF_INET6, ip.src), address_text(socket.AF_INET6, ip.dst)
    else:
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    return Segment(src, tcp.sport, dst, tcp.dport, tcp.seq, tcp.flags, bytes(tcp.data))


_IPV4 = struct.Struct(">BBHHHBBH4s4s")
_TCP = struct.Struct(">HHIIH")
_ADDRESSES: dict[bytes, str] = {}


def address_text(family: int, raw: bytes) -> str:
    """An IPv4/IPv6 address in text, cached (a capture names few hosts)."""
    text = _ADDRESSES.get(raw)
    if text is None:
        if len(_ADDRESSES) > 65536:
            _ADDRESSES.clear()
        text = _ADDRESSES[raw] = socket.inet_ntop(family, raw)
    return text


def _ipv4_tcp(data: bytes, at: int) -> Segment | None:
    """IPv4 (RFC 791) + TCP (RFC 9293 3.1) at ``at``, read as dpkt reads them, without building packet objects
    (dpkt's objects were a third of the ingest time: cProfile in docs/pipeline.md)."""
    v_hl, _tos, total, _id, frag, _ttl, proto, _sum, src, dst = _IPV4.unpack_from(data, at)
    ihl = (v_hl & 0xF) << 2
    if ihl < 20 or frag & 0x3FFF or proto != 6:         # bad header, fragment (MF or offset), not TCP
        return None
    start = at + ihl
    end = at + total if total else len(data)            # total 0: TCP segmentation offload, as dpkt
    if end - start < 20 or len(data) - start < 20:
        return None
    sport, dport, seq, _ack, off_flags = _TCP.unpack_from(data, start)
    offset = (off_flags >> 12) << 2
    if offset < 20:
        return None
    return Segment(address_text(socket.AF_INET, src), sport, address_text(socket.AF_INET, dst), dport, seq,
                   off_flags & 0x1FF, data[start + offset:end])


_FLOW_KEYS: dict[bytes, tuple[bytes, bytes]] = {}
_ETHERNET_IPV4 = b"\x08\x00\x45"                # EtherType IPv4, then version 4 with a 20-byte header


def raw_flow_key(buf: bytes, begin: int, end: int) -> tuple[bytes, bytes] | None:
    """flow_key of an Ethernet frame held in ``buf[begin:end]`` when it is IPv4 without options carrying TCP (the
    common case, read in place), else None: the caller then asks flow_key."""
    if end - begin >= 54 and buf[begin + 12:begin + 15] == _ETHERNET_IPV4 and buf[begin + 23] == 6 \
            and not buf[begin + 20] & 0x3F | buf[begin + 21]:
        ends = buf[begin + 26:begin + 38]                   # addresses, then ports: one key per direction
        key = _FLOW_KEYS.get(ends)
        if key is None:
            if len(_FLOW_KEYS) > 65536:
                _FLOW_KEYS.clear()
            a, b = ends[:4] + ends[8:10], ends[4:8] + ends[10:12]
            key = _FLOW_KEYS[ends] = (a, b) if a <= b else (b, a)
        return key
    return None


def flow_key(frame: Frame) -> tuple | None:
    """The TCP connection of a frame as an order-free key of raw addresses and ports (both directions give the
    same key), or None when the frame carries no TCP segment; cheap enough for a first pass over a whole file."""
    if frame.linktype == LINKTYPE_ETHERNET:
        key = raw_flow_key(frame.data, 0, len(frame.data))
        if key is not None:
            return key
    try:
        ip = _ip_of(frame)
    except (dpkt.UnpackError, struct.error, ValueError, IndexError):
        return None
    tcp = getattr(ip, "data", None)
    if not isinstance(tcp, dpkt.tcp.TCP) or isinstance(ip, dpkt.ip.IP) and (ip.mf or ip.offset):
        return None
    a, b = ip.src + tcp.sport.to_bytes(2, "big"), ip.dst + tcp.dport.to_bytes(2, "big")
    return (a, b) if a <= b else (b, a)
