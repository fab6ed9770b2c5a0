#!/usr/bin/env python3
"""Benchmark of `qm2qm serve` over the qm2qm interface (MS-MQQP), against a bare asyncio echo server as baseline.

Scenarios (all over TCP on 127.0.0.1, raw precomputed PDUs, the server a real `qm2qm serve` subprocess on a fresh
SQLite data directory):

  peek      RemoteQMStartReceive2(MQ_ACTION_PEEK_CURRENT) of a 100-byte message, closed loop, 1/4/16 clients
            (one connection and one remote-read handle each); the baseline is a bare asyncio echo server
            (scripts/bench_rpc.py's EchoProtocol) driven by the same load generator with a request as large as
            the peek's response.
  receive   RemoteQMStartReceive2(MQ_ACTION_RECEIVE) + RemoteQMEndReceive(RR_ACK) of pre-filled 1 KiB messages
            until the queue is empty, 4 clients from one load process (on 2 CPUs a second load process takes
            the server's core: --receive-processes 2 shows it).
  mqrr-receive  the receive scenario over MS-MQRR RemoteRead (`qm2qm serve --mqrr`): R_StartReceive(MQ_ACTION_RECEIVE)
            + R_EndReceive(RR_ACK), 4 connections from one load process.
  large     one 4 MiB message (4 MiB - 1 KiB body: MS-MQMQ 2.2.19.1 caps the whole packet at 0x400000 bytes):
            StartReceive2 PEEK_CURRENT, and RECEIVE + EndReceive(RR_ACK), one client;
            the time from sending the request to the last response fragment.
  wake      5,000 RECEIVE calls blocked with ulTimeout INFINITE (100 connections x 50 concurrent calls; the
            runtime allows 64 calls in flight per connection), then
            5,000 sends one after another through the admin API; the latency from the start of each send's
            HTTP request to the arrival of the receive it completes (an upper bound on the wake-up).

    .venv/bin/python scripts/bench.py                     # everything (a few minutes)
    .venv/bin/python scripts/bench.py --only peek --duration 5
    .venv/bin/python scripts/bench.py --profile               # cProfile of the server under 4 peek clients
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import multiprocessing as mp
import os
import re
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

NDR20 = ("8a885d04-1ceb-11c9-9fe8-08002b104860", 2)
QM2QM = ("1088a980-eae5-11d0-8d9b-00a02453c337", 1, 0)
MQRR = ("1a9134dd-7b39-45ba-ad88-44d01ca47f28", 1, 0)          # MS-MQRR RemoteRead (qm2qm serve --mqrr)
MQ_OK = 0
MQ_ERROR_IO_TIMEOUT = 0xC00E001B
INFINITE = 0xFFFFFFFF
READY = re.compile(r"^qm2qm listening rpc=(?P<host>[^\s:]+):(?P<port>\d+) admin=(?P<admin>http://\S+)$")


# --- PDUs (C706 12.6.4.3, 12.6.4.9) ----------------------------------------------------------------------------

def bind_pdu(max_recv_frag: int = 5840, interface: tuple = QM2QM) -> bytes:
    """rpc_bind for an interface (qm2qm v1.0 unless told) over NDR (C706 12.6.4.3)."""
    item = struct.pack("<HBB", 0, 1, 0) + uuid.UUID(interface[0]).bytes_le + struct.pack("<HH", *interface[1:])
    item += uuid.UUID(NDR20[0]).bytes_le + struct.pack("<HH", NDR20[1], 0)
    body = struct.pack("<HHIB3x", 5840, max_recv_frag, 0, 1) + item
    return struct.pack("<BBBB4sHHI", 5, 0, 11, 3, b"\x10\0\0\0", 16 + len(body), 0, 1) + body


def request_pdu(opnum: int, stub: bytes, call_id: int = 2) -> bytes:
    """One rpc_request fragment (C706 12.6.4.9)."""
    body = struct.pack("<IHH", len(stub), 0, opnum) + stub
    return struct.pack("<BBBB4sHHI", 5, 0, 0, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body


def open_queue_stub(handle: int) -> bytes:
    """RemoteQMOpenQueue stub (MS-MQQP 3.1.4.3) with hQueue = pQueue = dwpContext."""
    from qm2qm.mqqp import idl
    req = idl.RemoteQMOpenQueue()
    req["pLicGuid"] = uuid.uuid4().bytes_le
    req["dwMQS"] = 0
    req["hQueue"] = req["pQueue"] = req["dwpContext"] = handle
    return req.getData()


def start_receive2_stub(handle: int, action: int, timeout_ms: int = 0, request_id: int = 1) -> bytes:
    """RemoteQMStartReceive2 stub (MS-MQQP 3.1.4.10)."""
    from qm2qm.client import Qm2qmClient
    from qm2qm.mqqp import idl
    req = idl.RemoteQMStartReceive2()
    req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = Qm2qmClient._desc(handle, action, timeout_ms, 0, request_id, None)
    req["lpRemoteReadDesc2"]["SequentialId"] = 0
    return req.getData()


def end_receive_stub(context: bytes, ack: int = 2) -> bytes:
    """RemoteQMEndReceive stub (MS-MQQP 3.1.4.2)."""
    return bytes(context) + struct.pack("<I", ack)


class Reassembler:
    """Splits a byte stream into PDUs and joins response fragments into (call_id, ptype, stub)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: dict[int, list[bytes]] = {}

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Bytes in; completed (call_id, ptype, stub) out."""
        self.buf += data
        out = []
        while len(self.buf) >= 16:
            frag_len = self.buf[8] | (self.buf[9] << 8)
            if len(self.buf) < frag_len:
                break
            ptype, flags = self.buf[2], self.buf[3]
            call_id = struct.unpack_from("<I", self.buf, 12)[0]
            if ptype == 3:                                      # fault
                status = struct.unpack_from("<I", self.buf, 24)[0]
                raise SystemExit(f"fault 0x{status:08x} on call {call_id}")
            self.parts.setdefault(call_id, []).append(bytes(self.buf[24 if ptype in (0, 2) else 16:frag_len]))
            del self.buf[:frag_len]
            if flags & 0x02:                                    # PFC_LAST_FRAG
                out.append((call_id, ptype, b"".join(self.parts.pop(call_id))))
        return out


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far (Linux /proc/<pid>/stat)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hresult(stub: bytes) -> int:
    """The HRESULT: the last 4 bytes of a response stub."""
    return struct.unpack_from("<I", stub, len(stub) - 4)[0]


def connect(port: int, max_recv_frag: int = 5840, interface: tuple = QM2QM) -> socket.socket:
    """A TCP connection bound to qm2qm (or another interface)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(bind_pdu(max_recv_frag, interface))
    rs = Reassembler()
    while not rs.feed(sock.recv(65536)):
        pass
    return sock


def call(sock: socket.socket, opnum: int, stub: bytes, call_id: int = 2) -> bytes:
    """One blocking call; the reassembled response stub."""
    sock.sendall(request_pdu(opnum, stub, call_id))
    rs = Reassembler()
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise SystemExit("server closed the connection")
        done = rs.feed(chunk)
        if done:
            return done[0][2]


# --- the server under test ---------------------------------------------------------------------------------------

class Server:
    """`qm2qm serve` in a subprocess on ephemeral ports, on a fresh data directory."""

    def __init__(self, profile_path: str | None = None, *extra: str) -> None:
        from qm2qm.client import AdminClient
        self.tmp = tempfile.TemporaryDirectory(prefix="qm2qm-bench-")
        env = dict(os.environ, PYTHONPATH=ROOT)
        profile = ["-m", "cProfile", "-o", profile_path] if profile_path else []
        self.proc = subprocess.Popen([sys.executable, *profile, "-m", "qm2qm", "serve", "--data-dir",
                                      self.tmp.name + "/data", "--port", "0", "--admin-port", "0",
                                      *self.optional_flags(), *extra],
                                     stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline().strip()
        match = READY.match(line)
        if not match:
            raise SystemExit(f"qm2qm serve did not start: {line!r}")
        self.port = int(match["port"])
        self.admin = AdminClient(match["admin"], timeout=120)

    @staticmethod
    def optional_flags() -> list[str]:
        """Listeners beside qm2qm that the benchmark does not measure, switched off when this build has them."""
        from qm2qm.config import KEYS
        flags = ["--epm-port", "0"] if "epm_port" in KEYS else []
        return flags + (["--qmcomm-port", "0"] if "qmcomm_port" in KEYS else [])

    def queue(self, name: str, body: bytes, count: int, delivery: str = "express") -> str:
        """Create a queue and fill it with ``count`` copies of ``body``."""
        q = f".\\private$\\{name}"
        self.admin.create_queue(q)
        if count:
            self.admin.send(q, body_base64=base64.b64encode(body).decode(), count=count, delivery=delivery)
        return q

    def close(self) -> None:
        """SIGINT the server and remove its data."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.tmp.cleanup()


# --- peek: closed loop, one call outstanding per connection ------------------------------------------------------

class EchoProtocol(asyncio.Protocol):
    """The transport limit: write back every byte received (the echo server of scripts/bench_rpc.py, copied
    rather than imported because that script is still changing under its owner)."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


def run_echo_server(port_queue, stop_event) -> None:
    """The baseline server process."""
    async def main():
        server = await asyncio.get_running_loop().create_server(EchoProtocol, "127.0.0.1", 0)
        port_queue.put(server.sockets[0].getsockname()[1])
        while not stop_event.is_set():
            await asyncio.sleep(0.05)
        server.close()
    asyncio.run(main())


def closed_loop_clients(port: int, setups: list[tuple], start_at: float, duration: float, ready, results) -> None:
    """One connection per setup (bind?, handle to RemoteQMOpenQueue or None, request PDU), one call outstanding
    on each; the same code drives the echo server (no bind) and qm2qm, so the client cost is the same."""
    sel = selectors.DefaultSelector()
    for bind, handle, request in setups:
        if bind:
            sock = connect(port)
            if hresult(call(sock, 2, open_queue_stub(handle))) != MQ_OK:
                raise SystemExit("RemoteQMOpenQueue failed")
        else:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, (sock, bytearray(), request))
    ready.put(1)
    while time.time() < start_at:
        time.sleep(0.001)
    done = errors = 0
    for key in sel.get_map().values():
        key.data[0].send(key.data[2])
    end = start_at + duration
    ok = b"\0\0\0\0"
    while (now := time.time()) < end:
        for key, _ in sel.select(timeout=end - now):
            sock, buf, request = key.data
            buf += sock.recv(1 << 20)
            # as light as bench_rpc's loop: frame by frag_length, a call ends at PFC_LAST_FRAG, and the
            # HRESULT is the last 4 stub bytes (the echoed request's stub is all zeros)
            while len(buf) >= 16:
                frag_len = buf[8] | (buf[9] << 8)
                if len(buf) < frag_len:
                    break
                if buf[2] == 3:
                    raise SystemExit("fault PDU")
                if buf[3] & 0x02:
                    errors += buf[frag_len - 4:frag_len] != ok
                    done += 1
                    sock.send(request)
                del buf[:frag_len]
    results.put((done, errors))


def measure_echo(clients: int, duration: float, request: bytes, processes: int) -> tuple[float, float]:
    """Echo calls/s with the peek load generator, and the echo server's CPU µs per call."""
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=run_echo_server, args=(port_queue, stop_event))
    server.start()
    try:
        port = port_queue.get(timeout=60)
        rate, _, cpu = run_load(port, [(False, None, request)] * clients, duration, processes, server.pid)
    finally:
        stop_event.set()
        server.join(timeout=30)
    return rate, cpu


def bench_peek(clients_list: list[int], duration: float, processes: int, repeat: int) -> list[tuple]:
    """Peek of a 100-byte message vs the echo limit."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    rows = []
    server = Server()
    try:
        q = server.queue("peek", bytes(range(100)), 1)
        probe = server.admin.open_queue(q, access="peek")["hRemoteQueue"]   # closed with its session below
        sock = connect(server.port)
        call(sock, 2, open_queue_stub(probe))
        response = call(sock, 9, start_receive2_stub(probe, MQ_ACTION_PEEK_CURRENT))
        assert hresult(response) == MQ_OK
        sock.close()
        request_len = len(request_pdu(9, start_receive2_stub(1, MQ_ACTION_PEEK_CURRENT)))
        echo_request = request_pdu(0, bytes(len(response)))   # echo a request as large as the peek's response
        for clients in clients_list:
            echoes, rates, errors, echo_cpu, rpc_cpu = [], [], 0, [], []
            for _ in range(repeat):          # interleaved; best of each (the least disturbed run on a shared box)
                echo_rate, cpu = measure_echo(clients, duration, echo_request, processes)
                echoes.append(echo_rate)
                echo_cpu.append(cpu)
                # each run's sessions close their descriptors when its connections go (RemoteQMCloseQueue rundown)
                setups = []
                for _ in range(clients):
                    h = server.admin.open_queue(q, access="peek")["hRemoteQueue"]
                    setups.append((True, h, request_pdu(9, start_receive2_stub(h, MQ_ACTION_PEEK_CURRENT))))
                rate, errs, cpu = run_load(server.port, setups, duration, processes, server.proc.pid)
                rates.append(rate)
                rpc_cpu.append(cpu)
                errors += errs
            echo, rate = max(echoes), max(rates)
            rows.append((clients, echo, rate, rate / echo, errors))
            print(f"  peek {clients:2d} clients: echo {echo:8.0f}/s  qm2qm {rate:8.0f}/s  ratio {rate / echo:4.2f}"
                  f"  errors {errors}  server CPU/call: echo {min(echo_cpu):5.1f} µs, qm2qm {min(rpc_cpu):5.1f} µs"
                  f"  (runs: echo {' '.join(f'{x:.0f}' for x in echoes)}; qm2qm {' '.join(f'{x:.0f}' for x in rates)})",
                  flush=True)
        print(f"  (peek request {request_len} B, response {len(response) + 24} B; echo request "
              f"{len(echo_request)} B)")
    finally:
        server.close()
    return rows


def run_load(port: int, setups: list[tuple], duration: float, processes: int,
             server_pid: int | None = None) -> tuple[float, int, float]:
    """Closed-loop load from up to ``processes`` processes: (calls/s, errors, server CPU µs per call)."""
    ctx = mp.get_context("spawn")
    n = min(len(setups), processes)
    shares = [setups[i::n] for i in range(n)]
    ready, results = ctx.Queue(), ctx.Queue()
    start_at = time.time() + 1.0 + 0.2 * n
    procs = [ctx.Process(target=closed_loop_clients, args=(port, share, start_at, duration, ready, results))
             for share in shares]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = cpu_seconds(server_pid) if server_pid else 0.0
    done = errors = 0
    for _ in procs:
        d, e = results.get(timeout=duration + 120)
        done, errors = done + d, errors + e
    cpu = (cpu_seconds(server_pid) - cpu0) / max(done, 1) * 1e6 if server_pid else float("nan")
    for p in procs:
        p.join()
    return done / duration, errors, cpu


# --- receive + ACK: drain a pre-filled queue ----------------------------------------------------------------------

def receive_clients(port: int, handles: list[int], start_at: float, duration: float, ready, results) -> None:
    """Drain a queue with StartReceive2(RECEIVE) + EndReceive(RR_ACK)."""
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    sel = selectors.DefaultSelector()
    for h in handles:
        sock = connect(port)
        if hresult(call(sock, 2, open_queue_stub(h))) != MQ_OK:
            raise SystemExit("RemoteQMOpenQueue failed")
        start = request_pdu(9, start_receive2_stub(h, MQ_ACTION_RECEIVE))
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, [sock, bytearray(), start])
    ready.put(1)
    while time.time() < start_at:
        time.sleep(0.001)
    done, errors = drain(sel, lambda frag, data: request_pdu(1, end_receive_stub(frag[24:44]), call_id=3))
    results.put((done, errors, time.time()))


def drain(sel: selectors.BaseSelector, end_request) -> tuple[int, int]:
    """Run receive (call 2) + end (call 3) loops on every registered connection until each receive times out;
    ``key.data`` is [sock, buffer, receive PDU, ...] and ``end_request(response fragment, key.data)`` the end
    PDU. Returns (messages received and ended, errors)."""
    done = errors = 0
    for key in sel.get_map().values():
        key.data[0].send(key.data[2])
    live = len(sel.get_map())
    while live:
        for key, _ in sel.select(timeout=30):
            sock, buf, start = key.data[:3]
            buf += sock.recv(1 << 20)
            while len(buf) >= 16:               # 1 KiB messages: every response is one fragment
                frag_len = buf[8] | (buf[9] << 8)
                if len(buf) < frag_len:
                    break
                if buf[2] == 3:
                    raise SystemExit(f"fault 0x{struct.unpack_from('<I', buf, 24)[0]:08x}")
                status = struct.unpack_from("<I", buf, frag_len - 4)[0]
                if buf[12] == 2:                                   # call 2: the receive answered
                    if status == MQ_OK:
                        sock.send(end_request(bytes(buf[:frag_len]), key.data))
                    else:
                        errors += status != MQ_ERROR_IO_TIMEOUT
                        sel.unregister(sock)
                        live -= 1
                else:                                              # call 3: the end answered
                    errors += status != MQ_OK
                    done += 1
                    sock.send(start)
                del buf[:frag_len]
    return done, errors


def bench_receive(messages: int, clients: int, processes: int, delivery: str = "express") -> tuple:
    """Receive+ACK throughput of 1 KiB messages."""
    server = Server()
    try:
        q = server.queue("receive", bytes(1024), messages, delivery)
        handles = [server.admin.open_queue(q)["hRemoteQueue"] for _ in range(clients)]
        ctx = mp.get_context("spawn")
        n = min(clients, processes)
        ready, results = ctx.Queue(), ctx.Queue()
        start_at = time.time() + 1.0 + 0.2 * n
        procs = [ctx.Process(target=receive_clients, args=(server.port, handles[i::n], start_at, 0, ready, results))
                 for i in range(n)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=60)
        while time.time() < start_at:
            time.sleep(0.001)
        cpu0 = cpu_seconds(server.proc.pid)
        outs = [results.get(timeout=600) for _ in procs]
        cpu = cpu_seconds(server.proc.pid) - cpu0
        for p in procs:
            p.join()
        done = sum(o[0] for o in outs)
        errors = sum(o[1] for o in outs)
        elapsed = max(o[2] for o in outs) - start_at
        left = len(server.admin.list_messages(q))
    finally:
        server.close()
    rate = done / elapsed
    print(f"  receive+ACK 1 KiB {delivery} x {messages}, {clients} clients: {rate:8.0f} msg/s  ({elapsed:.2f} s, "
          f"errors {errors}, left {left}; server CPU {cpu / max(done, 1) * 1e6:.0f} µs/message)", flush=True)
    return rate, elapsed, errors, left


# --- MS-MQRR receive + ACK: the same drain over RemoteRead (qm2qm serve --mqrr) ---------------------------------

def mqrr_receive_clients(port: int, format_name: str, clients: int, start_at: float, ready, results) -> None:
    """Drain a queue with MS-MQRR R_StartReceive(MQ_ACTION_RECEIVE) + R_EndReceive(RR_ACK), ``clients``
    connections from this process, each with its own R_OpenQueue handle (MS-MQRR 3.1.4.2, 3.1.4.7, 3.1.4.9)."""
    from qm2qm.mqrr import idl
    from qm2qm.mqrr.queue_format import queue_format
    sel = selectors.DefaultSelector()
    for _ in range(clients):
        sock = connect(port, interface=MQRR)
        request = idl.R_OpenQueue()
        request["pQueueFormat"] = queue_format(format_name)
        request["dwAccess"], request["dwShareMode"], request["pClientId"] = 1, 0, uuid.uuid4().bytes_le
        handle = call(sock, 2, request.getData())[:20]                 # a fault PDU ends the benchmark
        receive = idl.R_StartReceive()
        receive["phContext"], receive["ulAction"], receive["dwRequestId"] = handle, 0, 1
        receive["dwMaxBodySize"] = receive["dwMaxCompoundMessageSize"] = 0xFFFFFFFF
        start = request_pdu(7, receive.getData())
        end = request_pdu(9, handle + struct.pack("<II", 2, 1), call_id=3)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, [sock, bytearray(), start, end])
    ready.put(1)
    while time.time() < start_at:
        time.sleep(0.001)
    done, errors = drain(sel, lambda frag, data: data[3])
    results.put((done, errors, time.time()))


def bench_mqrr_receive(messages: int, clients: int, delivery: str = "express") -> tuple:
    """Receive+ACK throughput of 1 KiB messages over MS-MQRR, to set beside qm2qm's (bench_receive)."""
    server = Server(None, "--mqrr")
    try:
        q = server.queue("mqrr_receive", bytes(1024), messages, delivery)
        format_name = "DIRECT=OS:localhost\\private$\\mqrr_receive"
        ctx = mp.get_context("spawn")
        ready, results = ctx.Queue(), ctx.Queue()
        start_at = time.time() + 1.2
        proc = ctx.Process(target=mqrr_receive_clients, args=(server.port, format_name, clients, start_at, ready,
                                                              results))
        proc.start()
        ready.get(timeout=60)
        while time.time() < start_at:
            time.sleep(0.001)
        cpu0 = cpu_seconds(server.proc.pid)
        done, errors, finished = results.get(timeout=600)
        cpu = cpu_seconds(server.proc.pid) - cpu0
        proc.join()
        elapsed = finished - start_at
        left = len(server.admin.list_messages(q))
    finally:
        server.close()
    rate = done / elapsed
    print(f"  MS-MQRR receive+ACK 1 KiB {delivery} x {messages}, {clients} clients: {rate:8.0f} msg/s  "
          f"({elapsed:.2f} s, errors {errors}, left {left}; server CPU {cpu / max(done, 1) * 1e6:.0f} µs/message)",
          flush=True)
    return rate, elapsed, errors, left
# --- the Windows remote-read sequence (MS-MQMP 4.2): open -> receives -> close, vs the admin-API shortcut -----------

def sequence_client(admin_url: str, qmcomm_port: int, qm2qm_port: int, q: str, path: str, rounds: int,
                    receives: int, start_at: float, ready, results) -> None:
    """One client: ``rounds`` times open the queue, receive+ACK ``receives`` messages, close. ``path`` "qmcomm":
    qmcomm R_QMOpenRemoteQueue + RemoteQMOpenQueue; "admin": POST /v1/queues/{q}/open + RemoteQMOpenQueue;
    "mqrr": RemoteReader(protocol="mqrr"), R_GetServerPort + R_OpenQueue ... R_CloseQueue on the qm2qm listener."""
    from qm2qm.client import AdminClient, Qm2qmClient, RemoteReader
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    admin = AdminClient(admin_url)
    fmt = "DIRECT=TCP:127.0.0.1\\" + q.split("\\", 1)[1]
    ready.put(1)
    while time.time() < start_at:
        time.sleep(0.001)
    done = errors = 0
    for _ in range(rounds):
        if path == "admin":
            h = int(admin.open_queue(q)["hRemoteQueue"])
            with Qm2qmClient("127.0.0.1", qm2qm_port) as client:
                _, session = client.open_queue(h)
                client.get_version()
                for _ in range(receives):
                    read = client.start_receive2(h, action=MQ_ACTION_RECEIVE)
                    errors += read.hresult != MQ_OK
                    if read.ok:
                        client.end_receive(read.context)
                        done += 1
                client.close_queue(session)
        else:
            ports = dict(protocol="mqrr", mqrr_port=qm2qm_port) if path == "mqrr" else \
                dict(qmcomm_port=qmcomm_port, qm2qm_port=qm2qm_port)
            with RemoteReader("127.0.0.1", fmt, **ports) as reader:
                for _ in range(receives):
                    read = reader.receive()
                    errors += read.hresult != MQ_OK
                    done += read.ok
    results.put((done, errors, time.time()))


def bench_sequence(clients: int = 4, receives: int = 100, rounds: int = 5) -> dict:
    """Messages/s of `open -> receives x receive+ACK -> close` sessions, opened the Windows way (qmcomm), through
    the admin API, and over MS-MQRR (`serve --mqrr`), ``clients`` concurrent processes each."""
    out = {}
    names = {"qmcomm": "qmcomm sequence", "admin": "admin-API open", "mqrr": "MS-MQRR sequence"}
    for path, name in names.items():
        extra = ["--allow-anonymous-read"] if "allow_anonymous_read" in _config_keys() else []
        server = Server(None, *extra, *(["--mqrr"] if path == "mqrr" else []))
        try:
            total = clients * rounds * receives
            q = server.queue("sequence", bytes(1024), total)
            info = server.admin.info()
            ctx = mp.get_context("spawn")
            ready, results = ctx.Queue(), ctx.Queue()
            start_at = time.time() + 1.0 + 0.3 * clients
            procs = [ctx.Process(target=sequence_client,
                                 args=(server.admin.base_url, int(info["qmcomm_port"]), server.port, q, path,
                                       rounds, receives, start_at, ready, results)) for _ in range(clients)]
            for p in procs:
                p.start()
            for _ in procs:
                ready.get(timeout=120)
            outs = [results.get(timeout=600) for _ in procs]
            for p in procs:
                p.join()
        finally:
            server.close()
        done, errors = sum(o[0] for o in outs), sum(o[1] for o in outs)
        elapsed = max(o[2] for o in outs) - start_at
        out[name] = done / elapsed
        print(f"  {name:<16} open -> {receives} receives -> close, {clients} clients x {rounds} sessions: "
              f"{done / elapsed:7.0f} msg/s, {clients * rounds / elapsed:6.1f} sessions/s  ({elapsed:.2f} s, "
              f"{done} received, errors {errors})", flush=True)
    return out


def _config_keys() -> tuple:
    from qm2qm.config import KEYS
    return KEYS


# --- one 4 MiB message ---------------------------------------------------------------------------------------------

def bench_large(size: int, repeats: int, max_recv_frag: int) -> dict:
    """Latency of one 4 MiB message."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
    server = Server()
    out = {}
    try:
        q = server.queue("large", os.urandom(size), 1)
        h = server.admin.open_queue(q)["hRemoteQueue"]
        sock = connect(server.port, max_recv_frag)
        assert hresult(call(sock, 2, open_queue_stub(h))) == MQ_OK
        peek = start_receive2_stub(h, MQ_ACTION_PEEK_CURRENT)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            stub = call(sock, 9, peek)
            times.append(time.perf_counter() - t0)
            assert hresult(stub) == MQ_OK and len(stub) > size
        out["peek"] = times
        receive = start_receive2_stub(h, MQ_ACTION_RECEIVE)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            stub = call(sock, 9, receive)
            assert hresult(stub) == MQ_OK and len(stub) > size
            assert hresult(call(sock, 1, end_receive_stub(stub[:20]), call_id=3)) == MQ_OK
            times.append(time.perf_counter() - t0)
            server.admin.send(q, body_base64=base64.b64encode(os.urandom(size)).decode())
        out["receive"] = times
        sock.close()
    finally:
        server.close()
    for kind, times in out.items():
        ms = sorted(t * 1000 for t in times)
        print(f"  {size} B {kind:7s} (max_recv_frag {max_recv_frag}): median {statistics.median(ms):6.1f} ms"
              f"  min {ms[0]:6.1f}  max {ms[-1]:6.1f}  (n={len(ms)})", flush=True)
    return out


# --- 5,000 blocked receivers woken by 5,000 sends -------------------------------------------------------------------

def bench_wake(receivers: int, per_connection: int) -> list[float]:
    """Wake-up latency of blocked receivers."""
    from qm2qm.mqqp import idl
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    from shared_adm.packet import deserialize_message_from_buffer
    server = Server(None, "--max-connections", str(receivers // per_connection + 64))
    try:
        q = server.queue("wake", b"", 0)
        n_conns = receivers // per_connection
        sel = selectors.DefaultSelector()
        for _ in range(n_conns):
            h = server.admin.open_queue(q)["hRemoteQueue"]
            sock = connect(server.port)
            assert hresult(call(sock, 2, open_queue_stub(h))) == MQ_OK
            sock.sendall(b"".join(request_pdu(9, start_receive2_stub(h, MQ_ACTION_RECEIVE, INFINITE, rid),
                                              call_id=10 + rid) for rid in range(1, per_connection + 1)))
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, (sock, Reassembler()))
        deadline = time.time() + 120
        while len(server.admin.list_reads()["reads"]) < n_conns * per_connection:
            if time.time() > deadline:
                raise SystemExit(f"only {len(server.admin.list_reads()['reads'])} receives are pending")
            time.sleep(0.05)
        sent: dict[int, float] = {}

        admin = http.client.HTTPConnection(server.admin.base_url.split("//")[1])   # one keep-alive connection
        path = f"/v1/queues/{server.admin.quote(q)}/messages"

        def sender():
            for i in range(n_conns * per_connection):
                sent[i] = time.perf_counter()
                admin.request("POST", path, body=b'{"body": "%d"}' % i, headers={"Content-Type": "application/json"})
                response = admin.getresponse()
                response.read()
                assert response.status == 201
        thread = threading.Thread(target=sender)
        arrivals = []
        thread.start()
        while len(arrivals) < n_conns * per_connection:
            for key, _ in sel.select(timeout=60):
                sock, rs = key.data
                now = time.perf_counter()
                for _, _, stub in rs.feed(sock.recv(1 << 20)):
                    arrivals.append((now, stub))
        thread.join()
        latencies = []
        for now, stub in arrivals:
            resp = idl.RemoteQMStartReceive2Response(stub)
            assert resp["ErrorCode"] == 0
            data = resp["lpRemoteReadDesc2"]["pRemoteReadDesc"]["lpBuffer"]
            message = deserialize_message_from_buffer(b"".join(data))
            latencies.append(now - sent[int(message.body)])
        for key in list(sel.get_map().values()):
            key.data[0].close()
    finally:
        server.close()
    ms = sorted(x * 1000 for x in latencies)
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    print(f"  wake {len(ms)} blocked receivers on {n_conns} connections: p50 {p(0.5):6.2f} ms  p99 {p(0.99):6.2f} ms  max {ms[-1]:6.2f} ms "
          f"(send->wake, includes the admin HTTP request)", flush=True)
    return ms


def profile_peek(clients: int, duration: float, processes: int, path: str = "/tmp/qm2qm-peek.prof") -> None:
    """cProfile `qm2qm serve` under the peek load; prints the top functions by cumulative time."""
    import pstats
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    server = Server(profile_path=path)
    try:
        q = server.queue("peek", bytes(range(100)), 1)
        setups = []
        for _ in range(clients):
            h = server.admin.open_queue(q, access="peek")["hRemoteQueue"]
            setups.append((True, h, request_pdu(9, start_receive2_stub(h, MQ_ACTION_PEEK_CURRENT))))
        rate, errors, _ = run_load(server.port, setups, duration, processes)
    finally:
        server.close()
    print(f"  profiled peek, {clients} clients: {rate:.0f} calls/s under cProfile, errors {errors}")
    pstats.Stats(path).sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["peek", "receive", "mqrr-receive", "large", "wake", "sequence"],
                        action="append")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per peek measurement")
    parser.add_argument("--processes", type=int, default=2, help="load-generator processes (at most)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved echo/qm2qm peek runs; best is kept")
    parser.add_argument("--messages", type=int, default=20000, help="1 KiB messages to receive")
    parser.add_argument("--large-repeats", type=int, default=20)
    parser.add_argument("--max-recv-frag", type=int, default=5840, help="client max_recv_frag for the 4 MiB case")
    parser.add_argument("--receivers", type=int, default=5000)
    parser.add_argument("--receive-clients", type=int, default=4)
    parser.add_argument("--receive-processes", type=int, default=1,
                        help="load processes for the receive scenario (1 leaves the server a core of 2)")
    parser.add_argument("--delivery", choices=["express", "recoverable"], default="express",
                        help="delivery guarantee of the received messages")
    parser.add_argument("--wake-per-connection", type=int, default=50,
                        help="blocked receives per connection in the wake test (1..64; 1 = a connection each)")
    parser.add_argument("--profile", action="store_true", help="cProfile the server under 4 peek clients, then exit")
    args = parser.parse_args()
    only = set(args.only or ["peek", "receive", "mqrr-receive", "large", "wake", "sequence"])
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]} load processes<={args.processes} "
          f"loadavg={os.getloadavg()[0]:.2f}", flush=True)
    if args.profile:
        profile_peek(4, args.duration, args.processes)
        return
    if "peek" in only:
        bench_peek(args.clients, args.duration, args.processes, args.repeat)
    if "receive" in only:
        bench_receive(args.messages, args.receive_clients, args.receive_processes, args.delivery)
    if "mqrr-receive" in only:
        bench_mqrr_receive(args.messages, args.receive_clients, args.delivery)
    if "large" in only:
        # MS-MQMQ 2.2.19.1: a whole UserMessage packet is at most 0x400000 bytes, so a "4 MiB message" is the
        # largest round body that fits: 4 MiB - 1 KiB (the headers take ~170 bytes).
        bench_large(4 * 1024 * 1024 - 1024, args.large_repeats, args.max_recv_frag)
    if "wake" in only:
        bench_wake(args.receivers, args.wake_per_connection)
    if "sequence" in only:
        bench_sequence()


if __name__ == "__main__":
    main()
