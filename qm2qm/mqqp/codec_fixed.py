"""Codec of the qm2qm messages without pointers (MS-MQQP 3.1.4.2-3.1.4.9): their parameters are DWORDs, 20-byte
context handles, a GUID and small integers, laid out without gaps and identically in NDR and NDR64."""
from __future__ import annotations

import operator
import struct
import uuid
from typing import Any

from qm2qm.mqqp.codec_ndr import EncodeError, bound, check_end, ctx_bytes, hresult, truncated, u32
from qm2qm.mqqp.codec_types import (
    RemoteQMCancelReceiveRequest, RemoteQMCancelReceiveResponse, RemoteQMCloseCursorRequest,
    RemoteQMCloseCursorResponse, RemoteQMCloseQueueRequest, RemoteQMCloseQueueResponse, RemoteQMEndReceiveRequest,
    RemoteQMEndReceiveResponse, RemoteQMGetQMQMServerPortRequest, RemoteQMGetQMQMServerPortResponse,
    RemoteQmGetVersionRequest, RemoteQmGetVersionResponse, RemoteQMOpenQueueRequest, RemoteQMOpenQueueResponse,
    RemoteQMPurgeQueueRequest, RemoteQMPurgeQueueResponse)
from qm2qm.mqqp.constants import OPNUM_NAMES, RANGE_dwAck, RANGE_dwMQS, RANGE_dwPortType

# ----------------------------------------------------------------------------------------------------------
# Fixed-layout messages: every field is a u32, a 20-byte context handle, a GUID or small ints, laid out
# without gaps and identically in NDR and NDR64 (all 4-aligned from offset 0, no pointers, no enums).
# ----------------------------------------------------------------------------------------------------------

# field kinds of the fixed-layout messages; any other field is a u32 (DWORD)
_KINDS = {"pphContext": "ctx", "phContext": "ctx", "pLicGuid": "guid", "ErrorCode": "hr",
          "pMajor": "u8", "pMinor": "u8", "pBuildNumber": "u16"}


class FixedCodec:
    """Codec of a gap-free fixed-size parameter list (same bytes in NDR and NDR64)."""

    __slots__ = ("cls", "layout", "fields", "ranges", "where", "kinds", "_bounds", "_plain", "_get", "_contexts",
                 "_fits")

    def __init__(self, cls: type, fmt: str, fields: tuple[str, ...], where: str,
                 ranges: dict[str, tuple[int, int]] | None = None) -> None:
        self.cls = cls
        self.layout = struct.Struct(fmt)
        self.fields = fields
        self.ranges = ranges or {}
        self.where = where
        self.kinds = tuple(_KINDS.get(f, "u32") for f in fields)
        # the common case, decoded and encoded without the per-field loops below: DWORDs and context handles only
        self._bounds = tuple((fields.index(name), low, high) for name, (low, high) in self.ranges.items())
        self._plain = bool(fields) and set(self.kinds) <= {"ctx", "u32", "hr"}
        self._get = operator.attrgetter(*fields) if fields else None
        self._contexts = tuple(i for i, kind in enumerate(self.kinds) if kind == "ctx")
        self._fits = self._fits_each
        if self._plain and not self._bounds and self.kinds in (("ctx", "hr"), ("ctx", "u32")):
            self._fits = _handle_and_dword          # the common answer: a context handle and an HRESULT

    def decode(self, stub: Any, ndr64: bool) -> Any:
        """Unmarshal with the length and [range] checks; raises RpcFault."""
        layout = self.layout
        if self._plain and len(stub) == layout.size:
            values = layout.unpack_from(stub)
            for index, low, high in self._bounds:
                if not low <= values[index] <= high:
                    break
            else:
                return self.cls(*values)
        if len(stub) < layout.size:
            raise truncated(self.where, 0, layout.size, len(stub))
        check_end(stub, layout.size, self.where)
        values = layout.unpack_from(stub, 0)
        if self.ranges:
            for name, value in zip(self.fields, values):
                bounds = self.ranges.get(name)
                if bounds is not None and not bounds[0] <= value <= bounds[1]:
                    raise bound(f"{self.where} {name} {value} outside range({bounds[0]}, {bounds[1]})")
        if "guid" in self.kinds:
            values = tuple(uuid.UUID(bytes_le=v) if k == "guid" else v for k, v in zip(self.kinds, values))
        return self.cls(*values)

    def encode(self, obj: Any, ndr64: bool, strict: bool) -> bytes:
        """Marshal obj (of self.cls); raises EncodeError."""
        if type(obj) is not self.cls:
            raise EncodeError(f"{self.where} needs a {self.cls.__name__}, not {type(obj).__name__}")
        if self._plain and strict:
            values = self._get(obj)
            if type(values) is not tuple:
                values = (values,)
            if self._fits(values):
                return self.layout.pack(*values)
        values = []
        for name, kind in zip(self.fields, self.kinds):
            value = getattr(obj, name)
            if kind == "ctx":
                value = ctx_bytes(value, name)
            elif kind == "guid":
                if not isinstance(value, uuid.UUID):
                    raise EncodeError(f"{name} must be a uuid.UUID, not {type(value).__name__}")
                value = value.bytes_le
            elif kind == "hr":
                value = hresult(value)
            elif kind == "u32":
                value = u32(value, name)
                bounds = self.ranges.get(name)
                if strict and bounds is not None and not bounds[0] <= value <= bounds[1]:
                    raise EncodeError(f"{name} {value} outside range({bounds[0]}, {bounds[1]})")
            else:
                limit = 0xFF if kind == "u8" else 0xFFFF
                if not isinstance(value, int) or not 0 <= value <= limit:
                    raise EncodeError(f"{name} {value!r} does not fit its {kind}")
            values.append(value)
        return self.layout.pack(*values)

    def _fits_each(self, values: tuple) -> bool:
        """Whether the loop of encode() would pass these values unchanged: 20-byte handles, DWORDs in range."""
        contexts = self._contexts
        for index, value in enumerate(values):
            if index in contexts:
                if type(value) is not bytes or len(value) != 20:
                    return False
            elif type(value) is not int or not 0 <= value <= 0xFFFFFFFF:
                return False
        for index, low, high in self._bounds:
            if not low <= values[index] <= high:
                return False
        return True


def _handle_and_dword(values: tuple) -> bool:
    """FixedCodec._fits_each for (context handle, DWORD or HRESULT) without a [range]."""
    handle, value = values
    return type(handle) is bytes and len(handle) == 20 and type(value) is int and 0 <= value <= 0xFFFFFFFF


def _fixed(opnum: int, direction: str, cls: type, fmt: str, fields: tuple[str, ...],
           ranges: dict[str, tuple[int, int]] | None = None) -> FixedCodec:
    return FixedCodec(cls, fmt, fields, f"{OPNUM_NAMES[opnum]} {direction}", ranges)


FIXED_REQUESTS: dict[int, FixedCodec] = {
    1: _fixed(1, "request", RemoteQMEndReceiveRequest, "<20sI", ("pphContext", "dwAck"), {"dwAck": RANGE_dwAck}),
    2: _fixed(2, "request", RemoteQMOpenQueueRequest, "<16s4I",
              ("pLicGuid", "dwMQS", "hQueue", "pQueue", "dwpContext"), {"dwMQS": RANGE_dwMQS}),
    3: _fixed(3, "request", RemoteQMCloseQueueRequest, "<20s", ("pphContext",)),
    4: _fixed(4, "request", RemoteQMCloseCursorRequest, "<2I", ("hQueue", "hCursor")),
    5: _fixed(5, "request", RemoteQMCancelReceiveRequest, "<3I", ("hQueue", "pQueue", "dwRequestID")),
    6: _fixed(6, "request", RemoteQMPurgeQueueRequest, "<I", ("hQueue",)),
    7: _fixed(7, "request", RemoteQMGetQMQMServerPortRequest, "<I", ("dwPortType",),
              {"dwPortType": RANGE_dwPortType}),
    8: _fixed(8, "request", RemoteQmGetVersionRequest, "<", ()),
}
FIXED_RESPONSES: dict[int, FixedCodec] = {
    1: _fixed(1, "response", RemoteQMEndReceiveResponse, "<20sI", ("pphContext", "ErrorCode")),
    2: _fixed(2, "response", RemoteQMOpenQueueResponse, "<20sI", ("phContext", "ErrorCode")),
    3: _fixed(3, "response", RemoteQMCloseQueueResponse, "<20sI", ("pphContext", "ErrorCode")),
    4: _fixed(4, "response", RemoteQMCloseCursorResponse, "<I", ("ErrorCode",)),
    5: _fixed(5, "response", RemoteQMCancelReceiveResponse, "<I", ("ErrorCode",)),
    6: _fixed(6, "response", RemoteQMPurgeQueueResponse, "<I", ("ErrorCode",)),
    7: _fixed(7, "response", RemoteQMGetQMQMServerPortResponse, "<I", ("ReturnValue",)),
    8: _fixed(8, "response", RemoteQmGetVersionResponse, "<BBH", ("pMajor", "pMinor", "pBuildNumber")),
}
