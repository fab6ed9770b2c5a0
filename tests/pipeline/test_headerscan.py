"""The split's vectorized first pass (headerscan.scan_ethernet_pcap) learns from an Ethernet pcap exactly what the
Frame-by-Frame pass learns (split._Scan.frame): spans, connections and their first calls, counters, problems."""
from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings, strategies as st

from qm2qm.pipeline import headerscan, split

SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10
FLAGS = [ACK] * 6 + [PSH | ACK] * 6 + [SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, SYN | FIN, 0]     # mostly data
CLIENTS = [("10.0.0.1", 50000), ("10.0.0.1", 50001), ("10.0.0.2", 50000)]
SERVER = ("10.0.0.9", 2105)
# endpoints above and below the server's address, talking among themselves too: flow keys whose two ends rank
# every which way (headerscan numbers a flow by the ranks of its ends)
PEERS = [("10.0.0.3", 1), ("10.0.0.20", 7), ("10.0.0.21", 7), ("10.0.0.22", 9), SERVER]


def _request_pdu(frag_len: int, length: int, flags: int = 3) -> bytes:
    """A DCE/RPC request header (C706 12.6.4.9) claiming ``frag_len``, padded to ``length`` bytes."""
    head = bytes([5, 0, 0, flags, 0x10, 0, 0, 0]) + struct.pack("<HHI", frag_len, 0, 7)
    return (head + bytes(max(0, length - len(head))))[:max(length, 0)]


def _tcp(src, dst, flags: int, payload: bytes, *, header_words: int = 5, ip_options: bytes = b"",
         fragment: int = 0, total_zero: bool = False, proto: int = 6, ipv6: bool = False) -> bytes:
    tcp = struct.pack(">HHIIHHHH", src[1], dst[1], 1000, 0, header_words << 12 | flags, 8192, 0, 0)
    tcp += bytes(max(0, header_words * 4 - 20)) + payload
    if ipv6:
        ip = struct.pack(">IHBB", 6 << 28, len(tcp), proto, 64) \
            + socket.inet_pton(socket.AF_INET6, "fd00::" + src[0][-1]) \
            + socket.inet_pton(socket.AF_INET6, "fd00::" + dst[0][-1])
        return bytes(12) + b"\x86\xdd" + ip + tcp
    ihl = 5 + len(ip_options) // 4
    total = 0 if total_zero else ihl * 4 + len(tcp)
    ip = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, total, 1, fragment, 64, proto, 0, socket.inet_aton(src[0]),
                     socket.inet_aton(dst[0])) + ip_options
    return bytes(12) + b"\x08\x00" + ip + tcp


@st.composite
def _frame(draw) -> bytes:
    kind = draw(st.sampled_from(["tcp"] * 14 + ["options", "fragment", "udp", "ipv6", "short", "tso", "badtcp"]))
    client = draw(st.sampled_from(CLIENTS[:1] * 6 + CLIENTS))         # long runs of one connection's frames
    src, dst = (client, SERVER) if draw(st.booleans()) else (SERVER, client)
    if draw(st.integers(0, 5)) == 0:
        src, dst = draw(st.lists(st.sampled_from(PEERS), min_size=2, max_size=2, unique=True))
    flags = draw(st.sampled_from(FLAGS))
    length = draw(st.integers(16, 80))
    payload = draw(st.one_of(st.just(b""), st.binary(min_size=1, max_size=40),
                             st.builds(_request_pdu, st.integers(24, 80) | st.just(length), st.just(length),
                                       st.sampled_from([3, 3, 3, 1, 7]))))
    if kind == "short":
        return bytes(draw(st.integers(0, 53)))
    frame = _tcp(src, dst, flags, payload, ip_options=b"\x01\x01\x01\x00" if kind == "options" else b"",
                 fragment=0x2000 if kind == "fragment" else 0, total_zero=kind == "tso",
                 proto=17 if kind == "udp" else 6, ipv6=kind == "ipv6", header_words=4 if kind == "badtcp" else 5)
    cut = draw(st.integers(0, 8))                    # a snap length shorter than the packet
    return frame[:len(frame) - cut] if draw(st.booleans()) else frame


def _pcap(frames: list[bytes], tail: bytes, big_endian: bool) -> bytes:
    order = ">" if big_endian else "<"
    out = [struct.pack(order + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for n, frame in enumerate(frames):
        out.append(struct.pack(order + "IIII", 1_700_000_000 + n, n * 7 % 1_000_000, len(frame), len(frame)) + frame)
    return b"".join(out) + tail


_TAILS = st.sampled_from([b"", b"\x01\x02\x03",                                     # a cut record header
                          struct.pack("<IIII", 1, 0, 60, 60) + bytes(10),          # a cut record
                          struct.pack("<IIII", 1, 0, 1 << 30, 60) + bytes(100)])   # an implausible length


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frames=st.lists(_frame(), max_size=60), tail=_TAILS, block=st.integers(40, 4000),
       big_endian=st.booleans())
def test_the_vectorized_first_pass_learns_what_the_frame_by_frame_pass_learns(tmp_path, monkeypatch, frames, tail,
                                                                              block, big_endian):
    if big_endian and tail:
        tail = tail[:4][::-1] + tail[4:8][::-1] + tail[8:12][::-1] + tail[12:16][::-1] + tail[16:]
    path = tmp_path / "capture.pcap"
    path.write_bytes(_pcap(frames, tail, big_endian))
    monkeypatch.setattr(headerscan, "BLOCK_BYTES", block)          # records walked in several blocks
    assert split.scan_file(path).learned() == split.scan_file(path, vectorized=False).learned()


def test_a_capture_of_only_its_file_header_teaches_nothing(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(_pcap([], b"", False))
    scan = split.scan_file(path)
    assert scan.learned() == ([], [], [], {})


def test_every_pair_of_endpoints_in_one_block_keeps_its_own_span_and_connection(tmp_path):
    """15 connections among 6 endpoints, their frames interleaved in one block: each is numbered apart from the
    others (by the ranks of both its ends) and learned as the Frame-by-Frame pass learns it."""
    import itertools
    pairs = list(itertools.combinations(PEERS + [("10.0.0.2", 50000)], 2))
    frames = []
    for round_ in range(3):
        for src, dst in pairs:
            flags = SYN if round_ == 0 else PSH | ACK
            frames.append(_tcp(src, dst, flags, b"" if round_ == 0 else _request_pdu(40, 40)))
    path = tmp_path / "mesh.pcap"
    path.write_bytes(_pcap(frames, b"", False))
    learned = split.scan_file(path).learned()
    assert len(learned[0]) == len(pairs) and len(learned[1]) == len(pairs)
    assert learned == split.scan_file(path, vectorized=False).learned()


def test_a_4_tuple_reused_in_one_block_is_a_new_connection_with_its_own_first_call(tmp_path):
    """Data, then a SYN on the same 4-tuple (a new connection), then that connection's data and first request,
    all in one run of frames: the new connection's first data segment and request are picked too."""
    client = CLIENTS[0]
    frames = [_tcp(client, SERVER, SYN, b""), _tcp(client, SERVER, PSH | ACK, b"hello"),
              _tcp(client, SERVER, PSH | ACK, _request_pdu(40, 40)), _tcp(client, SERVER, SYN, b""),
              _tcp(client, SERVER, PSH | ACK, b"again"), _tcp(client, SERVER, PSH | ACK, _request_pdu(48, 48))]
    path = tmp_path / "reused.pcap"
    path.write_bytes(_pcap(frames, b"", False))
    learned = split.scan_file(path).learned()
    assert [(c[1], c[3] is not None, c[4]) for c in learned[1]] == [
        ("10.0.0.1:50000-10.0.0.9:2105", True, True), ("10.0.0.1:50000-10.0.0.9:2105#1", True, True)]
    assert learned == split.scan_file(path, vectorized=False).learned()


def test_a_syn_not_read_in_place_between_two_runs_starts_a_new_group(tmp_path):
    """The SYN that reuses the 4-tuple carries IP options (a Frame, not read in place): the connection it opens
    still gets its first data segment and request picked."""
    client = CLIENTS[0]
    frames = [_tcp(client, SERVER, SYN, b""), _tcp(client, SERVER, PSH | ACK, _request_pdu(40, 40)),
              _tcp(client, SERVER, SYN, b"", ip_options=b"\x01\x01\x01\x00"),
              _tcp(client, SERVER, PSH | ACK, b"again"), _tcp(client, SERVER, PSH | ACK, _request_pdu(48, 48))]
    path = tmp_path / "reused.pcap"
    path.write_bytes(_pcap(frames, b"", False))
    learned = split.scan_file(path).learned()
    assert [c[3] is not None for c in learned[1]] == [True, True]
    assert learned == split.scan_file(path, vectorized=False).learned()


def test_a_capture_that_cannot_be_mapped_is_read_frame_by_frame(tmp_path, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise OSError(19, "No such device")
    client = CLIENTS[0]
    path = tmp_path / "c.pcap"
    path.write_bytes(_pcap([_tcp(client, SERVER, SYN, b""), _tcp(client, SERVER, PSH | ACK, _request_pdu(40, 40))],
                           b"", False))
    expected = split.scan_file(path, vectorized=False).learned()
    monkeypatch.setattr(headerscan.mmap, "mmap", refuse)
    assert split.scan_file(path).learned() == expected and expected[1][0][3] is not None
