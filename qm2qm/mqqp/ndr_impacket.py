"""Conversion between the codec dataclasses (qm2qm.mqqp.codec) and the NDRCALLs of qm2qm.mqqp.idl (MS-MQQP 6).

For a client on impacket's DCERPC_v5 and for the tests that prove the codec equal to impacket. With
``windows_referents=True`` the unique pointers get the referent ids Windows writes (0x00020000, +4 in
marshalling order) instead of impacket's random ones, so impacket's bytes differ from the codec's only in
alignment-gap contents.
"""
from __future__ import annotations

import uuid
from typing import Any

from impacket.dcerpc.v5.ndr import NULL, NDRPOINTERNULL

from qm2qm.mqqp import codec, idl
from qm2qm.mqqp.constants import REFERENT_ID_BASE, REFERENT_ID_STEP, REMOTEREADACK


class _Referents:
    """Hands out Windows-style referent ids in marshalling order."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.next = REFERENT_ID_BASE

    def assign(self, pointer: Any) -> None:
        if self.enabled:
            pointer.fields["ReferentID"] = self.next
            self.next += REFERENT_ID_STEP


def _signed(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def _fill_rrd(target: Any, d: codec.REMOTEREADDESC, refs: _Referents) -> None:
    for name in ("hRemoteQueue", "hCursor", "ulAction", "ulTimeout", "dwSize", "dwQueue", "dwRequestID",
                 "Reserved", "dwArriveTime", "eAckNack"):
        target[name] = int(getattr(d, name))
    if d.lpBuffer is None:
        target["lpBuffer"] = NULL
    else:
        target["lpBuffer"] = bytes(d.lpBuffer)
        refs.assign(target.fields["lpBuffer"])


def _fill_rrd2(target: Any, d2: codec.REMOTEREADDESC2, refs: _Referents) -> None:
    target["SequentialId"] = d2.SequentialId
    if d2.pRemoteReadDesc is None:
        target["pRemoteReadDesc"] = NULL
    else:
        refs.assign(target.fields["pRemoteReadDesc"])
        _fill_rrd(target["pRemoteReadDesc"], d2.pRemoteReadDesc, refs)


def _is_null(pointer: Any) -> bool:
    return isinstance(pointer, NDRPOINTERNULL) or pointer["ReferentID"] == 0


def _read_rrd(source: Any) -> codec.REMOTEREADDESC:
    pointer = source.fields["lpBuffer"]
    buffer = None
    if not _is_null(pointer):
        data = pointer.fields["Data"]["Data"]
        buffer = data if isinstance(data, bytes) else b"".join(data)
    return codec.REMOTEREADDESC(
        source["hRemoteQueue"], source["hCursor"], source["ulAction"], source["ulTimeout"], source["dwSize"],
        source["dwQueue"], source["dwRequestID"], source["Reserved"], source["dwArriveTime"],
        REMOTEREADACK(source["eAckNack"]), buffer)


def _read_rrd2(source: Any) -> codec.REMOTEREADDESC2:
    pointer = source.fields["pRemoteReadDesc"]
    desc = None if _is_null(pointer) else _read_rrd(source["pRemoteReadDesc"])
    return codec.REMOTEREADDESC2(desc, source["SequentialId"])


def to_impacket(opnum: int, value: Any, ndr64: bool = False, *, windows_referents: bool = True) -> Any:
    """A codec request/response dataclass → the matching idl.py NDRCALL instance (idl.OPNUMS[opnum])."""
    is_request = type(value) is codec.REQUEST_TYPES[opnum]
    if not is_request and type(value) is not codec.RESPONSE_TYPES[opnum]:
        raise TypeError(f"{type(value).__name__} is not a request or response of opnum {opnum}")
    call = idl.OPNUMS[opnum][0 if is_request else 1](isNDR64=ndr64)
    refs = _Referents(windows_referents)
    for name in (n for n, _ in call.structure):
        field = getattr(value, name)
        if name == "ErrorCode":
            call[name] = _signed(field)
        elif name == "pLicGuid":
            call[name] = field.bytes_le
        elif name in ("lpRemoteReadDesc",):
            _fill_rrd(call[name], field, refs)
        elif name == "lpRemoteReadDesc2":
            _fill_rrd2(call[name], field, refs)
        elif name in ("pphContext", "phContext"):
            call[name] = bytes(field)
        else:
            call[name] = int(field)
    return call


def from_impacket(opnum: int, call: Any) -> Any:
    """An idl.py NDRCALL instance (request or response of opnum) → the codec dataclass."""
    request_cls, response_cls = idl.OPNUMS[opnum]
    target = codec.REQUEST_TYPES[opnum] if type(call) is request_cls else codec.RESPONSE_TYPES[opnum]
    if type(call) not in (request_cls, response_cls):
        raise TypeError(f"{type(call).__name__} is not a request or response of opnum {opnum}")
    values = []
    for name in (n for n, _ in call.structure):
        if name == "ErrorCode":
            values.append(call[name] & 0xFFFFFFFF)
        elif name == "pLicGuid":
            values.append(uuid.UUID(bytes_le=call[name]))
        elif name == "lpRemoteReadDesc":
            values.append(_read_rrd(call[name]))
        elif name == "lpRemoteReadDesc2":
            values.append(_read_rrd2(call[name]))
        else:
            values.append(call[name])
    return target(*values)
