"""Pipeline benchmarks: trace overhead on server throughput, and the Spark ingest rate (calls/s, MB/s of pcap)
at local[1] and local[2].

    .venv/bin/python scripts/bench_pipeline.py [--calls-per-file 20000] [--files 4] [--seconds 4] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qm2qm.mqqp import codec  # noqa: E402
from qm2qm.mqqp.constants import QM2QM_UUID, QM2QM_VERSION  # noqa: E402
from qm2qm.rpc.interface import NDR20  # noqa: E402


# ------------------------------------------------------------------------------------------- trace overhead

def _server(trace_path: str | None, ready, port_box, stop_evt) -> None:
    """A qm2qm App (:memory:) in this process, optionally traced, until stop_evt is set."""
    from qm2qm.app import App
    from qm2qm.client import AdminClient
    from qm2qm.config import ServerConfig
    from qm2qm.pipeline.trace import trace_interface

    tracers = []

    class _App(App):
        async def _bind_rpc(self, server_cls, interface):
            if trace_path:
                interface, tracer = trace_interface(interface, trace_path, self.qm)
                tracers.append(tracer)
            return await super()._bind_rpc(server_cls, interface)

    async def main():
        app = _App(ServerConfig(data_dir=":memory:", port=0, admin_port=0, computer_name="bench"))
        await app.start()
        admin = AdminClient(app.admin_url)

        def setup():
            admin.create_queue("private$\\bench")
            admin.send("private$\\bench", label="bench", body="x" * 200)
            return admin.open_queue("private$\\bench", access="peek")["hRemoteQueue"]

        handle = await asyncio.to_thread(setup)
        port_box.put((app.rpc.port, handle))
        cpu0 = time.process_time()
        ready.set()
        while not stop_evt.is_set():
            await asyncio.sleep(0.05)
        cpu = time.process_time() - cpu0
        await app.close()
        t0 = time.perf_counter()
        rows = 0
        for tracer in tracers:
            tracer.close()
            import pyarrow.parquet as pq
            rows += pq.ParquetFile(trace_path).metadata.num_rows
        port_box.put((cpu, time.perf_counter() - t0, rows))

    asyncio.run(main())


def _client(port: int, handle: int, seconds: float, connections: int, out) -> None:
    """Closed-loop load: `connections` connections, each one call in flight, a mix of opnums 7, 8 and 9 (peek)."""
    from qm2qm.pipeline.rpc_client import RpcClient

    peek = codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(codec.REMOTEREADDESC(
        hRemoteQueue=handle, dwQueue=handle, ulAction=0x80000000, dwRequestID=1), 0)), False)
    mix = [(8, b""), (7, b"\x00\x00\x00\x00"), (9, peek)]

    async def one() -> int:
        client = RpcClient("127.0.0.1", port)
        await client.connect((QM2QM_UUID, *QM2QM_VERSION), (NDR20[0], NDR20[1], 0))
        done = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            opnum, stub = mix[done % 3]
            kind, _ = await client.call(opnum, stub)
            assert kind == "ok"
            done += 1
        await client.close()
        return done

    async def main():
        return sum(await asyncio.gather(*(one() for _ in range(connections))))

    out.put(asyncio.run(main()))


def throughput(trace_path: str | None, seconds: float, connections: int) -> tuple[float, float, float]:
    """(calls/s, server CPU µs per call, seconds to close the tracer) of one server process under a client
    process. CPU per call is robust to other load on the machine; calls/s is not."""
    ctx = multiprocessing.get_context("spawn")
    ready, stop_evt, port_box, out = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=_server, args=(trace_path, ready, port_box, stop_evt))
    server.start()
    ready.wait(60)
    port, handle = port_box.get(timeout=60)
    client = ctx.Process(target=_client, args=(port, handle, seconds, connections, out))
    client.start()
    calls = out.get(timeout=seconds + 120)
    client.join()
    stop_evt.set()
    cpu, close_s, rows = port_box.get(timeout=120)
    server.join(60)
    if trace_path and rows != calls:
        raise SystemExit(f"the trace holds {rows} calls, the client made {calls}")
    return calls / seconds, cpu * 1e6 / calls, close_s


def bench_trace(seconds: float, rounds: int, connections: int) -> dict:
    plain, traced = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            plain.append(throughput(None, seconds, connections))
            traced.append(throughput(str(Path(tmp) / f"t{i}.parquet"), seconds, connections))
    p, t = statistics.median(r[0] for r in plain), statistics.median(r[0] for r in traced)
    pc, tc = statistics.median(r[1] for r in plain), statistics.median(r[1] for r in traced)
    return {"untraced_calls_per_s": round(p), "traced_calls_per_s": round(t),
            "overhead_pct": round(100 * (p - t) / p, 1), "untraced_cpu_us": round(pc, 1),
            "traced_cpu_us": round(tc, 1), "cpu_overhead_pct": round(100 * (tc - pc) / pc, 1),
            "close_s": round(statistics.median(r[2] for r in traced), 2), "rounds": rounds, "seconds": seconds,
            "connections": connections, "all_untraced": [round(x[0]) for x in plain],
            "all_traced": [round(x[0]) for x in traced]}


# --------------------------------------------------------------------------------------------- ingest rate

def make_capture(path: Path, calls: int, sessions: int = 20) -> None:
    """A synthetic ncacn_ip_tcp capture of `calls` qm2qm calls (opnums 2, 9 with a message, 1, 3, 7, 8) over
    `sessions` connections, 1460-byte segments, written with dpkt."""
    from qm2qm.pipeline.recorder import PcapSink
    from qm2qm.rpc.events import ContextItem
    from qm2qm.rpc.pdu import append_response, build_bind, build_bind_ack, fragment_request
    from shared_adm.message import Message
    from shared_adm.packet import serialize_message_to_buffer

    buffer = serialize_message_to_buffer(Message(label="bench", body=b"x" * 300,
                                                 destination_queue_format_name="DIRECT=OS:bench\\private$\\q"))
    ctx = bytes(4) + bytes(range(16))
    desc = codec.REMOTEREADDESC(hRemoteQueue=7, dwQueue=7, ulAction=0, dwRequestID=1)
    out_desc = codec.REMOTEREADDESC(hRemoteQueue=7, dwQueue=7, ulAction=0, dwRequestID=1, dwSize=len(buffer),
                                    Reserved=1, dwArriveTime=1, lpBuffer=buffer)
    ops = [
        (2, codec.encode_request(2, codec.RemoteQMOpenQueueRequest(__import__("uuid").UUID(int=5), 0, 7, 7, 7), False),
         codec.encode_response(2, codec.RemoteQMOpenQueueResponse(ctx, 0), False)),
        (9, codec.encode_request(9, codec.RemoteQMStartReceive2Request(codec.REMOTEREADDESC2(desc, 0)), False),
         codec.encode_response(9, codec.RemoteQMStartReceive2Response(ctx, codec.REMOTEREADDESC2(out_desc, 3), 0),
                               False)),
        (1, codec.encode_request(1, codec.RemoteQMEndReceiveRequest(ctx, 2), False),
         codec.encode_response(1, codec.RemoteQMEndReceiveResponse(bytes(20), 0), False)),
        (7, b"\x00\x00\x00\x00", b"\x37\x08\x00\x00"),
        (8, b"", codec.encode_response(8, codec.RemoteQmGetVersionResponse(6, 1, 20348), False)),
        (3, codec.encode_request(3, codec.RemoteQMCloseQueueRequest(ctx), False),
         codec.encode_response(3, codec.RemoteQMCloseQueueResponse(bytes(20), 0), False)),
    ]
    sink = PcapSink(path)
    per_session = calls // sessions
    abstract = (QM2QM_UUID, *QM2QM_VERSION)
    for s in range(sessions):
        client, server = ("10.1.0.1", 40000 + s), ("10.1.0.2", 2105)
        seq = {client: 1000, server: 5000}
        sink.segment(client, server, 999, 0, 0x02)
        sink.segment(server, client, 4999, 1000, 0x12)

        def send(a, b, data):
            seq[a] = sink.data(a, b, seq[a], seq[b], data)

        send(client, server, build_bind(1, [ContextItem(0, abstract, ((NDR20[0], NDR20[1], 0),))]))
        send(server, client, build_bind_ack(1, alter_context=False, max_xmit_frag=5840, max_recv_frag=5840,
                                            assoc_group_id=s + 1, secondary_address="2105",
                                            results=[(0, 0, (NDR20[0], NDR20[1], 0))]))
        for i in range(per_session):
            opnum, req, resp = ops[i % len(ops)]
            send(client, server, b"".join(fragment_request(i + 2, 0, opnum, req, 5840)))
            answer = bytearray()
            append_response(answer, i + 2, 0, resp, 5840)
            send(server, client, bytes(answer))
    sink.close()


def bench_ingest(calls_per_file: int, files: int, masters: list[str]) -> dict:
    from qm2qm.pipeline import spark_jobs

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(files):
            path = Path(tmp) / f"cap{i}.pcap"
            make_capture(path, calls_per_file)
            paths.append(str(path))
        megabytes = sum(Path(p).stat().st_size for p in paths) / 1e6
        for master in masters:
            spark = spark_jobs.spark_session(master)
            spark_jobs.ingest(spark, paths[:1], Path(tmp) / "warmup")          # JVM and worker warm-up
            t0 = time.perf_counter()
            out = Path(tmp) / ("out-" + "".join(ch for ch in master if ch.isalnum()))    # no [] in Spark paths
            summary = spark_jobs.ingest(spark, paths, out)
            elapsed = time.perf_counter() - t0
            spark.stop()
            calls = summary["totals"]["calls"]
            results[master] = {"calls": calls, "seconds": round(elapsed, 2), "calls_per_s": round(calls / elapsed),
                               "mb_per_s": round(megabytes / elapsed, 2), "pcap_mb": round(megabytes, 1)}
        from qm2qm.pipeline.ingest import ingest_file
        t0 = time.perf_counter()
        one = ingest_file(paths[0])
        elapsed = time.perf_counter() - t0
        results["in-process, 1 file, no Spark"] = {
            "calls": len(one.calls), "seconds": round(elapsed, 2), "calls_per_s": round(len(one.calls) / elapsed),
            "mb_per_s": round(Path(paths[0]).stat().st_size / 1e6 / elapsed, 2)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="load duration per throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="untraced/traced pairs (median reported)")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--calls-per-file", type=int, default=20000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--skip-trace", action="store_true")
    parser.add_argument("--skip-ingest", action="store_true")
    args = parser.parse_args()
    if not args.skip_trace:
        r = bench_trace(args.seconds, args.rounds, args.connections)
        print(f"trace overhead (server CPU per call, robust to machine load): untraced {r['untraced_cpu_us']} µs, "
              f"traced {r['traced_cpu_us']} µs -> {r['cpu_overhead_pct']}%")
        print(f"trace overhead (throughput): untraced {r['untraced_calls_per_s']} calls/s, traced (Parquet) "
              f"{r['traced_calls_per_s']} calls/s -> {r['overhead_pct']}% "
              f"(median of {r['rounds']} x {r['seconds']} s, {r['connections']} connections; "
              f"runs {r['all_untraced']} vs {r['all_traced']}); decoding the spool at close: {r['close_s']} s")
    if not args.skip_ingest:
        for master, r in bench_ingest(args.calls_per_file, args.files, ["local[1]", "local[2]"]).items():
            print(f"ingest {master}: {r['calls']} calls in {r['seconds']} s -> {r['calls_per_s']} calls/s, "
                  f"{r['mb_per_s']} MB/s of pcap")


if __name__ == "__main__":
    main()
