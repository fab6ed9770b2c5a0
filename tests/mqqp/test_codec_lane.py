"""The one-struct layouts of codec_lane.py and the loop-free FixedCodec path give what the general codec gives,
byte for byte (and the same errors), and take over the common shapes."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qm2qm.mqqp import codec, codec_lane
from qm2qm.mqqp.codec import REMOTEREADDESC, REMOTEREADDESC2, EncodeError
from qm2qm.mqqp.codec_fixed import FIXED_REQUESTS, FIXED_RESPONSES
from qm2qm.rpc.interface import RpcFault
from tests.mqqp.test_codec import REQUESTS, RESPONSES, acks, ctx, u32, u64

LANE_REQUESTS = {0: codec_lane.decode_request_0, 9: codec_lane.decode_request_9, 10: codec_lane.decode_request_10}
LANE_RESPONSES = {0: codec_lane.encode_response_0, 9: codec_lane.encode_response_2x,
                  10: codec_lane.encode_response_2x}

# values the lanes must hand to the general path: wrong types, out of range, negative HRESULTs, odd enums
odd_u32 = u32 | st.sampled_from([-1, -0x80000000, 1 << 32, True, None, 2.0, "1"])
odd_ctx = ctx | st.sampled_from([b"", bytes(19), bytes(21), bytearray(20), None, "x" * 20])


@st.composite
def odd_desc(draw):
    buffer = draw(st.none() | st.binary(max_size=12) | st.just(bytearray(3)) | st.just("abc"))
    size = draw(st.sampled_from([0 if buffer is None else len(buffer), 1, -1, 4325377]))
    return REMOTEREADDESC(draw(odd_u32), draw(u32), draw(u32), draw(u32), size, draw(u32), draw(odd_u32), draw(u32),
                          draw(odd_u32), draw(acks | st.sampled_from([3, -1, None])), buffer)


odd_desc2 = st.builds(REMOTEREADDESC2, st.none() | odd_desc(), u64 | st.sampled_from([-1, 1 << 64]))
ODD_RESPONSES = {
    0: st.builds(codec.RemoteQMStartReceiveResponse, odd_ctx, odd_desc(), odd_u32),
    9: st.builds(codec.RemoteQMStartReceive2Response, odd_ctx, odd_desc2, odd_u32),
    10: st.builds(codec.RemoteQMStartReceiveByLookupIdResponse, odd_ctx, odd_desc2, odd_u32),
}


def general_encode(opnum: int, value, ndr64: bool):
    try:
        return codec._RESPONSE_ENCODERS[opnum](value, ndr64, True)
    except (TypeError, AttributeError, ValueError) as exc:
        return type(exc)


def public_encode(opnum: int, value, ndr64: bool):
    try:
        return codec.encode_response(opnum, value, ndr64)
    except EncodeError:
        return EncodeError


def general_decode(opnum: int, stub: bytes, ndr64: bool):
    try:
        return codec._REQUEST_DECODERS[opnum](stub, ndr64)
    except RpcFault as fault:
        return fault.status


@pytest.mark.parametrize("opnum", [0, 9, 10])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_response_lane_equals_general_path(opnum, data):
    value = data.draw(RESPONSES[opnum])
    for ndr64 in (False, True):
        lane = LANE_RESPONSES[opnum](value, ndr64)
        general = codec._RESPONSE_ENCODERS[opnum](value, ndr64, True)
        assert lane is None or lane == general
        if opnum == 0 or value.lpRemoteReadDesc2.pRemoteReadDesc is not None:
            assert lane is not None, "the common shape takes the lane"
        assert codec.encode_response(opnum, value, ndr64) == general


@pytest.mark.parametrize("opnum", [0, 9, 10])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_odd_responses_get_what_the_general_path_gives(opnum, data):
    value = data.draw(ODD_RESPONSES[opnum])
    for ndr64 in (False, True):
        general = general_encode(opnum, copy.deepcopy(value), ndr64)
        public = public_encode(opnum, value, ndr64)
        assert public == (EncodeError if isinstance(general, type) else general)


@pytest.mark.parametrize("opnum", [0, 9, 10])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_request_lane_equals_general_path(opnum, data):
    value = data.draw(REQUESTS[opnum])
    for ndr64 in (False, True):
        stub = codec.encode_request(opnum, value, ndr64)
        lane = LANE_REQUESTS[opnum](stub, ndr64)
        assert lane is None or lane == general_decode(opnum, stub, ndr64)
        desc = value.lpRemoteReadDesc if opnum == 0 else value.lpRemoteReadDesc2.pRemoteReadDesc
        if desc is not None and desc.lpBuffer is None:
            assert lane == value, "the common shape takes the lane"
        assert codec.decode_request(opnum, stub, ndr64) == value


@pytest.mark.parametrize("opnum", [0, 9, 10])
@settings(max_examples=200, deadline=None)
@given(stub=st.binary(min_size=40, max_size=80), ndr64=st.booleans())
def test_odd_request_bytes_get_what_the_general_path_gives(opnum, stub, ndr64):
    try:
        public = codec.decode_request(opnum, stub, ndr64)
    except RpcFault as fault:
        public = fault.status
    assert public == general_decode(opnum, stub, ndr64)


def _looped(fixed):
    """The same FixedCodec with its loop-free path off."""
    twin = copy.copy(fixed)
    twin._plain = False
    return twin


def _outcome(call):
    try:
        return call()
    except (EncodeError, RpcFault) as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("opnum", range(1, 9))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fixed_codec_plain_path_equals_the_loop(opnum, data):
    request, response = data.draw(REQUESTS[opnum]), data.draw(RESPONSES[opnum])
    for fixed, value in ((FIXED_REQUESTS[opnum], request), (FIXED_RESPONSES[opnum], response)):
        looped = _looped(fixed)
        stub = fixed.encode(value, False, True)
        assert stub == looped.encode(value, False, True)
        assert fixed.decode(stub, False) == looped.decode(stub, False) == value
        odd = data.draw(st.binary(max_size=len(stub) + 2))
        assert _outcome(lambda: fixed.decode(odd, True)) == _outcome(lambda: looped.decode(odd, True))


@pytest.mark.parametrize("opnum", [1, 2, 3, 4, 7])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_fixed_codec_plain_path_refuses_what_the_loop_refuses(opnum, data):
    fixed = FIXED_RESPONSES[opnum]
    value = data.draw(RESPONSES[opnum])
    for name, kind in zip(fixed.fields, fixed.kinds):
        setattr(value, name, data.draw(odd_ctx if kind == "ctx" else odd_u32))
    looped = _looped(fixed)
    for strict in (True, False):
        assert _outcome(lambda: fixed.encode(value, False, strict)) == \
            _outcome(lambda: looped.encode(value, False, strict))
