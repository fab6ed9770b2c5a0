"""Mutational fuzz of whole DCE/RPC conversations against a running server (issue 14; C706 12.6, MS-RPCE 3.3).

A conversation: bind (NDR or NDR64) to a hosted interface, optionally a real open (RemoteQMOpenQueue on a
descriptor the admin API opened, R_QMOpenRemoteQueue, R_OpenQueue: seeds.Opener) so later stubs carry a live
handle, then a burst of cases — requests built from the
seed table with NDR words, bytes and lengths mutated, fragmented requests, co_cancel / orphaned, alter_context,
auth3, second binds, auth trailers, common-header mutations — then a half-close; the reply stream is read to EOF.
Every PDU of the burst and the tail is one case; a call with an unknown opnum after the burst (the sentinel)
proves the server consumed the burst, and only such conversations are counted.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from soak import mutate, seeds, wire

CORPUS_VERSION = 1


@dataclass
class Conversation:
    """What one fuzz connection sends; ``stateful`` conversations open a session first (placeholders)."""
    interface: str
    abstract: bytes
    ndr64: bool
    stateful: bool
    pdus: list[bytes] = field(default_factory=list)

    def to_json(self, found: str) -> dict:
        return {"version": CORPUS_VERSION, "found": found, "interface": self.interface,
                "abstract": self.abstract.hex(), "ndr64": self.ndr64, "stateful": self.stateful,
                "pdus": [p.hex() for p in self.pdus]}

    @classmethod
    def from_json(cls, data: dict) -> "Conversation":
        return cls(data["interface"], bytes.fromhex(data["abstract"]), data["ndr64"], data["stateful"],
                   [bytes.fromhex(p) for p in data["pdus"]])

    def digest(self) -> str:
        h = hashlib.sha1(self.abstract + bytes([self.ndr64, self.stateful]))
        for p in self.pdus:
            h.update(p)
        return h.hexdigest()[:16]


class SeedBank:
    """Seed stubs of each hosted interface, per transfer syntax."""

    def __init__(self, entries: list[seeds.InterfaceSeeds]) -> None:
        self.entries = entries
        self.stubs = {(e.name, n64): e.build(n64) for e in entries for n64 in (False, True)}


class Generator:
    """Builds random conversations from the seed bank (deterministic for a given seed)."""

    def __init__(self, bank: SeedBank, rng: random.Random, burst: tuple[int, int] = (30, 70)) -> None:
        self.bank = bank
        self.rng = rng
        self.burst = burst

    def conversation(self) -> Conversation:
        """A burst of framing-preserving cases (the server reads them all), then one tail case that may end
        the connection (header, length, flag and auth-trailer mutations, auth3, a second bind)."""
        rng = self.rng
        entry = rng.choice(self.bank.entries)
        ndr64 = rng.random() < 0.5
        stateful = entry.opener is not None and rng.random() < 0.3
        conv = Conversation(entry.name, entry.syntax, ndr64, stateful)
        stubs = self.bank.stubs[(entry.name, ndr64)]
        self._next_ctx = 0
        call_id = 3
        for _ in range(rng.randint(*self.burst)):
            call_id += 1
            conv.pdus.append(self._case(rng, stubs, ndr64, call_id))
        conv.pdus.append(self._tail(rng, stubs, ndr64, call_id + 1))
        return conv

    def _pick(self, rng, stubs) -> tuple[int, bytes]:
        opnum = rng.choice(list(stubs))
        return opnum, rng.choice(stubs[opnum] or [b""])

    def _case(self, rng, stubs, ndr64: bool, call_id: int) -> bytes:
        kind = rng.random()
        opnum, stub = self._pick(rng, stubs)
        if kind < 0.75:
            if rng.random() < 0.9:
                stub = mutate.mutate_stub(rng, stub, ndr64)
            if rng.random() < 0.04:
                opnum = rng.choice((opnum + 1, 0xFFFF, rng.getrandbits(16)))
            ctx = 0 if rng.random() < 0.96 else rng.choice((1, 2, 0xFFFF))
            return wire.request(call_id, ctx, opnum, stub,
                                object_uuid=rng.randbytes(16) if rng.random() < 0.03 else None)
        if kind < 0.85:
            stub = mutate.mutate_stub(rng, stub, ndr64) if rng.random() < 0.5 else stub
            return b"".join(wire.fragments(call_id, 0, opnum, stub, rng.choice((1, 3, 4, 8, 16))))
        if kind < 0.90:
            return wire.co_cancel(call_id - rng.choice((1, 2, 3)))
        if kind < 0.94:
            return wire.orphaned(call_id - rng.choice((1, 2, 3)))
        # a fresh context id each time: re-using one for another syntax ends the connection (that is a tail case)
        other = rng.choice(self.bank.entries)
        self._next_ctx += 1
        return wire.bind(call_id, [(self._next_ctx, other.syntax,
                                    rng.choice((wire.NDR20, wire.NDR64, rng.randbytes(20))))], alter=True)

    def _tail(self, rng, stubs, ndr64: bool, call_id: int) -> bytes:
        kind = rng.random()
        opnum, stub = self._pick(rng, stubs)
        if kind < 0.45:
            return mutate.mutate_header(rng, wire.request(call_id, 0, opnum, mutate.mutate_stub(rng, stub, ndr64)))
        if kind < 0.65:
            return mutate.with_auth(rng, wire.request(call_id, 0, opnum, stub))
        if kind < 0.8:
            frags = wire.fragments(call_id, 0, opnum, stub, rng.choice((1, 4, 8)))
            return b"".join(_shuffle_flags(rng, frags))
        if kind < 0.88:
            return wire.auth3(call_id, rng.randbytes(rng.choice((0, 8, 16, 100))))
        other = rng.choice(self.bank.entries)
        pdu = wire.bind(call_id, [(rng.choice((0, 1, 0xFFFF)), other.syntax,
                                   rng.choice((wire.NDR20, wire.NDR64, rng.randbytes(20))))],
                        alter=rng.random() < 0.5, assoc_group=rng.choice((0, 1, rng.getrandbits(32))))
        return mutate.with_auth(rng, pdu) if rng.random() < 0.5 else mutate.mutate_header(rng, pdu)


def _shuffle_flags(rng: random.Random, frags: list[bytes]) -> list[bytes]:
    """Fragment-flag mutations: drop/duplicate/reorder fragments or flip PFC_FIRST/LAST."""
    frags = list(frags)
    op = rng.randrange(4)
    if op == 0 and len(frags) > 1:
        del frags[rng.randrange(len(frags))]
    elif op == 1:
        frags.insert(rng.randrange(len(frags) + 1), rng.choice(frags))
    elif op == 2:
        rng.shuffle(frags)
    else:
        i = rng.randrange(len(frags))
        f = bytearray(frags[i])
        f[3] ^= rng.choice((1, 2, 3))
        frags[i] = bytes(f)
    return frags


def substitute(pdu: bytes, session: bytes, handle: int) -> bytes:
    """Put the live session handle / hRemoteQueue where the seeds carry placeholders (same lengths)."""
    if seeds.SESSION in pdu:
        pdu = pdu.replace(seeds.SESSION, session)
    if seeds.QUEUE_HANDLE_BYTES in pdu:
        pdu = pdu.replace(seeds.QUEUE_HANDLE_BYTES, struct.pack("<L", handle))
    return pdu


_OPEN_STUBS: dict[tuple[str, int, str, bool], bytes] = {}


def open_stub(interface: str, handle: int, format_name: str, ndr64: bool) -> bytes:
    """The valid open a stateful conversation of ``interface`` starts with (seeds.Opener), built once."""
    key = (interface, handle, format_name, ndr64)
    if key not in _OPEN_STUBS:
        if len(_OPEN_STUBS) > 256:         # bounded: one admin handle per stateful qm2qm conversation
            _OPEN_STUBS.clear()
        _OPEN_STUBS[key] = seeds.by_name()[interface].opener.stub(handle, format_name, ndr64)
    return _OPEN_STUBS[key]


async def _read_pdu(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(16)
    frag = head[8] | (head[9] << 8)
    return head + await reader.readexactly(max(0, frag - 16))


@dataclass
class Outcome:
    """What one conversation proved: ``consumed`` once the sentinel after the burst was answered (the server
    reads PDUs in order, so every burst case before it was parsed and dispatched)."""
    replies: int = 0
    consumed: bool = False


SENTINEL_CALL_ID = 0x7FFF0001
SENTINEL_OPNUM = 0xFFFF         # answered at once with nca_op_rng_error, on every interface


async def run_conversation(host: str, port: int, conv: Conversation, *, handle: int = 0, format_name: str = "",
                           timeout: float = 15.0) -> Outcome:
    """Send one conversation: bind, [the interface's real open: on the admin-opened ``handle`` (qm2qm) or of
    ``format_name`` (qmcomm, MS-MQRR)], the burst, a sentinel call (read up to its answer), the tail; then
    half-close and read the server's answers to EOF."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    out = Outcome()
    try:
        transfer = wire.NDR64 if conv.ndr64 else wire.NDR20
        writer.write(wire.bind(1, [(0, conv.abstract, transfer)]))
        session = bytes(20)
        opener = seeds.by_name()[conv.interface].opener if conv.stateful else None
        if opener is not None and (handle or not opener.needs_admin_handle):
            stub = open_stub(conv.interface, handle, format_name, conv.ndr64)
            writer.write(wire.request(2, 0, opener.opnum, stub))
            await writer.drain()
            try:
                await asyncio.wait_for(_read_pdu(reader), timeout)
                reply = await asyncio.wait_for(_read_pdu(reader), timeout)
                out.replies += 2
                if reply[2] == wire.MSRPC_RESPONSE:
                    session = reply[24:44]
                    handle = opener.queue_handle(reply[24:], handle)
            except (asyncio.IncompleteReadError, ConnectionError):
                return out
        burst, tail = conv.pdus[:-1], conv.pdus[-1:]
        try:
            for pdu in burst:
                if writer.transport.is_closing():
                    return out
                writer.write(substitute(pdu, session, handle))
            writer.write(wire.request(SENTINEL_CALL_ID, 0, SENTINEL_OPNUM, b""))
            await writer.drain()
            while not out.consumed:
                pdu = await asyncio.wait_for(_read_pdu(reader), timeout)
                out.replies += 1
                out.consumed = int.from_bytes(pdu[12:16], "little") == SENTINEL_CALL_ID
            if writer.transport.is_closing():
                return out
            for pdu in tail:
                writer.write(substitute(pdu, session, handle))
            await writer.drain()
            if not writer.transport.is_closing():
                writer.write_eof()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return out
        while True:
            try:
                await asyncio.wait_for(_read_pdu(reader), timeout)
                out.replies += 1
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return out
    finally:
        writer.transport.abort()


def save_case(corpus: Path, conv: Conversation, found: str) -> Path:
    """A conversation that made the server log an error, crash or stop answering, kept for pytest replay."""
    corpus.mkdir(parents=True, exist_ok=True)
    path = corpus / f"{conv.interface}-{conv.digest()}.json"
    path.write_text(json.dumps(conv.to_json(found), indent=1) + "\n")
    return path
