"""Normalization and comparison of calls for the conformance diff (docs/pipeline.md "Diff"): values that differ
by construction between two runs (context handles, queue handles, cursors, request ids, lookup ids, times,
message identifiers) become per-session ordinals or are dropped, so only real differences remain."""
from __future__ import annotations

import json
from typing import Any, Iterable

# REMOTEREADDESC / request fields holding a queue handle (MS-MQQP 2.2.2.1, 3.1.4.3, 3.1.4.5-3.1.4.7)
QUEUE_FIELDS = {"hQueue", "pQueue", "dwpContext", "hRemoteQueue", "dwQueue",
                "pdwContext", "dwpQueue", "phQueue"}        # MS-MQMP 3.1.4.2 (qmcomm R_QMOpenRemoteQueue)
CONTEXT_FIELDS = {"pphContext", "phContext"}          # PCTX_* context handles (2.2.1)
ORDINAL_FIELDS = {"hCursor": "cursor", "dwRequestID": "request", "LookupId": "lookup", "SequentialId": "seq",
                  "phCursor": "cursor"}                   # MS-MQMP 3.1.4.4
TIME_FIELDS = {"dwArriveTime"}
# Compared through status / message_fields instead
SKIP_FIELDS = {"ErrorCode", "ReturnValue", "lpBuffer"}
# Message attributes (MS-MQDMPR 3.1.1.12) assigned per run by the queue manager or the sender's clock
MESSAGE_VOLATILE = {"identifier", "sent_time", "arrival_time", "lookup_identifier", "source_machine_identifier"}
NULL_HANDLE_HEX = "00" * 20
# MS-MQQP 3.1.4.8: the port answered is the server's deployment (2103/2105 by default, +11 while busy), like qmcomm's
# R_QMGetRTQMServerPort (decode.py); a per-session ordinal still tells a wrong port type's answer apart.
PORT_OPS = {"RemoteQMGetQMQMServerPort"}


class Ordinals:
    """First-seen order numbering of values per kind, within one session."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[Any, str]] = {}

    def __call__(self, kind: str, value: Any) -> Any:
        if value in (None, 0, NULL_HANDLE_HEX):
            return value
        table = self.maps.setdefault(kind, {})
        name = table.get(value)
        if name is None:
            name = table[value] = f"{kind}#{len(table) + 1}"
        return name


def _normalize(value: Any, ordinals: Ordinals, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _normalize(v, ordinals, k) for k, v in value.items() if k not in SKIP_FIELDS}
    if isinstance(value, list):
        return [_normalize(v, ordinals) for v in value]
    if key in QUEUE_FIELDS:
        return ordinals("queue", value)
    if key in CONTEXT_FIELDS:
        return ordinals("context", value)
    if key in ORDINAL_FIELDS:
        return ordinals(ORDINAL_FIELDS[key], value)
    if key in TIME_FIELDS:
        return "<time>" if value else value
    return value


NCA_S_FAULT_CANCEL = 0x1C00000D


def status_of(row: dict, ordinals: Ordinals | None = None) -> str:
    """One comparable string: ok/fault/... with the HRESULT, DWORD return or fault status. A cancelled call is
    'cancelled' whether the source saw the cancel fault (captures, replays) or the cancelled handler (traces).
    With ``ordinals``, a port answer (PORT_OPS) is its per-session ordinal (``port#1``); the failure 0 stays."""
    kind = row.get("status_kind") or "?"
    if kind == "cancelled" or (kind == "fault" and row.get("fault_status") == NCA_S_FAULT_CANCEL):
        return "cancelled"
    parts = [kind]
    for col in ("hresult", "return_value", "fault_status"):
        value = row.get(col)
        if value is not None and not _isnan(value):
            if col == "return_value" and ordinals is not None and value and row.get("op_name") in PORT_OPS:
                parts.append(f"{col}={ordinals('port', int(value))}")
            else:
                parts.append(f"{col}=0x{int(value):08x}")
    return " ".join(parts)


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _loads(text: Any) -> Any:
    if text is None or _isnan(text):
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {"unparsed": str(text)}


def normalize_session(rows: Iterable[dict]) -> list[dict]:
    """The normalized view of one session's calls (sorted by call_index): status, request, response, message."""
    ordinals = Ordinals()
    out = []
    for row in sorted(rows, key=lambda r: r["call_index"]):
        request = _normalize(_loads(row.get("request_fields")), ordinals)
        response = _normalize(_loads(row.get("response_fields")), ordinals)
        message = _loads(row.get("message_fields"))
        if isinstance(message, dict):
            message = {k: v for k, v in message.items() if k not in MESSAGE_VOLATILE}
        out.append({"session_seq": row["session_seq"], "call_index": row["call_index"], "opnum": row["opnum"],
                    "op_name": row.get("op_name"), "status": status_of(row, ordinals),
                    "request": json.dumps(request, sort_keys=True), "response": json.dumps(response, sort_keys=True),
                    "message": json.dumps(message, sort_keys=True)})
    return out


def _flatten(value: Any, prefix: str, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else k, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def compare(left: dict | None, right: dict | None) -> list[dict]:
    """Mismatch rows (field, kind, left, right) between two normalized calls at the same position."""
    if left is None or right is None:
        side = left or right
        kind = "missing_right" if right is None else "missing_left"
        return [{"field": "call", "kind": kind, "left": side["op_name"] if left else None,
                 "right": side["op_name"] if right else None}]
    if left["opnum"] != right["opnum"]:
        return [{"field": "opnum", "kind": "opnum", "left": str(left["opnum"]), "right": str(right["opnum"])}]
    out = []
    parts: tuple[str, ...] = ("request", "response", "message")
    if left["status"] != right["status"]:
        out.append({"field": "status", "kind": "status", "left": left["status"], "right": right["status"]})
        parts = ("request",)            # [out] values of calls that ended differently differ by construction
    for part in parts:
        if left[part] == right[part]:     # normalized JSON is canonical (sorted keys): equal text, equal values
            continue
        a, b = {}, {}
        _flatten(json.loads(left[part]), part, a)
        _flatten(json.loads(right[part]), part, b)
        for key in sorted(set(a) | set(b)):
            if a.get(key, "<absent>") != b.get(key, "<absent>"):
                out.append({"field": key, "kind": "message" if part == "message" else "field",
                            "left": json.dumps(a.get(key, "<absent>")), "right": json.dumps(b.get(key, "<absent>"))})
    return out
