#!/usr/bin/env python3
"""Server CPU per call of the RPC dispatch path, without sockets: a peek (RemoteQMStartReceive2,
MQ_ACTION_PEEK_CURRENT of a 100-byte message) fed as a PDU to an RpcConnection over a fake transport.

Prints the least process CPU µs per call (time.process_time: preemption by other processes does not count)
over ``--rounds`` batches of ``--calls`` calls, with the RpcServer observer (qm2qm.metrics.RpcMetrics) set and
unset in interleaved batches of the same process; a tree without the hook
(PYTHONPATH=<older checkout>) prints one figure. The least of many short batches is steadier on a machine shared
with other work than calls/s over TCP.

    .venv/bin/python scripts/bench_dispatch.py --metrics on
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

    def write(self, data: bytes) -> None:
        pos = 0
        while pos + 10 <= len(data):
            if data[pos + 3] & 0x02:                    # PFC_LAST_FRAG
                if data[pos + 2] == 2:
                    self.responses += 1
                elif data[pos + 2] == 3:
                    self.faults += 1
            pos += data[pos + 8] | (data[pos + 9] << 8)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 50000) if name == "peername" else default

    def close(self) -> None:
        pass

    abort = close

    def pause_reading(self) -> None:
        pass

    resume_reading = pause_reading


async def measure(calls: int, rounds: int, metrics: bool | None) -> dict[str, float]:
    from qm2qm.admin import Backend
    from qm2qm.app import App
    from qm2qm.config import load_config
    from qm2qm.rpc.server import RpcConnection
    from shared_adm.message import Message

    values = {"data_dir": ":memory:", "port": 0, "admin_port": 0, "epm_port": 0}
    if metrics is not None:
        values["metrics"] = metrics
    app = App(load_config(None, values))
    await app.start()
    conn = None
    try:
        backend = Backend(app.qm, app.service)
        queue = backend.create_queue({"pathname": ".\\private$\\peek"})
        message = Message(body=bytes(range(100)))
        backend.prepare(queue, message)
        backend.enqueue(queue, message)
        handle = backend.open_for_remote_read(queue, "peek", "deny-none").handle
        transport = FakeTransport()
        conn = RpcConnection(app.rpc)
        conn.connection_made(transport)
        return await run_batches(app, conn, transport, handle, calls, rounds)
    finally:
        if conn is not None:
            conn.connection_lost(None)
        await app.close()


async def run_batches(app, conn, transport, handle: int, calls: int, rounds: int) -> dict[str, float]:
    """Bind, open the session, then peek in interleaved batches with the observer off and on."""
    from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT
    conn.data_received(bench.bind_pdu())
    conn.data_received(bench.request_pdu(2, bench.open_queue_stub(handle), call_id=2))
    stub = bench.start_receive2_stub(handle, MQ_ACTION_PEEK_CURRENT)
    observers = {"observer off": None, "observer on": getattr(app.rpc, "observer", None)}
    if observers["observer on"] is None:
        del observers["observer on"]                 # a tree without the hook, or metrics off
    best = {name: float("inf") for name in observers}
    call_id = 3
    answered = 1
    gc.disable()
    order = list(observers.items())
    for round_number in range(rounds):
        # interleaved, in alternating order: the same disturbances (and warm-up) hit both
        for name, observer in (order if round_number % 2 else order[::-1]):
            if "observer on" in observers:
                app.rpc.observer = observer
            batch = [bench.request_pdu(9, stub, call_id=call_id + i) for i in range(calls)]
            call_id += calls
            answered += calls
            started = time.process_time()
            for pdu in batch:
                conn.data_received(pdu)
            while transport.responses < answered:     # calls that ran as tasks
                await asyncio.sleep(0)
            best[name] = min(best[name], (time.process_time() - started) / calls)
        gc.collect()
    gc.enable()
    assert transport.faults == 0, "faults during the benchmark"
    if getattr(app, "metrics", None) is not None:
        observed = sum(op.latency.total for op in app.metrics.operations())
        assert observed == calls * rounds + 1, (observed, calls * rounds)   # + the RemoteQMOpenQueue
    return {name: value * 1e6 for name, value in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--metrics", choices=["on", "off"], help="the serve option (omit for a tree without it)")
    args = parser.parse_args()
    metrics = None if args.metrics is None else args.metrics == "on"
    import qm2qm
    print(f"tree {os.path.dirname(os.path.dirname(os.path.abspath(qm2qm.__file__)))}:", end="  ")
    result = asyncio.run(measure(args.calls, args.rounds, metrics))
    print("  ".join(f"{name} {value:.2f} µs/call" for name, value in result.items()))


if __name__ == "__main__":
    main()
