"""The call table's JSON columns (qm2qm/pipeline/decode.py _dumps) are exactly the text of
json.JSONEncoder(sort_keys=True, separators=(",", ":")) with the bytes-as-hex default, whichever encoder wrote them
(orjson where it gives the same text, json itself elsewhere): a capture ingested today and one ingested before
compare equal (`qm2qm diff`)."""
from __future__ import annotations

import dataclasses
import enum
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qm2qm.mqqp import codec
from qm2qm.pipeline import decode
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.rpc.interface import RpcFault
from shared_adm.message import Message
from shared_adm.packet import deserialize_message_from_buffer


def _json(value) -> str:
    return decode._ENCODER.encode(value)


def test_every_stub_and_message_of_a_recorded_capture_dumps_as_json_writes_it(recorded):
    path, _ = recorded
    seen = 0
    for row in ingest_file(path).calls:
        if row.get("interface_uuid") != decode.QM2QM_UUID_STR or row.get("opnum") is None:
            continue
        ndr64 = row.get("transfer_syntax") == "NDR64"
        stubs = [(codec.decode_request, row.get("request_stub"))]
        if row.get("status_kind") == "ok":
            stubs.append((codec.decode_response, row.get("response_stub")))
        for decoder, stub in stubs:
            if stub is None:
                continue
            try:
                value = decoder(row["opnum"], stub, ndr64)
            except RpcFault:
                continue
            assert decode._dumps(value) == _json(value)
            seen += 1
            desc = decode._read_desc(value)
            if desc is not None and desc.lpBuffer:
                message = deserialize_message_from_buffer(desc.lpBuffer)
                assert decode._dumps(message) == _json(message)
                seen += 1
    assert seen > 20


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 7


class Mode(enum.Enum):
    ON = "on"


@dataclasses.dataclass(slots=True)
class Inner:
    label: str
    raw: bytes
    when: int


@dataclasses.dataclass
class Outer:
    inner: Inner
    items: list
    ident: uuid.UUID
    colour: Colour
    mode: Mode
    pair: tuple


TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FFF), max_size=12)
INTS = st.one_of(st.integers(-2**63, 2**64 - 1), st.integers(min_value=2**64, max_value=2**80))
SCALARS = st.one_of(st.none(), st.booleans(), INTS, TEXT, st.binary(max_size=8), st.uuids(),
                    st.sampled_from(list(Colour) + list(Mode)))
OUTERS = st.builds(Inner, TEXT, st.binary(max_size=6), INTS).map(
    lambda i: Outer(i, [i.label, None], uuid.UUID(int=i.when % 2**128), Colour.BLUE, Mode.ON, (i.when, i.raw)))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(TEXT, inner, max_size=3), st.dictionaries(st.integers(-5, 5), inner, max_size=3), OUTERS),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_any_value_without_floats_dumps_as_json_writes_it(value):
    assert decode._dumps(value) == _json(value)


@pytest.mark.parametrize("label", ["caf\u00e9", "line\u2028", "a\x7fb", "\x01\x1f\t\n\"\\/", "\U0001F600"])
def test_a_label_json_escapes_is_escaped_as_json_escapes_it(label):
    message = Message(body=b"x", label=label)
    assert decode._dumps(message) == _json(message)
    assert decode._dumps(message).isascii()
