#!/usr/bin/env python3
"""Benchmark of `qm2qm serve` over the qm2qm interface (MS-MQQP): every figure a ratio to an echo baseline.

The server is a real `qm2qm serve` subprocess (SQLite store in a fresh data directory) driven over TCP on
127.0.0.1 with raw precomputed DCE/RPC PDUs. The baseline is a bare echo server (asyncio Protocol) on the *same
event loop* (`--loop`), driven by the same closed-loop load generator (one call outstanding per connection) with
a request as large as a peek's response, measured in the same run. A ratio is qm2qm calls/s ÷ echo calls/s at the
same client count; for receive + ACK (two calls per message) it is messages/s ÷ (echo calls/s ÷ 2). Every rate of a
ratio, echo's included, is the best of --repeat runs (receive scenarios refill their queues for each run). Echo
is measured once per client count, or beside each scenario with --echo-per-scenario (for a machine whose speed
drifts over the run).

Scenarios (the registry SCENARIOS, run in this order; `--only NAME` picks some):

  floor           not qm2qm: the least any Python DCE/RPC server does per call (frame the PDU, read its header,
                  answer a peek-sized response; no NDR, no handler, no queue manager) -- the ceiling of the
                  ratio for a server written in Python on one process
  floor-peek      not qm2qm: the floor plus the least a peek adds (one struct to read the REMOTEREADDESC2, a
                  dict, a distinct packet per call, one struct to write the answer): the ceiling for a peek
  peek-memo       PEEK_CURRENT of one 100-byte message again and again (the packet memo always hits: the
                  best case, kept for comparison with the first round)
  peek-next       a cursor per client walking PEEK_NEXT through distinct messages (100,000 in all: each client
                  its own queue of 100,000 / clients + 10,000, so no two cursors share messages)
  peek-queues     PEEK_CURRENT round-robin over 512 queues of one distinct message each (more than the packet
                  memo holds, so every peek serializes a packet)
  lookup          RemoteQMStartReceiveByLookupId(MQ_LOOKUP_PEEK_CURRENT) over 4,096 distinct lookup ids,
                  clients staggered through them
  receive-express   StartReceive2(RECEIVE) + EndReceive(RR_ACK) of 1 KiB express messages until the duration ends
  receive-recoverable  the same with recoverable messages (each ACK deletes a row: group commit)
  receive-recoverable-full  the same on `serve --store-synchronous full`: durable against power loss, an fsync
                  per group commit (what a user who needs that pays; no target)
  receive-cursor  RECEIVE through a cursor (positioned by PEEK_CURRENT) + RR_ACK, a queue per client
  large           one 4 MiB - 1 KiB message (MS-MQMQ 2.2.19.1 caps the packet at 0x400000 bytes): PEEK_CURRENT
                  and RECEIVE + RR_ACK, one client, max_recv_frag 5840; latency to the last response fragment,
                  and per read the CPU of the server process and of the (Python) client
  wake            5,000 RECEIVEs blocked with ulTimeout INFINITE, woken by 5,000 admin-API sends; send->wake
                  latency (includes the HTTP request)
  mqrr-receive    receive + ACK over MS-MQRR RemoteRead (`serve --mqrr`): R_StartReceive(RECEIVE) +
                  R_EndReceive(RR_ACK) of 1 KiB express messages, 4 connections from one load process
  sequence        the Windows remote-read sequence (qmcomm open -> 100 x receive + RR_ACK -> close) from 4
                  impacket clients x 5 sessions, beside the same sessions opened through the admin API
  auth            what RPC authentication costs: server CPU per receive + ACK call from one impacket RemoteReader
                  bound anonymously, with NTLM PKT_INTEGRITY and with PKT_PRIVACY (`--auth-receives` each)
  session         the same sequence over raw PDUs, as a ratio to echo: per session R_QMGetRTQMServerPort,
                  R_QMOpenRemoteQueue, RemoteQMOpenQueue, RemoteQmGetVersion, R_QMCloseRemoteQueueContext (MS-MQMP
                  4.2's order), --session-receives (10) x receive + RR_ACK of 1 KiB express, RemoteQMCloseQueue;
                  ratio = msg/s / (echo calls/s / calls per message)
  session-cursor  the same through a remote cursor (MS-MQMP 4.4), a queue per client: R_QMCreateRemoteCursor after
                  the open, a positioning PEEK_CURRENT, the receives at the cursor, RemoteQMCloseCursor
  session-mqrr    the same over MS-MQRR (`serve --mqrr`): R_OpenQueue, N x R_StartReceive + R_EndReceive,
                  R_CloseQueue

`--backlog N` (the scale test of issue 13 item 4): the receive-express/-recoverable and lookup scenarios read a
queue N messages deeper; every other scenario's server also holds N recoverable 100-byte messages in a ballast
queue (so N messages are queued in every case).

Adding a scenario (other branches do: "sequence", "mqrr"): write one function ``def bench_x(ctx: Context) ->
list[dict]`` decorated with ``@scenario("x", "one-line description")`` anywhere above ``main``. Start servers
with ``ctx.server()`` (on the run's loop; closed for you), get the baseline with ``ctx.echo(clients)``, drive load
with ``ctx.load(port, specs)`` (ConnSpec per connection) or your own client, and return rows made by
``ctx.row(...)``. Nothing else needs to change: --only, the table and --json pick it up.

    .venv/bin/python scripts/bench.py --json /tmp/bench.json             # everything, both loops
    .venv/bin/python scripts/bench.py --only peek-next --loop uvloop --duration 5
    .venv/bin/python scripts/bench.py --only receive-recoverable --profile /tmp/prof   # cProfile the server
    .venv/bin/python scripts/bench.py --backlog 1000000 --only receive-express --only lookup
"""
from __future__ import annotations

import argparse
import asyncio
import json
import platform
import base64
import http.client
import multiprocessing as mp
import os
import re
import selectors
import shutil
import shlex
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
from dataclasses import dataclass, field
from typing import Callable

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from argtypes import seconds, whole_number  # noqa: E402
from proc_cpu import cpu_seconds, cpu_split  # noqa: E402

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


def process_cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (Linux CPUCLOCK_SCHED of ``pid``, as clock_getcpuclockid(3)
    gives it): exact and current, where /proc/<pid>/stat counts clock ticks."""
    return ((~pid) << 3) | 2


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
    return call_pdu(sock, request_pdu(opnum, stub, call_id))


def call_pdu(sock: socket.socket, pdu: bytes) -> bytes:
    """One blocking call of a prebuilt request PDU; the response stub."""
    sock.sendall(pdu)
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

    def __init__(self, profile_path: str | None = None, *extra: str, loop: str = "auto") -> None:
        from qm2qm.client import AdminClient
        self.tmp = tempfile.TemporaryDirectory(prefix="qm2qm-bench-")
        env = dict(os.environ, PYTHONPATH=ROOT)
        profile = ["-m", "cProfile", "-o", os.path.abspath(profile_path)] if profile_path else []
        # cwd=ROOT: `python -m` puts the working directory first on sys.path, so run from another checkout the
        # server would import that checkout's qm2qm, not this tree's (an A/B of two trees would measure one)
        self.proc = subprocess.Popen([sys.executable, *profile, "-m", "qm2qm", "serve", "--data-dir",
                                      self.tmp.name + "/data", "--port", "0", "--admin-port", "0",
                                      "--loop", loop, *self.optional_flags(), *extra],
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
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
        encoded = base64.b64encode(body).decode()
        for done in range(0, count, 100_000):            # in slices: one admin request stays short
            self.admin.send(q, body_base64=encoded, count=min(100_000, count - done), delivery=delivery)
        return q

    def close(self) -> None:
        """SIGINT the server and remove its data."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.tmp.cleanup()


# --- the load generator: closed loop, one call outstanding per connection -----------------------------------------

@dataclass
class ConnSpec:
    """One load connection: ``bind`` to qm2qm (False: raw echo), RemoteQMOpenQueue each of ``handles`` first,
    then send each ``setup`` PDU once (must answer MQ_OK), then cycle through ``requests``. With ``ack`` every
    MQ_OK answer of a request (call id 2) is followed by EndReceive(RR_ACK) of its context (call id 3): one
    message = two calls; MQ_ERROR_IO_TIMEOUT (queue empty) ends the connection."""
    requests: list[bytes]
    bind: bool = True
    handles: list[int] = field(default_factory=list)
    setup: list[bytes] = field(default_factory=list)
    ack: bool = False


def closed_loop_clients(port: int, specs: list[ConnSpec], go, duration: float, ready, results) -> None:
    """Drive ``specs`` (one connection each) until ``start_at + duration``; the same code drives echo and qm2qm,
    so the client's cost is the same for both."""
    sel = selectors.DefaultSelector()
    for spec in specs:
        if spec.bind:
            sock = connect(port)
            for h in spec.handles:
                if hresult(call(sock, 2, open_queue_stub(h))) != MQ_OK:
                    raise SystemExit("RemoteQMOpenQueue failed")
            for pdu in spec.setup:
                status = hresult(call_pdu(sock, pdu))
                if status != MQ_OK:
                    raise SystemExit(f"setup call failed: 0x{status:08x}")
        else:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, [sock, bytearray(), spec.requests, 0, spec.ack])
    ready.put(1)
    start_at = go.get(timeout=600)          # every process set up: a common start
    while time.time() < start_at:
        time.sleep(0.001)
    calls = messages = errors = 0
    for key in sel.get_map().values():
        key.data[0].send(key.data[2][0])
    end = start_at + duration
    live = len(specs)
    finished = None
    while live and (now := time.time()) < end:
        for key, _ in sel.select(timeout=end - now):
            state = key.data
            sock, buf, requests, index, ack = state
            buf += sock.recv(1 << 20)
            # as light as bench_rpc's loop: frame by frag_length, a call ends at PFC_LAST_FRAG, and the
            # HRESULT is the last 4 stub bytes (the echoed request's stub is all zeros)
            while len(buf) >= 16:
                frag_len = buf[8] | (buf[9] << 8)
                if len(buf) < frag_len:
                    break
                if buf[2] == 3:
                    raise SystemExit(f"fault PDU 0x{struct.unpack_from('<I', buf, 24)[0]:08x}")
                if buf[3] & 0x02:
                    calls += 1
                    status = (buf[frag_len - 4] | buf[frag_len - 3] << 8 | buf[frag_len - 2] << 16
                              | buf[frag_len - 1] << 24)
                    if not ack:
                        errors += status != 0
                        index = state[3] = (index + 1) % len(requests)
                        sock.send(requests[index])
                    elif buf[12] == 2:                              # the read answered: ACK it
                        if status == MQ_OK:
                            sock.send(request_pdu(1, end_receive_stub(buf[24:44]), call_id=3))
                        else:
                            errors += status != MQ_ERROR_IO_TIMEOUT
                            sel.unregister(sock)
                            live -= 1
                            finished = time.time()
                    else:                                           # EndReceive answered: one message
                        errors += status != MQ_OK
                        messages += 1
                        index = state[3] = (index + 1) % len(requests)
                        sock.send(requests[index])
                del buf[:frag_len]
    results.put((calls, messages, errors, finished if not live else end))


def run_load(port: int, specs: list, duration: float, processes: int, server_pid: int | None = None, *,
             client=None) -> dict:
    """Closed-loop load from up to ``processes`` processes running ``client`` (closed_loop_clients unless told)
    over ``specs``; calls/s, messages/s, errors, server CPU µs per call (and sessions, when the client counts
    them)."""
    ctx = mp.get_context("spawn")
    n = min(len(specs), processes)
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=client or closed_loop_clients,
                         args=(port, specs[i::n], go, duration, ready, results))
             for i in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    start_at = time.time() + 0.3
    for _ in procs:
        go.put(start_at)
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = cpu_split(server_pid) if server_pid else (0.0, 0.0)
    spy = _start_py_spy(server_pid, duration)
    perf = _start_perf_stat(server_pid, duration)
    outs = [results.get(timeout=duration + 300) for _ in procs]
    _report_py_spy(spy)
    _report_perf_stat(perf)
    cpu1 = cpu_split(server_pid) if server_pid else (float("nan"), float("nan"))
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    cpu = user + system
    for p in procs:
        p.join()
    calls, messages, errors = (sum(o[i] for o in outs) for i in range(3))
    elapsed = max(o[3] for o in outs) - start_at
    out = {"calls": calls, "messages": messages, "errors": errors, "seconds": elapsed,
           "rate": calls / elapsed, "msg_rate": messages / elapsed,
           "cpu_us_per_call": cpu / max(calls, 1) * 1e6, "sys_us_per_call": system / max(calls, 1) * 1e6}
    if all(len(o) > 4 for o in outs):
        out["sessions"] = sum(o[4] for o in outs)
    return out


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


PY_SPY_DIR = os.environ.get("QM2QM_BENCH_PY_SPY")        # set by --py-spy DIR (inherited by nothing else)


def _py_spy_exe() -> str:
    return os.path.join(os.path.dirname(sys.executable), "py-spy")


def _start_py_spy(pid: int | None, duration: float):
    """py-spy sampling the server over the load window (--py-spy DIR): (process, output path) or None."""
    if not PY_SPY_DIR or not pid:
        return None
    os.makedirs(PY_SPY_DIR, exist_ok=True)
    path = os.path.join(PY_SPY_DIR, f"{pid}-{time.time():.0f}.txt")
    exe = _py_spy_exe()
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(max(1, int(duration))),
                             "--rate", "500", "--format", "raw", "--output", path, "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, path


PERF_STAT_EVENTS: str | None = None          # set by --perf-stat EVENTS


def _start_perf_stat(pid: int | None, duration: float):
    """`perf stat` of the server over the load window (--perf-stat EVENTS): the process, or None."""
    if not PERF_STAT_EVENTS or not pid:
        return None
    return subprocess.Popen(["perf", "stat", "-x", ",", "-e", PERF_STAT_EVENTS, "-p", str(pid), "--",
                             "sleep", str(max(1.0, duration - 0.5))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _report_perf_stat(proc) -> None:
    """Print each counter of the server's load window."""
    if proc is None:
        return
    _, err = proc.communicate()
    print("  --- perf stat of the server over the load window")
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip():
            print(f"      {fields[2]:<28} {fields[0]:>16}")


def _report_py_spy(spy, top: int = 30) -> None:
    """Print the sampled functions by own and by inclusive share of the samples."""
    if spy is None:
        return
    proc, path = spy
    proc.wait(timeout=120)
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    with open(path) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].rstrip(")") for f in stack.split(";")]
            total += n
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for f in set(frames):
                inclusive[f] = inclusive.get(f, 0) + n
    print(f"  --- py-spy of the server over the load window ({total} samples, {path})")
    for title, table in (("own", own), ("inclusive", inclusive)):
        print(f"  by {title} share:")
        for name, n in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            print(f"    {100 * n / total:5.1f} %  {name}")


# --- the echo baseline ----------------------------------------------------------------------------------------------

class EchoProtocol(asyncio.Protocol):
    """The transport limit: write back every byte received (the echo server of scripts/bench_rpc.py)."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


def run_protocol_server(protocol: type[asyncio.Protocol], port_queue, stop_event, loop: str) -> None:
    """A baseline server process (EchoProtocol, FloorProtocol) on 127.0.0.1, on the event loop ``loop``."""
    from qm2qm.eventloop import run

    async def main():
        server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0)
        port_queue.put(server.sockets[0].getsockname()[1])
        while not stop_event.is_set():
            await asyncio.sleep(0.05)
        server.close()
    run(main(), loop)


ECHO_REQUEST = request_pdu(0, bytes(364))      # as large as a 100-byte message's peek response (388 bytes)


# --- the Python floor: the least any Python DCE/RPC server does per call -------------------------------------------

FLOOR_RESPONSE_STUB = bytes(364)                # a 100-byte message's peek response is 388 bytes, header included
_HEADER = struct.Struct("<BBBB4sHHI")


class FloorProtocol(asyncio.Protocol):
    """What no Python DCE/RPC server can skip (C706 12.6.4): cut PDUs by frag_length, read the header, answer a
    bind with a fixed bind_ack and every request with a response of a peek's size for its call_id -- no NDR, no
    handler, no queue manager. Its rate over echo's is the ceiling of a server in Python on one process."""

    def connection_made(self, transport):
        self.transport = transport
        self.pending = b""

    def data_received(self, data):
        buf = self.pending + data if self.pending else data
        out = []
        while len(buf) >= 16:
            _, _, ptype, _, _, frag_len, _, call_id = _HEADER.unpack_from(buf)
            if len(buf) < frag_len:
                break
            if ptype == 0:
                out.append(self.respond(buf, call_id))
            elif ptype == 11:                                       # bind: accept the one context offered
                body = struct.pack("<HHIH5sxB3xHH20s", 5840, 5840, 0x1234, 5, b"2105\0", 1, 0, 0, NDR20_SYNTAX)
                out.append(_HEADER.pack(5, 0, 12, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body)
            buf = buf[frag_len:]
        self.pending = bytes(buf)
        self.transport.write(b"".join(out))

    def respond(self, pdu, call_id: int) -> bytes:
        """The response PDU to a request PDU: a fixed peek-sized stub."""
        _, context_id, _ = struct.unpack_from("<IHH", pdu, 16)      # alloc_hint, p_cont_id, opnum
        body = struct.pack("<IHBB", len(FLOOR_RESPONSE_STUB), context_id, 0, 0) + FLOOR_RESPONSE_STUB
        return _HEADER.pack(5, 0, 2, 3, b"\x10\0\0\0", 16 + len(body), 0, call_id) + body


NDR20_SYNTAX = uuid.UUID(NDR20[0]).bytes_le + struct.pack("<I", NDR20[1])


# RemoteQMStartReceive2 in NDR (qm2qm/mqqp/codec_lane.py's layouts): the request's REMOTEREADDESC2 with a NULL
# lpBuffer, the response's context handle, REMOTEREADDESC2, REMOTEREADDESC and lpBuffer's conformance
_PEEK_REQUEST = struct.Struct("<I4xQ9IH2xI")
_PEEK_RESPONSE = struct.Struct("<20s4xI4xQ9IH2xI3I")
_PAD = (b"", b"\0\0\0", b"\0\0", b"\0")


class PeekFloorProtocol(FloorProtocol):
    """The least a Python server does for a peek (MS-MQQP 3.1.4.10) beyond the floor: unpack the REMOTEREADDESC2
    with one struct, find the handle's queue in a dict, take the packet at its cursor (a distinct ~270-byte
    packet per call: PEEK_NEXT through 100,000 of them) and pack the [out] descriptor with one struct. No checks, no
    queue manager, no state beyond an index: its ratio to echo bounds any peek served by Python code."""
    packets: list[bytes] = []

    def connection_made(self, transport):
        super().connection_made(transport)
        if not PeekFloorProtocol.packets:
            PeekFloorProtocol.packets = [i.to_bytes(4, "little") * 67 for i in range(100_000)]
        self.cursors: dict[int, int] = {}

    def respond(self, pdu, call_id: int) -> bytes:
        if pdu[22] != 9:                                            # not RemoteQMStartReceive2: the floor's answer
            return super().respond(pdu, call_id)
        (ref, seq, queue, cursor, action, timeout, _, dw_queue, request_id, _, _,
         ack, _) = _PEEK_REQUEST.unpack_from(pdu, 24)
        packets = self.packets
        at = self.cursors.get(queue, 0)
        self.cursors[queue] = at + 1
        packet = packets[at % len(packets)]
        n = len(packet)
        stub = b"".join((_PEEK_RESPONSE.pack(bytes(20), ref, at, queue, cursor, action, timeout, n, dw_queue,
                                             request_id, 1, at, ack, 0x20004, n, 0, n),
                         packet, _PAD[n & 3], b"\0\0\0\0"))
        return (_HEADER.pack(5, 0, 2, 3, b"\x10\0\0\0", 24 + len(stub), 0, call_id)
                + struct.pack("<IHBB", len(stub), 0, 0, 0) + stub)


def measure_echo(clients: int, duration: float, processes: int, loop: str) -> dict:
    """Echo calls/s with the qm2qm load generator, and the echo server's CPU µs per call."""
    return measure_in_process(EchoProtocol, [ConnSpec([ECHO_REQUEST], bind=False)] * clients, duration,
                              processes, loop)


def measure_in_process(protocol: type[asyncio.Protocol], specs: list[ConnSpec], duration: float, processes: int,
                       loop: str) -> dict:
    """Serve ``protocol`` in a process of its own (run_protocol_server) and drive ``specs`` against it."""
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=run_protocol_server, args=(protocol, port_queue, stop_event, loop))
    server.start()
    try:
        port = port_queue.get(timeout=60)
        return run_load(port, specs, duration, processes, server.pid)
    finally:
        stop_event.set()
        server.join(timeout=30)


# --- the scenario registry ------------------------------------------------------------------------------------------

@dataclass
class Context:
    """What a scenario gets: the run's knobs, its event loop, servers on that loop, the echo baseline."""
    args: argparse.Namespace
    loop: str
    scenario: str = ""
    _echo: dict = field(default_factory=dict)
    _servers: list = field(default_factory=list)

    @property
    def clients(self) -> list[int]:
        return self.args.clients

    def server(self, *extra: str) -> Server:
        """A fresh `qm2qm serve` on this run's loop (cProfile'd with --profile); closed after the scenario."""
        path = None
        if self.args.profile:
            os.makedirs(self.args.profile, exist_ok=True)
            path = os.path.join(self.args.profile, f"{self.scenario}-{self.loop}-{len(self._servers)}.prof")
        server = Server(path, *extra, *shlex.split(self.args.serve_args), loop=self.loop)
        self._servers.append((server, path))
        return server

    def ballast_server(self, *extra: str) -> Server:
        """server(), holding the --backlog ballast queue."""
        server = self.server(*extra)
        _ballast(self, server)
        return server

    def close_servers(self) -> None:
        for server, path in self._servers:
            server.close()
            if path:
                import pstats
                print(f"  --- cProfile of the server ({path}), top 25 by own time")
                pstats.Stats(path).sort_stats("tottime").print_stats(25)
        self._servers.clear()

    def echo(self, clients: int, processes: int | None = None) -> dict:
        """The best of --repeat echo runs at ``clients`` on this loop from ``processes`` load processes
        (measured once per run, loop and setting)."""
        processes = processes or self.args.processes
        # --echo-per-scenario: measured again beside each scenario, so a machine whose speed drifts over the run
        # does not divide a late scenario by an echo of faster minutes
        key = (clients, min(clients, processes), self.scenario if self.args.echo_per_scenario else None)
        if key not in self._echo:
            runs = [measure_echo(clients, self.args.duration, processes, self.loop) for _ in range(self.args.repeat)]
            best = self._echo[key] = max(runs, key=lambda r: r["rate"])
            print(f"  echo {clients:2d} clients on {self.loop} ({key[1]} load processes): {best['rate']:8.0f} "
                  f"calls/s (runs {' '.join('%.0f' % r['rate'] for r in runs)}; "
                  f"{best['cpu_us_per_call']:.1f} µs server CPU/call)", flush=True)
        return self._echo[key]

    def best_of(self, run_once: Callable[[int], dict], key: str = "rate") -> dict:
        """The best (highest ``key``) of --repeat runs of ``run_once(attempt)``, with every run's ``key`` (runs) and
        the errors of all. Echo is the best of as many runs, so a ratio compares best with best: a scenario
        measured once against a best-of-two echo read a few hundredths low (BENCHMARKS.md, fifteenth pass)."""
        runs = [run_once(attempt) for attempt in range(self.args.repeat)]
        best = dict(max(runs, key=lambda r: r[key]))
        best["errors"] = sum(r.get("errors", 0) for r in runs)
        best["runs"] = [round(r[key]) for r in runs]
        return best

    def load(self, port: int, specs: list[ConnSpec], server_pid: int | None = None) -> dict:
        """The best (highest rate) of --repeat closed-loop runs; ``specs`` is a callable making fresh specs per
        run when cursors or handles must not be reused."""
        def run_once(_attempt: int) -> dict:
            made = specs() if callable(specs) else specs
            return run_load(port, made, self.args.duration, self.args.processes, server_pid)
        return self.best_of(run_once)

    def row(self, clients: int, result: dict, *, calls_per_op: int = 1, unit: str = "calls/s",
            processes: int | None = None, **extra) -> dict:
        """One table row: the rate as a ratio to this loop's echo at ``clients`` (÷ calls_per_op)."""
        echo = self.echo(clients, processes)
        rate = result["msg_rate"] if calls_per_op > 1 else result["rate"]
        ratio = rate / (echo["rate"] / calls_per_op)
        row = {"scenario": self.scenario, "loop": self.loop, "clients": clients, "backlog": self.args.backlog,
               "rate": round(rate, 1), "unit": unit, "echo_calls_per_s": round(echo["rate"], 1),
               "ratio": round(ratio, 3), "errors": result.get("errors", 0),
               "server_cpu_us_per_call": round(result.get("cpu_us_per_call", float("nan")), 1),
               "server_sys_us_per_call": round(result.get("sys_us_per_call", float("nan")), 1),
               "echo_cpu_us_per_call": round(echo["cpu_us_per_call"], 1),
               "echo_sys_us_per_call": round(echo.get("sys_us_per_call", float("nan")), 1),
               "runs": result.get("runs"), **extra}
        print(f"  {self.scenario:20s} {self.loop:7s} {clients:2d} clients: {rate:8.0f} {unit:7s} echo "
              f"{echo['rate']:8.0f}/s ratio {ratio:4.2f}  errors {row['errors']}  server CPU "
              f"{row['server_cpu_us_per_call']:.1f} µs/call, {row['server_sys_us_per_call']:.1f} of it system "
              f"(echo {row['echo_cpu_us_per_call']:.1f}, {row['echo_sys_us_per_call']:.1f})", flush=True)
        return row


SCENARIOS: dict[str, tuple[Callable[[Context], list[dict]], str]] = {}


def scenario(name: str, description: str):
    """Register ``fn(ctx) -> rows`` under ``name``; the registry's order is the run order."""
    def register(fn):
        SCENARIOS[name] = (fn, description)
        return fn
    return register


def _peek_stub(handle: int, action: int, cursor: int = 0) -> bytes:
    from qm2qm.client import Qm2qmClient
    from qm2qm.mqqp import idl
    req = idl.RemoteQMStartReceive2()
    req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = Qm2qmClient._desc(handle, action, 0, cursor, 1, None)
    req["lpRemoteReadDesc2"]["SequentialId"] = 0
    return req.getData()


def _lookup_stub(handle: int, lookup_id: int, action: int) -> bytes:
    from qm2qm.client import Qm2qmClient
    from qm2qm.mqqp import idl
    req = idl.RemoteQMStartReceiveByLookupId()
    req["LookupId"] = lookup_id
    req["lpRemoteReadDesc2"]["pRemoteReadDesc"] = Qm2qmClient._desc(handle, action, 0, 0, 1, None)
    req["lpRemoteReadDesc2"]["SequentialId"] = 0
    return req.getData()


def _ballast(ctx: Context, server: Server) -> None:
    """--backlog: N recoverable messages in a queue of their own."""
    if ctx.args.backlog:
        t0 = time.time()
        server.queue("ballast", bytes(100), ctx.args.backlog, "recoverable")
        print(f"  (ballast: {ctx.args.backlog} recoverable messages queued in {time.time() - t0:.1f} s)", flush=True)


def _floor_rows(ctx: Context, protocol: type[asyncio.Protocol], request: bytes) -> list[dict]:
    """A floor server (``protocol``, in process) answering ``request`` on every connection: the best of --repeat."""
    return [ctx.row(c, ctx.best_of(lambda _, c=c: measure_in_process(
        protocol, [ConnSpec([request], handles=[1])] * c, ctx.args.duration, ctx.args.processes, ctx.loop)))
        for c in ctx.clients]


@scenario("floor", "the Python floor: PDU framing and a fixed peek-sized answer, no NDR or queue manager")
def bench_floor(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    return _floor_rows(ctx, FloorProtocol, request_pdu(9, _peek_stub(1, MQ_ACTION_PEEK_CURRENT)))  # as peek-memo


@scenario("floor-peek", "the Python floor of a peek: floor + one struct each way, a dict, a distinct packet per call")
def bench_floor_peek(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_NEXT
    return _floor_rows(ctx, PeekFloorProtocol, request_pdu(9, _peek_stub(1, MQ_ACTION_PEEK_NEXT, 1)))  # as peek-next


@scenario("peek-memo", "PEEK_CURRENT of the same 100-byte message (packet memo always hits)")
def bench_peek_memo(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    server = ctx.server()
    _ballast(ctx, server)
    q = server.queue("peek", bytes(range(100)), 1)

    def specs(clients):
        out = []
        for _ in range(clients):
            h = server.admin.open_queue(q, access="peek")["hRemoteQueue"]
            out.append(ConnSpec([request_pdu(9, _peek_stub(h, MQ_ACTION_PEEK_CURRENT))], handles=[h]))
        return out
    return [ctx.row(c, ctx.load(server.port, lambda c=c: specs(c), server.proc.pid)) for c in ctx.clients]


@scenario("peek-next", "a cursor per client walking PEEK_NEXT through distinct messages")
def bench_peek_next(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT
    server = ctx.server()
    _ballast(ctx, server)
    rows = []
    for clients in ctx.clients:
        per_queue = ctx.args.walk // clients + 10_000
        queues = [server.queue(f"walk{clients}-{i}", bytes(range(100)), per_queue) for i in range(clients)]

        def specs():
            out = []
            for q in queues:
                h = server.admin.open_queue(q, access="peek")["hRemoteQueue"]
                cursor = server.admin.open_cursor(h)["hCursor"]
                out.append(ConnSpec([request_pdu(9, _peek_stub(h, MQ_ACTION_PEEK_NEXT, cursor))], handles=[h],
                                    setup=[request_pdu(9, _peek_stub(h, MQ_ACTION_PEEK_CURRENT, cursor))]))
            return out
        rows.append(ctx.row(clients, ctx.load(server.port, specs, server.proc.pid), queue_depth=per_queue))
        for q in queues:
            server.admin.delete_queue(q)
    return rows


@scenario("peek-queues", "PEEK_CURRENT round-robin over 512 queues of one distinct message each")
def bench_peek_queues(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    server = ctx.server()
    _ballast(ctx, server)
    queues = [server.queue(f"many-{i}", i.to_bytes(4, "little") * 25, 1) for i in range(512)]

    def specs(clients):
        out = []
        for j in range(clients):
            handles = [server.admin.open_queue(q, access="peek")["hRemoteQueue"] for q in queues[j::clients]]
            out.append(ConnSpec([request_pdu(9, _peek_stub(h, MQ_ACTION_PEEK_CURRENT)) for h in handles],
                                handles=handles))
        return out
    return [ctx.row(c, ctx.load(server.port, lambda c=c: specs(c), server.proc.pid)) for c in ctx.clients]


@scenario("lookup", "RemoteQMStartReceiveByLookupId(MQ_LOOKUP_PEEK_CURRENT) over 4,096 distinct ids")
def bench_lookup(ctx: Context) -> list[dict]:
    from qm2qm.mqqp.constants import MQ_LOOKUP_PEEK_CURRENT
    server = ctx.server()
    q = server.queue("lookup", bytes(range(100)), max(4096, ctx.args.backlog))
    ids = [m["lookup_id"] for m in server.admin.list_messages(q, limit=4096)]
    if len(ids) != 4096:
        raise SystemExit(f"lookup: the admin API listed {len(ids)} of 4096 messages")

    def specs(clients):
        out = []
        for j in range(clients):
            h = server.admin.open_queue(q, access="peek")["hRemoteQueue"]
            offset = j * len(ids) // clients      # staggered: no two clients peek the same id close in time
            order = ids[offset:] + ids[:offset]
            out.append(ConnSpec([request_pdu(10, _lookup_stub(h, i, MQ_LOOKUP_PEEK_CURRENT)) for i in order],
                                handles=[h]))
        return out
    return [ctx.row(c, ctx.load(server.port, lambda c=c: specs(c), server.proc.pid),
                    queue_depth=max(4096, ctx.args.backlog)) for c in ctx.clients]


def _receive(ctx: Context, delivery: str, cursor: bool, *serve: str) -> list[dict]:
    """RECEIVE + RR_ACK of 1 KiB messages for --duration (or until the queue is empty), the best of --repeat runs
    on queues filled afresh for each; ``serve``: serve options."""
    server = ctx.server(*serve)
    if cursor:
        _ballast(ctx, server)      # (without a cursor the received queue itself is --backlog deep)
    rows = []
    for clients in ctx.clients:
        result = ctx.best_of(
            lambda attempt, clients=clients: _receive_once(ctx, server, clients, attempt, delivery, cursor),
            key="msg_rate")
        rows.append(ctx.row(clients, result, calls_per_op=2, unit="msg/s", processes=ctx.args.receive_processes,
                            delivery=delivery,
                            server_cpu_us_per_message=round(result["cpu_us_per_message"], 1),
                            messages=result["messages"], seconds=round(result["seconds"], 3)))
    return rows


def _run_queues(server: Server, name: str, messages: int, clients: int, *, per_client: bool,
                delivery: str = "express") -> list[str]:
    """The queues of one run, a path per client, ``messages`` 1 KiB messages in all: a queue per client when each
    reads through a cursor (cursors of other clients would skip the messages it took, or race for its head), else
    one queue for all."""
    if per_client:
        return [server.queue(f"{name}-{i}", bytes(1024), messages // clients, delivery) for i in range(clients)]
    return [server.queue(name, bytes(1024), messages, delivery)] * clients


def _receive_once(ctx: Context, server: Server, clients: int, attempt: int, delivery: str, cursor: bool) -> dict:
    """One receive + RR_ACK run on queues of its own, deleted after."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
    queues = _run_queues(server, f"{'rc' if cursor else 'r'}{clients}-{attempt}", ctx.args.receive_messages,
                         clients, per_client=cursor, delivery=delivery)
    # --backlog more behind the 1 KiB ones, 100 bytes each (1M x 1 KiB would pass the 1 GiB quota); with cursors
    # _receive's ballast queue stands in for it
    if ctx.args.backlog and not cursor:
        t0 = time.time()
        for done in range(0, ctx.args.backlog, 100_000):
            server.admin.send(queues[0], body_base64=base64.b64encode(bytes(100)).decode(),
                              count=min(100_000, ctx.args.backlog - done), delivery=delivery)
        print(f"  ({ctx.args.backlog} more {delivery} messages queued behind in {time.time() - t0:.1f} s)",
              flush=True)
    specs = []
    for q in queues:
        h = server.admin.open_queue(q)["hRemoteQueue"]
        if cursor:
            c = server.admin.open_cursor(h)["hCursor"]
            specs.append(ConnSpec([request_pdu(9, _peek_stub(h, MQ_ACTION_RECEIVE, c))], handles=[h], ack=True,
                                  setup=[request_pdu(9, _peek_stub(h, MQ_ACTION_PEEK_CURRENT, c))]))
        else:
            specs.append(ConnSpec([request_pdu(9, _peek_stub(h, MQ_ACTION_RECEIVE))], handles=[h], ack=True))
    result = run_load(server.port, specs, ctx.args.duration, ctx.args.receive_processes, server.proc.pid)
    result["cpu_us_per_message"] = result["cpu_us_per_call"] * result["calls"] / max(result["messages"], 1)
    for q in set(queues):
        server.admin.delete_queue(q)
    return result


@scenario("receive-express", "StartReceive2(RECEIVE) + EndReceive(RR_ACK), 1 KiB express messages")
def bench_receive_express(ctx: Context) -> list[dict]:
    return _receive(ctx, "express", cursor=False)


@scenario("receive-recoverable", "the same with recoverable messages (group commit of the ACK deletes)")
def bench_receive_recoverable(ctx: Context) -> list[dict]:
    return _receive(ctx, "recoverable", cursor=False)


@scenario("receive-recoverable-full", "the same on `serve --store-synchronous full` (an fsync per group commit)")
def bench_receive_recoverable_full(ctx: Context) -> list[dict]:
    return _receive(ctx, "recoverable", False, "--store-synchronous", "full")


@scenario("receive-cursor", "RECEIVE through a cursor + RR_ACK, 1 KiB express, a queue per client")
def bench_receive_cursor(ctx: Context) -> list[dict]:
    return _receive(ctx, "express", cursor=True)


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


def bench_mqrr_receive(server: Server, messages: int, clients: int, delivery: str = "express",
                       name: str = "mqrr_receive") -> tuple:
    """Receive+ACK throughput of 1 KiB messages over MS-MQRR on ``server`` (`serve --mqrr
    --allow-anonymous-read`), to set beside qm2qm's (bench_receive), from a queue ``name`` filled for it and
    deleted after."""
    q = server.queue(name, bytes(1024), messages, delivery)
    format_name = "DIRECT=OS:localhost\\private$\\" + name
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    start_at = time.time() + 1.2
    proc = ctx.Process(target=mqrr_receive_clients, args=(server.port, format_name, clients, start_at, ready,
                                                          results))
    proc.start()
    ready.get(timeout=60)
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = cpu_split(server.proc.pid)
    done, errors, finished = results.get(timeout=600)
    cpu1 = cpu_split(server.proc.pid)
    system = cpu1[1] - cpu0[1]
    cpu = cpu1[0] - cpu0[0] + system
    proc.join()
    elapsed = finished - start_at
    left = len(server.admin.list_messages(q))
    server.admin.delete_queue(q)
    rate = done / elapsed
    print(f"  MS-MQRR receive+ACK 1 KiB {delivery} x {messages}, {clients} clients: {rate:8.0f} msg/s  "
          f"({elapsed:.2f} s, errors {errors}, left {left}; server CPU {cpu / max(done, 1) * 1e6:.0f} µs/message)",
          flush=True)
    return rate, elapsed, errors, left, cpu / max(done, 1) / 2 * 1e6, system / max(done, 1) / 2 * 1e6


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


def bench_sequence(clients: int = 4, receives: int = 100, rounds: int = 5, loop: str = "auto") -> dict:
    """Messages/s of `open -> receives x receive+ACK -> close` sessions, opened the Windows way (qmcomm), through
    the admin API, and over MS-MQRR (`serve --mqrr`), ``clients`` concurrent processes each."""
    out = {}
    names = {"qmcomm": "qmcomm sequence", "admin": "admin-API open", "mqrr": "MS-MQRR sequence"}
    for path, name in names.items():
        extra = ["--allow-anonymous-read"] if "allow_anonymous_read" in _config_keys() else []
        server = Server(None, *extra, *(["--mqrr"] if path == "mqrr" else []), loop=loop)
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


@scenario("mqrr-receive", "R_StartReceive(RECEIVE) + R_EndReceive(RR_ACK) over MS-MQRR, 1 KiB express, 4 clients")
def bench_mqrr_receive_scenario(ctx: Context) -> list[dict]:
    """MS-MQRR's receive + ACK, reported as a ratio to this loop's echo (two calls per message) like qm2qm's."""
    clients = 4
    server = ctx.ballast_server("--mqrr", "--allow-anonymous-read")

    def run_once(attempt: int) -> dict:
        rate, _, errors, left, cpu_per_call, sys_per_call = bench_mqrr_receive(
            server, ctx.args.receive_messages, clients, name=f"mqrr_receive{attempt}")
        return {"msg_rate": rate, "rate": rate * 2, "errors": errors, "cpu_us_per_call": cpu_per_call,
                "sys_us_per_call": sys_per_call, "left": left}
    result = ctx.best_of(run_once, key="msg_rate")
    return [ctx.row(clients, result, calls_per_op=2, unit="msg/s", processes=1, left=result["left"])]


@scenario("sequence", "qmcomm open -> 100 x receive+ACK -> close (impacket clients), vs the admin-API open")
def bench_sequence_scenario(ctx: Context) -> list[dict]:
    """Rates of whole Windows-style sessions; impacket clients bound them, so they are reported without a ratio."""
    rates = bench_sequence(loop=ctx.loop)
    return [{"scenario": ctx.scenario, "loop": ctx.loop, "clients": 4, "kind": name, "rate": round(rate, 1),
             "unit": "msg/s"} for name, rate in rates.items()]


# --- what RPC authentication costs the server (MS-RPCE 3.3.1.5.2 with NTLM) -----------------------------------------

AUTH_LEVELS = {"anonymous": None, "NTLM integrity": 5, "NTLM privacy": 6}   # RPC_C_AUTHN_LEVEL_PKT_*


@scenario("auth", "server CPU per receive + ACK call, unauthenticated vs NTLM PKT_INTEGRITY vs PKT_PRIVACY "
                  "(one impacket RemoteReader each)")
def bench_auth(ctx: Context) -> list[dict]:
    """The server's CPU per call of the same reads bound anonymously, then signed, then sealed. impacket's client
    (~1 ms per call) bounds the rate, so the figure is the server's CPU per call, not a ratio to echo."""
    from qm2qm.client import RemoteReader
    with tempfile.NamedTemporaryFile("w", suffix=".users", delete=False) as users:
        users.write("QM2QM:bench:bench-secret:S-1-5-21-1004336348-1177238915-682003330-1001\n")
    rows = []
    try:
        server = ctx.server("--users", users.name, "--allow-anonymous-read")
        qmcomm_port = int(server.admin.info()["qmcomm_port"])
        receives = ctx.args.auth_receives
        for kind, level in AUTH_LEVELS.items():
            q = server.queue(f"auth{level}", bytes(1024), receives + 50)
            credentials = {} if level is None else dict(user="bench", domain="QM2QM", password="bench-secret",
                                                        auth_level=level)
            with RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\" + q.split("\\", 1)[1],
                              qmcomm_port=qmcomm_port, qm2qm_port=server.port, **credentials) as reader:
                for _ in range(50):                             # warm-up
                    reader.receive()
                cpu0, t0 = cpu_seconds(server.proc.pid), time.perf_counter()
                errors = sum(not reader.receive().ok for _ in range(receives))
                cpu, seconds = cpu_seconds(server.proc.pid) - cpu0, time.perf_counter() - t0
            per_call = cpu / (2 * receives) * 1e6
            print(f"  auth {kind:16s} {receives} x receive + RR_ACK: {2 * receives / seconds:7.0f} calls/s, server "
                  f"CPU {per_call:.1f} µs/call, errors {errors}", flush=True)
            rows.append({"scenario": ctx.scenario, "loop": ctx.loop, "clients": 1, "kind": kind,
                         "rate": round(2 * receives / seconds, 1), "unit": "calls/s", "errors": errors,
                         "server_cpu_us_per_call": round(per_call, 1)})
    finally:
        os.unlink(users.name)
    return rows


# --- the Windows remote-read session over raw PDUs (MS-MQMP 4.2 with MS-MQQP 4.1), as a ratio to echo ------------

QMCOMM = ("fdb3a030-065f-11d1-bb9b-00a024ea5525", 1, 0)        # MS-MQMP qmcomm v1.0
_SENTINEL = 0x5EC0_0A11                                         # a handle value no stub holds by chance
_CURSOR_SENTINEL = 0x5EC0_0C22                                  # and a cursor's


@dataclass
class SessionSpec:
    """One client of the session scenarios, its connections bound once. ``protocol`` "qm2qm": a qmcomm and a
    qm2qm connection, and every session as MS-MQMP 4.2 orders it -- R_QMGetRTQMServerPort(IP_HANDSHAKE),
    R_QMOpenRemoteQueue, RemoteQMOpenQueue, RemoteQmGetVersion, R_QMCloseRemoteQueueContext (step 11: the qm2qm
    session holds the queue now), ``receives`` x (StartReceive2(RECEIVE) + EndReceive(RR_ACK)), RemoteQMCloseQueue;
    "qm2qm-cursor": the same through a remote cursor (MS-MQMP 4.4) -- R_QMCreateRemoteCursor (the zeroed
    CACTransferBufferV1 Windows sends) after the open, a PEEK_CURRENT that positions it, the receives at the
    cursor, RemoteQMCloseCursor before the close; "mqrr": one MS-MQRR connection, and every session R_OpenQueue,
    ``receives`` x (R_StartReceive(RECEIVE) + R_EndReceive(RR_ACK)), R_CloseQueue."""
    qmcomm_port: int
    format_name: str
    receives: int
    protocol: str = "qm2qm"


def session_calls(receives: int, protocol: str = "qm2qm") -> int:
    """Calls per session: qm2qm the port, two opens, the version, two per message, two closes (with a cursor also
    its creation, the positioning peek and its close); MS-MQRR one open, two per message, one close."""
    return 2 * receives + {"qm2qm": 6, "qm2qm-cursor": 9, "mqrr": 2}[protocol]


def _patchable(stub: bytes, count: int, what: str, sentinel: int = _SENTINEL) -> tuple[bytes, list[int]]:
    """A stub built with ``sentinel`` for a handle, and the offsets of its ``count`` occurrences."""
    offsets = [i for i in range(len(stub) - 3) if struct.unpack_from("<I", stub, i)[0] == sentinel]
    if len(offsets) != count:
        raise SystemExit(f"{what} stub: expected the handle {count} times, found {offsets}")
    return stub, offsets


def _patched(template: tuple[bytes, list[int]], handle: int, cursor_offsets: list[int] = (), cursor: int = 0) -> bytes:
    stub = bytearray(template[0])
    for offset in template[1]:
        struct.pack_into("<I", stub, offset, handle)
    for offset in cursor_offsets:
        struct.pack_into("<I", stub, offset, cursor)
    return bytes(stub)


class SessionStubs:
    """The request PDUs of a session, built once with impacket's NDR and patched per session (handles only)."""

    def __init__(self, format_name: str, protocol: str) -> None:
        from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
        self.lic_guid = uuid.uuid4().bytes_le
        self.version = request_pdu(8, b"")
        if protocol == "mqrr":
            from qm2qm.mqrr import idl as mqrr_idl
            from qm2qm.mqrr.queue_format import queue_format
            request = mqrr_idl.R_OpenQueue()
            request["pQueueFormat"] = queue_format(format_name)
            request["dwAccess"], request["dwShareMode"], request["pClientId"] = 1, 0, uuid.uuid4().bytes_le
            request["fNonRoutingServer"], request["Major"], request["Minor"] = 1, 6, 1
            request["BuildNumber"], request["fWorkgroup"] = 0, 1
            self.open = request_pdu(2, request.getData())
            # R_StartReceive(MQ_ACTION_RECEIVE) of request 1: its stub is the queue context handle, then the rest
            receive = mqrr_idl.R_StartReceive()
            receive["phContext"], receive["ulAction"], receive["dwRequestId"] = bytes(20), 0, 1
            receive["dwMaxBodySize"] = receive["dwMaxCompoundMessageSize"] = 0xFFFFFFFF
            stub = receive.getData()
            if stub[:20] != bytes(20):
                raise SystemExit("R_StartReceive stub: the context handle is no longer its first 20 bytes")
            self.mqrr_receive_tail = stub[20:]
            return
        from qm2qm.mqmp import codec, idl as mqmp_idl
        from qm2qm.mqmp.constants import IP_HANDSHAKE, MQ_DENY_NONE, MQ_RECEIVE_ACCESS
        port = mqmp_idl.R_QMGetRTQMServerPort()
        port["fIP"] = IP_HANDSHAKE
        self.port = request_pdu(31, port.getData())
        from qm2qm.mqqp import idl
        request = mqmp_idl.R_QMOpenRemoteQueue()
        codec.fill_queue_format(request["pQueueFormat"], format_name)
        request["dwCallingProcessID"], request["dwDesiredAccess"] = os.getpid(), MQ_RECEIVE_ACCESS
        request["dwShareMode"], request["pLicGuid"], request["dwMQS"] = MQ_DENY_NONE, uuid.uuid4().bytes_le, 0
        self.open = request_pdu(2, request.getData())
        # hRemoteQueue and dwQueue: the sentinel
        self.receive_template = _patchable(_peek_stub(_SENTINEL, MQ_ACTION_RECEIVE), 2, "StartReceive2")
        if protocol == "qm2qm-cursor":
            from qm2qm.mqmp.client import create_remote_cursor_request
            from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
            self.create_cursor = create_remote_cursor_request(0).getData()[:-4]     # + hQueue
            self.cursor_templates = []
            for action in (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE):
                stub = _peek_stub(_SENTINEL, action, _CURSOR_SENTINEL)
                self.cursor_templates.append((_patchable(stub, 2, "StartReceive2"),
                                              _patchable(stub, 1, "StartReceive2", _CURSOR_SENTINEL)[1]))
        check = idl.RemoteQMOpenQueue()
        check["pLicGuid"], check["dwMQS"] = self.lic_guid, 0
        check["hQueue"], check["pQueue"], check["dwpContext"] = 1, 2, 3
        if check.getData() != self.open_queue_stub(1, 2, 3):
            raise SystemExit("RemoteQMOpenQueue stub: the struct layout no longer matches the IDL")

    def open_queue_stub(self, h_queue: int, dwp_queue: int, pdw_context: int) -> bytes:
        """RemoteQMOpenQueue(pLicGuid, dwMQS, hQueue, pQueue, dwpContext) (MS-MQQP 3.1.4.3)."""
        return self.lic_guid + struct.pack("<IIII", 0, h_queue, dwp_queue, pdw_context)

    def receive(self, handle: int) -> bytes:
        """StartReceive2(MQ_ACTION_RECEIVE) of hRemoteQueue = dwQueue = ``handle``."""
        return request_pdu(9, _patched(self.receive_template, handle))

    def cursor_reads(self, handle: int, cursor: int) -> tuple[bytes, bytes]:
        """StartReceive2 PEEK_CURRENT and RECEIVE at ``cursor`` of queue ``handle``."""
        return tuple(request_pdu(9, _patched(template, handle, cursor_offsets, cursor))
                     for template, cursor_offsets in self.cursor_templates)

    def mqrr_read(self, handle: bytes) -> tuple[bytes, bytes]:
        """R_StartReceive(MQ_ACTION_RECEIVE) and R_EndReceive(RR_ACK) of request 1 on queue context ``handle``
        (built once in __init__: marshalling it with impacket per session cost the load client 0.25 ms each)."""
        end = request_pdu(9, handle + struct.pack("<II", 2, 1), call_id=3)
        return request_pdu(7, handle + self.mqrr_receive_tail), end


# the steps of a session: each names the call whose answer the client waits for
PORT, OPEN_REMOTE, CREATE_CURSOR, OPEN_QUEUE, VERSION, CLOSE_CONTEXT, POSITION, RECEIVE, ACK, CLOSE_CURSOR, \
    CLOSE_QUEUE = range(11)


def session_clients(port: int, specs: list[SessionSpec], go, duration: float, ready, results) -> None:
    """Run sessions (SessionSpec) on every client until ``start_at + duration`` or the queue is empty, one call
    outstanding per client; results as closed_loop_clients' (calls, messages, errors, end) plus sessions."""
    sel = selectors.DefaultSelector()
    clients = []
    for spec in specs:
        mqrr = spec.protocol == "mqrr"
        if mqrr:
            qm2qm = connect(port, interface=MQRR)
            socks = (qm2qm,)
        else:
            qm2qm = connect(port)
            socks = (connect(spec.qmcomm_port, interface=QMCOMM), qm2qm)
        client = {"qmcomm": socks[0], "qm2qm": qm2qm, "socks": socks, "mqrr": mqrr, "qmcomm_port": spec.qmcomm_port,
                  "cursor": spec.protocol == "qm2qm-cursor", "h_queue": 0, "h_cursor": 0, "position": b"",
                  "stubs": SessionStubs(spec.format_name, spec.protocol), "receives": spec.receives,
                  "step": OPEN_QUEUE if mqrr else PORT, "left": 0, "context": b"", "session": b"",
                  "receive": b"", "ack": b""}
        for sock in socks:
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, [client, bytearray()])
        clients.append(client)
    ready.put(1)
    start_at = go.get(timeout=600)
    while time.time() < start_at:
        time.sleep(0.001)
    calls = messages = errors = sessions = 0
    for client in clients:
        client["socks"][0].send(client["stubs"].open if client["mqrr"] else client["stubs"].port)
    end = start_at + duration
    live = len(clients)
    finished = None
    while live and (now := time.time()) < end:
        for key, _ in sel.select(timeout=end - now):
            client, buf = key.data
            buf += key.fileobj.recv(1 << 20)
            while len(buf) >= 16:           # 1 KiB messages: every answer is one fragment
                frag_len = buf[8] | (buf[9] << 8)
                if len(buf) < frag_len:
                    break
                if buf[2] == 3:
                    raise SystemExit(f"fault PDU 0x{struct.unpack_from('<I', buf, 24)[0]:08x} "
                                     f"at step {client['step']}")
                stub = bytes(buf[24:frag_len])
                del buf[:frag_len]
                calls += 1
                status = struct.unpack_from("<I", stub, len(stub) - 4)[0]
                qm2qm, stubs, step = client["qm2qm"], client["stubs"], client["step"]
                if step == ACK:
                    errors += status != MQ_OK
                    messages += 1
                    client["left"] -= 1
                    if client["left"]:
                        client["step"] = RECEIVE
                        qm2qm.send(client["receive"])
                    elif client["cursor"]:
                        client["step"] = CLOSE_CURSOR
                        qm2qm.send(request_pdu(4, struct.pack("<II", client["h_queue"], client["h_cursor"])))
                    else:                   # RemoteQMCloseQueue and R_CloseQueue: opnum 3 of the handle alone
                        client["step"] = CLOSE_QUEUE
                        qm2qm.send(request_pdu(3, client["session"]))
                elif step in (RECEIVE, POSITION) and status != MQ_OK:
                    # the queue is empty (MQ_ERROR_IO_TIMEOUT): this client is done; a cursor's session meets
                    # that first at its position (PEEK_CURRENT) when the queue ran out at a session's end
                    errors += status != MQ_ERROR_IO_TIMEOUT
                    for sock in client["socks"]:
                        sel.unregister(sock)
                    live -= 1
                    finished = time.time()
                elif step == RECEIVE:
                    client["step"] = ACK
                    qm2qm.send(client["ack"] or request_pdu(1, end_receive_stub(stub[:20]), call_id=3))
                elif step == PORT:
                    errors += status != client["qmcomm_port"]     # IP_HANDSHAKE: the qmcomm port
                    client["step"] = OPEN_REMOTE
                    client["qmcomm"].send(stubs.open)
                elif step == OPEN_REMOTE:
                    if status != MQ_OK:
                        raise SystemExit(f"R_QMOpenRemoteQueue: 0x{status:08x}")
                    client["context"] = stub[:20]
                    pdw_context, dwp_queue, h_queue = struct.unpack_from("<III", stub, 20)
                    client["h_queue"] = h_queue
                    client["receive"] = stubs.receive(h_queue)
                    client["open_queue"] = request_pdu(2, stubs.open_queue_stub(h_queue, dwp_queue, pdw_context))
                    if client["cursor"]:
                        client["step"] = CREATE_CURSOR
                        client["qmcomm"].send(request_pdu(4, stubs.create_cursor + struct.pack("<I", h_queue)))
                    else:
                        client["step"] = OPEN_QUEUE
                        qm2qm.send(client["open_queue"])
                elif step == CREATE_CURSOR:
                    if status != MQ_OK:
                        raise SystemExit(f"R_QMCreateRemoteCursor: 0x{status:08x}")
                    client["h_cursor"] = struct.unpack_from("<I", stub)[0]
                    client["position"], client["receive"] = stubs.cursor_reads(client["h_queue"], client["h_cursor"])
                    client["step"] = OPEN_QUEUE
                    qm2qm.send(client["open_queue"])
                elif step == OPEN_QUEUE:
                    client["session"] = stub[:20]
                    if client["mqrr"]:      # R_OpenQueue answers the handle alone (a failure is a fault)
                        client["receive"], client["ack"] = stubs.mqrr_read(client["session"])
                        client["step"], client["left"] = RECEIVE, client["receives"]
                        qm2qm.send(client["receive"])
                        continue
                    if status != MQ_OK:
                        raise SystemExit(f"RemoteQMOpenQueue: 0x{status:08x}")
                    client["step"] = VERSION
                    qm2qm.send(stubs.version)
                elif step == VERSION:
                    client["step"] = CLOSE_CONTEXT
                    client["qmcomm"].send(request_pdu(3, client["context"]))
                elif step == CLOSE_CONTEXT:         # answers the NULL handle (MS-MQMP 3.1.4.3)
                    errors += stub != bytes(20)
                    if client["cursor"]:
                        client["step"] = POSITION
                        qm2qm.send(client["position"])
                    else:
                        client["step"], client["left"] = RECEIVE, client["receives"]
                        qm2qm.send(client["receive"])
                elif step == POSITION:              # the cursor is at the first message: receive from there
                    client["step"], client["left"] = RECEIVE, client["receives"]
                    qm2qm.send(client["receive"])
                elif step == CLOSE_CURSOR:
                    errors += status != MQ_OK
                    client["step"] = CLOSE_QUEUE
                    qm2qm.send(request_pdu(3, client["session"]))
                else:                               # CLOSE_QUEUE: the session is over
                    errors += status != MQ_OK
                    sessions += 1
                    client["step"] = OPEN_QUEUE if client["mqrr"] else PORT
                    client["socks"][0].send(stubs.open if client["mqrr"] else stubs.port)
    for client in clients:
        for sock in client["socks"]:
            sock.close()
    results.put((calls, messages, errors, finished if not live else end, sessions))


def _sessions(ctx: Context, protocol: str) -> list[dict]:
    """Whole sessions as a ratio to echo: msg/s ÷ (echo calls/s ÷ calls per message), the calls per message
    being session_calls / receives; the best of --repeat runs on queues filled afresh for each."""
    extra = ["--allow-anonymous-read"] if "allow_anonymous_read" in _config_keys() else []
    server = ctx.ballast_server(*extra, *(["--mqrr"] if protocol == "mqrr" else []))
    qmcomm_port = int(server.admin.info()["qmcomm_port"])
    receives = ctx.args.session_receives
    rows = []
    for clients in ctx.clients:
        result = ctx.best_of(
            lambda attempt, clients=clients: _sessions_once(ctx, server, qmcomm_port, clients, attempt, protocol),
            key="msg_rate")
        per_message = session_calls(receives, protocol) / receives
        rows.append(ctx.row(clients, result, calls_per_op=per_message, unit="msg/s",
                            processes=ctx.args.receive_processes, receives_per_session=receives,
                            sessions=result["sessions"], messages=result["messages"],
                            seconds=round(result["seconds"], 3)))
    return rows


def _sessions_once(ctx: Context, server: Server, qmcomm_port: int, clients: int, attempt: int,
                   protocol: str) -> dict:
    """One run of whole sessions on queues of its own, deleted after."""
    queues = _run_queues(server, f"session{clients}-{attempt}", ctx.args.receive_messages, clients,
                         per_client=protocol == "qm2qm-cursor")
    prefix = "DIRECT=OS:localhost\\" if protocol == "mqrr" else "DIRECT=TCP:127.0.0.1\\"
    specs = [SessionSpec(qmcomm_port, prefix + q.split("\\", 1)[1], ctx.args.session_receives, protocol)
             for q in queues]
    result = run_load(server.port, specs, ctx.args.duration, ctx.args.receive_processes, server.proc.pid,
                      client=session_clients)
    for q in set(queues):
        server.admin.delete_queue(q)
    return result


@scenario("session", "the Windows remote-read session over raw PDUs, in MS-MQMP 4.2's order: qmcomm port and open, "
                     "qm2qm open and version, qmcomm close, --session-receives x receive+ACK, qm2qm close")
def bench_session(ctx: Context) -> list[dict]:
    return _sessions(ctx, "qm2qm")


@scenario("session-cursor", "the same session through a remote cursor (MS-MQMP 4.4): R_QMCreateRemoteCursor, "
                            "a positioning PEEK_CURRENT, the receives at the cursor, RemoteQMCloseCursor")
def bench_session_cursor(ctx: Context) -> list[dict]:
    return _sessions(ctx, "qm2qm-cursor")


@scenario("session-mqrr", "the same session over MS-MQRR (`serve --mqrr`): R_OpenQueue, --session-receives x "
                          "R_StartReceive + R_EndReceive(RR_ACK), R_CloseQueue")
def bench_session_mqrr(ctx: Context) -> list[dict]:
    return _sessions(ctx, "mqrr")


# --- one 4 MiB message ---------------------------------------------------------------------------------------------

def bench_large(size: int, repeats: int, max_recv_frag: int, make_server=Server) -> dict:
    """Latency of one 4 MiB message, and per read the CPU the server process and this client spent (what of the
    latency is the server's: the client reassembles ~720 fragments in Python); a _large_summary per kind."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE
    server = make_server()
    out = {}
    server_cpu = process_cpu_clock(server.proc.pid)

    def timed(do) -> tuple[float, float, float]:
        """(latency, server CPU, client CPU) of one read, seconds."""
        s0, c0 = time.clock_gettime(server_cpu), time.process_time()
        t0 = time.perf_counter()
        do()
        t1 = time.perf_counter()
        c1, s1 = time.process_time(), time.clock_gettime(server_cpu)
        return t1 - t0, s1 - s0, c1 - c0

    try:
        q = server.queue("large", os.urandom(size), 1)
        h = server.admin.open_queue(q)["hRemoteQueue"]
        sock = connect(server.port, max_recv_frag)
        assert hresult(call(sock, 2, open_queue_stub(h))) == MQ_OK
        peek = start_receive2_stub(h, MQ_ACTION_PEEK_CURRENT)

        def peek_once():
            stub = call(sock, 9, peek)
            assert hresult(stub) == MQ_OK and len(stub) > size
        out["peek"] = [timed(peek_once) for _ in range(repeats)]
        receive = start_receive2_stub(h, MQ_ACTION_RECEIVE)

        def receive_once():
            stub = call(sock, 9, receive)
            assert hresult(stub) == MQ_OK and len(stub) > size
            assert hresult(call(sock, 1, end_receive_stub(stub[:20]), call_id=3)) == MQ_OK
        times = []
        for _ in range(repeats):
            times.append(timed(receive_once))
            server.admin.send(q, body_base64=base64.b64encode(os.urandom(size)).decode())
        out["receive"] = times
        sock.close()
    finally:
        server.close()
    summaries = {kind: _large_summary(reads) for kind, reads in out.items()}
    for kind, r in summaries.items():
        print(f"  {size} B {kind:7s} (max_recv_frag {max_recv_frag}): median {r['median_ms']:6.1f} ms"
              f"  min {r['min_ms']:6.1f}  max {r['max_ms']:6.1f}  (n={r['n']}); server CPU median "
              f"{statistics.median(r['server_cpu_ms']):.1f} ms, client CPU "
              f"{statistics.median(r['client_cpu_ms']):.1f} ms", flush=True)
    return summaries


def _large_summary(reads: list[tuple[float, float, float]]) -> dict:
    """The figures of one kind of 4 MiB read from its (latency, server CPU, client CPU) seconds: latency median,
    min, max and the CPU of each read, in ms."""
    ms = sorted(r[0] * 1000 for r in reads)
    return {"median_ms": round(statistics.median(ms), 2), "min_ms": round(ms[0], 2), "max_ms": round(ms[-1], 2),
            "n": len(ms), "server_cpu_ms": [round(r[1] * 1000, 3) for r in reads],
            "client_cpu_ms": [round(r[2] * 1000, 3) for r in reads]}


# --- 5,000 blocked receivers woken by 5,000 sends -------------------------------------------------------------------

def _quantile(ms: list[float], q: float) -> float:
    """The q-quantile of sorted latencies, as every wake figure reads it (nearest rank, no interpolation)."""
    return ms[min(len(ms) - 1, int(q * len(ms)))]


def bench_wake(receivers: int, per_connection: int, make_server=Server) -> list[float]:
    """Wake-up latency of blocked receivers."""
    from qm2qm.mqqp import idl
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    from shared_adm.packet import deserialize_message_from_buffer
    server = make_server("--max-connections", str(receivers // per_connection + 64))
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
    print(f"  wake {len(ms)} blocked receivers on {n_conns} connections: p50 {_quantile(ms, 0.5):6.2f} ms  "
          f"p99 {_quantile(ms, 0.99):6.2f} ms  max {ms[-1]:6.2f} ms (send->wake, includes the admin HTTP request)",
          flush=True)
    return ms


@scenario("large", "one 4 MiB - 1 KiB message: PEEK_CURRENT, and RECEIVE + RR_ACK (latency)")
def bench_large_scenario(ctx: Context) -> list[dict]:
    # MS-MQMQ 2.2.19.1: a whole UserMessage packet is at most 0x400000 bytes, so a "4 MiB message" is the
    # largest round body that fits: 4 MiB - 1 KiB (the headers take ~170 bytes).
    out = bench_large(4 * 1024 * 1024 - 1024, ctx.args.large_repeats, ctx.args.max_recv_frag, ctx.ballast_server)
    return [{"scenario": ctx.scenario, "loop": ctx.loop, "clients": 1, "backlog": ctx.args.backlog, "kind": kind,
             **summary} for kind, summary in out.items()]


@scenario("wake", "5,000 blocked RECEIVEs woken by 5,000 admin sends (send->wake latency)")
def bench_wake_scenario(ctx: Context) -> list[dict]:
    ms = bench_wake(ctx.args.receivers, ctx.args.wake_per_connection, ctx.ballast_server)
    return [{"scenario": ctx.scenario, "loop": ctx.loop, "clients": ctx.args.receivers // ctx.args.wake_per_connection,
             "backlog": ctx.args.backlog, "receivers": len(ms), "p50_ms": round(_quantile(ms, 0.5), 3),
             "p99_ms": round(_quantile(ms, 0.99), 3), "max_ms": round(ms[-1], 3)}]


# --- main -------------------------------------------------------------------------------------------------------------

def print_table(rows: list[dict]) -> None:
    """The summary: one line per scenario and client count, a column per loop."""
    loops = sorted({r["loop"] for r in rows})
    print("\n| scenario | clients | " + " | ".join(f"{lp}: rate (ratio to echo)" for lp in loops) + " |")
    print("|---|---|" + "---|" * len(loops))
    keys = []
    for r in rows:
        k = (r["scenario"], r["clients"], r.get("kind"))
        if k not in keys:
            keys.append(k)
    for k in keys:
        cells = []
        for lp in loops:
            match = [r for r in rows if (r["scenario"], r["clients"], r.get("kind")) == k and r["loop"] == lp]
            if not match:
                cells.append("—")
                continue
            r = match[0]
            if "ratio" in r:
                cells.append(f"{r['rate']:,.0f} {r['unit']} (**{r['ratio']:.2f}**)")
            elif "p99_ms" not in r and "median_ms" not in r:
                cells.append(f"{r['rate']:,.0f} {r['unit']}")
            elif "median_ms" in r:
                cells.append(f"median {r['median_ms']:.1f} ms (min {r['min_ms']:.1f}, max {r['max_ms']:.1f}; "
                             f"server CPU {statistics.median(r['server_cpu_ms']):.1f} ms)")
            else:
                cells.append(f"p50 {r['p50_ms']:.2f} ms, p99 **{r['p99_ms']:.2f}** ms, max {r['max_ms']:.2f}")
        name = k[0] + (f" {k[2]}" if k[2] else "")
        print(f"| {name} | {k[1]} | " + " | ".join(cells) + " |")


def main() -> None:
    from qm2qm.eventloop import uvloop_available
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--only", choices=list(SCENARIOS), action="append", help="run only these (repeatable)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="both",
                        help="event loop of server and echo baseline [both when uvloop is installed]")
    parser.add_argument("--clients", type=whole_number, nargs="+", default=[1, 4, 16])
    parser.add_argument("--duration", type=seconds, default=3.0, help="seconds per closed-loop measurement")
    parser.add_argument("--processes", type=whole_number, default=2, help="load-generator processes (at most)")
    parser.add_argument("--repeat", type=whole_number, default=2, help="runs per measurement; the best is kept")
    parser.add_argument("--echo-per-scenario", action="store_true",
                        help="measure echo again beside each scenario (fair ratios while the machine's speed drifts; "
                             "the run takes longer)")
    parser.add_argument("--walk", type=int, default=100_000, help="distinct messages the peek-next cursors walk")
    parser.add_argument("--receive-messages", type=int, default=40_000,
                        help="1 KiB messages queued per receive measurement (more than --duration drains)")
    parser.add_argument("--auth-receives", type=int, default=2000,
                        help="auth: receives (+ ACK) per authentication level")
    parser.add_argument("--session-receives", type=int, default=10,
                        help="session: messages received (+ ACK) per qmcomm + qm2qm session")
    parser.add_argument("--receive-processes", type=int, default=1,
                        help="load processes for the receive scenarios (1 leaves the server a core of 2)")
    parser.add_argument("--backlog", type=int, default=0, help="messages queued besides (the 1,000,000 scale test)")
    parser.add_argument("--large-repeats", type=int, default=20)
    parser.add_argument("--max-recv-frag", type=int, default=5840, help="client max_recv_frag for the 4 MiB case")
    parser.add_argument("--receivers", type=int, default=5000)
    parser.add_argument("--wake-per-connection", type=int, default=50,
                        help="blocked receives per connection in the wake test (1..64; 1 = a connection each)")
    parser.add_argument("--serve-args", default="", metavar="ARGS",
                        help="more `qm2qm serve` options for the servers of every scenario but sequence, "
                             "e.g. '--store-group-wait-ms 0'")
    parser.add_argument("--json", metavar="FILE", help="write every figure (and the machine, load, command) here")
    parser.add_argument("--profile", metavar="DIR", help="cProfile each server into DIR and print its top functions")
    parser.add_argument("--py-spy", metavar="DIR", help="sample the server with py-spy over each load window")
    parser.add_argument("--perf-stat", metavar="EVENTS",
                        help="count perf events of the server (and echo) over each load window, e.g. "
                             "'task-clock,instructions,cycles,cache-misses'")
    args = parser.parse_args()
    if args.json:       # found now, not after the whole run
        target = os.path.abspath(args.json)
        if os.path.isdir(target) or not os.access(os.path.dirname(target), os.W_OK | os.X_OK) \
                or os.path.exists(target) and not os.access(target, os.W_OK):
            parser.error(f"argument --json: cannot write {args.json!r}")
    global PY_SPY_DIR, PERF_STAT_EVENTS
    PY_SPY_DIR = args.py_spy
    PERF_STAT_EVENTS = args.perf_stat
    if PERF_STAT_EVENTS and not shutil.which("perf"):
        parser.error("--perf-stat needs Linux perf on PATH (Debian: apt install linux-perf)")
    if PY_SPY_DIR and not os.path.exists(_py_spy_exe()):
        parser.error(f"--py-spy needs py-spy beside this Python ({_py_spy_exe()}): "
                     f"{sys.executable} -m pip install py-spy")
    loops = (["asyncio", "uvloop"] if uvloop_available() else ["asyncio"]) if args.loop == "both" else [args.loop]
    names = args.only or list(SCENARIOS)
    meta = {"command": " ".join([os.path.relpath(sys.executable, os.getcwd()), *sys.argv]),
            "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "platform": platform.platform(), "loadavg_start": os.getloadavg(),
            "loops": loops, "scenarios": names}
    print(f"cpus={meta['cpus']} python={meta['python']} loops={','.join(loops)} load processes<={args.processes} "
          f"loadavg={meta['loadavg_start'][0]:.2f}", flush=True)
    rows = []
    for loop in loops:
        ctx = Context(args, loop)
        for name in names:
            ctx.scenario = name
            try:
                rows += SCENARIOS[name][0](ctx)
            finally:
                ctx.close_servers()
    meta["loadavg_end"] = os.getloadavg()
    meta["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    print_table(rows)
    print(f"\nloadavg start {meta['loadavg_start'][0]:.2f}, end {meta['loadavg_end'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
