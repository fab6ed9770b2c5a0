#!/usr/bin/env python3
"""Server CPU per call of the RPC dispatch path, without sockets: RemoteQMStartReceive2 calls fed as PDUs to an
RpcConnection over a fake transport. ``--scenario`` picks the call: peek-memo (MQ_ACTION_PEEK_CURRENT of one
100-byte message: the packet memo always hits), peek-next (a cursor walking PEEK_NEXT through distinct 100-byte
messages: every call serializes a packet), lookup (RemoteQMStartReceiveByLookupId, MQ_LOOKUP_PEEK_CURRENT of one
100-byte message: opnum 10, the memo hits), peek-queues (MQ_ACTION_PEEK_CURRENT round-robin over ``--queues``
queues of one distinct 100-byte message each: more than the packet memo holds, so every call serializes a packet),
receive-ack (MQ_ACTION_RECEIVE of a 1 KiB express message, then
RemoteQMEndReceive(RR_ACK) of its context handle: two calls per message, CPU reported per call),
receive-ack-recoverable (the same with recoverable messages: each ACK waits for the group commit of its delete) or
mqrr-receive-ack (MS-MQRR R_StartReceive(MQ_ACTION_RECEIVE) + R_EndReceive(RR_ACK) of 1 KiB express messages on
an R_OpenQueue handle: the same read over the other wire form).
``--loop uvloop`` runs it on uvloop.

Prints the least process CPU µs per call (time.process_time: preemption by other processes does not count)
over ``--rounds`` batches of ``--calls`` calls, with the RpcServer observer (qm2qm.metrics.RpcMetrics) set and
unset in interleaved batches of the same process; a tree without the hook
(PYTHONPATH=<older checkout>) prints one figure. The least of many short batches is steadier on a machine shared
with other work than calls/s over TCP.

    .venv/bin/python scripts/bench_dispatch.py --metrics on
    .venv/bin/python scripts/bench_dispatch.py --scenario receive-ack --profile /tmp/receive.prof
    PYTHONPATH=/tmp/baseline .venv/bin/python scripts/bench_dispatch.py
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (PDU builders)

# bench puts this checkout first on sys.path; the tree under test is the one PYTHONPATH (or the install) names.
while bench.ROOT in sys.path:
    sys.path.remove(bench.ROOT)


class FakeTransport:
    """Collects what the connection writes; counts response PDUs (ptype 2) and faults (ptype 3)."""

    def __init__(self) -> None:
        self.responses = 0
        self.faults = 0
        self.last_stub = b""                            # stub of the last single-fragment response

    def write(self, data: bytes) -> None:
        pos = 0
        while pos + 10 <= len(data):
            if data[pos + 3] & 0x02:                    # PFC_LAST_FRAG
                if data[pos + 2] == 2:
                    self.responses += 1
                    self.last_stub = bytes(data[pos + 24:pos + (data[pos + 8] | (data[pos + 9] << 8))])
                elif data[pos + 2] == 3:
                    self.faults += 1
            pos += data[pos + 8] | (data[pos + 9] << 8)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 50000) if name == "peername" else default

    def writelines(self, chunks) -> None:
        self.write(b"".join(chunks))

    def close(self) -> None:
        pass

    abort = close

    def pause_reading(self) -> None:
        pass

    resume_reading = pause_reading


SCENARIOS = ("peek-memo", "peek-next", "lookup", "peek-queues", "receive-ack", "receive-ack-recoverable",
             "mqrr-receive-ack")
PROFILER = None         # --profile: a cProfile.Profile enabled over the measured batches only


async def measure(calls: int, rounds: int, metrics: bool | None, scenario: str = "peek-memo",
                  clients: int = 1, queues: int = 512) -> dict[str, float]:
    from qm2qm.admin import Backend
    from qm2qm.app import App
    from qm2qm.config import load_config
    from qm2qm.rpc.server import RpcConnection
    from shared_adm.message import Message
    from shared_adm.message import DeliveryGuarantee

    import tempfile
    # the SQLite store of `qm2qm serve` (the volatile :memory: store makes every ACK wait a loop turn)
    data_dir = tempfile.TemporaryDirectory(prefix="bench_dispatch_")
    values = {"data_dir": data_dir.name, "port": 0, "admin_port": 0, "epm_port": 0}
    if scenario.startswith("mqrr"):
        values.update(mqrr=True, allow_anonymous_read=True)
    if metrics is not None:
        values["metrics"] = metrics
    app = App(load_config(None, values))
    await app.start()
    conn = None
    try:
        backend = Backend(app.qm, app.service)
        if scenario == "peek-queues":
            handles = []
            for i in range(queues):
                queue = backend.create_queue({"pathname": f".\\private$\\many{i}"})
                message = Message(body=i.to_bytes(4, "little") * 25)
                backend.prepare(queue, message)
                backend.enqueue(queue, message)
                handles.append(backend.open_for_remote_read(queue, "peek", "deny-none").handle)
            transport = FakeTransport()
            conn = RpcConnection(app.rpc)
            conn.connection_made(transport)
            return await run_round_robin(app, conn, transport, handles, calls, rounds)
        queue = backend.create_queue({"pathname": ".\\private$\\peek"})
        observers = 2 if getattr(app.rpc, "observer", None) is not None else 1
        count = 1 if scenario in ("peek-memo", "lookup") else calls * rounds * observers + 1 + clients
        receiving = "receive-ack" in scenario
        delivery = DeliveryGuarantee.RECOVERABLE if scenario == "receive-ack-recoverable" else DeliveryGuarantee.EXPRESS
        for i in range(count):      # distinct messages: each its own identifier, hence its own packet
            message = Message(body=bytes(1024) if receiving else bytes(range(100)), label=f"m{i}",
                              delivery_guarantee=delivery)
            backend.prepare(queue, message)
            backend.enqueue(queue, message)
        access = "receive" if receiving else "peek"
        handle = backend.open_for_remote_read(queue, access, "deny-none").handle
        cursor = backend.open_cursor(backend.find_descriptor(handle)) if scenario == "peek-next" else 0
        if clients > 1:
            return await run_clients(app, handle, calls, rounds, clients)
        transport = FakeTransport()
        conn = RpcConnection(app.rpc)
        conn.connection_made(transport)
        if scenario.startswith("mqrr"):
            return await run_mqrr_batches(app, conn, transport, calls, rounds)
        return await run_batches(app, conn, transport, handle, calls, rounds, scenario, cursor,
                                 lookup_id=message.lookup_identifier)
    finally:
        if conn is not None:
            conn.connection_lost(None)
        await app.close()
        data_dir.cleanup()


async def interleaved(app, rounds: int, calls: int, make_batch) -> dict[str, float]:
    """The least CPU µs per call of the batches ``make_batch(call_id)()`` (each ``calls`` calls; built untimed, run
    timed) over ``rounds``, with the RpcServer observer unset and set in interleaved batches, in alternating order:
    the same disturbances (and warm-up) hit both."""
    observers = {"observer off": None, "observer on": getattr(app.rpc, "observer", None)}
    if observers["observer on"] is None:
        del observers["observer on"]                 # a tree without the hook, or metrics off
    best = {name: float("inf") for name in observers}
    order = list(observers.items())
    call_id = 4
    gc.disable()
    for round_number in range(rounds):
        for name, observer in (order if round_number % 2 else order[::-1]):
            if "observer on" in observers:
                app.rpc.observer = observer
            batch = make_batch(call_id)
            if PROFILER is not None:
                PROFILER.enable()
            started = time.process_time()
            await batch()
            best[name] = min(best[name], (time.process_time() - started) / calls)
            if PROFILER is not None:
                PROFILER.disable()
            call_id += calls
        gc.collect()
    gc.enable()
    return best


async def run_batches(app, conn, transport, handle: int, calls: int, rounds: int, scenario: str = "peek-memo",
                      cursor: int = 0, lookup_id: int = 0) -> dict[str, float]:
    """Bind, open the session, then call in interleaved batches with the observer off and on."""
    from qm2qm.mqqp.constants import (MQ_ACTION_PEEK_CURRENT, MQ_ACTION_PEEK_NEXT, MQ_ACTION_RECEIVE,
                                      MQ_LOOKUP_PEEK_CURRENT)
    opnum = 10 if scenario == "lookup" else 9
    conn.data_received(bench.bind_pdu())
    conn.data_received(bench.request_pdu(2, bench.open_queue_stub(handle), call_id=2))
    if scenario == "peek-next":
        conn.data_received(bench.request_pdu(9, bench._peek_stub(handle, MQ_ACTION_PEEK_CURRENT, cursor), call_id=3))
        stub = bench._peek_stub(handle, MQ_ACTION_PEEK_NEXT, cursor)
    elif scenario.startswith("receive-ack"):
        stub = bench.start_receive2_stub(handle, MQ_ACTION_RECEIVE)
    elif scenario == "lookup":
        stub = bench._lookup_stub(handle, lookup_id, MQ_LOOKUP_PEEK_CURRENT)
    else:
        stub = bench.start_receive2_stub(handle, MQ_ACTION_PEEK_CURRENT)
    while transport.responses < 1 + (scenario == "peek-next"):
        await asyncio.sleep(0)

    def make_batch(call_id: int):
        if scenario.startswith("receive-ack"):
            return lambda: receive_ack(conn, transport, stub, call_id, calls)
        return feed([bench.request_pdu(opnum, stub, call_id=call_id + i) for i in range(calls)], conn, transport)

    best = await interleaved(app, rounds, calls, make_batch)
    check_answers(transport)
    if getattr(app, "metrics", None) is not None:
        observed = sum(op.latency.total for op in app.metrics.operations())
        setup = 1 + (scenario == "peek-next")      # the RemoteQMOpenQueue (and the cursor's first PEEK_CURRENT)
        assert observed == calls * rounds + setup, (observed, calls * rounds)
    return {name: value * 1e6 for name, value in best.items()}


async def run_round_robin(app, conn, transport, handles: list[int], calls: int, rounds: int) -> dict[str, float]:
    """Bind, open a session per handle, then PEEK_CURRENT each handle in turn in interleaved batches."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    conn.data_received(bench.bind_pdu())
    for n, handle in enumerate(handles):
        conn.data_received(bench.request_pdu(2, bench.open_queue_stub(handle), call_id=2 + n))
    while transport.responses < len(handles):
        await asyncio.sleep(0)
    stubs = [bench.start_receive2_stub(handle, MQ_ACTION_PEEK_CURRENT) for handle in handles]

    def make_batch(call_id: int):
        return feed([bench.request_pdu(9, stubs[(call_id + i) % len(stubs)], call_id=call_id + i)
                     for i in range(calls)], conn, transport)

    best = await interleaved(app, rounds, calls, make_batch)
    check_answers(transport)
    return {name: value * 1e6 for name, value in best.items()}


def feed(batch: list[bytes], conn, transport):
    """A batch (built untimed) as the coroutine function that feeds its PDUs and waits for every answer."""
    async def run() -> None:
        target = transport.responses + len(batch)
        for pdu in batch:
            conn.data_received(pdu)
        while transport.responses < target:       # calls that ran as tasks
            await asyncio.sleep(0)
    return run


def check_answers(transport) -> None:
    """No call faulted, and the last one answered MQ_OK."""
    assert transport.faults == 0, "faults during the benchmark"
    assert bench.hresult(transport.last_stub) == 0, f"the last call answered 0x{bench.hresult(transport.last_stub):08x}"


async def run_mqrr_batches(app, conn, transport, calls: int, rounds: int) -> dict[str, float]:
    """MS-MQRR: bind RemoteRead, R_OpenQueue the queue by its direct format name, then R_StartReceive(RECEIVE) +
    R_EndReceive(RR_ACK) in interleaved batches with the observer off and on (MS-MQRR 3.1.4.2, 3.1.4.7, 3.1.4.9)."""
    import struct
    import uuid
    from qm2qm.mqrr import idl
    from qm2qm.mqrr.queue_format import queue_format
    conn.data_received(bench.bind_pdu(interface=bench.MQRR))
    request = idl.R_OpenQueue()
    request["pQueueFormat"] = queue_format("DIRECT=OS:localhost\\private$\\peek")
    request["dwAccess"], request["dwShareMode"], request["pClientId"] = 1, 0, uuid.uuid4().bytes_le
    conn.data_received(bench.request_pdu(2, request.getData(), call_id=2))
    handle = transport.last_stub[:20]
    receive = idl.R_StartReceive()
    receive["phContext"], receive["ulAction"], receive["dwRequestId"] = handle, 0, 1
    receive["dwMaxBodySize"] = receive["dwMaxCompoundMessageSize"] = 0xFFFFFFFF
    start, end = receive.getData(), handle + struct.pack("<II", 2, 1)

    def make_batch(call_id: int):
        async def run() -> None:
            for i in range(0, calls, 2):
                answered = transport.responses + 2
                conn.data_received(bench.request_pdu(7, start, call_id=call_id + i))
                conn.data_received(bench.request_pdu(9, end, call_id=call_id + i + 1))
                while transport.responses < answered:
                    await asyncio.sleep(0)
                if bench.hresult(transport.last_stub) != 0:
                    raise SystemExit(f"R_EndReceive answered 0x{bench.hresult(transport.last_stub):08x}")
        return run

    best = await interleaved(app, rounds, calls, make_batch)
    assert transport.faults == 0, "faults during the benchmark"
    return {name: value * 1e6 for name, value in best.items()}


class ClientTransport(FakeTransport):
    """A closed-loop receive + ACK client: each response's next request arrives on a later loop iteration (as
    bytes from a socket would), so several clients' ACKs meet in one group commit."""

    def __init__(self, loop, conn_holder: list, stub: bytes, budget: list) -> None:
        super().__init__()
        self.loop, self.holder, self.stub, self.budget = loop, conn_holder, stub, budget
        self.call_id = 10
        self.acking = False
        self.done = loop.create_future()

    def write(self, data: bytes) -> None:
        before = self.responses
        super().write(data)
        if self.responses > before and self.budget[0] is not None:
            self.loop.call_soon(self.next)

    def next(self) -> None:
        if self.budget[0] <= 0:
            if not self.done.done():
                self.done.set_result(None)
            return
        self.budget[0] -= 1
        self.call_id += 1
        if self.acking:
            pdu = bench.request_pdu(1, bench.end_receive_stub(self.last_stub[:20]), call_id=self.call_id)
        else:
            pdu = bench.request_pdu(9, self.stub, call_id=self.call_id)
        self.acking = not self.acking
        self.holder[0].data_received(pdu)


async def run_clients(app, handle: int, calls: int, rounds: int, clients: int) -> dict[str, float]:
    """``clients`` connections, each RECEIVE then RR_ACK in a closed loop: the least CPU per call over rounds."""
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    from qm2qm.rpc.server import RpcConnection
    loop = asyncio.get_running_loop()
    stub = bench.start_receive2_stub(handle, MQ_ACTION_RECEIVE)
    budget = [None]
    transports = []
    for _ in range(clients):
        holder = [None]
        transport = ClientTransport(loop, holder, stub, budget)
        conn = RpcConnection(app.rpc)
        holder[0] = conn
        conn.connection_made(transport)
        conn.data_received(bench.bind_pdu())
        conn.data_received(bench.request_pdu(2, bench.open_queue_stub(handle), call_id=2))
        transports.append(transport)
    best = float("inf")
    gc.disable()
    try:
        for _ in range(rounds):
            budget[0] = calls - calls % 2
            for transport in transports:
                transport.done = loop.create_future()
                transport.acking = False
            if PROFILER is not None:
                PROFILER.enable()
            started = time.process_time()
            for transport in transports:
                transport.next()
            await asyncio.gather(*(t.done for t in transports))
            best = min(best, (time.process_time() - started) / calls)
            if PROFILER is not None:
                PROFILER.disable()
            budget[0] = None
            await asyncio.sleep(0.01)   # the last ACKs' answers
            gc.collect()
    finally:
        gc.enable()
        for transport in transports:
            transport.holder[0].connection_lost(None)
    assert sum(t.faults for t in transports) == 0, "faults during the benchmark"
    return {f"{clients} clients": best * 1e6}


async def receive_ack(conn, transport, stub: bytes, call_id: int, calls: int) -> None:
    """``calls`` calls: RECEIVE, then RR_ACK of the context handle it answered (MS-MQQP 3.1.4.2), and so on."""
    for i in range(0, calls, 2):
        answered = transport.responses + 1
        conn.data_received(bench.request_pdu(9, stub, call_id=call_id + i))
        while transport.responses < answered:
            await asyncio.sleep(0)
        reply = transport.last_stub
        if bench.hresult(reply) != 0:
            raise SystemExit(f"RECEIVE answered 0x{bench.hresult(reply):08x}")
        conn.data_received(bench.request_pdu(1, bench.end_receive_stub(reply[:20]), call_id=call_id + i + 1))
        while transport.responses < answered + 1:
            await asyncio.sleep(0)
        if bench.hresult(transport.last_stub) != 0:
            raise SystemExit(f"RR_ACK answered 0x{bench.hresult(transport.last_stub):08x}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--metrics", choices=["on", "off"], help="the serve option (omit for a tree without it)")
    parser.add_argument("--scenario", choices=SCENARIOS, default="peek-memo")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--clients", type=int, default=1, help="receive-ack*: closed-loop connections")
    parser.add_argument("--queues", type=int, default=512, help="peek-queues: queues of one message each")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the whole run into FILE and print its top")
    args = parser.parse_args()
    if args.calls % 2:
        parser.error("--calls must be even (receive-ack is two calls per message)")
    if args.clients > 1 and not args.scenario.startswith("receive-ack"):
        parser.error(f"--clients {args.clients} drives receive-ack and receive-ack-recoverable only, "
                     f"not {args.scenario}")
    metrics = None if args.metrics is None else args.metrics == "on"
    import qm2qm
    print(f"tree {os.path.dirname(os.path.dirname(os.path.abspath(qm2qm.__file__)))} {args.scenario}:", end="  ")
    run = measure(args.calls, args.rounds, metrics, args.scenario, args.clients, args.queues)
    if args.profile:
        import cProfile
        import pstats
        global PROFILER
        PROFILER = cProfile.Profile()
    if args.loop == "uvloop":
        import uvloop
        result = uvloop.run(run)
    else:
        result = asyncio.run(run)
    if args.profile:
        PROFILER.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(40)
    print("  ".join(f"{name} {value:.2f} µs/call" for name, value in result.items()))


if __name__ == "__main__":
    main()
