"""Decode a call row's qm2qm stubs into the call-table columns (MS-MQQP 3.1.4; lpBuffer as MS-MQMQ 2.2.20), and
the qmcomm calls of the remote-read sequence (MS-MQMP 3.1.4)."""
from __future__ import annotations

import dataclasses
import enum
import json
import operator
import uuid
from typing import Any

import orjson

from qm2qm.mqmp.constants import OPNUM_NAMES as QMCOMM_OPNUM_NAMES, QMCOMM_UUID
from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import OPNUM_NAMES, QM2QM_UUID
from qm2qm.rpc.interface import RpcFault

QM2QM_UUID_STR = str(QM2QM_UUID)
QMCOMM_UUID_STR = str(QMCOMM_UUID)
# Methods whose return value is a DWORD, not an HRESULT (MS-MQQP 3.1.4.8); opnum 8 returns void.
DWORD_RETURN = {7}
VOID_RETURN = {8}


def to_jsonable(value: Any) -> Any:
    """Dataclasses, bytes, UUIDs and enums as plain JSON values (bytes as lowercase hex)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


_CONVERTERS: dict[type, Any] = {bytes: bytes.hex, uuid.UUID: str}


def _json_default(value: Any) -> Any:
    """What to_jsonable gives for one non-JSON value, one level at a time (json's C encoder recurses); the
    conversion is looked up once per type."""
    convert = _CONVERTERS.get(type(value))
    if convert is None:
        convert = _CONVERTERS[type(value)] = _converter(value)
    return convert(value)


def _converter(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value))
        if len(names) > 1:
            getter = operator.attrgetter(*names)
            return lambda v: dict(zip(names, getter(v)))
        return lambda v: {n: getattr(v, n) for n in names}
    if isinstance(value, enum.Enum):
        return operator.attrgetter("value")
    return to_jsonable


# One encoder built once: a JSON dump per decoded stub is the ingest's hottest step (cProfile, docs/pipeline.md).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_json_default, check_circular=False)
# orjson sorts dict keys only: a dataclass goes through _json_default (a dict of its fields), as for json
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def _dumps(value: Any) -> str:
    """_ENCODER.encode(value), the same text, 2.4x faster where orjson writes it (tests/pipeline/test_decode_json.py):
    json itself when orjson cannot encode the value (a non-string key, an int over 64 bits) or leaves unescaped a
    character json escapes (non-ASCII, DEL; control characters both escape alike). Values here hold no floats
    (orjson writes those differently)."""
    try:
        out = orjson.dumps(value, default=_json_default, option=_ORJSON_OPTIONS)
    except TypeError:                       # orjson.JSONEncodeError is a TypeError
        return _ENCODER.encode(value)
    if out.isascii() and b"\x7f" not in out:
        return out.decode()
    return _ENCODER.encode(value)


def _read_desc(obj: Any) -> Any:
    """The REMOTEREADDESC inside a request/response of opnum 0, 9 or 10, or None."""
    desc = getattr(obj, "lpRemoteReadDesc", None)
    if desc is None:
        desc2 = getattr(obj, "lpRemoteReadDesc2", None)
        desc = None if desc2 is None else desc2.pRemoteReadDesc
    return desc


def message_json(buffer: bytes) -> str:
    """The Message attributes (MS-MQDMPR 3.1.1.12) of a UserMessage packet as JSON; a parse error as {"error"}."""
    from shared_adm.packet import PacketError, deserialize_message_from_buffer
    try:
        message = deserialize_message_from_buffer(buffer)
    except (PacketError, ValueError, IndexError) as exc:
        return _dumps({"error": str(exc)})
    except Exception as exc:   # noqa: BLE001 - a hostile packet must not stop an ingest; say what happened
        return _dumps({"error": f"{type(exc).__name__}: {exc}"})
    return _dumps(message)


def decode_call(row: dict) -> None:
    """Fill the decoded columns of one call row in place; never raises on bad stubs (decode_error says why)."""
    if row.get("interface_uuid") == QMCOMM_UUID_STR and row.get("opnum") is not None:
        decode_qmcomm_call(row)
        return
    if row.get("interface_uuid") != QM2QM_UUID_STR or row.get("opnum") is None:
        return
    opnum = row["opnum"]
    row["op_name"] = OPNUM_NAMES.get(opnum)
    ndr64 = row.get("transfer_syntax") == "NDR64"
    errors = []
    request = response = None
    if row.get("request_stub") is not None:
        try:
            request = codec.decode_request(opnum, row["request_stub"], ndr64)
            row["request_fields"] = _dumps(request)
        except RpcFault as exc:
            errors.append(f"request: {exc}")
    if row.get("response_stub") is not None and row.get("status_kind") == "ok":
        try:
            response = codec.decode_response(opnum, row["response_stub"], ndr64)
            row["response_fields"] = _dumps(response)
        except RpcFault as exc:
            errors.append(f"response: {exc}")
    if errors:
        row["decode_error"] = "; ".join(errors)
    _derive(row, opnum, request, response)


def _derive(row: dict, opnum: int, request: Any, response: Any) -> None:
    if response is not None:
        if opnum in DWORD_RETURN:
            row["return_value"] = response.ReturnValue
        elif opnum not in VOID_RETURN:
            row["hresult"] = response.ErrorCode
        out = getattr(response, "pphContext", None) or getattr(response, "phContext", None)
        if out is not None:
            row["context_handle_out"] = bytes(out)
        desc = _read_desc(response)
        if desc is not None and desc.lpBuffer:
            row["message_fields"] = message_json(desc.lpBuffer)
    if request is None:
        return
    ctx_in = getattr(request, "pphContext", None)
    if ctx_in is not None:
        row["context_handle_in"] = bytes(ctx_in)
    desc = _read_desc(request)
    if desc is not None:
        row["queue_handle"], row["cursor"], row["request_id"] = desc.hRemoteQueue, desc.hCursor, desc.dwRequestID
    else:
        handle = getattr(request, "hQueue", None)
        if handle is not None:
            row["queue_handle"] = handle
        row["cursor"] = getattr(request, "hCursor", None)
        row["request_id"] = getattr(request, "dwRequestID", None)
    row["lookup_id"] = getattr(request, "LookupId", None)


# ------------------------------------------------------------------------------------------------ qmcomm (MS-MQMP)


def decode_qmcomm_call(row: dict) -> None:
    """The qmcomm opnums qm2qm serves (MS-MQMP 3.1.4.1-3.1.4.4, 3.1.4.24) into the same columns: queue_handle is
    phQueue / hQueue, cursor phCursor, the context handles PCTX_OPENREMOTE_HANDLE_TYPE. R_QMGetRTQMServerPort's
    port differs between two servers by construction: it stays in response_fields (ReturnValue, which the diff
    skips) and return_value is set only for the failure answer 0."""
    from qm2qm.mqmp import codec as qmcomm_codec
    opnum = row["opnum"]
    row["op_name"] = QMCOMM_OPNUM_NAMES.get(opnum)
    if opnum not in (1, 2, 3, 4, 31):
        return
    ndr64 = row.get("transfer_syntax") == "NDR64"
    errors = []
    if row.get("request_stub") is not None:
        try:
            request = qmcomm_codec.decode_request(opnum, row["request_stub"], ndr64)
            view = qmcomm_codec.request_view(opnum, request)
            row["request_fields"] = _dumps(view)
            if "pphContext" in view:
                row["context_handle_in"] = bytes.fromhex(view["pphContext"])
            if "hQueue" in view:
                row["queue_handle"] = view["hQueue"]
        except RpcFault as exc:
            errors.append(f"request: {exc}")
    if row.get("response_stub") is not None and row.get("status_kind") == "ok":
        try:
            view = qmcomm_codec.response_view(opnum, qmcomm_codec.decode_response(opnum, row["response_stub"], ndr64))
            row["response_fields"] = _dumps(view)
            if "ErrorCode" in view:
                row["hresult"] = view["ErrorCode"]
            if view.get("ReturnValue") == 0:
                row["return_value"] = 0
            if "pphContext" in view:
                row["context_handle_out"] = bytes.fromhex(view["pphContext"])
            if view.get("phQueue"):
                row["queue_handle"] = view["phQueue"]
            if view.get("phCursor"):
                row["cursor"] = view["phCursor"]
        except RpcFault as exc:
            errors.append(f"response: {exc}")
    if errors:
        row["decode_error"] = "; ".join(errors)
