"""Mutations of DCE/RPC PDUs: common header, lengths, fragment flags, auth trailers, NDR words (C706 12.6.3)."""
from __future__ import annotations

import random
import struct

from soak import wire

INTERESTING_U32 = (0, 1, 2, 3, 4, 0x14, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x20000, 0x20004,
                   0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x420000, 0x1000000)
INTERESTING_U16 = (0, 1, 15, 16, 17, 23, 24, 0x7FFF, 0x8000, 0xFFFF, 2047, 2048, 5840, 5841)


def _put(data: bytearray, pos: int, fmt: str, value: int) -> None:
    size = struct.calcsize(fmt)
    if pos + size <= len(data):
        struct.pack_into(fmt, data, pos, value & ((1 << (8 * size)) - 1))


def mutate_stub(rng: random.Random, stub: bytes, ndr64: bool) -> bytes:
    """One to three NDR-aware mutations: conformance / offset / length / pointer words set to edge values,
    byte flips, truncation, extension (MS-RPCE 2.2.5, C706 14.3)."""
    data = bytearray(stub)
    for _ in range(rng.randint(1, 3)):
        choice = rng.random()
        align = 8 if ndr64 and rng.random() < 0.5 else 4
        words = len(data) // align
        if choice < 0.45 and words:
            pos = rng.randrange(words) * align
            value = rng.choice(INTERESTING_U32 + (len(data), len(data) + 1, len(data) - 1))
            if align == 8:
                _put(data, pos, "<Q", value if rng.random() < 0.8 else rng.getrandbits(64))
            else:
                _put(data, pos, "<L", value)
        elif choice < 0.6 and data:
            pos = rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
        elif choice < 0.7 and data:
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        elif choice < 0.8:
            del data[rng.randrange(len(data) + 1):]
        elif choice < 0.9:
            data += rng.choice((b"\x00" * 4, b"\xff" * 4, rng.randbytes(rng.randint(1, 64)), b"\x00\x00\x02\x00"))
        elif data:
            start = rng.randrange(len(data))
            piece = data[start:start + rng.randint(1, 16)]
            pos = rng.randrange(len(data) + 1)
            data[pos:pos] = piece
    return bytes(data)


def with_auth(rng: random.Random, pdu: bytes) -> bytes:
    """Append a sec_trailer + auth value with random fields and a random (sometimes wrong) auth_length."""
    data = bytearray(pdu)
    pad = (4 - len(data) % 4) % 4
    auth = rng.randbytes(rng.choice((0, 1, 16, 76, rng.randint(0, 300))))
    trailer = wire.sec_trailer(rng.choice((0, 9, 10, 16, 68, 0xFF, rng.getrandbits(8))), rng.randint(0, 7),
                               rng.choice((pad, rng.getrandbits(8))), rng.getrandbits(32))
    data += b"\x00" * pad + trailer + auth
    _put(data, 8, "<H", len(data))
    auth_len = len(auth) if rng.random() < 0.7 else rng.choice(INTERESTING_U16)
    _put(data, 10, "<H", auth_len)
    return bytes(data)


def mutate_header(rng: random.Random, pdu: bytes) -> bytes:
    """Common-header / request-header mutations: version, type, flags, drep, frag/auth length, call id,
    alloc_hint, context id, opnum."""
    data = bytearray(pdu)
    field = rng.randrange(11)
    if field == 0:
        data[rng.randrange(2)] = rng.choice((4, 5, 6, 0, 1, 0xFF))
    elif field == 1:
        data[2] = rng.choice(tuple(wire.PTYPES.values()) + (rng.randrange(256), 2, 3, 12, 13, 17, 20))
    elif field == 2:
        data[3] = rng.choice((0, 1, 2, 3, 0x10, 0x20, 0x40, 0x80, 0x83, rng.getrandbits(8)))
    elif field == 3:
        data[4:8] = rng.choice((b"\x00\x00\x00\x00", b"\x01\x00\x00\x00", b"\x10\x01\x00\x00",
                                b"\x00\x02\x00\x00", rng.randbytes(4)))
    elif field == 4:
        frag = struct.unpack_from("<H", data, 8)[0] if len(data) >= 10 else 0
        _put(data, 8, "<H", rng.choice(INTERESTING_U16 + (frag - 1, frag + 1, frag + 8, frag - 8)))
    elif field == 5:
        _put(data, 10, "<H", rng.choice(INTERESTING_U16))
    elif field == 6:
        _put(data, 12, "<L", rng.choice(INTERESTING_U32))
    elif field == 7:
        _put(data, 16, "<L", rng.choice(INTERESTING_U32))
    elif field == 8:
        _put(data, 20, "<H", rng.choice((0, 1, 2, 0xFFFF, rng.getrandbits(16))))
    elif field == 9:
        _put(data, 22, "<H", rng.choice((0, 1, 8, 11, 36, 0xFFFF, rng.getrandbits(16))))
    else:
        del data[rng.randrange(len(data) + 1):]
    return bytes(data)
