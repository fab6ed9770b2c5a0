"""ScalarArrayItems (qm2qm/rpc/ndr_arrays.py) reads byte and WCHAR arrays as impacket's item-by-item loop does:
the same values, the same bytes consumed, the same error — on bare arrays at every alignment and count, and on the
requests whose arrays a peer controls (R_QMCreateRemoteCursor's transfer buffer, R_QMEnlistRemoteTransaction's
token), whole, cut short and altered, NDR and NDR64."""
from __future__ import annotations

import struct

import impacket.dcerpc.v5.ndr as impacket_ndr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from impacket.dcerpc.v5.ndr import NDR, NDRPOINTER, NULL, NDRUniConformantArray, NDRUniConformantVaryingArray

from qm2qm.mqmp import idl as mqmp_idl
from qm2qm.mqrr import idl as mqrr_idl
from qm2qm.rpc import ndr_arrays
from qm2qm.rpc.ndr_arrays import ScalarArrayItems, items_skipped
from qm2qm.rpc.quiet_ndr import parse_quietly


class _Bytes(ScalarArrayItems, NDRUniConformantArray):
    item = "c"


class _Wchars(ScalarArrayItems, NDRUniConformantArray):
    item = "<H"


class _VaryingBytes(ScalarArrayItems, NDRUniConformantVaryingArray):
    item = "c"


class _VaryingWchars(ScalarArrayItems, NDRUniConformantVaryingArray):
    item = "<H"


def _plain(value):
    """An impacket object as nested dicts and lists (the transient _tmpItem of a failed parse left out; a referent
    ID as whether it is set, since a pointer the parse did not reach keeps the random one impacket made)."""
    if isinstance(value, NDR):
        return {name: bool(field) if name == "ReferentID" else _plain(field)
                for name, field in value.fields.items() if name != "_tmpItem"}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _outcome(parse):
    try:
        used = parse()
    except Exception as exc:        # noqa: BLE001 - the same exception, whatever it is, is the point
        return "raised", type(exc), str(exc)
    return "read", used


def _both(monkeypatch, parse):
    """(the outcome with ScalarArrayItems, the outcome of impacket's own loop) of ``parse()`` -> (outcome, value)."""
    fast = _outcome(parse[0]), _plain(parse[1]())
    with monkeypatch.context() as patch:
        patch.setattr(ndr_arrays, "_READERS", {})      # every item goes to impacket's NDRArray.unpack
        slow = _outcome(parse[2]), _plain(parse[3]())
    return fast, slow


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cls=hs.sampled_from([_Bytes, _Wchars, _VaryingBytes, _VaryingWchars]), ndr64=hs.booleans(),
       count=hs.integers(0, 70), offset=hs.integers(0, 5), data=hs.binary(max_size=90))
def test_a_bare_array_reads_as_impacket_reads_it(monkeypatch, cls, ndr64, count, offset, data):
    arrays = {}

    def parse(key):
        array = arrays[key] = cls(isNDR64=ndr64)
        if issubclass(cls, NDRUniConformantArray):
            array.arraySize = count             # what the enclosing structure reads before the items
            return array.unpack("Data", "*MaximumCount", data, offset)
        array.fields["ActualCount"] = count
        return array.unpack("Data", "*ActualCount", data, offset)

    fast, slow = _both(monkeypatch, (lambda: parse("fast"), lambda: arrays["fast"], lambda: parse("slow"),
                                     lambda: arrays["slow"]))
    assert fast == slow


CURSOR_ARRAYS = ("ppBody", "ppTitle", "ppSenderID", "ppwcsProvName")


def cursor_request_with_arrays(ndr64: bool, body: bytes, title: str, sender: bytes, provider: str) -> bytes:
    """R_QMCreateRemoteCursor whose transfer buffer carries a body (a varying byte array), a title (a varying WCHAR
    array), a sender ID (a conformant byte array) and a provider name (a conformant WCHAR array)."""
    request = mqmp_idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    tb = request["ptb1"]
    items = (list(body), [ord(ch) for ch in title], list(sender), [ord(ch) for ch in provider])
    arrays = dict(zip(CURSOR_ARRAYS, items))
    for name, _ in tb.structure:
        if name == "u":
            continue
        if name in arrays and arrays[name]:
            tb.fields[name].fields["Data"].fields["Data"]["Data"] = arrays[name]
        else:
            tb[name] = NULL if isinstance(tb.fields[name], NDRPOINTER) else 0
    tb["uTransferType"] = tb["u"]["tag"] = 0
    tb["u"]["Send"]["pAdminQueueFormat"] = tb["u"]["Send"]["pResponseQueueFormat"] = NULL
    request["hQueue"] = 7
    return request.getData()


def _enlist_request(ndr64: bool, token: bytes) -> bytes:
    request = mqrr_idl.R_QMEnlistRemoteTransaction(isNDR64=ndr64)
    request["pTransactionId"]["rgb"] = b"\x01" * 16
    request["cbPropagationToken"], request["pbPropagationToken"] = len(token), list(token)
    request["pQueueFormat"]["m_qft"] = request["pQueueFormat"]["u"]["tag"] = 1
    request["pQueueFormat"]["u"]["m_gPublicID"] = bytes(16)
    return request.getData()


def _altered(stub: bytes, cut: int, flips: list[tuple[int, int]]) -> bytes:
    altered = bytearray(stub[:max(0, len(stub) - cut)])
    for at, value in flips:
        if altered:
            altered[at % len(altered)] = value
    return bytes(altered)


def _request_outcomes(monkeypatch, cls, ndr64: bool, stub: bytes):
    calls = {}

    def parse(key):
        calls[key] = cls(isNDR64=ndr64)
        return parse_quietly(calls[key], stub)

    return _both(monkeypatch, (lambda: parse("fast"), lambda: calls["fast"], lambda: parse("slow"),
                               lambda: calls["slow"]))


_TEXT = hs.text(hs.characters(min_codepoint=1, max_codepoint=0xD7FF), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ndr64=hs.booleans(), body=hs.binary(max_size=40), title=_TEXT, sender=hs.binary(max_size=9), provider=_TEXT,
       cut=hs.integers(0, 40), flips=hs.lists(hs.tuples(hs.integers(0, 2000), hs.integers(0, 255)), max_size=3))
def test_a_transfer_buffer_reads_as_impacket_reads_it(monkeypatch, ndr64, body, title, sender, provider, cut, flips):
    stub = _altered(cursor_request_with_arrays(ndr64, body, title, sender, provider), cut, flips)
    fast, slow = _request_outcomes(monkeypatch, mqmp_idl.R_QMCreateRemoteCursor, ndr64, stub)
    assert fast == slow
    skipping = mqmp_idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    with items_skipped():
        outcome = _outcome(lambda: parse_quietly(skipping, stub))
    assert outcome == fast[0]               # stepped over alike, errors alike: only the items are not kept
    if outcome[0] == "read":
        assert _plain(skipping)["hQueue"] == fast[1]["hQueue"]
        assert all(_array_items(skipping["ptb1"], name) == [] for name in CURSOR_ARRAYS)


def _array_items(tb, name: str) -> list:
    """The items of one of the transfer buffer's arrays ([] when its pointer is NULL)."""
    outer = tb.fields[name]
    if not outer["ReferentID"] or not outer.fields["Data"]["ReferentID"]:
        return []
    return outer.fields["Data"].fields["Data"]["Data"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ndr64=hs.booleans(), token=hs.binary(max_size=40), cut=hs.integers(0, 40),
       flips=hs.lists(hs.tuples(hs.integers(0, 200), hs.integers(0, 255)), max_size=3))
def test_a_propagation_token_reads_as_impacket_reads_it(monkeypatch, ndr64, token, cut, flips):
    stub = _altered(_enlist_request(ndr64, token), cut, flips)
    fast, slow = _request_outcomes(monkeypatch, mqrr_idl.R_QMEnlistRemoteTransaction, ndr64, stub)
    assert fast == slow


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_a_large_array_is_read_at_once_not_item_by_item(monkeypatch, ndr64):
    """The cost that held the event loop: impacket unpacks each item with its own unpack_from call."""
    stub = cursor_request_with_arrays(ndr64, b"b" * 4, "", b"", "")     # the body last: hQueue follows it
    at = stub.index(b"bbbb")
    count = struct.Struct("<QQQ" if ndr64 else "<III")          # MaximumCount, Offset, ActualCount
    assert count.unpack_from(stub, at - count.size) == (4, 0, 4)
    size = 200_000
    stub = stub[:at - count.size] + count.pack(size, 0, size) + b"b" * size + stub[at + 4:]
    calls = []
    original = impacket_ndr.unpack_from
    monkeypatch.setattr(impacket_ndr, "unpack_from", lambda *a: calls.append(a) or original(*a))
    request = mqmp_idl.R_QMCreateRemoteCursor(isNDR64=ndr64)
    parse_quietly(request, stub)
    assert request["hQueue"] == 7 and len(request["ptb1"]["ppBody"]) == size
    assert len(calls) < 1000
