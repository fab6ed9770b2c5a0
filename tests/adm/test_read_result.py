"""ReadResult (MS-MQDMPR rStatus/rMessage of the read events): a peek's Message is rebuilt from its compact form."""
from __future__ import annotations

from shared_adm import status as st
from shared_adm.compact import pack
from shared_adm.descriptor import ReadResult
from shared_adm.message import Message


def test_a_result_given_a_compact_form_rebuilds_an_equal_message_once():
    message = Message(body=b"lazy", label="l", lookup_identifier=42)
    result = ReadResult(st.MQ_OK, packed=pack(message))
    assert result.message == message
    assert result.message is result.message                  # rebuilt once, then the same object
    assert result == ReadResult(st.MQ_OK, message)             # equal to an eager result with that Message
    assert "lazy" in repr(result) and result.ok


def test_setting_the_message_forgets_the_compact_form():
    result = ReadResult(st.MQ_OK, packed=pack(Message(body=b"old")))
    result.message = Message(body=b"new")
    assert result.packed is None and result.message.body == b"new"


def test_a_result_without_a_message_has_none():
    result = ReadResult(st.MQ_ERROR_IO_TIMEOUT)
    assert result.message is None and result.packed is None and not result.ok
    assert result != ReadResult(st.MQ_OK) and result == ReadResult(st.MQ_ERROR_IO_TIMEOUT)
