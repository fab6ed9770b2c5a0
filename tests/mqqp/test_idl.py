"""qm2qm.mqqp.idl (and the codec's dataclasses) mirror idl/qm2qm.idl (MS-MQQP 6) name for name and in IDL order,
with each IDL declaration copied as the comment above its class."""
from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from impacket.uuid import uuidtup_to_bin

from qm2qm.mqqp import codec, constants, idl

IDL_TEXT = (Path(__file__).resolve().parents[2] / "idl" / "qm2qm.idl").read_text()
METHOD_RE = re.compile(r"^\s*(HRESULT|DWORD|void)\s+(\w+)\s*\((.*?)\);", re.S | re.M)
STRUCT_RE = re.compile(r"typedef struct _(\w+) \{(.*?)\}\s*(\w+)\s*;", re.S)
PARAM_RE = re.compile(r"\[([^\]]*)\]\s*([\w ]+?)\s*\*?\s*(\w+)$")


def idl_methods():
    methods = []
    for m in METHOD_RE.finditer(IDL_TEXT):
        params = []
        for raw in re.split(r",\s*\n", m.group(3)):
            raw = " ".join(raw.split())
            if not raw:
                continue
            attrs, _, name = PARAM_RE.match(raw).groups()
            direction = {a.strip() for a in attrs.split(",")} & {"in", "out"}
            params.append((name, direction))
        methods.append((m.group(1), m.group(2), params, m.group(0)))
    return methods


def idl_structs():
    return {m.group(3): ([line.split()[-1].strip(";*") for line in m.group(2).split(";") if line.strip()],
                         m.group(0)) for m in STRUCT_RE.finditer(IDL_TEXT)}


def comment_above(cls) -> str:
    src_lines = inspect.getsource(inspect.getmodule(cls)).splitlines()
    index = next(i for i, line in enumerate(src_lines) if line.startswith(f"class {cls.__name__}("))
    block = []
    for line in reversed(src_lines[:index]):
        if not line.startswith("#"):
            break
        block.append(line[1:])
    return "\n".join(reversed(block))


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def test_the_idl_declares_eleven_methods():
    assert [name for _, name, _, _ in idl_methods()] == [constants.OPNUM_NAMES[n] for n in range(11)]


def test_interface_uuid_and_version():
    header = re.search(r"uuid\(([0-9a-f-]+)\),\s*version\((\d+)\.(\d+)\)", IDL_TEXT)
    assert str(constants.QM2QM_UUID) == header.group(1)
    assert constants.QM2QM_VERSION == (int(header.group(2)), int(header.group(3)))
    assert idl.MSRPC_UUID_QM2QM == uuidtup_to_bin((header.group(1), f"{header.group(2)}.{header.group(3)}"))


@pytest.mark.parametrize("opnum", range(11))
def test_opnum_classes_mirror_the_method(opnum):
    returns, name, params, text = idl_methods()[opnum]
    request, response = idl.OPNUMS[opnum]
    assert request.__name__ == name and request.opnum == opnum
    assert response.__name__ == name + "Response"
    ins = [p for p, d in params if "in" in d and p != "hBind"]
    outs = [p for p, d in params if "out" in d] + {"HRESULT": ["ErrorCode"], "DWORD": ["ReturnValue"],
                                                   "void": []}[returns]
    assert [f for f, _ in request.structure] == ins
    assert [f for f, _ in response.structure] == outs
    assert [f.name for f in dataclasses.fields(codec.REQUEST_TYPES[opnum])] == ins
    assert [f.name for f in dataclasses.fields(codec.RESPONSE_TYPES[opnum])] == outs
    assert codec.REQUEST_TYPES[opnum].__name__ == name + "Request"
    assert codec.RESPONSE_TYPES[opnum].__name__ == name + "Response"
    assert tokens(comment_above(request)) == tokens(text)


@pytest.mark.parametrize("name", ["REMOTEREADDESC", "REMOTEREADDESC2"])
def test_structs_mirror_the_typedef(name):
    fields, text = idl_structs()[name]
    assert [f for f, _ in getattr(idl, name).structure] == fields
    assert [f.name for f in dataclasses.fields(getattr(codec, name))] == fields
    assert tokens(comment_above(getattr(idl, name))) == tokens(text)


def test_enum_and_context_handles_mirror_the_typedefs():
    enum = re.search(r"typedef enum _REMOTEREADACK \{(.*?)\}\s*REMOTEREADACK\s*;", IDL_TEXT, re.S)
    names = [n.strip() for n in enum.group(1).split(",")]
    assert [(i.name, i.value) for i in idl.REMOTEREADACK.enumItems] == [(n, v) for v, n in enumerate(names)]
    assert [(i.name, i.value) for i in constants.REMOTEREADACK] == [(n, v) for v, n in enumerate(names)]
    assert tokens(comment_above(idl.REMOTEREADACK)) == tokens(enum.group(0))
    for handle in ("PCTX_RRSESSION_HANDLE_TYPE", "PCTX_REMOTEREAD_HANDLE_TYPE"):
        assert f"typedef [context_handle] void *{handle};" in IDL_TEXT
        assert tokens(comment_above(getattr(idl, handle))) == tokens(f"typedef [context_handle] void *{handle};")


def idl_declaration_offset(name: str) -> int:
    """Where the IDL declares name: a context-handle typedef, an enum/struct typedef or a method."""
    found = re.search(rf"void \*{name};|\}}\s*{name}\s*;|\b{name}\s*\(", IDL_TEXT)
    return found.start()


def test_declarations_follow_idl_order():
    names = ["PCTX_RRSESSION_HANDLE_TYPE", "PCTX_REMOTEREAD_HANDLE_TYPE", "REMOTEREADACK", "REMOTEREADDESC",
             "REMOTEREADDESC2"] + [name for _, name, _, _ in idl_methods()]
    in_idl = sorted(names, key=idl_declaration_offset)
    assert in_idl.index("REMOTEREADDESC2") == 4 + 8     # declared between GetQMQMServerPort and GetVersion
    source = inspect.getsource(idl)
    assert sorted(names, key=lambda n: source.index(f"\nclass {n}(")) == in_idl


def test_range_constants_match_the_idl():
    assert re.search(r"\[range \(0, 4325376\)\] DWORD dwSize", IDL_TEXT)
    assert constants.RANGE_dwSize == (0, constants.MAX_REMOTEREAD_BUFFER) == (0, 4325376)
    for name, bounds in (("dwAck", constants.RANGE_dwAck), ("dwMQS", constants.RANGE_dwMQS),
                         ("dwPortType", constants.RANGE_dwPortType)):
        found = re.search(rf"range\((\d+), (\d+)\)\] DWORD {name}\b", IDL_TEXT)
        assert (int(found.group(1)), int(found.group(2))) == bounds


def test_impacket_request_builds_and_parses_with_ndr64():
    req = idl.RemoteQMEndReceive(isNDR64=True)
    req["pphContext"] = bytes(range(20))
    req["dwAck"] = 2
    stub = req.getData()
    assert stub == bytes(range(20)) + b"\x02\x00\x00\x00"
    assert idl.RemoteQMEndReceive(stub, isNDR64=True)["pphContext"] == bytes(range(20))
