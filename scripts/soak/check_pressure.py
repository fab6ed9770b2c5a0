"""Checks: slowloris, more than --max-connections, idle unbound connections, half-sent fragmented requests, pipelined
calls whose answers nobody reads, woken peeks nobody reads, requests of 8 MiB of array items, sessions piled on one
descriptor, opens piled on one queue (issue 14; C706 12.6.3.7, 12.6.4; MS-RPCE 3.3.3; MS-MQDMPR 3.1.7.1.5)."""
from __future__ import annotations

import base64
import re
import socket
import struct
import threading
import time
import urllib.request

from impacket.dcerpc.v5.ndr import NDRPOINTER, NULL

from qm2qm.mqmp import idl as mqmp_idl
from qm2qm.mqrr import idl as mqrr_idl
from soak import qm2qm_calls as q
from soak import seeds_qmcomm, wire
from soak.admin import Admin
from soak.harness import LogWatch, Run, wait_until

MAX_CONNECTIONS = 40
IDLE_TIMEOUT_S = 2.0
P99_LIMIT_MS = 50.0
REASSEMBLY_MIB = 32                 # --max-reassembly-mib of the partial-requests check
PARTIAL_SENDERS = 12                # each sends all but the last fragment of an 8 MiB request: 96 MiB offered
NCA_S_SERVER_TOO_BUSY = 0x1C010014
UNREAD_READERS, UNREAD_PEEKS = 16, 64   # each sends 64 peeks of a 4 MiB message in one write and reads nothing
UNREAD_MIB = 64                     # --max-unread-mib of the woken-peeks check
WOKEN_READERS, WOKEN_PEEKS = 32, 16     # each waits in 16 peeks of an empty queue: one 4 MiB message answers 2 GiB
BIG = r".\private$\soak-pressure-big"
ARRAY_REQUEST = 8 * 1024 * 1024 - 4096  # the array items of one request, under its 8 MiB bound
ARRAY_CPU_LIMIT_S = 1.0             # the server CPU one such request may cost (impacket's item loop took 10 s)
ARRAY_LATENCY_LIMIT_MS = 500.0      # a GetVersion meanwhile
RPC_X_BAD_STUB_DATA = 0x6F7
MQ_ERROR_INVALID_HANDLE = 0xC00E0007
PILED_CONNECTIONS, PILED_SESSIONS = 8, 2000     # RemoteQMOpenQueue sessions each, all on one made-up dwpContext
PILED_DESCRIPTOR = 0x5EED
PILED_CPU_LIMIT_S = 0.5             # one connection's rundown (a scan per session took about 2 s here)
OPENS_QUEUE = r".\private$\soak-pressure-opens"
OPENS_CONNECTIONS, OPENS_EACH = 4, 4096     # R_QMOpenRemoteQueue of one queue: each connection's limit of handles
OPENS_CPU_LIMIT_US = 600.0          # server CPU an open, on average (a scan of every open descriptor: 5 ms at 8,000)
OPENS_RUNDOWN_LIMIT_S = 2.0         # one connection's 4,096 descriptors closed
R_QM_OPEN_REMOTE_QUEUE = 2          # qmcomm opnum (MS-MQMP 3.1.4.2)


def _log_note(problems: list[str]) -> str:
    """The first WARNING/ERROR/traceback line the server logged during a check, for its detail."""
    return f"; server log: {problems[0]}" if problems else ""


def _p99(samples: list[float]) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.99))] * 1000 if s else float("inf")


def _latencies(client: wire.RawClient, n: int, seconds: float, stop: threading.Event | None = None) -> list[float]:
    """GetVersion round trips on one bound connection, paced over ``seconds`` (or until ``stop`` is set)."""
    out = []
    deadline = time.monotonic() + seconds
    pause = seconds / max(n, 1)
    while len(out) < n and time.monotonic() < deadline and not (stop is not None and stop.is_set()):
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
                       + _log_note(problems))
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
                       + _log_note(problems))
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


def _reassembly_held(admin: str) -> int:
    with urllib.request.urlopen(admin + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return int(float(re.search(r"^qm2qm_rpc_reassembly_bytes (\S+)$", text, re.M).group(1)))


def _answer(sock: socket.socket, wait_s: float) -> int | None:
    """The fault status the server sent, or None if it sent nothing within ``wait_s`` (the request is held)."""
    sock.settimeout(wait_s)
    try:
        pdu = wire.read_pdu(sock)
    except socket.timeout:
        return None
    return struct.unpack_from("<I", pdu, 24)[0] if pdu[2] == wire.MSRPC_FAULT else -pdu[2]


def partial_requests(r: Run) -> None:
    """Senders that stop before the last fragment of an 8 MiB request share --max-reassembly-mib: past it each
    gets nca_s_server_too_busy, the server's memory stays bounded, and closing the holders gives the bytes back."""
    server = r.server("partial", extra=["--max-reassembly-mib", str(REASSEMBLY_MIB)]).start()
    watch = LogWatch(server)
    try:
        stub = bytes(8 * 1024 * 1024)
        held_fragments = b"".join(wire.fragments(1, 0, wire.GET_VERSION_OPNUM, stub, 5816)[:-1])
        rss_before = server.rss_kib()
        senders = []
        for _ in range(PARTIAL_SENDERS):
            c = wire.RawClient(server.host, server.port, timeout=30)
            c.bind()
            c.sock.sendall(held_fragments)
            senders.append(c)
        answers = [_answer(c.sock, 2.0) for c in senders]
        held = _reassembly_held(server.admin)
        rss_growth = (server.rss_kib() - rss_before) // 1024
        latency_ms = wire.get_version_latency(server.host, server.port, 5.0) * 1000
        holders = [c for c, a in zip(senders, answers) if a is None]
        refused = sum(a == NCA_S_SERVER_TOO_BUSY for a in answers)
        for c in holders:
            c.abort()
        released = bool(wait_until(lambda: _reassembly_held(server.admin) == 0, 10))
        for c in senders:
            c.close()
        capacity = REASSEMBLY_MIB * 1024 * 1024
        problems = watch.new_problems()
        r.report.check(f"{PARTIAL_SENDERS} half-sent 8 MiB requests share --max-reassembly-mib {REASSEMBLY_MIB}: "
                       "the rest are faulted server_too_busy, memory stays bounded, closing gives the bytes back",
                       0 < held <= capacity and refused == len(senders) - len(holders) > 0 and released
                       and rss_growth <= 2 * REASSEMBLY_MIB and not problems,
                       f"{len(holders)} held ({held / 1048576:.1f} MiB), {refused} faulted "
                       f"0x{NCA_S_SERVER_TOO_BUSY:08x}, "
                       f"other answers {[a for a in answers if a not in (None, NCA_S_SERVER_TOO_BUSY)]}; server RSS "
                       f"+{rss_growth} MiB for {PARTIAL_SENDERS * 8} MiB offered; GetVersion meanwhile "
                       f"{latency_ms:.1f} ms; after the holders reset: {'0 bytes held' if released else 'still held'}"
                       + _log_note(problems))
    finally:
        server.stop()


def unread_answers(r: Run) -> None:
    """Readers that pipeline many peeks of a large message in one write and never read the answers: the server
    stops dispatching a connection's calls while its answers are backlogged, so memory stays near one answer each."""
    server = r.server("unread").start()
    watch = LogWatch(server)
    try:
        admin = Admin(server.admin)
        admin.ok("POST", "/v1/queues", {"pathname": BIG})
        body = base64.b64encode(bytes(4 * 1024 * 1024 - 4096)).decode()
        admin.ok("POST", f"/v1/queues/{Admin.q(BIG)}/messages", {"body_base64": body})
        rss_before = server.rss_kib()
        sessions = []
        for _ in range(UNREAD_READERS):
            handle = admin.ok("POST", f"/v1/queues/{Admin.q(BIG)}/open", {})["hRemoteQueue"]
            s = q.Session(server.host, server.port, handle, timeout=30)
            peek = q.start_receive2(handle, q.MQ_ACTION_PEEK_CURRENT, 0)
            s.client.sock.sendall(b"".join(wire.request(100 + i, 0, q.START_RECEIVE2, peek)
                                           for i in range(UNREAD_PEEKS)))
            sessions.append(s)
        time.sleep(2.0)
        rss_growth = (server.rss_kib() - rss_before) // 1024
        latency_ms = wire.get_version_latency(server.host, server.port, 5.0) * 1000
        first = sessions[0].client
        first.sock.settimeout(60)
        answered = 0
        for _ in range(UNREAD_PEEKS):               # one reader now reads: every answer comes, in full
            ptype, stub = first.read_reply()
            answered += ptype == wire.MSRPC_RESPONSE and q.receive_result(stub)[0] == 0
        for s in sessions:
            s.client.abort()
        offered = UNREAD_READERS * UNREAD_PEEKS * 4
        limit = UNREAD_READERS * 12 + 64
        problems = watch.new_problems()
        r.report.check(f"{UNREAD_READERS} readers pipeline {UNREAD_PEEKS} peeks of a 4 MiB message in one write "
                       f"and read nothing: server RSS grows <= {limit} MiB, a reader that reads gets every answer",
                       rss_growth <= limit and answered == UNREAD_PEEKS and not problems,
                       f"RSS +{rss_growth} MiB for {offered} MiB of answers asked; GetVersion meanwhile "
                       f"{latency_ms:.1f} ms; the reading one: {answered}/{UNREAD_PEEKS} answers"
                       + _log_note(problems))
    finally:
        server.stop()


def woken_peeks(r: Run) -> None:
    """Readers waiting in many peeks, woken together by one 4 MiB message, read nothing: the answers of one turn
    meet --max-unread-mib over every connection, past it connections close (largest first), memory stays bounded."""
    server = r.server("woken", extra=["--max-unread-mib", str(UNREAD_MIB)]).start()
    watch = LogWatch(server)
    try:
        admin = Admin(server.admin)
        queue = r".\private$\soak-pressure-woken"
        admin.ok("POST", "/v1/queues", {"pathname": queue})
        sessions = []
        for _ in range(WOKEN_READERS):
            handle = admin.ok("POST", f"/v1/queues/{Admin.q(queue)}/open", {})["hRemoteQueue"]
            s = q.Session(server.host, server.port, handle, timeout=30)
            s.client.sock.sendall(b"".join(
                wire.request(100 + i, 0, q.START_RECEIVE2,
                             q.start_receive2(handle, q.MQ_ACTION_PEEK_CURRENT, 0xFFFFFFFF, request_id=i + 1))
                for i in range(WOKEN_PEEKS)))
            sessions.append(s)
        time.sleep(1.0)
        rss_before = server.rss_kib()
        body = base64.b64encode(bytes(4 * 1024 * 1024 - 4096)).decode()
        admin.ok("POST", f"/v1/queues/{Admin.q(queue)}/messages", {"body_base64": body})
        time.sleep(2.0)
        rss_growth = (server.rss_kib() - rss_before) // 1024
        latency_ms = wire.get_version_latency(server.host, server.port, 5.0) * 1000
        text = watch.server.log_text()[watch.offset:]
        closed = text.count("(--max-unread-mib)") + text.count("rather than queue")
        left = admin.ok("GET", f"/v1/queues/{Admin.q(queue)}")["messages"]
        for s in sessions:
            s.client.abort()
        offered = WOKEN_READERS * WOKEN_PEEKS * 4
        limit = 2 * UNREAD_MIB
        problems = watch.new_problems()
        r.report.check(f"{WOKEN_READERS} readers each waiting in {WOKEN_PEEKS} peeks, woken by one 4 MiB message, "
                       f"read nothing: under --max-unread-mib {UNREAD_MIB} connections close and server RSS grows "
                       f"<= {limit} MiB; the message stays",
                       rss_growth <= limit and closed >= WOKEN_READERS - 2 and left == 1 and not problems,
                       f"RSS +{rss_growth} MiB for {offered} MiB of answers; {closed} of {WOKEN_READERS} connections "
                       f"closed; GetVersion meanwhile {latency_ms:.1f} ms; messages left {left}"
                       + _log_note(problems))
    finally:
        server.stop()


def _cursor_with_body(size: int) -> bytes:
    """R_QMCreateRemoteCursor (NDR, hQueue 7) whose transfer buffer, which 3.1.4.4 ignores, carries a body of
    ``size`` bytes: impacket marshals it with a 4-byte body, which is then replaced (impacket would take minutes)."""
    request = mqmp_idl.R_QMCreateRemoteCursor()
    tb = request["ptb1"]
    for name, _ in tb.structure:
        if name not in ("u", "ppBody"):
            tb[name] = NULL if isinstance(tb.fields[name], NDRPOINTER) else 0
    tb["uTransferType"] = tb["u"]["tag"] = 0
    tb["u"]["Send"]["pAdminQueueFormat"] = tb["u"]["Send"]["pResponseQueueFormat"] = NULL
    tb.fields["ppBody"].fields["Data"].fields["Data"]["Data"] = list(b"Body")
    request["hQueue"] = 7
    stub = request.getData()
    at = stub.index(b"Body")        # behind MaximumCount, Offset, ActualCount; hQueue follows
    return stub[:at - 12] + struct.pack("<III", size, 0, size) + bytes(size) + stub[at + 4:]


def _enlist_with_token(token_size: int, size: int) -> bytes:
    """R_QMEnlistRemoteTransaction (NDR) whose cbPropagationToken says ``token_size`` and whose array holds
    ``size`` bytes."""
    request = mqrr_idl.R_QMEnlistRemoteTransaction()
    request["pTransactionId"]["rgb"] = b"\x01" * 16
    request["cbPropagationToken"], request["pbPropagationToken"] = 4, list(b"Soak")
    request["pQueueFormat"]["m_qft"] = request["pQueueFormat"]["u"]["tag"] = 1
    request["pQueueFormat"]["u"]["m_gPublicID"] = bytes(16)
    stub = request.getData()
    return stub[:16] + struct.pack("<II", token_size, size) + bytes(size) + stub[28:]


def _array_request(server, port: int, abstract: bytes, opnum: int, stub: bytes) -> tuple[int, bytes, float, float]:
    """Send one request in 4 KiB fragments while a GetVersion loop runs: (its answer's PDU type, its first 8 stub
    bytes or fault status, the server CPU seconds until it came, the slowest GetVersion in ms)."""
    health = wire.RawClient(server.host, server.port, timeout=30)
    health.bind()
    client = wire.RawClient(server.host, port, timeout=60)
    client.bind(abstract)
    latencies: list[float] = []
    stop = threading.Event()
    # one every 10 ms, for at most the 60 s the request's own answer may take
    thread = threading.Thread(target=lambda: latencies.extend(_latencies(health, 6000, 60.0, stop)), daemon=True)
    try:
        thread.start()
        cpu0 = server.cpu_seconds()
        client.call_id += 1
        for fragment in wire.fragments(client.call_id, 0, opnum, stub, 4096):
            client.sock.sendall(fragment)
        ptype, answer = client.read_reply()
        cpu = server.cpu_seconds() - cpu0
    finally:
        stop.set()
        thread.join(10)
        client.close()
        health.close()
    return ptype, answer[:8], cpu, max(latencies, default=0.0) * 1000


def array_requests(r: Run) -> None:
    """Requests of 8 MiB of array items on the paths impacket's declarations read: R_QMCreateRemoteCursor's ignored
    transfer buffer carrying a body, and R_QMEnlistRemoteTransaction's token behind a size of 4 (its conformance
    disagrees). Each costs the server well under a second and another connection's GetVersion stays quick."""
    server = r.server("arrays").start()
    watch = LogWatch(server)
    try:
        cursor = _array_request(server, server.qmcomm_port, mqmp_idl.MSRPC_UUID_QMCOMM, 4,
                                _cursor_with_body(ARRAY_REQUEST))
        enlist = _array_request(server, server.port, mqrr_idl.MSRPC_UUID_REMOTEREAD, 12,
                                _enlist_with_token(4, ARRAY_REQUEST))
        answered = (cursor[0] == wire.MSRPC_RESPONSE
                    and struct.unpack_from("<II", cursor[1]) == (0, MQ_ERROR_INVALID_HANDLE)
                    and enlist[0] == wire.MSRPC_FAULT and struct.unpack_from("<I", enlist[1])[0] == RPC_X_BAD_STUB_DATA)
        cpu, latency = max(cursor[2], enlist[2]), max(cursor[3], enlist[3])
        problems = watch.new_problems()
        mib = round(ARRAY_REQUEST / 2 ** 20)
        r.report.check(f"R_QMCreateRemoteCursor with an {mib} MiB body in its ignored transfer buffer, "
                       f"R_QMEnlistRemoteTransaction with an {mib} MiB token: answered (a cursor status, bad stub "
                       f"data), each in <= {ARRAY_CPU_LIMIT_S:.0f} s of server CPU, GetVersion meanwhile "
                       f"<= {ARRAY_LATENCY_LIMIT_MS:.0f} ms",
                       answered and cpu <= ARRAY_CPU_LIMIT_S and latency <= ARRAY_LATENCY_LIMIT_MS and not problems,
                       f"server CPU {cursor[2]:.2f} s / {enlist[2]:.2f} s; GetVersion at most {cursor[3]:.1f} / "
                       f"{enlist[3]:.1f} ms; answers {cursor[1].hex()} / {enlist[1].hex()}" + _log_note(problems))
    finally:
        server.stop()


def _open_sessions(client: wire.RawClient, count: int, stub: bytes, opnum: int = q.OPEN_QUEUE) -> bool:
    """``count`` calls of ``stub`` (RemoteQMOpenQueue unless said), 64 pipelined at a time; whether each answered
    MQ_OK."""
    ok = True
    for first in range(0, count, 64):
        n = min(64, count - first)
        client.sock.sendall(b"".join(wire.request(client.call_id + 1 + i, 0, opnum, stub) for i in range(n)))
        client.call_id += n
        for _ in range(n):
            ptype, answer = client.read_reply()
            ok = ok and ptype == wire.MSRPC_RESPONSE and q.hresult_at_end(answer) == 0
    return ok


def _cpu_until_quiet(server, quiet_s: float = 0.3, settle_s: float = 0.05) -> float:
    """Server CPU seconds from now until a ``quiet_s`` interval in which it spent under ``settle_s``."""
    start = last = server.cpu_seconds()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = server.cpu_seconds()
        if now - last < settle_s:
            return last - start
        last = now
    return last - start


def _abort_last(server, clients: list[wire.RawClient]) -> tuple[float, float]:
    """Abort the last connection: (server CPU seconds of its rundown, a GetVersion's ms after); close the others."""
    clients[-1].abort()
    rundown = _cpu_until_quiet(server)
    latency_ms = wire.get_version_latency(server.host, server.port, 5.0) * 1000
    for client in clients[:-1]:
        client.close()
    return rundown, latency_ms


def piled_sessions(r: Run) -> None:
    """Anonymous RemoteQMOpenQueue sessions piled on one made-up descriptor (3.1.4.3 does not check it) over several
    connections; one connection aborts: its rundown removes each of its sessions in one step, not by a scan of all."""
    server = r.server("piled").start()
    watch = LogWatch(server)
    try:
        stub = q.open_queue(PILED_DESCRIPTOR)
        clients = [wire.RawClient(server.host, server.port, timeout=60) for _ in range(PILED_CONNECTIONS)]
        for client in clients:
            client.bind()
        opened = all(_open_sessions(client, PILED_SESSIONS, stub) for client in clients)
        time.sleep(0.3)
        rundown, latency_ms = _abort_last(server, clients)   # the newest sessions, last among the descriptor's
        problems = watch.new_problems()
        total = PILED_CONNECTIONS * PILED_SESSIONS
        r.report.check(f"{total} anonymous sessions on one made-up dwpContext over {PILED_CONNECTIONS} connections; "
                       f"one aborts: its {PILED_SESSIONS} sessions run down in <= {PILED_CPU_LIMIT_S} s of server CPU",
                       opened and rundown <= PILED_CPU_LIMIT_S and not problems,
                       f"sessions opened: {'all' if opened else 'not all'}; rundown {rundown:.2f} s of server CPU; "
                       f"GetVersion after {latency_ms:.1f} ms" + _log_note(problems))
    finally:
        server.stop()


def piled_opens(r: Run) -> None:
    """Anonymous R_QMOpenRemoteQueue of one queue (read access: --allow-anonymous-read) until several connections hold
    their 4,096 descriptors each: an open costs the same however many are open (Open Queue's share-mode check reads
    counts, not every descriptor), and one connection's rundown closes its descriptors one step each."""
    server = r.server("opens").start()
    watch = LogWatch(server)
    try:
        Admin(server.admin).ok("POST", "/v1/queues", {"pathname": OPENS_QUEUE})
        stub = seeds_qmcomm.open_remote_queue("DIRECT=OS:" + OPENS_QUEUE, False)
        clients = [wire.RawClient(server.host, server.qmcomm_port, timeout=120) for _ in range(OPENS_CONNECTIONS)]
        for client in clients:
            client.bind(mqmp_idl.MSRPC_UUID_QMCOMM)
        before = server.cpu_seconds()
        opened = all(_open_sessions(client, OPENS_EACH, stub, R_QM_OPEN_REMOTE_QUEUE) for client in clients)
        per_open_us = (server.cpu_seconds() - before) / (OPENS_CONNECTIONS * OPENS_EACH) * 1e6
        rundown, latency_ms = _abort_last(server, clients)
        problems = watch.new_problems()
        total = OPENS_CONNECTIONS * OPENS_EACH
        r.report.check(f"{total} anonymous R_QMOpenRemoteQueue of one queue over {OPENS_CONNECTIONS} connections: "
                       f"<= {OPENS_CPU_LIMIT_US:.0f} us of server CPU an open; one connection's rundown <= "
                       f"{OPENS_RUNDOWN_LIMIT_S} s",
                       opened and per_open_us <= OPENS_CPU_LIMIT_US and rundown <= OPENS_RUNDOWN_LIMIT_S
                       and not problems,
                       f"opened: {'all' if opened else 'not all'}; {per_open_us:.0f} us an open; rundown of "
                       f"{OPENS_EACH} descriptors {rundown:.2f} s; GetVersion after {latency_ms:.1f} ms"
                       + _log_note(problems))
    finally:
        server.stop()


def run(r: Run) -> None:
    slowloris(r)
    max_connections(r)
    idle(r)
    partial_requests(r)
    unread_answers(r)
    woken_peeks(r)
    array_requests(r)
    piled_sessions(r)
    piled_opens(r)
