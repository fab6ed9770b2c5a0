"""qm2qm/mqmp/idl.py mirrors idl/qmcomm.idl (MS-MQMP 6) name for name, and round-trips over NDR and NDR64."""
import re
import uuid
from pathlib import Path

import pytest

from qm2qm.mqmp import codec, idl

IDL = (Path(__file__).resolve().parents[2] / "idl" / "qmcomm.idl").read_text()


def _methods():
    for m in re.finditer(r"//\s*opnum (\d+)\s+(\w+)\s+(\w+)\((.*?)\);", IDL, re.S):
        opnum, ret, name, params = int(m[1]), m[2], m[3], m[4]
        parsed = [(re.search(r"\[([^\]]*)\]", p)[1], re.findall(r"(\w+)\s*$", p.strip())[0])
                  for p in params.split(",\n") if p.strip()]
        yield opnum, ret, name, parsed


@pytest.mark.parametrize("opnum, ret, name, params", list(_methods()), ids=lambda v: str(v)[:30])
def test_declarations_follow_the_idl(opnum, ret, name, params):
    request, response = idl.OPNUMS[opnum]
    assert request.__name__ == name and request.opnum == opnum
    ins = [n for attrs, n in params if "in" in [a.strip() for a in attrs.split(",")] and n != "hBind"]
    outs = [n for attrs, n in params if "out" in [a.strip() for a in attrs.split(",")]]
    assert [n for n, _ in request.structure] == ins
    tail = {"HRESULT": ["ErrorCode"], "DWORD": ["ReturnValue"], "void": []}[ret]
    assert [n for n, _ in response.structure] == outs + tail


def test_idl_lists_exactly_the_served_opnums():
    assert sorted(opnum for opnum, *_ in _methods()) == sorted(idl.OPNUMS) == [1, 2, 3, 4, 31]


@pytest.mark.parametrize("ndr64", [False, True])
@pytest.mark.parametrize("name", ["DIRECT=OS:h\\private$\\q", "DIRECT=TCP:10.1.2.3\\q;JOURNAL",
                                  "PRIVATE={%s}\\0000000a" % uuid.UUID(int=7), "PUBLIC={%s}" % uuid.UUID(int=9),
                                  "MACHINE={%s};DEADXACT" % uuid.UUID(int=3)])
def test_queue_format_round_trips(ndr64, name):
    req = idl.R_QMOpenRemoteQueue(isNDR64=ndr64)
    codec.fill_queue_format(req["pQueueFormat"], name)
    req["pLicGuid"] = bytes(16)
    decoded = codec.decode_request(2, req.getData(), ndr64)
    assert codec.format_name(decoded["pQueueFormat"]).lower() == name.lower()
