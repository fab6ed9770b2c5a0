"""pcap and pcapng containers (libpcap format; IETF draft-ietf-opsawg-pcapng) read with exact file offsets,
and link layers decoded to IP/TCP with dpkt (Ethernet, Linux SLL/SLL2, BSD loopback, raw IP)."""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import BinaryIO, Iterator

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


def read_frames(fh: BinaryIO) -> Iterator[Frame]:
    """Every packet record of a pcap or pcapng stream; raises CaptureError at the first unreadable record."""
    head = fh.read(4)
    kind = sniff(head)
    if kind == "pcap":
        yield from _read_pcap(fh, head)
    elif kind == "pcapng":
        yield from _read_pcapng(fh, head)
    else:
        raise CaptureError("not_capture", 0, f"not a pcap or pcapng file (magic {head.hex() or 'empty'})")


def _need(fh: BinaryIO, n: int, offset: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise CaptureError("truncated", offset, f"truncated {what}: {len(data)} of {n} bytes")
    return data


def _read_pcap(fh: BinaryIO, magic: bytes) -> Iterator[Frame]:
    order, per_second = PCAP_MAGICS[magic]
    rest = _need(fh, 20, 4, "pcap file header")
    _major, _minor, _zone, _sigfigs, _snaplen, linktype = struct.unpack(order + "HHiIII", rest)
    linktype &= 0xFFFF
    record = struct.Struct(order + "IIII")
    offset = 24
    while True:
        head = fh.read(16)
        if not head:
            return
        if len(head) < 16:
            raise CaptureError("truncated", offset, f"truncated packet record header: {len(head)} of 16 bytes")
        sec, frac, caplen, _origlen = record.unpack(head)
        if caplen > MAX_RECORD:
            raise CaptureError("damaged", offset, f"packet record length {caplen} is not plausible")
        data = _need(fh, caplen, offset, "packet record")
        yield Frame(sec * 1_000_000 + frac * 1_000_000 // per_second, linktype, data, offset)
        offset += 16 + caplen


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
            interfaces.append(_interface(body, order))
        elif btype in (_EPB, _PB):
            frame = _packet_block(btype, body, order, interfaces, offset)
            if frame is not None:
                yield frame
        elif btype == _SPB and interfaces:
            origlen = struct.unpack_from(order + "I", body)[0]
            linktype = interfaces[0][0]
            yield Frame(0, linktype, body[4:4 + origlen], offset)
        offset += length
        block_type = None


def _interface(body: bytes, order: str) -> tuple[int, int]:
    linktype = struct.unpack_from(order + "H", body)[0]
    resolution = 1_000_000
    pos = 8
    while pos + 4 <= len(body):
        code, size = struct.unpack_from(order + "HH", body, pos)
        if code == 0:
            break
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
    ticks = (high << 32) | low
    return Frame(ticks * 1_000_000 // resolution, linktype, body[start:start + caplen], offset)


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
    try:
        ip = _ip_of(frame)
    except (dpkt.UnpackError, struct.error, ValueError, IndexError):
        return None
    if isinstance(ip, dpkt.ip.IP):
        if ip.mf or ip.offset:
            return None
        src, dst = socket.inet_ntop(socket.AF_INET, ip.src), socket.inet_ntop(socket.AF_INET, ip.dst)
    elif isinstance(ip, dpkt.ip6.IP6):
        src, dst = socket.inet_ntop(socket.AF_INET6, ip.src), socket.inet_ntop(socket.AF_INET6, ip.dst)
    else:
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    return Segment(src, tcp.sport, dst, tcp.dport, tcp.seq, tcp.flags, bytes(tcp.data))
