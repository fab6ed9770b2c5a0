"""Wire layout of the qm2qm stubs (MS-RPCE 2.2.5, C706 14; notes ms-rpce-server.md 4.3): an independent layout
walker giving the alignment-gap and referent-id positions of each stub, and hand-built known-answer vectors."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

import pytest

from qm2qm.mqqp import codec
from qm2qm.mqqp.codec import (REMOTEREADDESC, REMOTEREADDESC2, RemoteQMOpenQueueRequest,
                              RemoteQMStartReceive2Response, RemoteQMStartReceiveByLookupIdRequest,
                              RemoteQMStartReceiveRequest, RemoteQMStartReceiveResponse, RemoteQmGetVersionResponse)


@dataclass
class Layout:
    """Positions of alignment gaps and referent ids in a stub, walked from the IDL by hand."""
    ndr64: bool
    pos: int = 0
    pads: list[int] = field(default_factory=list)
    refs: list[tuple[int, int]] = field(default_factory=list)     # (offset, width)

    def align(self, n: int) -> None:
        gap = -self.pos % n
        self.pads.extend(range(self.pos, self.pos + gap))
        self.pos += gap

    def take(self, n: int) -> None:
        self.pos += n

    def pointer(self, non_null: bool) -> None:
        width = 8 if self.ndr64 else 4
        self.align(width)
        if non_null:
            self.refs.append((self.pos, width))
        self.pos += width

    def rrd(self, d: REMOTEREADDESC) -> None:
        self.align(8 if self.ndr64 else 4)
        self.take(36)                       # nine DWORDs
        self.take(4 if self.ndr64 else 2)   # eAckNack: enum, i32 in NDR64, u16 in NDR
        self.pointer(d.lpBuffer is not None)
        if d.lpBuffer is not None:          # deferred conformant varying array
            self.align(8 if self.ndr64 else 4)
            self.take(24 if self.ndr64 else 12)
            self.take(len(d.lpBuffer))

    def rrd2(self, d2: REMOTEREADDESC2) -> None:
        self.align(8)
        self.pointer(d2.pRemoteReadDesc is not None)
        self.align(8)
        self.take(8)                        # SequentialId
        if d2.pRemoteReadDesc is not None:
            self.rrd(d2.pRemoteReadDesc)

    def u32(self) -> None:
        self.align(4)
        self.take(4)


def walk(opnum: int, value, ndr64: bool) -> Layout:
    """The layout of the stub of value (a request or response dataclass of opnum)."""
    lay = Layout(ndr64)
    is_request = type(value) is codec.REQUEST_TYPES[opnum]
    if opnum in (0, 9, 10):
        if is_request:
            if opnum == 10:
                lay.take(8)
            lay.rrd(value.lpRemoteReadDesc) if opnum == 0 else lay.rrd2(value.lpRemoteReadDesc2)
        else:
            lay.take(20)
            lay.rrd(value.lpRemoteReadDesc) if opnum == 0 else lay.rrd2(value.lpRemoteReadDesc2)
            lay.u32()
    else:
        lay.take(len(codec.encode_request(opnum, value, ndr64) if is_request
                     else codec.encode_response(opnum, value, ndr64)))
    return lay


CTX = bytes(range(1, 21))


def test_start_receive_request_ndr_known_answer():
    d = REMOTEREADDESC(hRemoteQueue=7, hCursor=0, ulAction=0x80000000, ulTimeout=0xFFFFFFFF, dwQueue=7,
                       dwRequestID=42)
    expected = struct.pack("<9I", 7, 0, 0x80000000, 0xFFFFFFFF, 0, 7, 42, 0, 0) + b"\x00\x00" + b"\x00\x00" + \
        struct.pack("<I", 0)
    assert len(expected) == 44
    assert codec.encode_request(0, RemoteQMStartReceiveRequest(d), False) == expected
    assert codec.decode_request(0, expected, False) == RemoteQMStartReceiveRequest(d)


def test_start_receive_request_ndr64_known_answer():
    d = REMOTEREADDESC(hRemoteQueue=7, dwQueue=7, dwRequestID=1, eAckNack=2)
    expected = struct.pack("<9I", 7, 0, 0, 0, 0, 7, 1, 0, 0) + struct.pack("<i", 2) + struct.pack("<Q", 0)
    assert len(expected) == 48
    assert codec.encode_request(0, RemoteQMStartReceiveRequest(d), True) == expected


def test_start_receive_response_known_answer_both_syntaxes():
    d = REMOTEREADDESC(hRemoteQueue=1, dwSize=5, dwQueue=1, Reserved=1, dwArriveTime=0x5F000000,
                       lpBuffer=b"hello")
    head = struct.pack("<9I", 1, 0, 0, 0, 5, 1, 0, 1, 0x5F000000)
    ndr = (CTX + head + b"\x00\x00\x00\x00" + struct.pack("<I", 0x00020000)
           + struct.pack("<3I", 5, 0, 5) + b"hello" + b"\x00" * 3 + struct.pack("<I", 0xC00E001B))
    ndr64 = (CTX + b"\x00" * 4 + head + struct.pack("<iQ", 0, 0x00020000)
             + struct.pack("<3Q", 5, 0, 5) + b"hello" + b"\x00" * 3 + struct.pack("<I", 0xC00E001B))
    resp = RemoteQMStartReceiveResponse(CTX, d, 0xC00E001B)
    assert codec.encode_response(0, resp, False) == ndr
    assert codec.encode_response(0, resp, True) == ndr64
    assert codec.decode_response(0, ndr, False) == resp
    assert codec.decode_response(0, ndr64, True) == resp


def test_start_receive2_response_nested_deferral_and_referent_order():
    d = REMOTEREADDESC(dwSize=2, lpBuffer=b"\xaa\xbb")
    resp = RemoteQMStartReceive2Response(CTX, REMOTEREADDESC2(d, 0x00FFEEDDCCBBAA99), 0)
    head = struct.pack("<9I", 0, 0, 0, 0, 2, 0, 0, 0, 0)
    ndr = (CTX + b"\x00" * 4 + struct.pack("<I", 0x00020000) + b"\x00" * 4 + struct.pack("<Q", 0x00FFEEDDCCBBAA99)
           + head + b"\x00\x00\x00\x00" + struct.pack("<I", 0x00020004)
           + struct.pack("<3I", 2, 0, 2) + b"\xaa\xbb" + b"\x00\x00" + struct.pack("<I", 0))
    ndr64 = (CTX + b"\x00" * 4 + struct.pack("<QQ", 0x00020000, 0x00FFEEDDCCBBAA99)
             + head + struct.pack("<iQ", 0, 0x00020004)
             + struct.pack("<3Q", 2, 0, 2) + b"\xaa\xbb" + b"\x00\x00" + struct.pack("<I", 0))
    assert codec.encode_response(9, resp, False) == ndr
    assert codec.encode_response(9, resp, True) == ndr64


def test_lookup_id_request_starts_with_the_ulonglong():
    req = RemoteQMStartReceiveByLookupIdRequest(0x0102030405060708, REMOTEREADDESC2(None, 0))
    assert codec.encode_request(10, req, False) == struct.pack("<QI4xQ", 0x0102030405060708, 0, 0)
    assert codec.encode_request(10, req, True) == struct.pack("<QQQ", 0x0102030405060708, 0, 0)


def test_open_queue_request_guid_is_little_endian_fields():
    guid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    stub = codec.encode_request(2, RemoteQMOpenQueueRequest(guid, 16, 1, 2, 3), True)
    assert stub == bytes.fromhex("33221100554477668899aabbccddeeff") + struct.pack("<4I", 16, 1, 2, 3)


def test_get_version_response_packs_bytes_and_short():
    assert codec.encode_response(8, RemoteQmGetVersionResponse(6, 1, 7601), False) == b"\x06\x01" + \
        struct.pack("<H", 7601)


@pytest.mark.parametrize("ndr64", [False, True])
def test_walker_agrees_with_encoded_length(ndr64):
    d = REMOTEREADDESC(dwSize=3, lpBuffer=b"abc")
    resp = RemoteQMStartReceive2Response(CTX, REMOTEREADDESC2(d, 1), 0)
    lay = walk(9, resp, ndr64)
    assert lay.pos == len(codec.encode_response(9, resp, ndr64))
    assert len(lay.refs) == 2
