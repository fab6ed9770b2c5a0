"""Check: mutational conversation fuzz with a health check after every batch (issue 14 item 1, first bullet)."""
from __future__ import annotations

import asyncio
import random
import time
import uuid

from impacket.dcerpc.v5 import mgmt

from soak import fuzz, seeds, wire
from soak.admin import Admin
from soak.harness import LogWatch, Run, wait_until

QUEUE = r".\private$\soak-fuzz"
CONCURRENCY = 12
RSS_GROWTH_LIMIT_KIB = 64 * 1024


def hosted_interfaces(host: str, port: int) -> set[tuple[str, int, int]]:
    """What the server says it hosts on one listener: rpc_mgmt_inq_if_ids (MS-RPCE 2.2.1.3.1)."""
    c = wire.RawClient(host, port)
    try:
        c.bind(seeds.SEED_TABLE[1].syntax)
        ptype, stub = c.call(0, b"")
    finally:
        c.close()
    resp = mgmt.inq_if_idsResponse(stub + b"\x00" * 4)
    out = set()
    for item in resp["if_id_vector"]["if_id"]:
        i = item["Data"] if "Data" in item.fields else item
        out.add((str(uuid.UUID(bytes_le=bytes(i["Uuid"]))), i["VersMajor"], i["VersMinor"]))
    return out


def fill_queue(admin: Admin, target: int = 300) -> None:
    status, q = admin.json("GET", f"/v1/queues/{Admin.q(QUEUE)}")
    have = q.get("messages", 0) if status == 200 else 0
    if have < target:
        admin.ok("POST", f"/v1/queues/{Admin.q(QUEUE)}/messages",
                 {"body": "soak", "count": target - have, "delivery": "recoverable"})


def leftovers(admin: Admin) -> tuple[int, int, int]:
    """(open remote-read handles, pending/awaiting reads + waiting reads, Locked messages) via the admin API."""
    handles = len(admin.ok("GET", "/v1/handles")["handles"])
    reads = admin.ok("GET", "/v1/reads")
    locked = 0
    for q in admin.ok("GET", "/v1/queues")["queues"]:
        if q.get("type") not in ("Private", "Public"):
            continue
        msgs = admin.messages(q["pathname"])
        locked += sum(1 for m in msgs if m["state"] == "Locked")
    return handles, len(reads["reads"]) + len(reads["waiting"]), locked


def port_for(server, conv: fuzz.Conversation) -> int:
    """The listener that serves the conversation's interface: qmcomm/qmcomm2 their own, the rest --port."""
    return server.port_of(seeds.by_name()[conv.interface].listener)


def format_name_of(admin: Admin, pathname: str) -> str:
    """The queue's format name (the R_QMOpenRemoteQueue / R_OpenQueue a stateful conversation starts with)."""
    return admin.ok("GET", f"/v1/queues/{Admin.q(pathname)}")["format_name"]


def admin_handle(admin: Admin, conv: fuzz.Conversation, pathname: str) -> int:
    """An admin-opened hRemoteQueue for a stateful conversation whose open needs one (qm2qm), else 0."""
    opener = seeds.by_name()[conv.interface].opener
    if conv.stateful and opener is not None and opener.needs_admin_handle:
        return admin.ok("POST", f"/v1/queues/{Admin.q(pathname)}/open", {})["hRemoteQueue"]
    return 0


async def _batch(server, convs: list[fuzz.Conversation], handles: list[int], format_name: str) -> tuple[int, int]:
    """(reply PDUs, cases the server provably consumed: bursts whose sentinel was answered, and their tail)."""
    sem = asyncio.Semaphore(CONCURRENCY)
    replies = consumed = 0

    async def one(conv: fuzz.Conversation, handle: int) -> None:
        nonlocal replies, consumed
        async with sem:
            try:
                out = await fuzz.run_conversation(server.host, port_for(server, conv), conv, handle=handle,
                                                  format_name=format_name)
            except (OSError, asyncio.TimeoutError):
                return
            replies += out.replies
            consumed += len(conv.pdus) if out.consumed else 0
    await asyncio.gather(*(one(c, h) for c, h in zip(convs, handles)))
    return replies, consumed


def run(r: Run) -> None:
    server = r.server("fuzz").start()
    watch = LogWatch(server)
    admin = Admin(server.admin)
    try:
        _run(r, server, watch, admin)
    finally:
        admin.close()
        server.stop()


def _run(r: Run, server, watch: LogWatch, admin: Admin) -> None:
    b = r.budget
    admin.ok("POST", "/v1/queues", {"pathname": QUEUE})
    fill_queue(admin)
    format_name = format_name_of(admin, QUEUE)
    hosted = hosted_interfaces(server.host, server.port) | hosted_interfaces(server.host, server.qmcomm_port)
    table = seeds.by_syntax()
    missing = sorted(f"{u} v{ma}.{mi}" for (u, ma, mi) in hosted if (u, ma, mi) not in table)
    entries = [table[k] for k in sorted(hosted) if k in table]
    r.report.check("fuzz seed table covers every hosted interface", not missing,
                   f"hosted {', '.join(e.name for e in entries)}"
                   + (f"; no seeds for {', '.join(missing)}" if missing else ""))
    gen = fuzz.Generator(fuzz.SeedBank(entries), random.Random(r.seed))
    cases = batches = conversations = replies = crashes = consumed = 0
    per_interface: dict[str, int] = {}
    health_failures: list[str] = []
    problems: list[str] = []
    saved = []
    worst = 0.0
    rss_first = rss_peak = 0
    start = time.monotonic()
    while consumed < b.fuzz_cases and time.monotonic() - start < b.fuzz_seconds:
        convs = [gen.conversation() for _ in range(b.batch_conversations)]
        handles = [admin_handle(admin, c, QUEUE) for c in convs]
        got, took = asyncio.run(_batch(server, convs, handles, format_name))
        replies += got
        consumed += took
        batches += 1
        conversations += len(convs)
        for c in convs:
            per_interface[c.interface] = per_interface.get(c.interface, 0) + 1
        cases += sum(len(c.pdus) for c in convs)
        bad = _health(server, watch)
        if bad:
            problems.append(bad)
            crashes += not server.alive()
            saved += _bisect(r, server, watch, convs, format_name)
            if not server.alive():
                server.start()
                admin = Admin(server.admin)
            watch.new_problems()
        else:
            try:
                worst = max(worst, wire.get_version_latency(server.host, server.port, 2.0))
            except (OSError, wire.WireError) as exc:
                health_failures.append(f"batch {batches}: {exc}")
        rss = server.rss_kib()
        rss_peak = max(rss_peak, rss)
        if batches == 3:
            rss_first = rss
        if batches % 10 == 0:
            fill_queue(admin)
    elapsed = time.monotonic() - start
    rss_end = server.rss_kib()
    r.report.check("fuzz conversations: no crash, no traceback or ERROR in the server log",
                   not problems and consumed >= b.fuzz_cases,
                   f"{consumed} cases consumed ({cases} sent) in {conversations} conversations, {batches} batches, "
                   f"{elapsed:.0f} s ({consumed / max(elapsed, 1e-9):.0f} cases/s), {replies} reply PDUs, {crashes} crashes, "
                   f"{len(problems)} bad batches, {len(saved)} saved to {r.corpus}; conversations per interface: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(per_interface.items()))
                   + (f"; target {b.fuzz_cases} cases not reached in {b.fuzz_seconds:.0f} s"
                      if consumed < b.fuzz_cases else "")
                   + (f"; first: {problems[0]}" if problems else ""))
    r.report.check("fuzz health check after every batch (bind + GetVersion within 2 s)", not health_failures,
                   f"{batches - len(health_failures)}/{batches} answered, worst {worst * 1000:.1f} ms"
                   + (f"; {health_failures[0]}" if health_failures else ""))
    growth = rss_end - rss_first if rss_first else 0
    r.report.check("fuzz server RSS bounded", growth <= RSS_GROWTH_LIMIT_KIB,
                   f"RSS {rss_first // 1024} MiB after warm-up, peak {rss_peak // 1024} MiB, end {rss_end // 1024} "
                   f"MiB (growth limit {RSS_GROWTH_LIMIT_KIB // 1024} MiB)")
    left = wait_until(lambda: (lambda v: v if v == (0, 0, 0) else None)(leftovers(admin)), 10) or leftovers(admin)
    r.report.check("fuzz leaves no handle, read or Locked message behind", left == (0, 0, 0),
                   f"handles={left[0]} reads={left[1]} locked={left[2]}")


def _health(server, watch: LogWatch) -> str:
    if not server.alive():
        return f"server exited with {server.proc.returncode}"
    found = watch.new_problems()
    if found:
        return found[0][:200]
    try:
        wire.get_version_latency(server.host, server.port, 2.0)
    except (OSError, wire.WireError) as exc:
        return f"health check failed: {exc}"
    return ""


def _bisect(r: Run, server, watch: LogWatch, convs: list[fuzz.Conversation], format_name: str) -> list:
    """Replay a bad batch's conversations one by one; save each one that reproduces the problem."""
    saved = []
    for conv in convs:
        if not server.alive():
            server.start()
        watch.new_problems()
        admin = Admin(server.admin)
        handle = admin_handle(admin, conv, QUEUE)
        admin.close()
        try:
            asyncio.run(fuzz.run_conversation(server.host, port_for(server, conv), conv, handle=handle,
                                              format_name=format_name))
        except (OSError, asyncio.TimeoutError):
            pass
        bad = _health(server, watch)
        if bad:
            saved.append(fuzz.save_case(r.corpus, conv, bad))
            print(f"  saved {saved[-1]}: {bad}", flush=True)
    return saved
