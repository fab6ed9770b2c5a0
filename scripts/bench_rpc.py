#!/usr/bin/env python3
"""Benchmark of the DCE/RPC runtime (qm2qm/rpc/server.py) against a bare asyncio echo server (the transport limit)
and impacket's stock DCERPCServer, on the probe interface's trivial opnum (qm2qm/rpc/testing.py OP_ECHO).

Load: closed loop, one outstanding call per client connection, precomputed request PDUs (C706 12.6.4.9) sent over
raw sockets by separate processes. The echo server answers each request with the same bytes (an RPC response to
the echo opnum has exactly the request's size: 24-byte header + the same stub). The echo server and the RPC
server live in one server process (same conditions; loaded one at a time, interleaved); the server's user and
system CPU per call are sampled with os.times() over each load window. impacket's DCERPCServer (one connection at
a time, NDR only) runs in its own process with 1 client.

    .venv/bin/python scripts/bench_rpc.py                       # 1, 4, 16 clients, 3 s each
    .venv/bin/python scripts/bench_rpc.py --clients 4 --duration 5 --profile   # + cProfile of the RPC server
    .venv/bin/python scripts/bench_rpc.py --auth --clients 4     # NTLM privacy (level 6) vs no auth, impacket clients
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import selectors
import socket
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

NDR20 = ("8a885d04-1ceb-11c9-9fe8-08002b104860", 2)


# --- PDUs (built once, outside the measured loop) ---------------------------------------------------------------

def bind_pdu() -> bytes:
    import uuid
    from qm2qm.rpc.testing import PROBE_UUID, PROBE_VERSION
    item = struct.pack("<HBB", 0, 1, 0) + PROBE_UUID.bytes_le + struct.pack("<HH", *PROBE_VERSION)
    item += uuid.UUID(NDR20[0]).bytes_le + struct.pack("<HH", NDR20[1], 0)
    body = struct.pack("<HHIB3x", 5840, 5840, 0, 1) + item
    return struct.pack("<BBBB4sHHI", 5, 0, 11, 3, b"\x10\0\0\0", 16 + len(body), 0, 1) + body


def request_pdu(stub: bytes, call_id: int = 2) -> bytes:
    from qm2qm.rpc.testing import OP_ECHO
    body = struct.pack("<IHH", len(stub), 0, OP_ECHO) + stub
    return struct.pack("<BBBB4sHHI", 5, 0, 0, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body


# --- servers (each in its own process) -------------------------------------------------------------------------

class EchoProtocol(asyncio.Protocol):
    """The transport limit: write back every byte received."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


async def idle_until(stop_event, samples: list) -> None:
    """Sample (wall clock, process CPU time) until told to stop, so the window's server CPU can be computed."""
    while not stop_event.is_set():
        samples.append(cpu_sample())
        await asyncio.sleep(0.02)
    samples.append(cpu_sample())


def cpu_sample() -> tuple[float, float, float]:
    """(wall clock, user CPU, system CPU) of this process."""
    t = os.times()
    return time.time(), t.user, t.system


def cpu_between(samples: list, start: float, end: float) -> tuple[float, float]:
    """Server (user, system) CPU seconds spent between two wall-clock instants (samples inside the window)."""
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2:
        return float("nan"), float("nan")
    (w0, u0, s0), (w1, u1, s1) = inside[0], inside[-1]
    scale = (end - start) / (w1 - w0)
    return (u1 - u0) * scale, (s1 - s0) * scale


def run_servers(kind: str, port_queue, stop_event, profile_path: str | None) -> None:
    """kind "both": the echo server and the RPC server in one process (same conditions; loaded one at a time);
    kind "impacket": impacket's DCERPCServer. Reports its ports, then its CPU samples when stopped."""
    samples: list = []
    if kind == "impacket":
        run_impacket_server(port_queue, stop_event, samples)
        port_queue.put(samples)
        return

    async def main():
        import logging
        from qm2qm.rpc.server import RpcServer
        from qm2qm.rpc.testing import Probe
        logging.getLogger("qm2qm.rpc").setLevel(logging.WARNING)
        loop = asyncio.get_running_loop()
        echo = await loop.create_server(EchoProtocol, "127.0.0.1", 0)
        rpc = RpcServer([Probe().interface], idle_timeout_s=None, max_connections=4096)
        await rpc.start()
        port_queue.put({"echo": echo.sockets[0].getsockname()[1], "rpc": rpc.port})
        await idle_until(stop_event, samples)
        echo.close()
        await rpc.close()

    if profile_path:
        import cProfile
        cProfile.runctx("asyncio.run(main())", globals(), {"asyncio": asyncio, "main": main}, profile_path)
    else:
        asyncio.run(main())
    port_queue.put(samples)


class Servers:
    """A server process and the load windows run against it (CPU per window is computed once it stops)."""

    def __init__(self, kind: str, profile_path: str | None = None) -> None:
        self.ctx = mp.get_context("spawn")
        self.port_queue, self.stop_event = self.ctx.Queue(), self.ctx.Event()
        self.process = self.ctx.Process(target=run_servers, args=(kind, self.port_queue, self.stop_event,
                                                                  profile_path))
        self.process.start()
        ports = self.port_queue.get(timeout=60)
        self.ports = ports if isinstance(ports, dict) else {"impacket": ports}
        self.windows: list[tuple[str, int, float, float, int]] = []    # (kind, clients, start, end, calls)

    def load(self, kind: str, clients: int, duration: float, stub: bytes, processes: int) -> float:
        """Run one closed-loop load against ports[kind]; returns calls/s."""
        ctx = self.ctx
        n_procs = min(clients, processes)
        share = [clients // n_procs + (1 if i < clients % n_procs else 0) for i in range(n_procs)]
        ready, results = ctx.Queue(), ctx.Queue()
        start_at = time.time() + 1.0 + 0.1 * n_procs
        request = request_pdu(stub)
        procs = [ctx.Process(target=run_clients, args=(self.ports[kind], k, kind != "echo", request, start_at,
                                                       duration, ready, results)) for k in share]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=60)
        total = sum(results.get(timeout=duration + 60) for _ in procs)
        for p in procs:
            p.join()
        self.windows.append((kind, clients, start_at, start_at + duration, total))
        return total / duration

    def stop(self) -> list[tuple[str, int, float, float]]:
        """Stop the server; (kind, clients, user µs/call, system µs/call) per load window."""
        self.stop_event.set()
        samples = self.port_queue.get(timeout=60)
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()
        out = []
        for kind, clients, start, end, total in self.windows:
            user, system = cpu_between(samples, start, end)
            out.append((kind, clients, user / max(total, 1) * 1e6, system / max(total, 1) * 1e6))
        return out


def run_impacket_server(port_queue, stop_event, samples: list) -> None:
    from impacket.dcerpc.v5.rpcrt import DCERPCServer
    from qm2qm.rpc.testing import PROBE_UUID
    server = DCERPCServer()
    server.daemon = True
    server.addCallbacks((str(PROBE_UUID), "1.0"), "", {0: lambda stub: stub})
    server.setListenPort(0)
    port_queue.put(server.getListenPort())
    server.start()
    while not stop_event.wait(0.02):
        samples.append(cpu_sample())
    samples.append(cpu_sample())


# --- load generator --------------------------------------------------------------------------------------------

def run_clients(port: int, n_conns: int, bind: bool, request: bytes, start_at: float, duration: float,
                ready, result_queue) -> None:
    """n_conns connections in a closed loop, one call outstanding on each; reports completed calls."""
    sel = selectors.DefaultSelector()
    conns = []
    for _ in range(n_conns):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if bind:
            sock.sendall(bind_pdu())
            read_pdu(sock)
        sock.setblocking(False)
        state = [sock, bytearray()]
        conns.append(state)
        sel.register(sock, selectors.EVENT_READ, state)
    ready.put(1)
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    end = start_at + duration
    for sock, _ in conns:
        sock.send(request)
    while True:
        now = time.time()
        if now >= end:
            break
        for key, _ in sel.select(timeout=end - now):
            sock, buf = key.data
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("server closed a benchmark connection")
            buf += chunk
            while len(buf) >= 16:
                frag_len = buf[8] | (buf[9] << 8)
                if len(buf) < frag_len:
                    break
                if buf[2] != 2 and buf[2] != 0:      # neither an RPC response nor the echoed request
                    raise SystemExit(f"unexpected PDU type {buf[2]}")
                del buf[:frag_len]
                done += 1
                sock.send(request)
    result_queue.put(done)
    for sock, _ in conns:
        sock.close()


def read_pdu(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 16:
        data += sock.recv(16 - len(data))
    frag_len = struct.unpack_from("<H", data, 8)[0]
    while len(data) < frag_len:
        data += sock.recv(frag_len - len(data))
    return data


class _NullTransport(asyncio.Transport):
    """Swallows writes: isolates the Python cost of one call from sockets and the event loop."""

    def write(self, data):
        pass

    def is_closing(self):
        return False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def close(self):
        pass


def micro(stub: bytes, n: int = 100_000) -> tuple[float, float]:
    """In-process µs per call: (RpcConnection.data_received end to end, the sans-IO Connection alone)."""
    from qm2qm.rpc.connection import Connection
    from qm2qm.rpc.server import RpcConnection, RpcServer
    from qm2qm.rpc.testing import Probe

    async def run() -> tuple[float, float]:
        server = RpcServer([Probe().interface], idle_timeout_s=None)
        server._loop = asyncio.get_running_loop()
        requests = [request_pdu(stub, call_id=i) for i in range(2, n + 2)]
        rc = RpcConnection(server)
        rc.connection_made(_NullTransport())
        rc.data_received(bind_pdu())
        t0 = time.perf_counter()
        for pdu in requests:
            rc.data_received(pdu)
        full = (time.perf_counter() - t0) / n * 1e6
        conn = Connection(server.registry)
        conn.accept_bind(conn.receive_data(bind_pdu())[0], 1, "1")
        conn.data_to_send()
        t0 = time.perf_counter()
        for pdu in requests:
            for event in conn.receive_data(pdu):
                conn.send_response(event.call_id, event.stub)
            conn.data_to_send()
        core = (time.perf_counter() - t0) / n * 1e6
        return full, core

    return asyncio.run(run())


# --- authenticated calls (MS-RPCE 3.3.1.5.2): impacket clients, NTLM at level 6 vs none ---------------------------

BENCH_USERS = "BENCH:bench:Bench-pass-1\n"


def run_auth_server(port_queue, stop_event, cpu_requests, cpu_answers) -> None:
    """The RPC server with the probe interface and a user file, until told to stop; answers each CPU request
    with its process CPU seconds (user + system)."""
    async def main():
        import logging
        from qm2qm.rpc.auth import AuthPolicy, UserStore
        from qm2qm.rpc.server import RpcServer
        from qm2qm.rpc.testing import Probe
        logging.getLogger("qm2qm.rpc").setLevel(logging.WARNING)
        users = UserStore.parse(BENCH_USERS)
        rpc = RpcServer([Probe().interface], idle_timeout_s=None, auth=AuthPolicy(users=users))
        await rpc.start()
        port_queue.put(rpc.port)
        while not stop_event.is_set():
            await asyncio.sleep(0.02)
            while not cpu_requests.empty():
                cpu_requests.get()
                t = os.times()
                cpu_answers.put(t.user + t.system)
        await rpc.close()
        users.close()
    asyncio.run(main())


def run_auth_client(port: int, level: int | None, stub: bytes, start_at: float, duration: float, out) -> None:
    """One impacket connection calling the echo opnum in a closed loop; puts the call count."""
    from impacket.dcerpc.v5 import transport
    from impacket.uuid import uuidtup_to_bin
    from qm2qm.rpc.testing import OP_ECHO, PROBE_UUID, PROBE_VERSION
    dce = transport.DCERPCTransportFactory(f"ncacn_ip_tcp:127.0.0.1[{port}]").get_dce_rpc()
    if level is not None:
        dce.set_credentials("bench", "Bench-pass-1", "BENCH")
        dce.set_auth_level(level)
    dce.connect()
    dce.get_rpc_transport().get_socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    dce.bind(uuidtup_to_bin((str(PROBE_UUID), f"{PROBE_VERSION[0]}.{PROBE_VERSION[1]}")))
    while time.time() < start_at:
        time.sleep(0.001)
    calls = 0
    end = start_at + duration
    while time.time() < end:
        dce.call(OP_ECHO, stub)
        if dce.recv() != stub:
            raise AssertionError("echo mismatch")
        calls += 1
    dce.disconnect()
    out.put(calls)


def auth_benchmark(clients: int, duration: float, stub: bytes, rounds: int) -> None:
    """calls/s with NTLM privacy (level 6) and without authentication, same clients, interleaved rounds."""
    ctx = mp.get_context("spawn")
    port_queue, stop_event, cpu_requests, cpu_answers = ctx.Queue(), ctx.Event(), ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=run_auth_server, args=(port_queue, stop_event, cpu_requests, cpu_answers))

    def server_cpu() -> float:
        cpu_requests.put(1)
        return cpu_answers.get(timeout=60)
    server.start()
    port = port_queue.get(timeout=60)
    rates: dict[str, list[float]] = {"none": [], "privacy": []}
    cpu_per_call: dict[str, list[float]] = {"none": [], "privacy": []}
    try:
        for _ in range(rounds):
            for name, level in (("none", None), ("privacy", 6)):
                out = ctx.Queue()
                start_at = time.time() + 1.5
                procs = [ctx.Process(target=run_auth_client, args=(port, level, stub, start_at, duration, out))
                         for _ in range(clients)]
                for proc in procs:
                    proc.start()
                while time.time() < start_at:
                    time.sleep(0.001)
                cpu0 = server_cpu()
                total = sum(out.get(timeout=duration + 60) for _ in procs)
                cpu_per_call[name].append((server_cpu() - cpu0) / max(total, 1) * 1e6)
                for proc in procs:
                    proc.join(timeout=30)
                rates[name].append(total / duration)
    finally:
        stop_event.set()
        server.join(timeout=30)
    none, privacy = (statistics.median(rates[k]) for k in ("none", "privacy"))
    cpu_none, cpu_privacy = (statistics.median(cpu_per_call[k]) for k in ("none", "privacy"))
    print(f"auth: {clients} impacket clients, stub {len(stub)}B, {duration}s x {rounds} rounds (median), "
          f"loadavg {os.getloadavg()[0]:.1f}: none {none:.0f} calls/s, NTLM privacy (level 6) {privacy:.0f} calls/s, "
          f"ratio {privacy / none:.2f}; server CPU µs/call: none {cpu_none:.0f}, privacy {cpu_privacy:.0f}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--stub-size", type=int, default=16)
    parser.add_argument("--processes", type=int, default=4, help="load-generator processes (at most)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved echo/rpc rounds (median reported)")
    parser.add_argument("--no-impacket", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the RPC server at the largest load")
    parser.add_argument("--auth", action="store_true",
                        help="only the authentication line: NTLM level 6 vs none, impacket clients")
    args = parser.parse_args()
    stub = bytes(range(256)) * (args.stub_size // 256) + bytes(range(args.stub_size % 256))
    if args.auth:
        for clients in args.clients:
            auth_benchmark(clients, args.duration, stub, args.rounds)
        return
    print(f"cpus={os.cpu_count()} duration={args.duration}s x {args.rounds} rounds (median) stub={len(stub)}B "
          f"request={len(request_pdu(stub))}B load processes<={args.processes} loadavg={os.getloadavg()[0]:.2f}")
    servers = Servers("both")
    rates: dict[tuple[str, int], list[float]] = {}
    for clients in args.clients:
        # Interleave the two servers, take medians: the machine is shared, so load drifts between runs.
        for _ in range(args.rounds):
            for kind in ("echo", "rpc"):
                rates.setdefault((kind, clients), []).append(
                    servers.load(kind, clients, args.duration, stub, args.processes))
    cpu: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for kind, clients, user, system in servers.stop():
        cpu.setdefault((kind, clients), []).append((user, system))
    impacket = None
    if 1 in args.clients and not args.no_impacket:
        stock = Servers("impacket")
        impacket = stock.load("impacket", 1, args.duration, stub, 1)
        stock.stop()
    print(f"{'clients':>7} {'echo calls/s':>12} {'rpc calls/s':>11} {'ratio':>5} | server CPU µs/call: "
          f"{'echo user':>9} {'rpc user':>8} {'echo sys':>8} {'rpc sys':>7} | {'impacket calls/s':>16}")
    for clients in args.clients:
        echo, rpc = (statistics.median(rates[(k, clients)]) for k in ("echo", "rpc"))
        echo_user, echo_sys = (statistics.median(c[i] for c in cpu[("echo", clients)]) for i in (0, 1))
        rpc_user, rpc_sys = (statistics.median(c[i] for c in cpu[("rpc", clients)]) for i in (0, 1))
        imp = f"{impacket:.0f}" if clients == 1 and impacket is not None else ""
        print(f"{clients:7d} {echo:12.0f} {rpc:11.0f} {rpc / echo:5.2f} |                    "
              f"{echo_user:9.1f} {rpc_user:8.1f} {echo_sys:8.1f} {rpc_sys:7.1f} | {imp:>16}", flush=True)
    full, core = micro(stub)
    print(f"in-process, no sockets: {full:.2f} µs/call through RpcConnection.data_received, of which the sans-IO "
          f"core {core:.2f} µs and the runtime layer (dispatch, CallContext, flush) {full - core:.2f} µs")
    if args.profile:
        path = "/tmp/bench_rpc.prof"
        profiled = Servers("both", profile_path=path)
        profiled.load("rpc", max(args.clients), args.duration, stub, args.processes)
        profiled.stop()
        import pstats
        print(f"\nprofile of the RPC server ({max(args.clients)} clients), top 25 by own time:")
        pstats.Stats(path).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
