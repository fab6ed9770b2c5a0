"""Check: random and mutated JSON on every admin endpoint never gives a 500 (issue 14; docs/admin-api.md)."""
from __future__ import annotations

import json
import random
import urllib.parse

from soak.admin import Admin
from soak.harness import LogWatch, Run

QUEUE = r".\private$\soak-admin"
VALID = {
    "queue": {"pathname": QUEUE + "2", "label": "L", "transactional": False, "journal": False, "quota": 100,
              "journal_quota": 100},
    "message": {"body": "x", "body_type": 8, "label": "l", "priority": 3, "time_to_be_received": 60,
                "time_to_reach_queue": 60, "correlation_id": "00" * 20, "app_specific": 7,
                "delivery": "recoverable", "acknowledgement": "full_receive", "admin_queue": "DIRECT=OS:.\\private$\\a",
                "response_queue": "DIRECT=OS:.\\private$\\r", "journal": True, "dead_letter": False, "trace": False,
                "extension_base64": "AAEC", "count": 2},
    "open": {"access": "peek", "share_mode": "deny-none"},
    "cursor": {},
    "move": {"to": "poison"},
}
ODD_STRINGS = ("", " ", "\\", "private$\\", ".\\private$\\" + "q" * 200, "DIRECT=OS:", "\u0000", "\ud800", "é" * 300,
               "%", "%%", "..", "../..", "a;b", "\"", "-1", "0x10", "1e400", "NaN", "null", "🙂" * 50)
ODD_NUMBERS = (0, -1, 1, 7, 8, 2**31, 2**32 - 1, 2**32, 2**63, 2**64, -2**63, 10**400, 1.5, float("nan"),
               float("inf"), True, False, None)


def random_json(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(ODD_NUMBERS + ODD_STRINGS)
    if roll < 0.6:
        return {rng.choice(list(VALID["message"]) + ["pathname", "access", "x"] + list(ODD_STRINGS[:6])):
                random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def mutated_body(rng: random.Random, kind: str) -> bytes:
    roll = rng.random()
    if roll < 0.5:
        body = dict(VALID[kind])
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(list(body) or ["x"]) if rng.random() < 0.85 else rng.choice(ODD_STRINGS)
            body[key] = random_json(rng, 2) if rng.random() < 0.5 else rng.choice(ODD_NUMBERS + ODD_STRINGS)
        if body and rng.random() < 0.2:
            del body[rng.choice(list(body))]
        return json.dumps(body).encode()
    if roll < 0.75:
        return json.dumps(random_json(rng)).encode()
    if roll < 0.85:
        depth = rng.choice((50, 1000, 100_000))
        return ("[" * depth + "]" * depth).encode() if rng.random() < 0.5 else ('{"a":' * depth + "1" + "}" * depth).encode()
    raw = bytearray(json.dumps(VALID[kind]).encode())
    for _ in range(rng.randint(1, 4)):
        if raw:
            raw[rng.randrange(len(raw))] = rng.getrandbits(8)
    return bytes(raw) if rng.random() < 0.8 else rng.randbytes(rng.randint(0, 64))


def odd_segment(rng: random.Random, valid: str) -> str:
    return rng.choice((valid, urllib.parse.quote(rng.choice(ODD_STRINGS), safe="", errors="surrogatepass"), str(rng.choice(ODD_NUMBERS)),
                       "%ZZ", "%00", "%C0%AF", valid + "%2F..", "x" * 5000))


def run(r: Run) -> None:
    server = r.server("admin").start()
    watch = LogWatch(server)
    admin = Admin(server.admin, timeout=30)
    rng = random.Random(r.seed)
    try:
        admin.ok("POST", "/v1/queues", {"pathname": QUEUE})
        q = urllib.parse.quote(QUEUE, safe="")
        sent = admin.ok("POST", f"/v1/queues/{q}/messages", {"body": "seed"})
        handle = admin.ok("POST", f"/v1/queues/{q}/open", {})["hRemoteQueue"]
        lookup = sent["lookup_id"]
        counts: dict[int, int] = {}
        five_hundreds: list[str] = []
        for i in range(r.budget.admin_cases):
            target = rng.randrange(18)
            qq = odd_segment(rng, q) if rng.random() < 0.4 else q
            hh = odd_segment(rng, str(handle)) if rng.random() < 0.4 else str(handle)
            ll = odd_segment(rng, str(lookup)) if rng.random() < 0.4 else str(lookup)
            tt = odd_segment(rng, "00" * 16)
            method, path, kind = [
                ("GET", "/v1/info", None), ("GET", "/v1/queues", None), ("POST", "/v1/queues", "queue"),
                ("GET", f"/v1/queues/{qq}", None), ("DELETE", f"/v1/queues/{qq}2", None),
                ("GET", f"/v1/queues/{qq}/messages?limit={rng.choice(('1', '0', '-1', 'x', '99999999999', ''))}"
                 f"&body={rng.choice(('1', '0', 'yes', ''))}"
                 f"&after={rng.choice(('0', 'x', '-1', '', ll))}", None),
                ("POST", f"/v1/queues/{qq}/messages", "message"), ("GET", f"/v1/queues/{qq}/messages/{ll}", None),
                ("POST", f"/v1/queues/{qq}/open", "open"), ("GET", "/v1/handles", None),
                ("POST", f"/v1/handles/{hh}/cursors", "cursor"), ("GET", "/v1/reads", None),
                ("GET", "/v1/transactions", None), ("POST", f"/v1/transactions/{tt}/commit", None),
                ("POST", f"/v1/transactions/{tt}/abort", None),
                ("POST", f"/v1/queues/{qq}/messages/{ll}/move", "move"),         # to a subqueue and back
                ("GET", f"/v1/queues/{qq}%3Bpoison", None),
                ("DELETE", f"/v1/queues/{qq}%3Bpoison/messages/{ll}", None)][target]
            if rng.random() < 0.05:
                method = rng.choice(("PUT", "PATCH", "DELETE", "POST", "GET"))
            body = mutated_body(rng, kind) if kind else (mutated_body(rng, "open") if rng.random() < 0.2 else None)
            if kind == "move" and rng.random() < 0.5:       # a valid move too, so the seed goes to ;poison and back
                body = json.dumps({"to": rng.choice(("poison", ""))}).encode()
            headers = {"Content-Type": rng.choice(("application/json", "text/plain", "application/json; charset=latin-1"))}
            try:
                status, data = admin.raw(method, path, body, headers)
            except Exception as exc:        # a dropped connection is as bad as a 500
                status, data = 599, repr(exc).encode()
            counts[status] = counts.get(status, 0) + 1
            if target == 17 and method == "DELETE" and status == 200:      # the seed is gone: send another
                lookup = admin.ok("POST", f"/v1/queues/{q}/messages", {"body": "seed"})["lookup_id"]
            if status >= 500 and status != 507:
                five_hundreds.append(f"{method} {path[:80]} {body[:60] if body else b''!r} -> {status} {data[:100]!r}")
        problems = watch.new_problems()
        r.report.check("admin API: random and mutated JSON on every endpoint never gives a 500",
                       not five_hundreds and not problems and server.alive(),
                       f"{r.budget.admin_cases} requests, statuses {dict(sorted(counts.items()))}"
                       + (f"; {len(five_hundreds)} 5xx, first: {five_hundreds[0]}" if five_hundreds else "")
                       + (f"; server log: {problems[0][:150]}" if problems else ""))
    finally:
        admin.close()
        server.stop()
