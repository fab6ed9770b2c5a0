"""A loopback TCP proxy that records what it forwards as a pcap/pcapng capture (Ethernet/IPv4/TCP frames built
with dpkt, RFC 9293 sequence numbers), for tests and for users without tcpdump."""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import BinaryIO

import dpkt

MSS = 1460
_MAC_CLIENT = b"\x02\x00\x00\x00\x00\x01"
_MAC_SERVER = b"\x02\x00\x00\x00\x00\x02"


def _ipv6(address: str) -> bytes:
    """An address as IPv6 bytes (an IPv4 one as IPv4-mapped, RFC 4291 2.5.5.2: the loopback client of an IPv6
    target)."""
    if ":" not in address:
        address = "::ffff:" + address
    return socket.inet_pton(socket.AF_INET6, address)


class PcapSink:
    """Writes TCP segments of many connections as Ethernet frames into one pcap or pcapng file (thread-safe)."""

    def __init__(self, path: str | Path, *, pcapng: bool = False, mss: int = MSS, duplicate: bool = False) -> None:
        self.fh: BinaryIO = open(path, "wb")
        self.writer = (dpkt.pcapng.Writer(self.fh, linktype=dpkt.pcap.DLT_EN10MB) if pcapng
                       else dpkt.pcap.Writer(self.fh, linktype=dpkt.pcap.DLT_EN10MB))
        self.mss = mss
        self.duplicate = duplicate      # write every data segment twice (a retransmission) to test reassembly
        self.lock = threading.Lock()
        self.frames = 0

    def segment(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
                payload: bytes = b"") -> None:
        """Write one TCP segment (checksums and lengths computed by dpkt)."""
        tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF, flags=flags,
                           win=65535, data=payload)
        if ":" in src[0] or ":" in dst[0]:
            ip = dpkt.ip6.IP6(src=_ipv6(src[0]), dst=_ipv6(dst[0]), nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=tcp)
            ip.plen = len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP6
        else:
            ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=dpkt.ip.IP_PROTO_TCP,
                            ttl=64, data=tcp)
            ip.len = 20 + len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP
        eth = dpkt.ethernet.Ethernet(src=_MAC_CLIENT, dst=_MAC_SERVER, type=eth_type, data=ip)
        frame = bytes(eth)
        with self.lock:
            self.writer.writepkt(frame, ts=time.time())
            self.fh.flush()              # a recorder killed or hung up keeps every frame written so far
            self.frames += 1

    def data(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, payload: bytes) -> int:
        """Write payload as MSS-sized PSH/ACK segments; returns the next sequence number."""
        for pos in range(0, len(payload), self.mss):
            part = payload[pos:pos + self.mss]
            flags = dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH
            self.segment(src, dst, seq + pos, ack, flags, part)
            if self.duplicate:
                self.segment(src, dst, seq + pos, ack, flags, part)
        return seq + len(payload)

    def close(self) -> None:
        """Close the capture file."""
        with self.lock:
            self.fh.close()


class RecordingProxy:
    """Listens on 127.0.0.1, forwards each connection to ``target`` and records both directions in ``sink``."""

    def __init__(self, target: tuple[str, int], sink: PcapSink, listen_port: int = 0) -> None:
        self.target = target
        self.sink = sink
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.sockets: set[socket.socket] = set()      # of the relayed connections still open
        self._closing = False
        self._accept = threading.Thread(target=self._serve, name="recording-proxy", daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._relay, args=(client,), daemon=True)
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        self.sockets |= {client, upstream}
        try:
            if not self._closing:
                self._forward(client, upstream)
        finally:
            self.sockets -= {client, upstream}
            client.close()
            upstream.close()

    def _forward(self, client: socket.socket, upstream: socket.socket) -> None:
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c_addr = client.getpeername()[:2]
        s_addr = upstream.getpeername()[:2]          # the address a host name resolved to
        sink = self.sink
        seqs = {c_addr: 1000, s_addr: 500000}
        syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
        sink.segment(c_addr, s_addr, seqs[c_addr] - 1, 0, syn)
        sink.segment(s_addr, c_addr, seqs[s_addr] - 1, seqs[c_addr], syn | ack)
        sink.segment(c_addr, s_addr, seqs[c_addr], seqs[s_addr], ack)
        lock = threading.Lock()
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket, a: tuple, b: tuple) -> None:
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    with lock:
                        sink.segment(a, b, seqs[a], seqs[b], dpkt.tcp.TH_FIN | ack)
                        seqs[a] += 1
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    if done.is_set():
                        return
                    done.set()
                    return
                with lock:
                    seqs[a] = sink.data(a, b, seqs[a], seqs[b], data)
                    try:
                        dst.sendall(data)
                    except OSError:
                        return

        back = threading.Thread(target=pump, args=(upstream, client, s_addr, c_addr), daemon=True)
        back.start()
        pump(client, upstream, c_addr, s_addr)
        back.join()

    def close(self) -> None:
        """Stop accepting, end the relayed connections still open (both ends see EOF; their FINs are recorded)
        and wait for their threads."""
        self._closing = True
        self.listener.close()
        for s in list(self.sockets):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self.threads:
            thread.join(timeout=30)
