"""The read path's struct codec (qm2qm/mqrr/codec_fast.py) equals impacket's marshalling of qm2qm.mqrr.idl
(MS-MQRR 6; MS-RPCE 2.2.5), both syntaxes, up to the contents of alignment gaps (impacket fills them, we zero them)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqrr import codec, codec_fast, idl
from tests.stub_changes import changed

u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
handle = st.binary(min_size=20, max_size=20)
sections = st.lists(st.tuples(st.integers(0, 4), u32, st.binary(max_size=40)), max_size=3)


def impacket_response(arrive, sequence, secs, status, ndr64):
    r = idl.R_StartReceiveResponse(isNDR64=ndr64)
    r["pdwArriveTime"], r["pSequenceId"], r["pdwNumberOfSections"] = arrive, sequence, len(secs)
    buffers = []
    for kind, alloc, data in secs:
        b = idl.SectionBuffer(isNDR64=ndr64)
        b["SectionBufferType"], b["SectionSizeAlloc"], b["SectionSize"], b["pSectionBuffer"] = \
            kind, alloc, len(data), data
        buffers.append(b)
    r["ppPacketSections"] = buffers if secs else NULL
    r["ErrorCode"] = status - (1 << 32) if status & 0x80000000 else status
    if secs:                                            # the referent ids Windows writes, as ours
        r.fields["ppPacketSections"].fields["ReferentID"] = codec_fast.REFERENT_ID_BASE
        for i, b in enumerate(r["ppPacketSections"]):
            b.fields["pSectionBuffer"].fields["ReferentID"] = \
                codec_fast.REFERENT_ID_BASE + codec_fast.REFERENT_ID_STEP * (i + 1)
    return r.getData()


def equal_but_gaps(ours: bytes, theirs: bytes) -> None:
    assert len(ours) == len(theirs)
    assert [i for i in range(len(ours)) if ours[i] != theirs[i] and ours[i] != 0] == []


@settings(max_examples=80, deadline=None)
@given(u32, u64, sections, u32)
def test_start_receive_response_equals_impacket(arrive, sequence, secs, status):
    for ndr64 in (False, True):
        ours = codec_fast.encode_receive_response(arrive, sequence, secs, status, ndr64)
        equal_but_gaps(ours, impacket_response(arrive, sequence, secs, status, ndr64))
        decoded = idl.R_StartReceiveResponse(isNDR64=ndr64)
        decoded.fromString(ours)
        got = [(s["SectionBufferType"], s["SectionSizeAlloc"], b"".join(s["pSectionBuffer"] or []))
               for s in (decoded["ppPacketSections"] or [])]
        assert (decoded["pdwArriveTime"], decoded["pSequenceId"], decoded["pdwNumberOfSections"]) == \
            (arrive, sequence, len(secs))
        assert got == [(k, a, d) for k, a, d in secs]
        assert decoded["ErrorCode"] & 0xFFFFFFFF == status


@settings(max_examples=80, deadline=None)
@given(handle, u64, u32, u32, u32, u32, u32, u32)
def test_start_receive_request_equals_impacket(h, lookup, cursor, action, timeout, request_id, body, compound):
    for ndr64 in (False, True):
        r = idl.R_StartReceive(isNDR64=ndr64)
        r["phContext"], r["LookupId"], r["hCursor"], r["ulAction"] = h, lookup, cursor, action
        r["ulTimeout"], r["dwRequestId"], r["dwMaxBodySize"], r["dwMaxCompoundMessageSize"] = \
            timeout, request_id, body, compound
        fields = codec.decode(7, r.getData(), ndr64)
        assert isinstance(fields, dict)
        assert fields == {"phContext": h, "LookupId": lookup, "hCursor": cursor, "ulAction": action,
                          "ulTimeout": timeout, "dwRequestId": request_id, "dwMaxBodySize": body,
                          "dwMaxCompoundMessageSize": compound}


@settings(max_examples=80, deadline=None)
@given(handle, u32, u32)
def test_end_receive_request_equals_impacket(h, ack, request_id):
    for ndr64 in (False, True):
        for opnum, cls in ((9, idl.R_EndReceive), (15, idl.R_EndTransactionalReceive)):
            r = cls(isNDR64=ndr64)
            r["phContext"], r["dwAck"], r["dwRequestId"] = h, ack, request_id
            assert codec.decode(opnum, r.getData(), ndr64) == {"phContext": h, "dwAck": ack, "dwRequestId": request_id}


@given(st.binary(max_size=80).filter(lambda b: len(b) not in (28, 56)))
def test_any_other_stub_length_goes_to_impacket_and_bad_data_is_a_stub_fault(stub):
    from qm2qm.rpc.interface import RpcFault
    for opnum in (7, 9):
        try:
            codec.decode(opnum, stub, False)
        except RpcFault as fault:
            assert fault.status == codec.RPC_X_BAD_STUB_DATA


@given(u32)
def test_an_hresult_alone_is_its_four_bytes(status):
    for ndr64 in (False, True):
        response = idl.R_EndReceiveResponse(isNDR64=ndr64)
        response["ErrorCode"] = status - (1 << 32) if status & 0x80000000 else status
        assert codec.encode(9, ndr64, ErrorCode=codec.signed(status)) == response.getData()


def test_a_truncated_stub_is_bad_stub_data_without_impacket_error_log_lines(caplog):
    """Found by scripts/soak.py: impacket logged two ERROR records per malformed MS-MQRR stub into the server log."""
    import logging

    import pytest

    from qm2qm.rpc.interface import RpcFault
    caplog.set_level(logging.DEBUG)
    for ndr64 in (False, True):
        with pytest.raises(RpcFault) as fault:
            codec.decode(3, b"\x00" * 11, ndr64)            # R_CloseQueue: a 20-byte handle cut short
        assert fault.value.status == codec.RPC_X_BAD_STUB_DATA
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_queue_format_cut_after_its_union_tag_is_bad_stub_data():
    """Found by the coverage fuzzer: impacket reads a union's tag but not its arm when 4 bytes or fewer follow,
    and the request decoded with no m_pDirectID (a KeyError in the format-name mapping)."""
    import pytest

    from qm2qm.rpc.interface import RpcFault
    r = idl.R_QMEnlistRemoteTransaction()
    r["pTransactionId"]["rgb"] = b"\x01" * 16
    r["cbPropagationToken"], r["pbPropagationToken"] = 4, list(b"soak")
    r["pQueueFormat"]["m_qft"] = r["pQueueFormat"]["u"]["tag"] = 3
    r["pQueueFormat"]["m_SuffixAndFlags"] = r["pQueueFormat"]["m_reserved"] = 0
    r["pQueueFormat"]["u"]["m_pDirectID"] = "OS:.\\private$\\q\x00"
    stub = r.getData()
    tag_at = stub.index(b"\x03\x00\x00\x00", 16 + 4 + 4 + 4)        # m_qft, m_SuffixAndFlags, m_reserved
    with pytest.raises(RpcFault) as fault:
        codec.decode(12, stub[:tag_at + 4 + 1], False)
    assert fault.value.status == codec.RPC_X_BAD_STUB_DATA


# --- R_OpenQueue / R_CloseQueue: a session's open and close ---------------------------------------------------------

guid = st.binary(min_size=16, max_size=16)
small_int = st.integers(0, 255)
long_ = st.integers(-0x80000000, 0x7FFFFFFF)


@st.composite
def queue_formats(draw):
    """(m_qft, m_SuffixAndFlags, the arm's value) of the arms codec_fast reads: PUBLIC, PRIVATE, DIRECT, MACHINE."""
    qft = draw(st.sampled_from([1, 2, 3, 4]))
    flags = draw(small_int)
    if qft == 2:
        return qft, flags, (draw(guid), draw(u32))
    if qft == 3:
        return qft, flags, draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))
    return qft, flags, draw(guid)


def open_queue_stub(ndr64, queue_format, access, share, client, routing, major, minor, build, workgroup):
    r = idl.R_OpenQueue(isNDR64=ndr64)
    qft, flags, value = queue_format
    qf = r["pQueueFormat"]
    qf["m_qft"] = qf["u"]["tag"] = qft
    qf["m_SuffixAndFlags"], qf["m_reserved"] = flags, 0
    arm = {1: "m_gPublicID", 2: "m_oPrivateID", 3: "m_pDirectID", 4: "m_gMachineID"}[qft]
    if qft == 2:
        qf["u"][arm]["Lineage"], qf["u"][arm]["Uniquifier"] = value
    else:
        qf["u"][arm] = value + "\x00" if qft == 3 else value
    r["dwAccess"], r["dwShareMode"], r["pClientId"], r["fNonRoutingServer"] = access, share, client, routing
    r["Major"], r["Minor"], r["BuildNumber"], r["fWorkgroup"] = major, minor, build, workgroup
    return r.getData()


def impacket_open_queue(stub, ndr64):
    """What impacket's decode makes of an R_OpenQueue stub: (format name or None, dwAccess, dwShareMode)."""
    from qm2qm.mqrr.queue_format import format_name
    r = idl.R_OpenQueue(isNDR64=ndr64)
    r.fromString(stub)
    return format_name(r["pQueueFormat"]), r["dwAccess"], r["dwShareMode"]


def fast_open_queue(stub, ndr64):
    from qm2qm.mqrr.queue_format import format_name
    fields = codec_fast.decode_open_queue(stub, ndr64)
    return None if fields is None else (format_name(fields["pQueueFormat"]), fields["dwAccess"], fields["dwShareMode"])


@settings(max_examples=200, deadline=None)
@given(st.booleans(), queue_formats(), u32, u32, guid, long_, small_int, small_int, st.integers(0, 0xFFFF), long_)
def test_open_queue_request_reads_as_impacket_reads_it(ndr64, queue_format, access, share, client, routing, major,
                                                       minor, build, workgroup):
    stub = open_queue_stub(ndr64, queue_format, access, share, client, routing, major, minor, build, workgroup)
    fast = fast_open_queue(stub, ndr64)
    assert fast is not None and fast == impacket_open_queue(stub, ndr64)
    assert isinstance(codec.decode(2, stub, ndr64), dict)          # the server's decode takes the fast path


@settings(max_examples=200, deadline=None)
@given(st.booleans(), queue_formats(), u32, u32, st.data())
def test_a_changed_open_queue_request_is_read_as_impacket_reads_it_or_left_to_it(ndr64, queue_format, access,
                                                                                  share, data):
    stub = changed(data, open_queue_stub(ndr64, queue_format, access, share, bytes(16), 1, 6, 1, 0, 1))
    fast = fast_open_queue(stub, ndr64)
    if fast is not None:
        assert fast == impacket_open_queue(stub, ndr64)


@given(st.booleans(), handle, u32)
def test_open_and_close_queue_stubs_equal_impacket(ndr64, h, status):
    request = idl.R_CloseQueue(isNDR64=ndr64)
    request["pphContext"] = h
    assert codec.decode(3, request.getData(), ndr64) == {"pphContext": h}
    response = idl.R_OpenQueueResponse(isNDR64=ndr64)
    response["pphContext"] = h
    assert codec.encode(2, ndr64, pphContext=h) == response.getData()
    response = idl.R_CloseQueueResponse(isNDR64=ndr64)
    response["pphContext"], response["ErrorCode"] = h, codec.signed(status)
    assert codec.encode(3, ndr64, pphContext=h, ErrorCode=codec.signed(status)) == response.getData()
    assert codec.encode(3, ndr64, pphContext=h, ErrorCode=status) == response.getData()


@settings(max_examples=80, deadline=None)
@given(st.booleans(), handle, u64, u32, u32, u32, u32, u32, u32, guid)
def test_start_transactional_receive_request_reads_as_impacket_reads_it(ndr64, h, lookup, cursor, action, timeout,
                                                                         request_id, body, compound, uow):
    from qm2qm.mqrr.handlers._transaction import uow_of
    r = idl.R_StartTransactionalReceive(isNDR64=ndr64)
    r["phContext"], r["LookupId"], r["hCursor"], r["ulAction"] = h, lookup, cursor, action
    r["ulTimeout"], r["dwRequestId"], r["dwMaxBodySize"], r["dwMaxCompoundMessageSize"] = \
        timeout, request_id, body, compound
    r["pTransactionId"]["rgb"] = uow
    stub = r.getData()
    fields = codec.decode(13, stub, ndr64)
    assert isinstance(fields, dict)
    theirs = idl.R_StartTransactionalReceive(isNDR64=ndr64)
    theirs.fromString(stub)
    for name in ("LookupId", "hCursor", "ulAction", "ulTimeout", "dwRequestId", "dwMaxBodySize",
                 "dwMaxCompoundMessageSize"):
        assert fields[name] == theirs[name]
    assert fields["phContext"] == codec.handle_bytes(theirs["phContext"]) == h
    assert uow_of(fields["pTransactionId"]) == uow_of(theirs["pTransactionId"]) == uow


@settings(max_examples=80, deadline=None)
@given(st.booleans(), handle, u32, u32)
def test_the_handle_and_dword_requests_read_as_impacket_reads_them(ndr64, h, value, status):
    """R_CreateCursor, R_CloseCursor, R_PurgeQueue, R_CancelReceive; and R_CreateCursor's response."""
    for cls, dword in ((idl.R_CreateCursor, None), (idl.R_CloseCursor, "hCursor"), (idl.R_PurgeQueue, None),
                       (idl.R_CancelReceive, "dwRequestId")):
        r = cls(isNDR64=ndr64)
        r["phContext"] = h
        if dword:
            r[dword] = value
        fields = codec.decode(cls.opnum, r.getData(), ndr64)
        assert fields == {"phContext": h, **({dword: value} if dword else {})}
    response = idl.R_CreateCursorResponse(isNDR64=ndr64)
    response["phCursor"], response["ErrorCode"] = value, codec.signed(status)
    assert codec.encode(4, ndr64, phCursor=value, ErrorCode=codec.signed(status)) == response.getData()
