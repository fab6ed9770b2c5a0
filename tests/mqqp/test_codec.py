"""The fast codec equals impacket's marshalling of qm2qm.mqqp.idl byte for byte (MS-MQQP 6; MS-RPCE 2.2.5), for every
opnum, both directions and both transfer syntaxes, up to referent-id values and alignment-gap contents."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5.rpcrt import DCERPC

from qm2qm.mqqp import codec, idl
from qm2qm.mqqp.codec import REMOTEREADDESC, REMOTEREADDESC2
from qm2qm.mqqp.constants import REFERENT_ID_BASE, REFERENT_ID_STEP, REMOTEREADACK
from qm2qm.mqqp.ndr_impacket import from_impacket, to_impacket
from tests.mqqp.test_codec_layout import walk

u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
ctx = st.binary(min_size=20, max_size=20)
acks = st.sampled_from(list(REMOTEREADACK))


@st.composite
def remotereaddesc(draw):
    buffer = draw(st.none() | st.binary(max_size=80))
    return REMOTEREADDESC(draw(u32), draw(u32), draw(u32), draw(u32), 0 if buffer is None else len(buffer),
                          draw(u32), draw(u32), draw(u32), draw(u32), draw(acks), buffer)


remotereaddesc2 = st.builds(REMOTEREADDESC2, st.none() | remotereaddesc(), u64)

REQUESTS = {
    0: st.builds(codec.RemoteQMStartReceiveRequest, remotereaddesc()),
    1: st.builds(codec.RemoteQMEndReceiveRequest, ctx, st.integers(1, 2)),
    2: st.builds(codec.RemoteQMOpenQueueRequest, st.uuids(), st.integers(0, 16), u32, u32, u32),
    3: st.builds(codec.RemoteQMCloseQueueRequest, ctx),
    4: st.builds(codec.RemoteQMCloseCursorRequest, u32, u32),
    5: st.builds(codec.RemoteQMCancelReceiveRequest, u32, u32, u32),
    6: st.builds(codec.RemoteQMPurgeQueueRequest, u32),
    7: st.builds(codec.RemoteQMGetQMQMServerPortRequest, st.integers(0, 3)),
    8: st.builds(codec.RemoteQmGetVersionRequest),
    9: st.builds(codec.RemoteQMStartReceive2Request, remotereaddesc2),
    10: st.builds(codec.RemoteQMStartReceiveByLookupIdRequest, u64, remotereaddesc2),
}
RESPONSES = {
    0: st.builds(codec.RemoteQMStartReceiveResponse, ctx, remotereaddesc(), u32),
    1: st.builds(codec.RemoteQMEndReceiveResponse, ctx, u32),
    2: st.builds(codec.RemoteQMOpenQueueResponse, ctx, u32),
    3: st.builds(codec.RemoteQMCloseQueueResponse, ctx, u32),
    4: st.builds(codec.RemoteQMCloseCursorResponse, u32),
    5: st.builds(codec.RemoteQMCancelReceiveResponse, u32),
    6: st.builds(codec.RemoteQMPurgeQueueResponse, u32),
    7: st.builds(codec.RemoteQMGetQMQMServerPortResponse, u32),
    8: st.builds(codec.RemoteQmGetVersionResponse, st.integers(0, 255), st.integers(0, 255),
                 st.integers(0, 0xFFFF)),
    9: st.builds(codec.RemoteQMStartReceive2Response, ctx, remotereaddesc2, u32),
    10: st.builds(codec.RemoteQMStartReceiveByLookupIdResponse, ctx, remotereaddesc2, u32),
}


def impacket_bytes(opnum: int, value, ndr64: bool, is_request: bool) -> bytes:
    """What impacket puts on the wire, with its own random referent ids, marshalled as its client does
    (DCERPC.request: a request is built in NDR then changeTransferSyntax()ed to NDR64)."""
    if is_request:
        call = to_impacket(opnum, value, False, windows_referents=False)
        if ndr64:
            call.changeTransferSyntax(DCERPC.NDR64Syntax)
        return call.getData()
    return to_impacket(opnum, value, ndr64, windows_referents=False).getData()


def assert_equal_but_gaps_and_referents(opnum, value, ours: bytes, theirs: bytes, ndr64: bool) -> None:
    lay = walk(opnum, value, ndr64)
    assert lay.pos == len(ours) == len(theirs)
    masked = set(lay.pads)
    for offset, width in lay.refs:
        masked.update(range(offset, offset + width))
    diff = [i for i in range(len(ours)) if ours[i] != theirs[i] and i not in masked]
    assert diff == [], f"bytes differ outside gaps/referents at {diff[:8]}"
    assert all(ours[i] == 0 for i in lay.pads), "alignment gaps are written as zeros"
    ids = [int.from_bytes(ours[o:o + w], "little") for o, w in lay.refs]
    assert ids == [REFERENT_ID_BASE + REFERENT_ID_STEP * n for n in range(len(ids))]
    assert all(int.from_bytes(theirs[o:o + w], "little") != 0 for o, w in lay.refs)


def check(opnum: int, value, is_request: bool) -> None:
    encode = codec.encode_request if is_request else codec.encode_response
    decode = codec.decode_request if is_request else codec.decode_response
    cls = idl.OPNUMS[opnum][0 if is_request else 1]
    for ndr64 in (False, True):
        ours = encode(opnum, value, ndr64)
        theirs = impacket_bytes(opnum, value, ndr64, is_request)
        assert_equal_but_gaps_and_referents(opnum, value, ours, theirs, ndr64)
        assert decode(opnum, theirs, ndr64) == value
        assert from_impacket(opnum, cls(ours, isNDR64=ndr64)) == value
        # with Windows referent ids impacket's bytes differ from ours in gap contents only
        windows = to_impacket(opnum, value, ndr64, windows_referents=True).getData()
        lay = walk(opnum, value, ndr64)
        assert [i for i in range(len(ours)) if ours[i] != windows[i] and i not in lay.pads] == []


@pytest.mark.parametrize("opnum", range(11))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_request_equals_impacket(opnum, data):
    check(opnum, data.draw(REQUESTS[opnum]), True)


@pytest.mark.parametrize("opnum", range(11))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_response_equals_impacket(opnum, data):
    check(opnum, data.draw(RESPONSES[opnum]), False)


@pytest.mark.parametrize("ndr64", [False, True])
def test_kilobyte_buffer_equals_impacket(ndr64):
    body = bytes(range(256)) * 8 + b"xyz"
    d = REMOTEREADDESC(hRemoteQueue=3, dwSize=len(body), dwQueue=3, lpBuffer=body)
    resp = codec.RemoteQMStartReceiveByLookupIdResponse(bytes(20), REMOTEREADDESC2(d, 99), 0)
    ours = codec.encode_response(10, resp, ndr64)
    theirs = impacket_bytes(10, resp, ndr64, False)
    assert_equal_but_gaps_and_referents(10, resp, ours, theirs, ndr64)
    assert codec.decode_response(10, theirs, ndr64) == resp


def test_hresult_failure_roundtrips_through_impacket_signed_hresult():
    resp = codec.RemoteQMPurgeQueueResponse(0xC00E0006)
    stub = codec.encode_response(6, resp, False)
    assert stub == struct.pack("<I", 0xC00E0006)
    assert idl.RemoteQMPurgeQueueResponse(stub)["ErrorCode"] == struct.unpack("<i", stub)[0]
    assert codec.encode_response(6, codec.RemoteQMPurgeQueueResponse(-0x3FF1FFFA), False) == stub


def test_decoded_types():
    req = codec.decode_request(2, bytes(16) + struct.pack("<4I", 1, 2, 3, 4), False)
    assert req.pLicGuid == uuid.UUID(int=0)
    d = codec.decode_request(0, codec.encode_request(
        0, codec.RemoteQMStartReceiveRequest(REMOTEREADDESC(eAckNack=1, dwSize=1, lpBuffer=b"x")), True), True)
    assert d.lpRemoteReadDesc.eAckNack is REMOTEREADACK.RR_NACK
    assert type(d.lpRemoteReadDesc.lpBuffer) is bytes


def test_decode_accepts_memoryview_and_bytearray():
    d = REMOTEREADDESC(dwSize=3, lpBuffer=b"abc")
    resp = codec.RemoteQMStartReceiveResponse(bytes(20), d, 0)
    stub = codec.encode_response(0, resp, False)
    assert codec.decode_response(0, memoryview(stub), False) == resp
    assert codec.decode_response(0, bytearray(stub), False) == resp
    assert type(codec.decode_response(0, memoryview(stub), False).lpRemoteReadDesc.lpBuffer) is bytes


@pytest.mark.parametrize("ndr64", [False, True])
def test_largest_buffer_roundtrips(ndr64):
    body = bytes(range(256)) * (4325376 // 256)
    d = REMOTEREADDESC(dwSize=len(body), lpBuffer=body)
    resp = codec.RemoteQMStartReceive2Response(bytes(20), REMOTEREADDESC2(d, 5), 0)
    stub = codec.encode_response(9, resp, ndr64)
    assert len(stub) == walk(9, resp, ndr64).pos
    assert codec.decode_response(9, stub, ndr64) == resp
