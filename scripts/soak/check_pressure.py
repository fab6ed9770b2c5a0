"""Checks: slowloris, more than --max-connections, idle unbound connections (issue 14; C706 12.6.4, MS-RPCE 3.3.3)."""
from __future__ import annotations

import socket
import threading
import time

from soak import wire
from soak.harness import LogWatch, Run

MAX_CONNECTIONS = 40
IDLE_TIMEOUT_S = 2.0
P99_LIMIT_MS = 50.0


def _p99(samples: list[float]) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))] * 1000 if s else float("inf")


def _latencies(client: wire.RawClient, n: int, seconds: float) -> list[float]:
    """GetVersion round trips on one bound connection, paced over ``seconds``."""
    out = []
    deadline = time.monotonic() + seconds
    pause = seconds / max(n, 1)
    while len(out) < n and time.monotonic() < deadline:
        t0 = time.perf_counter()
        client.call(wire.GET_VERSION_OPNUM, b"")
        out.append(time.perf_counter() - t0)
        time.sleep(max(0.0, pause - out[-1]))
    return out


def _slowloris(host: str, port: int, count: int, stop: threading.Event, opened: list) -> None:
    """``count`` connections each sending a bind one byte per second."""
    pdu = wire.bind(1, [(0, wire.QM2QM, wire.NDR20)])
    socks = []
    for _ in range(count):
        s = socket.create_connection((host, port))
        s.setblocking(False)
        socks.append(s)
    opened.append(len(socks))
    pos = 0
    while not stop.is_set():
        for s in socks:
            try:
                s.send(pdu[pos % len(pdu):pos % len(pdu) + 1])
            except (BlockingIOError, OSError):
                pass
        pos += 1
        stop.wait(1.0)
    for s in socks:
        s.close()


def slowloris(r: Run) -> None:
    b = r.budget
    server = r.server("slowloris").start()
    watch = LogWatch(server)
    try:
        client = wire.RawClient(server.host, server.port)
        client.bind()
        base = _latencies(client, b.latency_samples // 4, 5)
        stop = threading.Event()
        opened: list[int] = []
        t = threading.Thread(target=_slowloris, args=(server.host, server.port, b.slowloris, stop, opened))
        t.start()
        while not opened and t.is_alive():
            time.sleep(0.05)
        loaded = _latencies(client, b.latency_samples, b.slowloris_seconds)
        stop.set()
        t.join()
        client.close()
        p99 = _p99(loaded)
        problems = watch.new_problems()
        r.report.check(f"{b.slowloris} slowloris connections (1 byte/s) keep a normal client's GetVersion "
                       f"p99 <= {P99_LIMIT_MS:.0f} ms",
                       p99 <= P99_LIMIT_MS and bool(opened) and not problems,
                       f"p99 {p99:.2f} ms over {len(loaded)} calls in {b.slowloris_seconds:.0f} s with "
                       f"{opened[0] if opened else 0} slow connections (idle baseline p99 {_p99(base):.2f} ms)"
                       + (f"; server log: {problems[0]}" if problems else ""))
    finally:
        server.stop()


def _refused(host: str, port: int, timeout: float = 3.0) -> bool:
    """True when the server closes (RST or FIN) a new connection without sending a byte."""
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return True
    try:
        s.sendall(wire.bind(1, [(0, wire.QM2QM, wire.NDR20)]))
        return s.recv(1) == b""
    except (ConnectionError, OSError):
        return True
    finally:
        s.close()


def max_connections(r: Run) -> None:
    server = r.server("maxconn", extra=["--max-connections", str(MAX_CONNECTIONS)]).start()
    watch = LogWatch(server)
    try:
        clients = []
        for _ in range(MAX_CONNECTIONS):
            c = wire.RawClient(server.host, server.port)
            c.bind()
            clients.append(c)
        refused = sum(_refused(server.host, server.port) for _ in range(20))
        working = 0
        for c in clients:
            ptype, _ = c.call(wire.GET_VERSION_OPNUM, b"")
            working += ptype == wire.MSRPC_RESPONSE
        for c in clients[:5]:
            c.close()
        time.sleep(0.3)
        try:
            wire.get_version_latency(server.host, server.port, 2.0)
            recovered = True
        except (OSError, wire.WireError):
            recovered = False
        for c in clients[5:]:
            c.close()
        problems = watch.new_problems()
        r.report.check(f"more than --max-connections ({MAX_CONNECTIONS}) is refused, existing clients keep working",
                       refused == 20 and working == MAX_CONNECTIONS and recovered and not problems,
                       f"{refused}/20 extra connections refused (closed without a byte), {working}/{MAX_CONNECTIONS} "
                       f"open clients answered, new connection after 5 closed: {'ok' if recovered else 'failed'}"
                       + (f"; server log: {problems[0]}" if problems else ""))
    finally:
        server.stop()


def idle(r: Run) -> None:
    server = r.server("idle", extra=["--idle-timeout", str(IDLE_TIMEOUT_S)]).start()
    try:
        results = {}
        for kind in ("unbound", "half-sent PDU", "bound"):
            s = socket.create_connection((server.host, server.port), timeout=IDLE_TIMEOUT_S * 4)
            if kind == "half-sent PDU":
                s.sendall(wire.bind(1, [(0, wire.QM2QM, wire.NDR20)])[:10])
            elif kind == "bound":
                s.sendall(wire.bind(1, [(0, wire.QM2QM, wire.NDR20)]))
                wire.read_pdu(s)
                s.settimeout(IDLE_TIMEOUT_S * 2)
            t0 = time.monotonic()
            try:
                closed = s.recv(1) == b""
            except socket.timeout:
                closed = False
            except OSError:
                closed = True
            results[kind] = (closed, time.monotonic() - t0)
            s.close()
        ok = (results["unbound"][0] and results["half-sent PDU"][0] and not results["bound"][0]
              and all(IDLE_TIMEOUT_S * 0.8 <= results[k][1] <= IDLE_TIMEOUT_S * 3 for k in ("unbound", "half-sent PDU")))
        r.report.check(f"idle unbound / half-sent connections are closed after --idle-timeout ({IDLE_TIMEOUT_S} s); "
                       "bound ones are kept", ok,
                       "; ".join(f"{k}: {'closed' if c else 'open'} after {t:.1f} s" for k, (c, t) in results.items()))
    finally:
        server.stop()


def run(r: Run) -> None:
    slowloris(r)
    max_connections(r)
    idle(r)
