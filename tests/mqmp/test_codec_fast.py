"""qm2qm.mqmp.codec_fast against impacket's NDR of idl.py (MS-MQMP 3.1.4.2, 3.1.4.3), NDR and NDR64: the response
bytes are impacket's, a request it accepts reads as impacket reads it, and whatever it refuses (None) goes to the
general path."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqmp import codec, codec_fast, idl
from qm2qm.mqmp import constants as c
from qm2qm.rpc.interface import RpcFault
from tests.stub_changes import changed

u32 = st.integers(0, 0xFFFFFFFF)
handle = st.binary(min_size=20, max_size=20)
guid = st.binary(min_size=16, max_size=16)
syntax = st.booleans()
# any BMP character but the surrogates (impacket encodes str as UTF-16 and a lone surrogate cannot be encoded)
direct_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=40)


@st.composite
def queue_formats(draw):
    """(m_qft, m_SuffixAndFlags, the arm's value) of the five arms codec_fast reads, any suffix byte."""
    qft = draw(st.sampled_from([c.QUEUE_FORMAT_TYPE_PUBLIC, c.QUEUE_FORMAT_TYPE_PRIVATE, c.QUEUE_FORMAT_TYPE_DIRECT,
                                c.QUEUE_FORMAT_TYPE_MACHINE, c.QUEUE_FORMAT_TYPE_SUBQUEUE]))
    flags = draw(st.integers(0, 255))
    if qft == c.QUEUE_FORMAT_TYPE_PRIVATE:
        value = (draw(guid), draw(u32))
    elif qft == c.QUEUE_FORMAT_TYPE_DIRECT:
        value = draw(direct_text)
    elif qft == c.QUEUE_FORMAT_TYPE_SUBQUEUE:       # with its subqueue, or without (MQ_ERROR_ILLEGAL_FORMATNAME)
        value = draw(direct_text) + draw(st.sampled_from(["", ";poison", ";Retry-1"]))
    else:
        value = draw(guid)
    return qft, flags, value


def _request(ndr64: bool, queue_format, access: int, share: int, pid: int = 7, lic: bytes = bytes(16),
             mqs: int = 0):
    request = idl.R_QMOpenRemoteQueue(isNDR64=ndr64)
    if queue_format is None:
        request["pQueueFormat"] = NULL
    else:
        qft, flags, value = queue_format
        qf = request["pQueueFormat"]
        qf["m_qft"], qf["m_SuffixAndFlags"], qf["m_reserved"] = qft, flags, 0
        qf["u"]["tag"] = qft
        if qft == c.QUEUE_FORMAT_TYPE_PUBLIC:
            qf["u"]["m_gPublicID"] = value
        elif qft == c.QUEUE_FORMAT_TYPE_MACHINE:
            qf["u"]["m_gMachineID"] = value
        elif qft == c.QUEUE_FORMAT_TYPE_PRIVATE:
            qf["u"]["m_oPrivateID"]["Lineage"], qf["u"]["m_oPrivateID"]["Uniquifier"] = value
        elif qft == c.QUEUE_FORMAT_TYPE_SUBQUEUE:
            qf["u"]["m_pDirectSubqueueID"] = value + "\x00"
        else:
            qf["u"]["m_pDirectID"] = value + "\x00"
    request["dwCallingProcessID"], request["dwDesiredAccess"], request["dwShareMode"] = pid, access, share
    request["pLicGuid"], request["dwMQS"] = lic, mqs
    return request.getData()


def _general(stub: bytes, ndr64: bool):
    """What the general path (impacket's decode and codec.format_name) makes of a request: (name or the
    FormatNameError's status, access, share)."""
    call = codec.decode_request(2, stub, ndr64)
    if codec.is_null(call.fields["pQueueFormat"]):
        name = None
    else:
        try:
            name = codec.format_name(call["pQueueFormat"])
        except codec.FormatNameError as exc:
            name = exc.status
    return name, call["dwDesiredAccess"], call["dwShareMode"]


def _fast(stub: bytes, ndr64: bool):
    decoded = codec_fast.decode_open_remote_queue(stub, ndr64)
    if decoded is None:
        return None
    queue_format, access, share = decoded
    try:
        name = codec.format_name_of(*queue_format)
    except codec.FormatNameError as exc:
        name = exc.status
    return name, access, share


@settings(max_examples=300)
@given(syntax, queue_formats(), u32, u32, u32, guid, u32)
def test_open_remote_queue_request_reads_as_impacket_reads_it(ndr64, queue_format, access, share, pid, lic, mqs):
    stub = _request(ndr64, queue_format, access, share, pid, lic, mqs)
    fast = _fast(stub, ndr64)
    assert fast is not None, stub.hex()
    assert fast == _general(stub, ndr64)


@settings(max_examples=300)
@given(syntax, queue_formats(), u32, u32, st.data())
def test_a_changed_request_is_read_as_impacket_reads_it_or_left_to_it(ndr64, queue_format, access, share, data):
    """Truncated, extended or with one byte changed: codec_fast either refuses it or reads what impacket reads."""
    stub = changed(data, _request(ndr64, queue_format, access, share))
    fast = _fast(stub, ndr64)
    if fast is None:
        return
    assert fast == _general(stub, ndr64)


@given(syntax, u32, u32)
def test_a_null_queue_format_is_left_to_the_general_path(ndr64, access, share):
    stub = _request(ndr64, None, access, share)
    assert codec_fast.decode_open_remote_queue(stub, ndr64) is None
    assert _general(stub, ndr64) == (None, access, share)


@pytest.mark.parametrize("ndr64", [False, True])
def test_a_discriminant_other_than_m_qft_is_left_to_the_general_path_which_faults(ndr64):
    stub = bytearray(_request(ndr64, (c.QUEUE_FORMAT_TYPE_PUBLIC, 0, bytes(16)), 2, 0))
    stub[16 if ndr64 else 8] = c.QUEUE_FORMAT_TYPE_MACHINE      # the union's tag
    assert codec_fast.decode_open_remote_queue(bytes(stub), ndr64) is None
    with pytest.raises(RpcFault):
        codec.decode_request(2, bytes(stub), ndr64)


def _patch_counts(stub: bytes, ndr64: bool, n: int, counts: tuple[int, int, int]) -> bytes:
    """``stub`` with its string of ``n`` characters (the NUL counted) saying (maximum, offset, actual) counts."""
    form = "<3Q" if ndr64 else "<3I"
    at = stub.index(struct.pack(form, n, 0, n))
    return stub[:at] + struct.pack(form, *counts) + stub[at + struct.calcsize(form):]


NAME = "OS:vm\\private$\\a"                  # 16 characters and the NUL


@pytest.mark.parametrize("ndr64", [False, True])
@pytest.mark.parametrize("counts", [(3, 0, 17), (16, 0, 17), (17, 1, 17)], ids=["max 3", "max 16", "offset 1"])
def test_a_string_whose_offset_and_actual_count_pass_its_maximum_count_is_bad_stub_data(ndr64, counts):
    """MS-RPCE 3.1.1.5.3.2.1.12 (strict NDR, MS-MQMP 3.1.4, MS-MQRR 3.1.4): the maximum count MUST be at least
    offset + actual count. impacket reads the actual count alone, so the general path opened the queue; qmcomm's
    R_QMOpenRemoteQueue and MS-MQRR's R_OpenQueue (the same QUEUE_FORMAT) now fault RPC_X_BAD_STUB_DATA."""
    from qm2qm.mqrr import codec as mqrr_codec
    from qm2qm.mqrr import idl as mqrr_idl
    stub = _patch_counts(_request(ndr64, (c.QUEUE_FORMAT_TYPE_DIRECT, 0, NAME), 2, 0), ndr64, 17, counts)
    assert codec_fast.decode_open_remote_queue(stub, ndr64) is None
    with pytest.raises(RpcFault) as fault:
        codec.decode_request(2, stub, ndr64)
    assert fault.value.status == 0x6F7
    request = mqrr_idl.R_OpenQueue(isNDR64=ndr64)
    qf = request["pQueueFormat"]
    qf["m_qft"] = qf["u"]["tag"] = c.QUEUE_FORMAT_TYPE_DIRECT
    qf["m_SuffixAndFlags"], qf["m_reserved"], qf["u"]["m_pDirectID"] = 0, 0, NAME + "\x00"
    request["dwAccess"], request["dwShareMode"], request["pClientId"] = 1, 0, bytes(16)
    request["fNonRoutingServer"], request["Major"], request["Minor"], request["fWorkgroup"] = 1, 6, 1, 1
    good = request.getData()
    assert mqrr_codec.decode(2, good, ndr64)                        # the counts right: it reads
    with pytest.raises(RpcFault) as fault:
        mqrr_codec.decode(2, _patch_counts(good, ndr64, 17, counts), ndr64)
    assert fault.value.status == 0x6F7


@pytest.mark.parametrize("ndr64", [False, True])
def test_a_direct_name_that_is_not_utf16_is_left_to_the_general_path(ndr64):
    stub = bytearray(_request(ndr64, (c.QUEUE_FORMAT_TYPE_DIRECT, 0, "OS:a\\b"), 2, 0))
    # the whole name's position: impacket's random referent ids can hold the bytes of "a" too
    at = stub.index("OS:a\\b".encode("utf-16-le")) + len("OS:".encode("utf-16-le"))
    stub[at:at + 2] = b"\x00\xd8"                                   # an unpaired high surrogate
    assert codec_fast.decode_open_remote_queue(bytes(stub), ndr64) is None
    assert _general(bytes(stub), ndr64)[0] == 0xC00E001E             # MQ_ERROR_ILLEGAL_FORMATNAME


@pytest.mark.parametrize("ndr64", [False, True])
def test_the_format_names_of_a_windows_reader_read_the_same_both_ways(ndr64):
    public, private = uuid.uuid4(), uuid.uuid4()
    expected = {"DIRECT=TCP:127.0.0.1\\private$\\orders": "DIRECT=TCP:127.0.0.1\\private$\\orders",
                "DIRECT=OS:host\\q;JOURNAL": "DIRECT=OS:host\\q;JOURNAL",
                "DIRECT=OS:host\\private$\\q;poison": "DIRECT=OS:host\\private$\\q;poison",
                f"PUBLIC={{{public}}}": f"PUBLIC={{{public}}}",
                f"PRIVATE={{{private}}}\\0000000a": f"PRIVATE={{{private}}}\\0000000a",
                "DIRECT=HTTP://host/msmq/q": 0xC00E0020}        # MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    for name, answer in expected.items():
        request = idl.R_QMOpenRemoteQueue(isNDR64=ndr64)
        codec.fill_queue_format(request["pQueueFormat"], name)
        request["dwCallingProcessID"], request["dwDesiredAccess"], request["dwShareMode"] = 1, 2, 0
        request["pLicGuid"], request["dwMQS"] = bytes(16), 0
        stub = request.getData()
        assert _fast(stub, ndr64) == _general(stub, ndr64) == (answer, 2, 0)


def _private_queue_format_by_the_spec(ndr64: bool, lineage: uuid.UUID, number: int) -> bytes:
    """QUEUE_FORMAT's PRIVATE arm laid out by hand from MS-RPCE: m_qft, m_SuffixAndFlags, m_reserved; the union
    aligned to its widest arm (a pointer: 8 in NDR64) with its UCHAR tag, the OBJECTID at that alignment; in NDR64
    the structure's trailing pad to 8 (2.2.5.3.4.1, 2.2.5.3.4.4): 40 bytes, against 28 in NDR."""
    at = 8 if ndr64 else 4
    out = struct.pack("<BBH", c.QUEUE_FORMAT_TYPE_PRIVATE, 0, 0) + bytes(at - 4)
    out += bytes([c.QUEUE_FORMAT_TYPE_PRIVATE]) + bytes(at - 1) + lineage.bytes_le + struct.pack("<I", number)
    return out + bytes(-len(out) % 8 if ndr64 else 0)


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_a_private_queue_format_has_its_ndr64_trailing_pad_both_ways(ndr64):
    lineage = uuid.uuid4()
    name = f"PRIVATE={{{lineage}}}\\0000000a"
    tail = struct.pack("<III", 1, 2, 0) + bytes(16) + struct.pack("<I", 0)
    pointer = struct.pack("<Q" if ndr64 else "<I", 0x20000)
    by_the_spec = pointer + _private_queue_format_by_the_spec(ndr64, lineage, 10) + tail
    assert len(by_the_spec) == (8 + 40 if ndr64 else 4 + 28) + len(tail)
    request = idl.R_QMOpenRemoteQueue(isNDR64=ndr64)
    codec.fill_queue_format(request["pQueueFormat"], name)
    request["dwCallingProcessID"], request["dwDesiredAccess"], request["dwShareMode"] = 1, 2, 0
    request["pLicGuid"], request["dwMQS"] = bytes(16), 0
    ours = request.getData()                    # ours marshals it so: the same length, the tail at the same place
    assert len(ours) == len(by_the_spec) and ours.endswith(tail)
    assert _fast(by_the_spec, ndr64) == _general(by_the_spec, ndr64) == (name, 2, 0)


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_mqrr_open_queue_reads_a_private_queue_format_with_its_trailing_pad(ndr64):
    from qm2qm.mqrr import idl as mqrr_idl
    from qm2qm.mqrr.codec_fast import decode_open_queue
    from qm2qm.mqrr.queue_format import format_name
    lineage = uuid.uuid4()
    stub = (_private_queue_format_by_the_spec(ndr64, lineage, 10) + struct.pack("<II", 1, 0) + bytes(16)
            + struct.pack("<iBBHi", 0, 6, 1, 0, 0))
    fast = decode_open_queue(stub, ndr64)
    assert fast is not None and (fast["dwAccess"], fast["dwShareMode"]) == (1, 0)
    assert format_name(fast["pQueueFormat"]) == f"PRIVATE={lineage}\\0000000a"
    request = mqrr_idl.R_OpenQueue(isNDR64=ndr64)           # the general path reads it alike
    request.fromString(stub)
    assert (request["dwAccess"], request["dwShareMode"], request["Major"], request["Minor"]) == (1, 0, 6, 1)
    assert format_name(request["pQueueFormat"]) == format_name(fast["pQueueFormat"])


@given(syntax, handle, u32, st.integers(-0x80000000, 0xFFFFFFFF))
def test_open_remote_queue_response_equals_impacket(ndr64, context, queue_handle, status):
    response = idl.R_QMOpenRemoteQueueResponse(isNDR64=ndr64)
    signed = status & 0xFFFFFFFF
    response["pphContext"], response["ErrorCode"] = context, signed - (1 << 32) if signed & 0x80000000 else signed
    response["pdwContext"] = response["dwpQueue"] = response["phQueue"] = queue_handle
    encoded = codec_fast.encode_open_remote_queue(context, queue_handle, status)
    assert encoded == response.getData()
    decoded = codec.decode_response(2, encoded, ndr64)               # and impacket reads it back
    assert codec.wire_handle(decoded["pphContext"]) == context and decoded["phQueue"] == queue_handle


@given(syntax, handle)
def test_close_remote_queue_context_stubs_are_the_handle_alone_as_impacket_marshals_them(ndr64, context):
    request = idl.R_QMCloseRemoteQueueContext(isNDR64=ndr64)
    request["pphContext"] = context
    assert codec_fast.decode_context_handle(request.getData()) == context
    response = idl.R_QMCloseRemoteQueueContextResponse(isNDR64=ndr64)
    response["pphContext"] = context
    assert response.getData() == context


@given(st.binary(max_size=40).filter(lambda b: len(b) != 20))
def test_a_close_request_of_another_length_is_left_to_the_general_path(stub):
    assert codec_fast.decode_context_handle(stub) is None


@given(syntax, u32)
def test_get_rtqm_server_port_stubs_are_one_dword_as_impacket_marshals_them(ndr64, value):
    request = idl.R_QMGetRTQMServerPort(isNDR64=ndr64)
    request["fIP"] = value
    assert codec_fast.decode_dword(request.getData()) == value
    response = idl.R_QMGetRTQMServerPortResponse(isNDR64=ndr64)
    response["ReturnValue"] = value
    assert codec_fast.encode_dword(value) == response.getData()


@given(st.binary(max_size=12).filter(lambda b: len(b) != 4))
def test_a_port_request_of_another_length_is_left_to_the_general_path_which_faults(stub):
    assert codec_fast.decode_dword(stub) is None
    with pytest.raises(RpcFault):
        codec.decode_request(31, stub, False)


def _zeroed_cursor_stub(ndr64: bool, h_queue: int, zero_pads: bool = False) -> bytes:
    from qm2qm.mqmp.client import create_remote_cursor_request
    stub = create_remote_cursor_request(h_queue, ndr64).getData()
    if zero_pads:               # as Windows marshals it: the gaps zeroed, not filled as impacket fills them
        stub = bytes(0 if i < len(stub) - 4 else byte for i, byte in enumerate(stub))
    return stub


@given(syntax, u32, st.booleans())
def test_the_zeroed_cursor_request_windows_sends_reads_its_h_queue_as_impacket_reads_it(ndr64, h_queue, zero_pads):
    stub = _zeroed_cursor_stub(ndr64, h_queue, zero_pads)
    assert codec_fast.decode_create_remote_cursor(stub, ndr64) == h_queue
    assert codec.decode_request(4, stub, ndr64)["hQueue"] == h_queue


@settings(max_examples=300)
@given(syntax, u32, st.data())
def test_a_changed_cursor_request_is_read_as_impacket_reads_it_or_left_to_it(ndr64, h_queue, data):
    stub = changed(data, _zeroed_cursor_stub(ndr64, h_queue))
    fast = codec_fast.decode_create_remote_cursor(stub, ndr64)
    if fast is not None:
        assert fast == codec.decode_request(4, stub, ndr64)["hQueue"]


@pytest.mark.parametrize("ndr64", [False, True])
def test_a_cursor_request_with_a_receive_transfer_buffer_is_left_to_the_general_path(ndr64):
    from impacket.dcerpc.v5.ndr import NDRPOINTER
    request = idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    tb = request["ptb1"]
    for name, _ in tb.structure:
        if name != "u":
            tb[name] = NULL if isinstance(tb.fields[name], NDRPOINTER) else 0
    tb["uTransferType"] = tb["u"]["tag"] = c.CACTB_RECEIVE
    receive = tb["u"]["Receive"]
    for name, _ in receive.structure:
        receive[name] = NULL if isinstance(receive.fields[name], NDRPOINTER) else 0
    receive["ulDestFormatNameLen"] = 2048                          # outside [range(0,1024)]
    request["hQueue"] = 9
    stub = request.getData()
    assert codec_fast.decode_create_remote_cursor(stub, ndr64) is None
    with pytest.raises(RpcFault):
        codec.decode_request(4, stub, ndr64)


@given(syntax, u32, st.integers(-0x80000000, 0xFFFFFFFF))
def test_create_remote_cursor_response_equals_impacket(ndr64, cursor, status):
    assert codec_fast.encode_create_remote_cursor(cursor, status) == \
        codec.encode_response(4, ndr64, phCursor=cursor, ErrorCode=status)
