"""The read path's struct codec (qm2qm/mqrr/codec_fast.py) equals impacket's marshalling of qm2qm.mqrr.idl
(MS-MQRR 6; MS-RPCE 2.2.5), both syntaxes, up to the contents of alignment gaps (impacket fills them, we zero them)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqrr import codec, codec_fast, idl

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
