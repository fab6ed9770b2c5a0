#!/usr/bin/env python3
"""Memory a long-running `qm2qm serve` keeps from work its callers finished: the server's RSS over cycles of sessions.

Starts `qm2qm serve` (the default event loop, a fresh SQLite store, a user file for NTLM, MS-MQRR on) and runs
cycles of what Windows readers and hostile callers do, each cycle leaving the queue as it found it:

  - two sends through the admin API (a day's TimeToBeReceived: each leaves a TTBR timer entry behind);
  - an anonymous reader over NDR64 that NACKs a receive and leaves another un-ACKed when it disconnects (the
    rundown returns the message);
  - qmcomm + qm2qm over NDR64 with NTLM privacy and a remote cursor: peek, peek-next, receive + RR_ACK, close;
  - MS-MQRR over NDR64 with NTLM integrity: peek, receive + RR_ACK, close;
  - qmcomm over NDR64, anonymous: R_QMGetRemoteQueueName (MQ_ERROR_ILLEGAL_OPERATION, MS-MQMP 3.1.4.1) and the
    transaction opnums 15, 17, 18 (refused as a supporting server's);
  - a bind with a wrong NTLM password (refused).

After ``--warm`` cycles it reads the server's VmRSS every ``--every`` cycles and the queue's depth; it prints the
growth in bytes a cycle between the first and the last sample. A benchmark, not a test: a server whose memory grew
with its callers' history shows it as bytes a cycle that do not fall with more cycles. Exits 1 if the server died,
a read failed, or a sample found the queue not empty (a message lost or kept).

    .venv/bin/python scripts/bench_churn.py --cycles 6000 --warm 1000 --every 1000 [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from impacket.dcerpc.v5.rpcrt import DCERPCException  # noqa: E402

from qm2qm.client import AdminClient, RemoteReader  # noqa: E402
from qm2qm.mqmp import idl as mqmp_idl  # noqa: E402
from qm2qm.mqmp.client import QmcommClient, RpcCallError, call  # noqa: E402
from qm2qm.pytest_plugin import start_subprocess, stop_subprocess  # noqa: E402
from proc_cpu import status_kib  # noqa: E402

QUEUE = ".\\private$\\churn"
USER, DOMAIN, PASSWORD = "alice", "QM2QM", "Secret-123"
MQ_ACTION_RECEIVE = 0x00000000
TRANSACTION_OPNUMS = (15, 17, 18)     # R_QMEnlistTransaction, R_QMCommitTransaction, R_QMAbortTransaction
READ_WAIT_MS = 5000                   # a read waits this long for a message a rundown is still returning


def rss_kib(pid: int) -> int:
    kib = status_kib(pid, "VmRSS")
    if kib is None:
        raise RuntimeError(f"no VmRSS for process {pid}")
    return kib


class Churn:
    """One server and the cycle run against it."""

    def __init__(self, base: Path) -> None:
        users = base / "users.txt"
        users.write_text(f"{DOMAIN}:{USER}:{PASSWORD}\n")
        self.server = start_subprocess(base / "data", "--users", str(users), "--mqrr", "--log-level", "error")
        try:
            self.qmcomm_port = int(self.server.info["qmcomm_port"])     # the port `--qmcomm-port 0` bound
            self.admin = AdminClient(self.server.admin_url)
            self.admin.create_queue(QUEUE)
        except BaseException:       # a server this run cannot use is not left running
            stop_subprocess(self.server)
            raise
        self.format_name = "DIRECT=TCP:127.0.0.1\\private$\\churn"
        self.counts = {"cycles": 0, "refused_logons": 0, "refused_calls": 0}

    def reader(self, **options) -> RemoteReader:
        defaults = dict(qmcomm_port=self.qmcomm_port, qm2qm_port=self.server.port, mqrr_port=self.server.port,
                        ndr64=True)
        return RemoteReader("127.0.0.1", self.format_name, **{**defaults, **options})

    def cycle(self, i: int) -> None:
        for k in range(2):
            self.admin.send(QUEUE, body=f"churn {i}.{k} " * 8, time_to_be_received=86400)
        with self.reader() as r:
            if not r.receive(ack=False).ok:         # RR_NACK: the message goes back
                raise RuntimeError(f"cycle {i}: the receive to NACK failed")
            if not r._start(MQ_ACTION_RECEIVE, 0).ok:
                raise RuntimeError(f"cycle {i}: the receive left un-ACKed failed")
        # the disconnect above runs that receive down (its message goes back); the reads below wait for it
        ntlm = dict(user=USER, domain=DOMAIN, password=PASSWORD)
        with self.reader(cursor=True, auth_level=6, **ntlm) as r:
            if not r.peek(READ_WAIT_MS).ok:
                raise RuntimeError(f"cycle {i}: qm2qm peek failed")
            r.peek_next()
            if not r.receive(READ_WAIT_MS).ok:
                raise RuntimeError(f"cycle {i}: qm2qm receive failed")
        with self.reader(protocol="mqrr", **ntlm) as r:
            if not (r.peek(READ_WAIT_MS).ok and r.receive(READ_WAIT_MS).ok):
                raise RuntimeError(f"cycle {i}: MS-MQRR read failed")
        self.refused_qmcomm_calls(i)
        try:
            with self.reader(user=USER, domain=DOMAIN, password="not-" + PASSWORD):
                raise RuntimeError(f"cycle {i}: a wrong password was accepted")
        except RpcCallError:
            self.counts["refused_logons"] += 1
        self.counts["cycles"] += 1

    def refused_qmcomm_calls(self, i: int) -> None:
        with QmcommClient("127.0.0.1", self.qmcomm_port, ndr64=True) as q:
            request = mqmp_idl.R_QMGetRemoteQueueName(isNDR64=True)
            request["pQueue"] = i
            request["lplpRemoteQueueName"] = f"q{i}\x00"
            try:
                call(q.dce, request)
                raise RuntimeError("R_QMGetRemoteQueueName answered; MS-MQMP 3.1.4.1 says it raises")
            except RpcCallError:
                self.counts["refused_calls"] += 1
            for opnum in TRANSACTION_OPNUMS:
                try:
                    q.dce.call(opnum, b"\x00" * 16)
                    q.dce.recv()
                    raise RuntimeError(f"qmcomm opnum {opnum} answered; a supporting server's opnum is refused")
                except DCERPCException:
                    self.counts["refused_calls"] += 1

    def sample(self) -> dict:
        if self.server.process.poll() is not None:
            raise RuntimeError(f"the server exited with {self.server.process.returncode}")
        return {"cycle": self.counts["cycles"], "rss_kib": rss_kib(self.server.process.pid),
                "queued": len(self.admin.list_messages(QUEUE, limit=None))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=6000, help="cycles measured after the warm-up")
    parser.add_argument("--warm", type=int, default=1000, help="cycles before the first sample")
    parser.add_argument("--every", type=int, default=1000, help="cycles between samples")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    for name, least in (("cycles", 1), ("warm", 0), ("every", 1)):
        if getattr(args, name) < least:
            parser.error(f"--{name} must be at least {least}, got {getattr(args, name)}")
    churn = Churn(Path(tempfile.mkdtemp(prefix="bench_churn")))
    started, failure = time.perf_counter(), None
    samples: list[dict] = []
    try:
        for i in range(args.warm):
            churn.cycle(i)
        samples.append(churn.sample())
        print(f"after {args.warm} warm-up cycles: RSS {samples[0]['rss_kib']} KiB, {samples[0]['queued']} queued",
              flush=True)
        for i in range(args.warm, args.warm + args.cycles):
            churn.cycle(i)
            done = i + 1 - args.warm
            if done % args.every == 0 or done == args.cycles:
                samples.append(churn.sample())
                print(f"after {i + 1} cycles ({time.perf_counter() - started:.0f} s): RSS {samples[-1]['rss_kib']} "
                      f"KiB, {samples[-1]['queued']} queued", flush=True)
    except (RuntimeError, RpcCallError, OSError) as exc:
        failure = str(exc)
    finally:
        code, err = stop_subprocess(churn.server)
    result = {"samples": samples, "counts": churn.counts, "server_exit": code, "failure": failure}
    if len(samples) >= 2:
        first, last = samples[0], samples[-1]
        result["bytes_per_cycle"] = (last["rss_kib"] - first["rss_kib"]) * 1024 / (last["cycle"] - first["cycle"])
        print(f"RSS growth {result['bytes_per_cycle']:.1f} bytes a cycle over {last['cycle'] - first['cycle']} "
              f"cycles; {churn.counts}")
    kept = [s for s in samples if s["queued"]]
    if kept:
        failure = failure or f"{kept[0]['queued']} message(s) queued after cycle {kept[0]['cycle']}: lost or kept"
        result["failure"] = failure
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if failure:
        print(f"bench_churn: {failure}; server stderr: {err[-2000:]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
