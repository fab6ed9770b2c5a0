"""Strict NDR/NDR64 consistency checks of the qm2qm codec (MS-RPCE 3.1.1.5.3 at target level 6.0, MS-MQQP 3.1.4 <9>):
each malformed stub gets its exact RpcFault status; what the spec says to ignore is ignored."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qm2qm.mqqp import codec
from qm2qm.mqqp.codec import REMOTEREADDESC, REMOTEREADDESC2, EncodeError
from qm2qm.mqqp.constants import NCA_S_OP_RNG_ERROR, RPC_S_INVALID_BOUND, RPC_X_BAD_STUB_DATA
from qm2qm.rpc.interface import RpcFault
from tests.mqqp.test_codec_layout import walk

CTX = bytes(range(20))
BUF = b"0123456789"
DESC = REMOTEREADDESC(hRemoteQueue=9, dwSize=len(BUF), dwQueue=9, eAckNack=2, lpBuffer=BUF)

# one valid value per opnum and direction, with buffers and non-NULL pointers wherever the IDL allows
REQUESTS = {
    0: codec.RemoteQMStartReceiveRequest(DESC),
    1: codec.RemoteQMEndReceiveRequest(CTX, 2),
    2: codec.RemoteQMOpenQueueRequest(uuid.UUID(int=5), 16, 1, 2, 3),
    3: codec.RemoteQMCloseQueueRequest(CTX),
    4: codec.RemoteQMCloseCursorRequest(1, 2),
    5: codec.RemoteQMCancelReceiveRequest(1, 2, 3),
    6: codec.RemoteQMPurgeQueueRequest(1),
    7: codec.RemoteQMGetQMQMServerPortRequest(3),
    8: codec.RemoteQmGetVersionRequest(),
    9: codec.RemoteQMStartReceive2Request(REMOTEREADDESC2(DESC, 0)),
    10: codec.RemoteQMStartReceiveByLookupIdRequest(77, REMOTEREADDESC2(DESC, 0)),
}
RESPONSES = {
    0: codec.RemoteQMStartReceiveResponse(CTX, DESC, 0),
    1: codec.RemoteQMEndReceiveResponse(bytes(20), 0),
    2: codec.RemoteQMOpenQueueResponse(CTX, 0),
    3: codec.RemoteQMCloseQueueResponse(bytes(20), 0),
    4: codec.RemoteQMCloseCursorResponse(0),
    5: codec.RemoteQMCancelReceiveResponse(0),
    6: codec.RemoteQMPurgeQueueResponse(0xC00E0006),
    7: codec.RemoteQMGetQMQMServerPortResponse(2105),
    8: codec.RemoteQmGetVersionResponse(6, 1, 7601),
    9: codec.RemoteQMStartReceive2Response(CTX, REMOTEREADDESC2(DESC, 1), 0),
    10: codec.RemoteQMStartReceiveByLookupIdResponse(CTX, REMOTEREADDESC2(DESC, 1), 0),
}
CASES = [(op, True, nd) for op in range(11) for nd in (False, True)] + \
        [(op, False, nd) for op in range(11) for nd in (False, True)]


def encode(opnum, value, ndr64, is_request, **kw):
    return (codec.encode_request if is_request else codec.encode_response)(opnum, value, ndr64, **kw)


def decode(opnum, stub, ndr64, is_request):
    return (codec.decode_request if is_request else codec.decode_response)(opnum, stub, ndr64)


def fault_of(opnum, stub, ndr64, is_request=True) -> int:
    with pytest.raises(RpcFault) as info:
        decode(opnum, stub, ndr64, is_request)
    return info.value.status


def value_of(opnum, is_request):
    return (REQUESTS if is_request else RESPONSES)[opnum]


# ---- Rejecting insufficient octet stream (3.1.1.5.3.2.2.3) and leftover bytes -----------------------------

@pytest.mark.parametrize("opnum,is_request,ndr64", CASES)
def test_every_truncation_is_bad_stub_data(opnum, is_request, ndr64):
    stub = encode(opnum, value_of(opnum, is_request), ndr64, is_request)
    for cut in range(len(stub)):
        assert fault_of(opnum, stub[:cut], ndr64, is_request) == RPC_X_BAD_STUB_DATA, cut


@pytest.mark.parametrize("opnum,is_request,ndr64", CASES)
def test_trailing_bytes_are_bad_stub_data(opnum, is_request, ndr64):
    stub = encode(opnum, value_of(opnum, is_request), ndr64, is_request)
    assert decode(opnum, stub, ndr64, is_request) == value_of(opnum, is_request)
    for extra in (b"\x00", b"\x00" * 4, b"\x00" * 8):
        assert fault_of(opnum, stub + extra, ndr64, is_request) == RPC_X_BAD_STUB_DATA


# ---- Ignoring alignment gap (3.1.1.5.3.2.2.6); any non-zero referent id is a valid unique pointer ----------

@pytest.mark.parametrize("opnum,is_request,ndr64", CASES)
def test_gap_contents_and_referent_values_are_ignored(opnum, is_request, ndr64):
    value = value_of(opnum, is_request)
    stub = bytearray(encode(opnum, value, ndr64, is_request))
    lay = walk(opnum, value, ndr64)
    for i in lay.pads:
        stub[i] = 0xA5
    for offset, width in lay.refs:
        stub[offset:offset + width] = (0xDEADBEEF + offset).to_bytes(width, "little")
    assert decode(opnum, bytes(stub), ndr64, is_request) == value


# ---- [range] (2.2.4.14, 3.1.1.5.3.2.2.4) → RPC_S_INVALID_BOUND ---------------------------------------------

@pytest.mark.parametrize("ndr64", [False, True])
@pytest.mark.parametrize("opnum,stub", [
    (1, CTX + struct.pack("<I", 0)),
    (1, CTX + struct.pack("<I", 3)),
    (1, CTX + struct.pack("<I", 0xFFFFFFFF)),
    (2, bytes(16) + struct.pack("<4I", 17, 0, 0, 0)),
    (7, struct.pack("<I", 4)),
])
def test_range_violation_is_invalid_bound(opnum, stub, ndr64):
    assert fault_of(opnum, stub, ndr64) == RPC_S_INVALID_BOUND


@pytest.mark.parametrize("ndr64", [False, True])
@pytest.mark.parametrize("opnum,stub", [
    (1, CTX + struct.pack("<I", 1)), (1, CTX + struct.pack("<I", 2)),
    (2, bytes(16) + struct.pack("<4I", 0, 0, 0, 0)), (2, bytes(16) + struct.pack("<4I", 16, 0, 0, 0)),
    (7, struct.pack("<I", 0)), (7, struct.pack("<I", 3)),
])
def test_range_bounds_are_inclusive(opnum, stub, ndr64):
    codec.decode_request(opnum, stub, ndr64)


def _rrd(ndr64: bool, dw_size: int, ack: int = 0, ref: int = 0) -> bytes:
    head = struct.pack("<9I", 1, 0, 0, 0, dw_size, 1, 0, 0, 0)
    return head + (struct.pack("<iQ", ack, ref) if ndr64 else struct.pack("<H2xI", ack, ref))


def _counts(ndr64: bool, max_count: int, offset: int, actual: int) -> bytes:
    return struct.pack("<3Q" if ndr64 else "<3I", max_count, offset, actual)


@pytest.mark.parametrize("ndr64", [False, True])
def test_dwsize_above_range_is_invalid_bound_in_requests_and_responses(ndr64):
    assert fault_of(0, _rrd(ndr64, 4325377), ndr64) == RPC_S_INVALID_BOUND
    stub = CTX + (b"\x00" * 4 if ndr64 else b"") + _rrd(ndr64, 0xFFFFFFFF) + struct.pack("<I", 0)
    assert fault_of(0, stub, ndr64, is_request=False) == RPC_S_INVALID_BOUND


# ---- Correlation validation of lpBuffer with dwSize (3.1.1.5.3.2.1.x) → RPC_X_BAD_STUB_DATA ----------------

@pytest.mark.parametrize("ndr64", [False, True])
@pytest.mark.parametrize("name,max_count,offset,actual,data", [
    ("maximum count above dwSize", 5, 0, 4, b"abcd"),
    ("maximum count below dwSize", 3, 0, 4, b"abcd"),
    ("actual count below dwSize", 4, 0, 3, b"abc"),
    ("actual count above dwSize", 4, 0, 5, b"abcde"),
    ("non-zero offset", 4, 1, 3, b"abc"),
    ("non-zero offset, same counts", 4, 1, 4, b"abcd"),
    ("maximum != actual, both != dwSize", 6, 0, 5, b"abcde"),
    ("huge actual count", 4, 0, 0xFFFFFFFF, b"abcd"),
])
def test_buffer_counts_disagreeing_with_dwsize_are_bad_stub_data(ndr64, name, max_count, offset, actual, data):
    stub = _rrd(ndr64, 4, ref=0x20000) + _counts(ndr64, max_count, offset, actual) + data
    assert fault_of(0, stub, ndr64) == RPC_X_BAD_STUB_DATA, name


@pytest.mark.parametrize("ndr64", [False, True])
def test_null_buffer_with_nonzero_dwsize_is_bad_stub_data(ndr64):
    assert fault_of(0, _rrd(ndr64, 1, ref=0), ndr64) == RPC_X_BAD_STUB_DATA


@pytest.mark.parametrize("ndr64", [False, True])
def test_non_null_empty_buffer_is_valid(ndr64):
    stub = _rrd(ndr64, 0, ref=0x20000) + _counts(ndr64, 0, 0, 0)
    assert codec.decode_request(0, stub, ndr64).lpRemoteReadDesc.lpBuffer == b""


@pytest.mark.parametrize("ndr64", [False, True])
def test_null_rrd_pointer_in_rrd2_is_carried_as_none(ndr64):
    stub = struct.pack("<QQ" if ndr64 else "<I4xQ", 0, 5)
    assert codec.decode_request(9, stub, ndr64) == codec.RemoteQMStartReceive2Request(REMOTEREADDESC2(None, 5))


# ---- REMOTEREADACK: 16-bit in NDR, 32-bit signed in NDR64 (MS-RPCE 2.2.5.2); others → RPC_X_BAD_STUB_DATA ---

@pytest.mark.parametrize("ndr64,ack", [(False, 3), (False, 0x7FFF), (False, 0xFFFF), (True, 3), (True, -1),
                                       (True, 0x10000), (True, -0x80000000)])
def test_ack_outside_enum_is_bad_stub_data(ndr64, ack):
    assert fault_of(0, _rrd(ndr64, 0, ack=ack), ndr64) == RPC_X_BAD_STUB_DATA


def test_ndr_enum_is_two_bytes_and_the_next_two_are_a_gap():
    # eAckNack = 2 followed by a gap 0xFFFF: a 32-bit reading would see 0xFFFF0002
    stub = struct.pack("<9I", 1, 0, 0, 0, 0, 1, 0, 0, 0) + b"\x02\x00\xff\xff" + struct.pack("<I", 0)
    assert codec.decode_request(0, stub, False).lpRemoteReadDesc.eAckNack == 2


# ---- opnum outside the interface ---------------------------------------------------------------------------

@pytest.mark.parametrize("opnum", [-1, 11, 255, "0", None])
def test_unknown_opnum(opnum):
    with pytest.raises(RpcFault) as info:
        codec.decode_request(opnum, b"", False)
    assert info.value.status == NCA_S_OP_RNG_ERROR
    with pytest.raises(RpcFault) as info:
        codec.decode_response(opnum, b"", False)
    assert info.value.status == NCA_S_OP_RNG_ERROR
    with pytest.raises(EncodeError):
        codec.encode_request(opnum, codec.RemoteQmGetVersionRequest(), False)


# ---- encoders: never emit what a strict peer rejects; strict=False writes bad stubs on purpose ------------

@pytest.mark.parametrize("opnum,value,message", [
    (0, codec.RemoteQMStartReceiveResponse(CTX, REMOTEREADDESC(dwSize=3, lpBuffer=b"ab"), 0), "dwSize"),
    (0, codec.RemoteQMStartReceiveResponse(CTX, REMOTEREADDESC(dwSize=3), 0), "lpBuffer is None"),
    (0, codec.RemoteQMStartReceiveResponse(CTX, REMOTEREADDESC(dwSize=4325377, lpBuffer=bytes(4325377)), 0),
     "range"),
    (0, codec.RemoteQMStartReceiveResponse(CTX, REMOTEREADDESC(eAckNack=3), 0), "eAckNack"),
    (0, codec.RemoteQMStartReceiveResponse(b"short", REMOTEREADDESC(), 0), "pphContext"),
    (0, codec.RemoteQMStartReceiveResponse(CTX, None, 0), "REMOTEREADDESC"),
    (0, codec.RemoteQMStartReceiveResponse(CTX, REMOTEREADDESC(lpBuffer="text", dwSize=4), 0), "lpBuffer"),
    (1, codec.RemoteQMEndReceiveResponse(CTX, 1 << 32), "DWORD"),
    (1, codec.RemoteQMEndReceiveResponse(CTX, None), "ErrorCode"),
    (4, codec.RemoteQMCloseQueueResponse(CTX, 0), "RemoteQMCloseCursorResponse"),
    (8, codec.RemoteQmGetVersionResponse(256, 0, 0), "pMajor"),
    (8, codec.RemoteQmGetVersionResponse(6, 1, 0x10000), "pBuildNumber"),
    (9, codec.RemoteQMStartReceive2Response(CTX, REMOTEREADDESC2(None, 1 << 64), 0), "SequentialId"),
    (9, codec.RemoteQMStartReceive2Response(CTX, REMOTEREADDESC(), 0), "REMOTEREADDESC2"),
])
@pytest.mark.parametrize("ndr64", [False, True])
def test_encode_response_rejects_unrepresentable_values(opnum, value, message, ndr64):
    with pytest.raises(EncodeError, match=message):
        codec.encode_response(opnum, value, ndr64)


@pytest.mark.parametrize("opnum,value", [
    (1, codec.RemoteQMEndReceiveRequest(CTX, 3)),
    (2, codec.RemoteQMOpenQueueRequest(uuid.UUID(int=0), 17, 0, 0, 0)),
    (2, codec.RemoteQMOpenQueueRequest("not a guid", 0, 0, 0, 0)),
    (7, codec.RemoteQMGetQMQMServerPortRequest(4)),
    (10, codec.RemoteQMStartReceiveByLookupIdRequest(-1, REMOTEREADDESC2())),
    (0, codec.RemoteQMStartReceiveRequest(None)),     # a [ref] pointer has no NULL on the wire
])
def test_encode_request_rejects_out_of_range_or_unrepresentable(opnum, value):
    with pytest.raises(EncodeError):
        codec.encode_request(opnum, value, False)


@pytest.mark.parametrize("ndr64", [False, True])
def test_non_strict_encoding_produces_the_stubs_a_strict_decoder_rejects(ndr64):
    stub = codec.encode_request(1, codec.RemoteQMEndReceiveRequest(CTX, 3), ndr64, strict=False)
    assert fault_of(1, stub, ndr64) == RPC_S_INVALID_BOUND
    bad = codec.RemoteQMStartReceiveRequest(REMOTEREADDESC(dwSize=5, lpBuffer=b"ab"))
    stub = codec.encode_request(0, bad, ndr64, strict=False)
    assert fault_of(0, stub, ndr64) == RPC_X_BAD_STUB_DATA
    bad = codec.RemoteQMStartReceiveRequest(REMOTEREADDESC(eAckNack=7))
    assert fault_of(0, codec.encode_request(0, bad, ndr64, strict=False), ndr64) == RPC_X_BAD_STUB_DATA


def test_fault_messages_name_the_field():
    with pytest.raises(RpcFault, match="dwAck 3 outside range"):
        codec.decode_request(1, CTX + struct.pack("<I", 3), False)
    with pytest.raises(RpcFault, match="truncated at offset 0"):
        codec.decode_request(4, b"\x01\x02", False)


# ---- arbitrary and mutated input never escapes as anything but a stub fault --------------------------------


def decodes_or_faults(opnum, stub, ndr64, is_request) -> None:
    try:
        value = decode(opnum, stub, ndr64, is_request)
    except RpcFault as fault:
        assert fault.status in (RPC_X_BAD_STUB_DATA, RPC_S_INVALID_BOUND)
    else:
        assert type(value) is (codec.REQUEST_TYPES if is_request else codec.RESPONSE_TYPES)[opnum]
        assert encode(opnum, value, ndr64, is_request, strict=False) is not None


@settings(max_examples=300, deadline=None)
@given(opnum=st.integers(0, 10), is_request=st.booleans(), ndr64=st.booleans(), stub=st.binary(max_size=160))
def test_random_bytes_decode_or_fault(opnum, is_request, ndr64, stub):
    decodes_or_faults(opnum, stub, ndr64, is_request)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_mutated_valid_stubs_decode_or_fault(case, data):
    opnum, is_request, ndr64 = case
    stub = bytearray(encode(opnum, value_of(opnum, is_request), ndr64, is_request))
    for _ in range(data.draw(st.integers(1, 4))):
        if not stub:
            break
        stub[data.draw(st.integers(0, len(stub) - 1))] = data.draw(st.integers(0, 255))
    decodes_or_faults(opnum, bytes(stub), ndr64, is_request)
