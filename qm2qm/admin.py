"""Admin HTTP+JSON API on loopback: queues, messages and remote-read handles (MS-MQDMPR 3.1.7.1, MS-MQMP 3.1.4.2/3.1.4.4)."""
from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import re
import time
import uuid
from typing import Any, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from shared_adm.message import INFINITE, DeliveryGuarantee, Message
from shared_adm import status as st
from shared_adm.status import status_name
from qm2qm.logfmt import printable
from qm2qm.web import register as register_web_view
from shared_adm.queue_manager import CursorLimitReached, SubqueueLimitReached
from shared_adm.store.base import StoreError

log = logging.getLogger("qm2qm.admin")

# MS-MQDMPR 3.1.1.12: Label MUST NOT exceed 249 characters. MS-MQMQ 2.2.19.1 caps a whole UserMessage packet
# at 0x400000 bytes (MS-MQQP's dwSize range, 0x420000, is looser); MAX_BODY is the cheap early bound, the
# serialization check in Backend.prepare the exact one.
MAX_LABEL = 249
MAX_BODY = 4 * 1024 * 1024
# A JSON request carries the body base64-encoded (4/3) plus the other fields.
MAX_REQUEST = 6 * 1024 * 1024 + 64 * 1024
# MS-MQMQ 2.1.1 (MSMQ 4.0–6.0): QueueName = 1*124(%x21 / %x23-2A / %x2D-3A / %x3C-5B / %x5D-7f).
# no "/" either: DIRECT=HTTP format names write a path's "\" as "/" (MS-MQMQ 2.1.2), so the queue manager refuses it
_QUEUE_NAME = re.compile(r"[\x21\x23-\x2a\x2d\x2e\x30-\x3a\x3c-\x5b\x5d-\x7f]{1,124}")
_MAX_PATHNAME = 248     # what the queue manager takes (shared_adm.format_name.pathname_key)
_COMPUTER = re.compile(r"[\x21-\x7e]{1,256}")
# MQMSG_ACKNOWLEDGMENT_* (MS-MQMQ 2.2.19.3 MessagePropertiesHeader.Flags bits).
ACK_NAMES = {
    "none": 0x00, "pos_arrival": 0x01, "pos_receive": 0x02, "neg_arrival": 0x04, "neg_receive": 0x08,
    "nack_reach_queue": 0x04, "full_reach_queue": 0x05, "nack_receive": 0x0C, "full_receive": 0x0E,
}
ACCESS = {"receive": 0x00000001, "peek": 0x00000020}      # MQ_RECEIVE_ACCESS / MQ_PEEK_ACCESS (MS-MQMP 3.1.4.2)
SHARE = {"deny-none": 0x00000000, "deny-receive": 0x00000001}  # MQ_DENY_NONE / MQ_DENY_RECEIVE_SHARE


class AdminError(Exception):
    """An admin request that cannot be served: HTTP status, a short code and a message saying what is wrong."""

    def __init__(self, http_status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.code = code
        self.message = message
        self.extra = extra


def mq_error(status: int, message: str) -> AdminError:
    """Map an MS-MQMQ 2.4 status to an HTTP error (404 not found, 409 conflict, 507 a limit reached, else 400)."""
    http = {
        "MQ_ERROR_QUEUE_NOT_FOUND": 404, "MQ_ERROR_INVALID_HANDLE": 404, "MQ_ERROR_MESSAGE_NOT_FOUND": 404,
        "MQ_ERROR_QUEUE_EXISTS": 409, "MQ_ERROR_SHARING_VIOLATION": 409, "MQ_ERROR_INSUFFICIENT_RESOURCES": 507,
    }.get(status_name(status), 400)
    return AdminError(http, status_name(status), message, hresult=f"0x{status:08X}")


# ----------------------------------------------------------------------------------------------- validation

def check_pathname(value: Any, *, field: str = "pathname") -> str:
    """A queue path name per MS-MQMQ 2.1.1: Computer\\QueueName or Computer\\private$\\QueueName."""
    if not isinstance(value, str) or not value:
        raise AdminError(400, "bad_pathname", f"{field}: expected a queue path name string, got {value!r}")
    parts = value.split("\\")
    if len(parts) == 3 and parts[1].lower() == "private$":
        computer, name = parts[0], parts[2]
    elif len(parts) == 2:
        computer, name = parts
    else:
        raise AdminError(400, "bad_pathname", f"{field}: '{value}' is not 'Computer\\QueueName' or "
                                              "'Computer\\private$\\QueueName' (MS-MQMQ 2.1.1)")
    if not _COMPUTER.fullmatch(computer):
        raise AdminError(400, "bad_pathname", f"{field}: bad computer name '{computer}' in '{value}' (MS-MQMQ 2.1.1)")
    if not _QUEUE_NAME.fullmatch(name):
        raise AdminError(400, "bad_pathname", f"{field}: bad queue name '{name}' in '{value}': 1 to 124 printable "
                                              "characters, none of \\ / ; + , \" (MS-MQMQ 2.1.1)")
    if len(value) > _MAX_PATHNAME:
        raise AdminError(400, "bad_pathname", f"{field}: '{value[:40]}...' has {len(value)} characters; a path name "
                                              f"has at most {_MAX_PATHNAME}")
    return value


def _int(body: dict, key: str, low: int, high: int, default: Any = None) -> Any:
    if key not in body or body[key] is None:
        return default
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(400, "bad_value", f"{key}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise AdminError(400, "bad_value", f"{key}: {value} is out of range {low}..{high}")
    return value


def _bool(body: dict, key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise AdminError(400, "bad_value", f"{key}: expected true or false, got {value!r}")
    return value


def _str(body: dict, key: str, default: Any = None, *, max_len: int | None = None,
         binary_alternative: str | None = None) -> Any:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise AdminError(400, "bad_value", f"{key}: expected a string, got {value!r}")
    if max_len is not None and len(value) > max_len:
        raise AdminError(400, "bad_value", f"{key}: {len(value)} characters is longer than {max_len}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:      # JSON lets "\ud800" through; UTF-8 has no lone surrogates
        advice = f"; send such bytes as {binary_alternative}" if binary_alternative else ""
        raise AdminError(400, "bad_value", f"{key}: character {exc.start} is a lone surrogate (U+"
                                           f"{ord(value[exc.start]):04X}), which UTF-8 cannot carry{advice}") from None
    return value


def ascii_decimal(text: str, most: int) -> int | None:
    """``text`` as an integer 0..most when it is ASCII digits, else None (str.isdigit also takes '²', which int()
    refuses, and int() refuses more than 4300 digits)."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(most)):
        return None
    value = int(text)
    return value if value <= most else None


def _b64(body: dict, key: str) -> bytes | None:
    value = _str(body, key)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AdminError(400, "bad_value", f"{key}: not valid base64") from None


def _reject_unknown(body: dict, known: set[str]) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise AdminError(400, "unknown_field", f"unknown field(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _ack_flags(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 0x0F:
            raise AdminError(400, "bad_value", f"acknowledgement: {value} is out of range 0..15 (PA/PR/NA/NR bits)")
        return value
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise AdminError(400, "bad_value", f"acknowledgement: expected an integer, a name or a list of names, got {value!r}")
    flags = 0
    for name in names:
        key = name.lower().replace("-", "_")
        if key not in ACK_NAMES:
            raise AdminError(400, "bad_value", f"acknowledgement: unknown flag '{name}' (known: {', '.join(ACK_NAMES)})")
        flags |= ACK_NAMES[key]
    return flags


QUEUE_FIELDS = {"pathname", "label", "transactional", "journal", "quota", "journal_quota"}
MESSAGE_FIELDS = {
    "body", "body_base64", "body_type", "label", "priority", "time_to_be_received", "time_to_reach_queue",
    "correlation_id", "app_specific", "delivery", "acknowledgement", "admin_queue", "response_queue",
    "journal", "dead_letter", "extension_base64", "trace", "count",
}
MAX_COUNT = 100_000


def _position(queue, text: str):
    """The MessagePosition of ``queue`` whose LookupIdentifier is ``text`` (a URL segment), or a 400/404 AdminError;
    found by LookupIdentifier, not by unpacking the queue up to it."""
    try:
        lookup_id = int(text, 0)
    except ValueError:
        raise AdminError(400, "bad_value", f"lookup_id: {text!r} is not a number") from None
    position = queue.message_position_list.get(lookup_id) if 0 <= lookup_id < 1 << 64 else None
    if position is None:
        raise AdminError(404, "MQ_ERROR_MESSAGE_NOT_FOUND", f"no message with lookup_id {lookup_id} in this queue")
    return position


def _require_available(position) -> None:
    """409 unless the message is Available: a read or a transaction holding it keeps it where it is."""
    from shared_adm.enums import PositionState
    if position.state is not PositionState.AVAILABLE:
        raise AdminError(409, "message_locked", f"lookup_id {position.lookup_identifier} is "
                                                f"{position.state.value}: a read or a transaction holds it")
# Listing unpacks every message on the loop thread; a bound keeps one request from stalling the RPC listener.
DEFAULT_LIST_LIMIT = 1000
MAX_LIST_LIMIT = 10_000         # messages a page; page on with ?after=<next_after>
MAX_PAGE_BODY_BYTES = 16 << 20  # with ?body=1 a page also ends past this many body bytes (at least one message)
LIST_CHUNK = 250                # messages a page builds between two turns of the event loop


def queue_spec(body: dict) -> dict:
    """Validate a create-queue request (MS-MQDMPR 3.1.1.2 attributes, Set Queue Defaults 3.1.7.1.33)."""
    _reject_unknown(body, QUEUE_FIELDS)
    return {
        "pathname": check_pathname(body.get("pathname")),
        "label": _str(body, "label", "", max_len=124),
        "transactional": _bool(body, "transactional"),
        "journaling": _bool(body, "journal"),
        "quota": _int(body, "quota", 0, 0xFFFFFFFF, 0xFFFFFFFF),
        "journal_quota": _int(body, "journal_quota", 0, 0xFFFFFFFF, 0xFFFFFFFF),
    }


def message_from_request(body: dict, *, now: Callable[[], float] = time.time) -> Message:
    """Validate a send request and build the Message (MS-MQDMPR 3.1.1.12) a sender would have set."""
    _reject_unknown(body, MESSAGE_FIELDS)
    if "body" in body and "body_base64" in body:
        raise AdminError(400, "bad_value", "give either body (text, sent as UTF-8) or body_base64, not both")
    if "body_base64" in body:
        payload = _b64(body, "body_base64") or b""
    else:
        payload = _str(body, "body", "", binary_alternative="body_base64").encode("utf-8")
    if len(payload) > MAX_BODY:
        raise AdminError(413, "body_too_large", f"body: {len(payload)} bytes is larger than {MAX_BODY}")
    label = _str(body, "label", "")
    if len(label) > MAX_LABEL:
        raise AdminError(400, "label_too_long", f"label: {len(label)} characters is longer than {MAX_LABEL} (MS-MQDMPR 3.1.1.12)")
    priority = _int(body, "priority", 0, 7, 3)
    correlation = bytes(20)
    if body.get("correlation_id") is not None:
        text = _str(body, "correlation_id")
        try:
            correlation = bytes.fromhex(text)
        except ValueError:
            raise AdminError(400, "bad_value", f"correlation_id: {text!r} is not hexadecimal") from None
        if len(correlation) != 20:
            raise AdminError(400, "bad_value", f"correlation_id: {len(correlation)} bytes, expected 20 (40 hex digits)")
    delivery = _str(body, "delivery", "express")
    if delivery not in ("express", "recoverable"):
        raise AdminError(400, "bad_value", f"delivery: expected 'express' or 'recoverable', got {delivery!r}")
    acks = _ack_flags(body.get("acknowledgement"))
    admin_queue = _str(body, "admin_queue")
    if acks and not admin_queue:
        raise AdminError(400, "bad_value", "acknowledgement requested without admin_queue (MS-MQMQ 2.2.19.2: "
                                           "an administration queue MUST be given when acknowledgements are requested)")
    sent = int(now())
    return Message(
        body=payload,
        body_type=_int(body, "body_type", 0, 0xFFFFFFFF, 0),
        label=label,
        priority=priority,
        time_to_be_received=_int(body, "time_to_be_received", 0, 0xFFFFFFFF, INFINITE),
        time_to_reach_queue=_int(body, "time_to_reach_queue", 0, 0xFFFFFFFF, 0x54600),
        correlation_identifier=correlation,
        application_tag=_int(body, "app_specific", 0, 0xFFFFFFFF, 0),
        delivery_guarantee=DeliveryGuarantee.RECOVERABLE if delivery == "recoverable" else DeliveryGuarantee.EXPRESS,
        acknowledgements_requested=acks,
        administration_queue_format_name=admin_queue,
        response_queue_format_name=_str(body, "response_queue"),
        positive_journaling_requested=_bool(body, "journal"),
        negative_journaling_requested=_bool(body, "dead_letter"),
        extension=_b64(body, "extension_base64") or b"",
        tracing_requested=_bool(body, "trace"),
        sent_time=sent,
    )


# ----------------------------------------------------------------------------------------------- views

def message_view(message: Message, state: str, *, with_body: bool) -> dict:
    """A message as JSON: its lookup identifier, position state and every attribute a sender sets."""
    view = {
        "lookup_id": message.lookup_identifier,
        "state": state,
        "identifier": f"{{{message.identifier[0]}}}\\{message.identifier[1]}",
        "priority": message.priority,
        "label": message.label,
        "body_size": len(message.body),
        "body_type": message.body_type,
        "app_specific": message.application_tag,
        "correlation_id": message.correlation_identifier.hex(),
        "delivery": "recoverable" if message.delivery_guarantee == DeliveryGuarantee.RECOVERABLE else "express",
        "acknowledgement": message.acknowledgements_requested,
        "admin_queue": message.administration_queue_format_name,
        "response_queue": message.response_queue_format_name,
        "destination_queue": message.destination_queue_format_name,
        "journal": message.positive_journaling_requested,
        "dead_letter": message.negative_journaling_requested,
        "trace": message.tracing_requested,
        "sent_time": message.sent_time,
        "arrival_time": message.arrival_time,
        "time_to_be_received": message.time_to_be_received,
        "time_to_reach_queue": message.time_to_reach_queue,
        "class": message.class_,
    }
    if with_body:
        view["body_base64"] = base64.b64encode(message.body).decode("ascii")
        try:
            view["body_text"] = message.body.decode("utf-8")
        except UnicodeDecodeError:
            view["body_text"] = None
        view["extension_base64"] = base64.b64encode(message.extension).decode("ascii")
    return view


# ----------------------------------------------------------------------------------------------- HTTP

class _ClientErrorFilter(logging.Filter):
    """A malformed HTTP request (line too long, bad header) is the client's error: aiohttp answers it 400 and
    logs it as an ERROR with a traceback; keep it as one WARNING line naming the problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = f"{record.msg}: malformed HTTP request answered {exc.code}: {exc.message}"[:500]
            record.exc_info = record.exc_text = None
        return True


HTTP_LOG = logging.getLogger("qm2qm.admin.http")
"""The logger `qm2qm serve` gives aiohttp's request handler (web.AppRunner(..., logger=HTTP_LOG))."""
HTTP_LOG.addFilter(_ClientErrorFilter())


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, indent=None))


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
    except AdminError as exc:
        return _json({"error": exc.code, "message": exc.message, **exc.extra}, status=exc.http_status)
    except web.HTTPRequestEntityTooLarge:
        message = f"request body larger than {MAX_REQUEST} bytes (a message body is at most {MAX_BODY} bytes, 4 MiB)"
        return _json({"error": "request_too_large", "message": message}, status=413)
    except StoreError as exc:
        # The change is applied in memory but not durable (disk full, read-only store): say so, 507 as for quotas.
        # The store keeps the change and retries it on the next commit (shared_adm/store/sqlite.py).
        log.warning("admin request %s %s: the store cannot commit: %s", request.method, printable(request.path), exc)
        storing = request.method == "POST" and request.path.endswith("/messages")
        status = st.MQ_ERROR_MESSAGE_STORAGE_FAILED if storing else st.MQ_ERROR_INSUFFICIENT_RESOURCES
        return _json({"error": status_name(status), "hresult": f"0x{status:08X}",
                      "message": f"the store cannot commit ({exc}); the change is not durable: it is kept in "
                                 "memory and written when the store can commit again, and lost if the server "
                                 "stops before that"}, status=507)
    except (HttpProcessingError, RequestPayloadError) as exc:   # a body its Content-Encoding does not decode
        why = getattr(exc, "message", None) or str(exc).partition("message:")[2].strip() or type(exc).__name__
        return _json({"error": "bad_body", "message": f"request body: {why}"}, status=400)
    except ConnectionError:                 # the client left in the middle of its request: nobody to answer
        log.debug("admin request %s %s: the client left", request.method, printable(request.path))
        return _json({"error": "client_gone", "message": "the client left"}, status=400)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        reason = {404: "no such endpoint", 405: "method not allowed for this endpoint"}.get(exc.status, exc.reason)
        return _json({"error": exc.reason.lower().replace(" ", "_"),
                      "message": f"{reason}: {request.method} {request.path}"}, status=exc.status)
    except Exception:  # the admin API must answer, not die, whatever a request does
        log.exception("admin request %s %s failed", request.method, request.path)
        return _json({"error": "internal_error", "message": "internal error; see the server log"}, status=500)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})


def _loopback_host(value: str) -> bool:
    """A Host header (or an Origin's host) naming this machine's loopback, with or without a port (digits)."""
    host, sep, port = value.rpartition(":") if value.count(":") == 1 or "]:" in value else (value, "", "")
    return host.lower() in LOOPBACK_HOSTS and (not sep or port.isascii() and port.isdigit())


@web.middleware
async def _loopback_only(request: web.Request, handler):
    """The API is loopback-only and unauthenticated, so a web page in a browser on this machine must not drive it:
    a Host other than a loopback name is a DNS-rebinding page (its requests reach 127.0.0.1 under its own name),
    and a state-changing request whose Origin is another site, or that the browser marks cross-site, is a
    cross-site request (a form posting text/plain needs no preflight)."""
    host = request.headers.get("Host", "")
    if not _loopback_host(host):
        raise AdminError(403, "forbidden_host", f"Host {host!r} is not a loopback name (127.0.0.1, localhost, "
                                                "[::1]): the admin API answers requests made to this machine only")
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        origin = request.headers.get("Origin")
        if origin is not None and not (origin.startswith("http://") and _loopback_host(origin[len("http://"):])):
            raise AdminError(403, "cross_origin", f"Origin {origin!r} is not this admin API: cross-site requests "
                                                  "are refused")
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            raise AdminError(403, "cross_origin", "the browser marks this request cross-site: refused")
    return await handler(request)


async def _body(request: web.Request) -> dict:
    raw = await request.read()
    if not raw:
        raise AdminError(400, "bad_json", "request body is empty; expected a JSON object")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AdminError(400, "bad_json", f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise AdminError(400, "bad_json", "request body is nested too deeply to decode") from None
    if not isinstance(data, dict):
        raise AdminError(400, "bad_json", f"request body must be a JSON object, got {type(data).__name__}")
    return data


def _handle_arg(request: web.Request, key: str) -> int:
    text = request.match_info[key]
    try:
        value = int(text, 0)
    except ValueError:
        raise AdminError(400, "bad_value", f"{key}: {text!r} is not a number") from None
    if not 0 < value <= 0xFFFFFFFF:
        raise AdminError(400, "bad_value", f"{key}: {value} is not a DWORD handle (1..0xFFFFFFFF)")
    return value


class AdminApi:
    """The aiohttp application over a running queue manager (see docs/admin-api.md)."""

    def __init__(self, qm: Any, info: Callable[[], dict], service: Any = None, directory: Any = None,
                 mqrr_service: Any = None) -> None:
        self.qm = qm
        self.info = info
        self.backend = Backend(qm, service, directory, mqrr_service)
        self.app = web.Application(middlewares=[_errors, _loopback_only], client_max_size=MAX_REQUEST)
        r = self.app.router
        r.add_get("/v1/info", self.get_info)
        r.add_get("/v1/queues", self.list_queues)
        r.add_post("/v1/queues", self.create_queue)
        # {name:[^/]+}: aiohttp's plain {name} stops at "{" and "}", which queue and subqueue names may hold
        r.add_get("/v1/queues/{name:[^/]+}", self.show_queue)
        r.add_delete("/v1/queues/{name:[^/]+}", self.delete_queue)
        r.add_get("/v1/queues/{name:[^/]+}/messages", self.list_messages)
        r.add_post("/v1/queues/{name:[^/]+}/messages", self.send_message)
        r.add_get("/v1/queues/{name:[^/]+}/messages/{lookup_id}", self.show_message)
        r.add_post("/v1/queues/{name:[^/]+}/messages/{lookup_id}/move", self.move_message)
        r.add_delete("/v1/queues/{name:[^/]+}/messages/{lookup_id}", self.delete_message)
        r.add_post("/v1/queues/{name:[^/]+}/open", self.open_queue)
        r.add_get("/v1/handles", self.list_handles)
        r.add_delete("/v1/handles/{handle}", self.close_handle)
        r.add_post("/v1/handles/{handle}/cursors", self.open_cursor)
        r.add_get("/v1/reads", self.list_reads)
        r.add_get("/v1/transactions", self.list_transactions)
        r.add_post("/v1/transactions/{identifier}/commit", self.commit_transaction)
        r.add_post("/v1/transactions/{identifier}/abort", self.abort_transaction)
        r.add_get("/v1/queues/{name:[^/]+}/permissions", self.show_permissions)
        r.add_post("/v1/queues/{name:[^/]+}/permissions", self.change_permissions)
        register_web_view(self)         # qm2qm/web: the pages at /, their JSON, and /metrics

    def _queue(self, request: web.Request):
        name = request.match_info["name"]
        queue = self.backend.find_queue(name)
        if queue is None:
            raise AdminError(404, "MQ_ERROR_QUEUE_NOT_FOUND", f"unknown queue '{name}'")
        return queue

    async def get_info(self, request: web.Request) -> web.Response:
        """GET /v1/info: addresses, ports and version of this server."""
        return _json(self.info())

    async def list_queues(self, request: web.Request) -> web.Response:
        """GET /v1/queues: every queue of QueueManager.QueueCollection (MS-MQDMPR 3.1.1.1)."""
        return _json({"queues": [self.backend.queue_view(q) for q in self.backend.queues()]})

    async def create_queue(self, request: web.Request) -> web.Response:
        """POST /v1/queues: Create Queue (MS-MQDMPR 3.1.7.1.3)."""
        spec = queue_spec(await _body(request))
        queue = self.backend.create_queue(spec)
        await self.qm.durable()
        return _json(self.backend.queue_view(queue), status=201)

    async def show_queue(self, request: web.Request) -> web.Response:
        """GET /v1/queues/{name}: one queue's attributes (MS-MQDMPR 3.1.1.2)."""
        return _json(self.backend.queue_view(self._queue(request)))

    async def delete_queue(self, request: web.Request) -> web.Response:
        """DELETE /v1/queues/{name}: Delete Queue (MS-MQDMPR 3.1.7.1.4)."""
        queue = self._queue(request)
        self.backend.delete_queue(queue)
        await self.qm.durable()
        return _json({"deleted": self.backend.queue_view(queue)["pathname"]})

    async def list_messages(self, request: web.Request) -> web.Response:
        """GET /v1/queues/{name}/messages: positions in list order with their State (MS-MQDMPR 3.1.1.11)."""
        queue = self._queue(request)
        with_body = request.query.get("body", "0") not in ("0", "false", "")
        text = request.query.get("limit", str(DEFAULT_LIST_LIMIT))
        limit = ascii_decimal(text, MAX_LIST_LIMIT)
        if not limit:
            raise AdminError(400, "bad_value", f"limit: {text!r} is not an integer from 1 to {MAX_LIST_LIMIT}; page "
                                               "on with after=<next_after of the previous page>")
        after = request.query.get("after")
        next_after = None if after is None else ascii_decimal(after, (1 << 64) - 1)
        if after is not None and next_after is None:
            raise AdminError(400, "bad_value", f"after: {after!r} is not a lookup_id")
        chunks: list[str] = []      # each chunk's messages as JSON text, so no single step encodes the whole page
        count, budget = 0, MAX_PAGE_BODY_BYTES if with_body else None
        while True:         # a chunk per loop turn: the RPC calls go on while a long page is built
            listed, next_after = self.backend.messages(queue, min(LIST_CHUNK, limit - count), next_after, budget)
            if listed:
                chunks.append(json.dumps([message_view(m, s, with_body=with_body) for m, s in listed])[1:-1])
            count += len(listed)
            if budget is not None:
                budget -= sum(len(m.body) for m, _ in listed)
            if next_after is None or count >= limit or (budget is not None and budget <= 0):
                break
            await asyncio.sleep(0)
        head = json.dumps({"queue": self.backend.queue_view(queue)["pathname"],
                           "total": len(queue.message_position_list)})[:-1]
        text = f'{head}, "messages": [{", ".join(chunks)}], "next_after": {json.dumps(next_after)}}}'
        return web.Response(text=text, content_type="application/json")

    async def send_message(self, request: web.Request) -> web.Response:
        """POST /v1/queues/{name}/messages: Enqueue Message (MS-MQDMPR 3.1.7.1.9), ``count`` copies."""
        body = await _body(request)
        queue = self._queue(request)        # after the body's await: the queue may have been deleted meanwhile
        if self.qm.is_machine_queue(queue):
            raise AdminError(403, "system_queue", f"'{self.backend.pathname(queue)}' takes no sends: the queue "
                                                  "manager puts messages there (Open Queue refuses SendAccess to a "
                                                  "computer journal or dead-letter queue)")
        if queue.parent_queue is not None:
            raise AdminError(403, "subqueue", f"'{self.backend.pathname(queue)}' is a subqueue: it takes no sends, "
                                              "messages reach it only by a move (POST …/messages/{lookup_id}/move)")
        count = _int(body, "count", 1, MAX_COUNT, 1)
        message = message_from_request(body)
        self.backend.prepare(queue, message)
        copies = [message] + [dataclasses.replace(message) for _ in range(count - 1)]
        for i, copy in enumerate(copies):
            try:
                self.backend.enqueue(queue, copy)
            except AdminError as exc:
                if i == 0:
                    raise
                exc.extra["sent"] = i
                await self.qm.durable()
                raise
        await self.qm.durable()
        view = message_view(message, "Available", with_body=False)
        if count > 1:
            view.update(count=count, last_lookup_id=copies[-1].lookup_identifier)
        return _json(view, status=201)

    async def show_message(self, request: web.Request) -> web.Response:
        """GET /v1/queues/{name}/messages/{lookup_id}: one message, body included."""
        position = _position(self._queue(request), request.match_info["lookup_id"])
        message = position.message
        message.lookup_identifier = position.lookup_identifier
        return _json(message_view(message, position.state.value, with_body=True))

    async def delete_message(self, request: web.Request) -> web.Response:
        """DELETE /v1/queues/{name}/messages/{lookup_id}: Message Position Deleted (MS-MQDMPR 3.1.7.2.1) of one
        Available message, as a purge deletes it (NackQueuePurged): an operator's way to take one message away."""
        from shared_adm.enums import MessageClass
        queue = self._queue(request)
        position = _position(queue, request.match_info["lookup_id"])
        _require_available(position)
        pathname = self.backend.pathname(queue)         # before: deleting a subqueue's last message removes it
        self.qm.message_position_deleted(queue, position, MessageClass.NACK_QUEUE_PURGED)
        await self.qm.durable()
        return _json({"deleted": position.lookup_identifier, "queue": pathname})

    async def move_message(self, request: web.Request) -> web.Response:
        """POST /v1/queues/{name}/messages/{lookup_id}/move {"to": subqueue name, or "" for the queue itself}: Move
        Message (MS-MQDMPR 3.1.7.1.16) within a queue's family, as MS-MQRR R_MoveMessage (3.1.4.10) does."""
        body = await _body(request)
        queue = self._queue(request)        # after the body's await: the queue may have been deleted meanwhile
        _reject_unknown(body, {"to"})
        to = _str(body, "to", "", max_len=64)
        position = _position(queue, request.match_info["lookup_id"])
        target = self.backend.move(position, to)
        await self.qm.durable()
        return _json({"moved": position.lookup_identifier, "from": self.backend.pathname(queue),
                      "to": self.backend.pathname(target)})

    async def open_queue(self, request: web.Request) -> web.Response:
        """POST /v1/queues/{name}/open: as MS-MQMP R_QMOpenRemoteQueue (3.1.4.2), without its access check: the
        admin API is loopback administration (docs/admin-api.md), not a remote reader."""
        body = await _body(request)
        queue, subqueue = self._queue_or_subqueue_to_make(request)      # after the body's await, as every route
        _reject_unknown(body, {"access", "share_mode"})
        access = _str(body, "access", "receive")
        share = _str(body, "share_mode", "deny-none")
        if access not in ACCESS:
            raise AdminError(400, "bad_value", f"access: expected one of {', '.join(ACCESS)}, got {access!r}")
        if share not in SHARE:
            raise AdminError(400, "bad_value", f"share_mode: expected one of {', '.join(SHARE)}, got {share!r}")
        desc = self.backend.open_for_remote_read(queue, access, share, subqueue)
        return _json(self.backend.descriptor_view(desc), status=201)

    def _queue_or_subqueue_to_make(self, request: web.Request):
        """(queue, None) for a queue or subqueue that exists; (its queue, subqueue name) for a subqueue not made yet,
        which Open Queue makes as for R_QMOpenRemoteQueue (MS-MQDMPR 3.1.7.1.5); else 404."""
        from shared_adm.format_name import is_subqueue_name
        name = request.match_info["name"]
        queue = self.backend.find_queue(name)
        if queue is not None:
            return queue, None
        parent_name, separator, subqueue = name.partition(";")
        parent = self.backend.find_queue(parent_name) if separator and is_subqueue_name(subqueue) else None
        if parent is None or parent.parent_queue is not None or self.qm.is_machine_queue(parent):
            raise AdminError(404, "MQ_ERROR_QUEUE_NOT_FOUND", f"unknown queue '{name}'")
        return parent, subqueue

    async def show_permissions(self, request: web.Request) -> web.Response:
        """GET /v1/queues/{name}/permissions: the queue's owner and access-allowed ACEs (MS-MQMQ 2.2.24 rights)."""
        from shared_adm import security
        return _json(self._permissions_view(security.queue_security(self._queue(request))))

    async def change_permissions(self, request: web.Request) -> web.Response:
        """POST /v1/queues/{name}/permissions {"grant"|"revoke": right, "principal": SID or name}: change one ACE,
        durably (the queue's Security attribute, MS-MQDMPR 3.1.1.2)."""
        from qm2qm.rpc.auth.users import sid_problem
        from shared_adm import security
        body = await _body(request)
        queue = self._queue(request)        # after the body's await: the queue may have been deleted meanwhile
        _reject_unknown(body, {"grant", "revoke", "principal"})
        if queue.parent_queue is not None:
            parent = self.backend.pathname(queue.parent_queue)
            raise AdminError(400, "subqueue", f"'{self.backend.pathname(queue)}' is a subqueue: it has its queue's "
                                              f"permissions; change those of '{parent}'")
        if ("grant" in body) == ("revoke" in body):
            raise AdminError(400, "bad_value", "give exactly one of grant or revoke (receive, peek or delete)")
        verb = "grant" if "grant" in body else "revoke"
        try:
            rights = security.right_mask(_str(body, verb, max_len=16) or "")
            sid = security.principal_sid(_str(body, "principal", max_len=200) or "")
        except security.SecurityError as exc:
            raise AdminError(400, "bad_value", str(exc)) from None
        # MS-DTYP 2.4.2 allows a 48-bit identifier authority, but shared_adm.security writes it in one byte
        # (impacket's LDAP_SID.fromCanonical): refuse what the queue's security descriptor could not hold.
        problem = sid_problem(sid, max_authority=0xFF)
        if problem is not None:
            raise AdminError(400, "bad_value", f"principal {problem}")
        current = security.queue_security(queue)
        getattr(current, verb)(sid, rights)
        security.set_queue_security(self.qm, queue, current)
        await self.qm.durable()
        return _json(self._permissions_view(current))

    def _permissions_view(self, queue_security) -> dict:
        return {**queue_security.to_json(), "allow_anonymous_read": bool(getattr(self.qm, "allow_anonymous_read",
                                                                                  False))}

    async def list_handles(self, request: web.Request) -> web.Response:
        """GET /v1/handles: every open OpenQueueDescriptor (MS-MQDMPR 3.1.1.16)."""
        return _json({"handles": [self.backend.descriptor_view(d) for d in self.backend.descriptors()]})

    async def close_handle(self, request: web.Request) -> web.Response:
        """DELETE /v1/handles/{handle}: Close Queue (MS-MQDMPR 3.1.7.1.6)."""
        handle = _handle_arg(request, "handle")
        desc = self.backend.find_descriptor(handle)
        if desc is None:
            raise AdminError(404, "MQ_ERROR_INVALID_HANDLE", f"no open queue descriptor with handle {handle}")
        self.backend.close_descriptor(desc)
        return _json({"closed": handle})

    async def open_cursor(self, request: web.Request) -> web.Response:
        """POST /v1/handles/{handle}/cursors: as MS-MQMP R_QMCreateRemoteCursor (3.1.4.4)."""
        handle = _handle_arg(request, "handle")
        desc = self.backend.find_descriptor(handle)
        if desc is None:
            raise AdminError(404, "MQ_ERROR_INVALID_HANDLE", f"no open queue descriptor with handle {handle}")
        cursor = self.backend.open_cursor(desc)
        return _json({"hRemoteQueue": handle, "hCursor": cursor}, status=201)

    async def list_transactions(self, request: web.Request) -> web.Response:
        """GET /v1/transactions: TransactionCollection (MS-MQDMPR 3.1.1.14) with each transaction's operations."""
        return _json({"transactions": [self.backend.transaction_view(t) for t in self.backend.transactions()]})

    async def commit_transaction(self, request: web.Request) -> web.Response:
        """POST /v1/transactions/{identifier}/commit: Transaction Commit (MS-MQDMPR 3.1.4.4), the outcome a DTC
        would deliver (this server has none: an MS-MQRR transaction's messages wait for an operator)."""
        return await self._end_transaction(request, self.qm.transaction_commit, "committed")

    async def abort_transaction(self, request: web.Request) -> web.Response:
        """POST /v1/transactions/{identifier}/abort: Transaction Abort (MS-MQDMPR 3.1.4.5): its received messages
        become Available again."""
        return await self._end_transaction(request, self.qm.transaction_abort, "aborted")

    async def _end_transaction(self, request: web.Request, outcome: Callable[[Any], int], done: str) -> web.Response:
        identifier = self.backend.transaction_to_end(request.match_info["identifier"])
        # the operations as the outcome found them: a listing taken before may miss a receive that ended since
        operations = self.backend.transaction_view(self.qm.transaction_collection[identifier])["operations"]
        outcome(identifier)
        await self.qm.durable()
        return _json({done: request.match_info["identifier"], "operations": operations})

    async def list_reads(self, request: web.Request) -> web.Response:
        """GET /v1/reads: RemoteReadEntry (MS-MQQP 3.1.1.2) and WaitingMessageReadOperation elements."""
        return _json({"reads": self.backend.remote_reads(), "waiting": self.backend.waiting_reads()})


# ----------------------------------------------------------------------------------------------- queue manager side

class Backend:
    """The admin operations as MS-MQDMPR events on the QueueManager (shared_adm.queue_manager)."""

    def __init__(self, qm: Any, service: Any = None, directory: Any = None, mqrr_service: Any = None) -> None:
        self.qm = qm
        self.service = service          # the qm2qm Service (qm2qm.mqqp.handlers._service), for pending reads
        self.mqrr_service = mqrr_service    # the MS-MQRR Service (qm2qm.mqrr.service) under `serve --mqrr`
        self.directory = directory      # shared_adm.directory.Directory: public queues are written to it

    # names ------------------------------------------------------------------------------------------------
    def pathname(self, queue) -> str:
        """MS-MQMQ 2.1.1 path name: Computer\\QueueName, Computer\\private$\\QueueName, Computer\\system$;Name."""
        return f"{self.qm.computer_name}\\{queue.pathname}"

    def format_name(self, queue) -> str:
        """The direct format name a client opens it by (MS-MQMQ 2.1.2; for the computer journal and dead-letter
        queues, its MachineQueuePath: DIRECT=OS:Computer\\system$;DEADLETTER)."""
        return f"DIRECT=OS:{self.pathname(queue)}"

    def find_queue(self, name: str):
        """By path name (Computer may be '.'), by 'private$\\Name' / 'Name' alone, by queue GUID, or by a machine
        queue's path name (Computer\\system$;deadletter)."""
        if "\\" not in name or name.lower().startswith("private$\\"):
            name = ".\\" + name
        queue = self.qm.queue_by_pathname(name)
        if queue is None:
            try:
                queue = self.qm.queue_collection.get(uuid.UUID(name.split("\\")[-1]))
            except ValueError:
                queue = self.qm.machine_queue_by_pathname(name)
        return queue

    # queues ------------------------------------------------------------------------------------------------
    def queues(self) -> list:
        """QueueCollection sorted by path name."""
        return sorted(self.qm.queue_collection.values(), key=lambda q: q.pathname.lower())

    def queue_view(self, queue) -> dict:
        """A queue as JSON (MS-MQDMPR 3.1.1.2 attributes plus counts)."""
        positions = queue.message_position_list
        return {
            "pathname": self.pathname(queue),
            "format_name": self.format_name(queue),
            "identifier": str(queue.identifier),
            "type": queue.queue_type.value,
            "label": queue.label,
            "transactional": queue.transactional,
            "journal": queue.journaling,
            "quota": queue.quota,
            "journal_quota": queue.journal_quota,
            "messages": len(positions),
            "available": positions.available_count,
            "bytes": queue.total_bytes,
            "private_queue_number": queue.private_queue_number or None,
            "create_time": queue.create_time,
            "open_handles": len(queue.open_queue_descriptor_collection),
            **({"parent": self.pathname(queue.parent_queue)} if queue.parent_queue is not None else
               {"subqueues": [{"name": sub.subqueue_name, "messages": len(sub.message_position_list)}
                              for sub in queue.subqueue_collection]}),
        }

    def create_queue(self, spec: dict):
        """Create Queue (MS-MQDMPR 3.1.7.1.3) from a validated spec; MQ statuses become AdminErrors."""
        from shared_adm import status as st
        pathname = spec.pop("pathname")
        if self.directory is not None and "private$" not in pathname.lower():
            # A public queue is a directory object too (MS-MQDMPR 3.1.7.1.3 with iSkipDirectory False): writing
            # it sends the MS-MQCN version 2 notification to its owner (MS-MQCN 3.3.4.1).
            from shared_adm.directory import create_public_queue
            status, queue = create_public_queue(self.qm, self.directory, pathname, **spec)
        else:
            status, queue = self.qm.create_queue(pathname, **spec)
        if status == st.MQ_ERROR_QUEUE_EXISTS:
            raise mq_error(status, f"queue '{pathname}' already exists")
        if status == st.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME:
            raise mq_error(status, f"pathname: '{pathname}' does not name a queue on this queue manager: its "
                                   f"computer must be '.', 'localhost' or '{self.qm.computer_name}' (MS-MQMQ 2.1.1)")
        if status != 0:
            raise mq_error(status, f"Create Queue failed for '{pathname}': {status_name(status)}")
        return queue

    def delete_queue(self, queue) -> None:
        """Delete Queue (MS-MQDMPR 3.1.7.1.4); system queues are refused."""
        from shared_adm.enums import QueueType
        if queue.queue_type is QueueType.SYSTEM:
            raise AdminError(403, "system_queue", f"'{self.pathname(queue)}' is a system queue and cannot be deleted")
        if queue.parent_queue is not None:
            raise AdminError(409, "subqueue", f"'{self.pathname(queue)}' is a subqueue: it goes by itself once it "
                                              "holds no message and no handle (as in MSMQ); receive or move its "
                                              "messages, or delete its queue")
        if self.directory is not None and queue.queue_type is QueueType.PUBLIC:
            from shared_adm.directory import delete_public_queue
            status = delete_public_queue(self.qm, self.directory, queue)
        else:
            status = self.qm.delete_queue(queue)
        if status != 0:
            raise mq_error(status, f"Delete Queue failed for '{self.pathname(queue)}': {status_name(status)}")

    # messages ----------------------------------------------------------------------------------------------
    def messages(self, queue, limit: int, after: int | None = None,
                 max_body_bytes: int | None = None) -> tuple[list[tuple[Message, str]], int | None]:
        """(Message, MessagePosition.State) pairs in MessagePositionList order (MS-MQDMPR 3.1.1.2) from the first
        position past LookupIdentifier ``after`` (O(log n) to find), at most ``limit`` of them and, given
        ``max_body_bytes``, no more once their bodies reach it; and the last one's lookup id when more follow."""
        from shared_adm.queue import START_KEY
        positions = queue.message_position_list
        out, size = [], 0
        for position in positions.irange_after_values(START_KEY if after is None else after):
            if len(out) >= limit or (max_body_bytes is not None and out and size >= max_body_bytes):
                return out, out[-1][0].lookup_identifier
            message = position.message
            message.lookup_identifier = position.lookup_identifier
            size += len(message.body)
            out.append((message, position.state.value))
        return out, None

    def move(self, position, to: str):
        """Move Message (MS-MQDMPR 3.1.7.1.16) of an Available message to the subqueue ``to`` of its queue (created
        as an Open Queue would) or, with ``to`` "", to the queue itself; the target queue is returned."""
        from shared_adm import status as st
        from shared_adm.format_name import is_subqueue_name
        source = position.queue
        family = source.parent_queue or source
        if to and not is_subqueue_name(to):
            raise AdminError(400, "bad_value", f"to: {to!r} is no subqueue name (1 to 32 of the characters MS-MQMQ "
                                               "2.1.1 allows: no space, '\"', '+', ',', ';' or '\\'; not journal, "
                                               "deadletter or deadxact)")
        _require_available(position)
        try:
            target = self.qm.subqueue(family, to, create=True) if to else family
        except SubqueueLimitReached as refused:
            raise AdminError(507, "too_many_subqueues", f"{refused}: receive, move or delete the messages of some "
                                                         "(serve --max-subqueues)") from None
        if target is None:
            raise AdminError(400, "no_subqueues", f"'{self.pathname(family)}' has no subqueues (a system queue)")
        if target is source:
            raise AdminError(400, "bad_value", f"lookup_id {position.lookup_identifier} is in "
                                               f"'{self.pathname(source)}' already")
        status = self.qm.move_message(position, target)
        self.qm.drop_subqueue_if_idle(target)       # only if the move failed and made it for nothing
        if status != st.MQ_OK:
            raise mq_error(status, f"Move Message failed: {status_name(status)}")
        return target

    def prepare(self, queue, message: Message) -> None:
        """Set what the sending queue manager sets, then prove the message serializes to a UserMessage packet
        (MS-MQDMPR 3.1.7.1.30-32), so a message every remote read would choke on is refused up front."""
        from shared_adm.packet import PacketError, serialize_message_to_buffer
        qm = self.qm
        message.destination_queue_format_name = self.format_name(queue)
        message.source_machine_identifier = qm.identifier
        message.destination_queue_manager_identifier = qm.identifier
        message.identifier = (qm.identifier, 1)
        try:
            serialize_message_to_buffer(message)
        except PacketError as exc:
            raise AdminError(400, "bad_message", f"the message cannot be carried in a UserMessage packet "
                                                 f"(MS-MQMQ 2.2.20): {exc}") from None

    def enqueue(self, queue, message: Message) -> None:
        """Enqueue Message (3.1.7.1.9) of a prepared message this queue manager originates."""
        qm = self.qm
        message.identifier = (qm.identifier, (qm.sequential_id + 1) & 0xFFFFFFFF)
        status = qm.enqueue_message(queue, message)
        if status == 1:
            raise AdminError(507, "quota_exceeded", f"queue '{self.pathname(queue)}': its quota of {queue.quota} KB "
                                                    "would be exceeded (MS-MQDMPR 3.1.7.1.9 rStatus 1)")
        if status == 2:
            raise AdminError(507, "quota_exceeded", "the queue manager quota would be exceeded "
                                                    "(MS-MQDMPR 3.1.7.1.9 rStatus 2)")

    # remote read handles -----------------------------------------------------------------------------------
    def open_for_remote_read(self, queue, access: str, share: str, subqueue: str | None = None):
        """As MS-MQMP R_QMOpenRemoteQueue (3.1.4.2): Open Queue (of ``queue``'s ``subqueue``, made if need be),
        then RemoteReadState := Opened."""
        from shared_adm.enums import QueueAccessType, QueueShareMode, RemoteReadState
        required = QueueAccessType.RECEIVE_ACCESS if access == "receive" else QueueAccessType.PEEK_ACCESS
        mode = QueueShareMode.DENY_RECEIVE if share == "deny-receive" else QueueShareMode.DENY_NONE
        format_name = self.format_name(queue) + (f";{subqueue}" if subqueue else "")
        status, desc = self.qm.open_queue(format_name, required, mode, remote_read_state=RemoteReadState.OPENED)
        if status != 0:
            raise mq_error(status, f"Open Queue '{self.pathname(queue)}{f';{subqueue}' if subqueue else ''}' "
                                   f"({access}, {share}) failed: {status_name(status)}")
        return desc

    def descriptors(self) -> list:
        """Every OpenQueueDescriptor opened for remote read (MS-MQDMPR 3.1.1.16, RemoteReadState not None), on a
        queue, a subqueue or a queue deleted since (it still counts against --max-open-queues until closed); the
        queue manager's own, such as the MS-MQCN consumer's on notify_queue$, are not remote handles."""
        from shared_adm.enums import RemoteReadState
        return [d for d in self.qm.open_descriptors() if d.remote_read_state is not RemoteReadState.NONE]

    def find_descriptor(self, handle: int):
        """The OpenQueueDescriptor with this Handle, or None."""
        return self.qm.descriptor_by_handle(handle)

    def descriptor_view(self, desc) -> dict:
        """A descriptor as JSON, with the handle values of MS-MQMP 3.1.4.2 <28>."""
        queue = desc.queue_reference
        handle = desc.handle
        return {
            # MS-MQMP 3.1.4.2 <28>: phQueue = dwpQueue = pdwContext = OpenQueueDescriptor.Handle
            "hRemoteQueue": handle, "dwQueue": handle, "pdwContext": handle,
            "context_value": desc.context_value,
            "queue": self.pathname(queue) if queue is not None else None,
            "format_name": desc.format_name,
            "access": desc.access_type.value,
            "share_mode": desc.share_mode.value,
            "remote_read_state": desc.remote_read_state.value,
            "cursors": sorted(desc.cursor_collection),
            "waiting_reads": len(desc.waiting_message_read_operation_collection),
            "locked_messages": len(desc.locked_positions),
        }

    def close_descriptor(self, desc) -> None:
        """Close Queue (MS-MQDMPR 3.1.7.1.6), after the remote reads through it end as a client's close ends them:
        waiting reads cancelled with MQ_ERROR_OPERATION_CANCELLED, Locked messages returned, their entries gone."""
        from qm2qm.remote_read.locks import release_descriptor
        for service in (self.service, self.mqrr_service):
            if service is not None:
                release_descriptor(service, desc.handle, st.MQ_ERROR_OPERATION_CANCELLED)
        self.qm.close_queue(desc)

    def open_cursor(self, desc) -> int:
        """Open Cursor (MS-MQDMPR 3.1.7.1.1); returns Cursor.Handle."""
        try:
            cursor = self.qm.open_cursor(desc)
        except CursorLimitReached as refused:
            raise AdminError(507, "too_many_cursors", f"{refused}: close some first (serve --max-cursors)") from None
        if cursor is None:
            raise AdminError(409, "queue_gone", f"handle {desc.handle}: its queue was deleted; no cursor can be opened")
        return cursor.handle

    def transactions(self) -> list:
        """TransactionCollection (MS-MQDMPR 3.1.1.1) in creation order."""
        return list(self.qm.transaction_collection.values())

    def transaction_to_end(self, text: str):
        """The Identifier of a live transaction named as transaction_view shows it (hex for bytes): 404 if none, 409
        while an MS-MQRR receive in it is in flight (a waiting one would lock its message in an ended transaction)."""
        identifier = self.transaction_identifier(text)
        calls = getattr(self.mqrr_service, "transaction_calls", {}).get(identifier, 0)
        if calls:
            raise AdminError(409, "transaction_busy", f"transaction {text!r} has {calls} R_StartTransactionalReceive"
                             " call(s) in flight; cancel them (R_CancelReceive) or let them end")
        return identifier

    def transaction_identifier(self, text: str):
        """The Identifier of a live transaction named as transaction_view shows it (hex for bytes); 404 if none."""
        collection = self.qm.transaction_collection
        try:
            identifier = bytes.fromhex(text)
        except ValueError:
            identifier = text
        if identifier not in collection and text in collection:
            identifier = text
        if identifier not in collection:
            raise AdminError(404, "MQ_ERROR_TRANSACTION_SEQUENCE", f"no transaction {text!r}")
        return identifier

    def transaction_view(self, transaction) -> dict:
        """A Transaction (3.1.1.14) and its TransactionalOperations (3.1.1.13)."""
        identifier = transaction.identifier
        operations = []
        for op in transaction.transactional_operation_collection:
            position = op.message_position_reference
            operations.append({
                "operation": op.operation_type.value,
                "queue": self.pathname(position.queue) if position.queue is not None else None,
                "lookup_id": position.lookup_identifier,
                "target_queue": self.pathname(op.target_queue_reference) if op.target_queue_reference else None,
                "dequeue_reason": op.dequeue_reason.name if op.dequeue_reason is not None else None})
        return {"identifier": identifier.hex() if isinstance(identifier, bytes) else identifier,
                "single_phase": transaction.single_phase, "operations": operations}

    def waiting_reads(self) -> list[dict]:
        """WaitingMessageReadOperation elements (MS-MQDMPR 3.1.1.10) of every open descriptor."""
        out = []
        for desc in self.descriptors():
            for op in desc.waiting_message_read_operation_collection:
                cursor = op.cursor_reference
                out.append({"hRemoteQueue": desc.handle, "destructive": op.destructive_read,
                            "tag": repr(op.tag) if op.tag is not None else None,
                            "cursor": getattr(cursor, "handle", None)})
        return out

    def remote_reads(self) -> list[dict]:
        """RemoteReadEntry elements (MS-MQQP 3.1.1.2) and, under --mqrr, PendingRequestEntry elements (MS-MQRR
        3.1.1.2): reads in progress, and receives awaiting their End."""
        out = []
        for protocol, service, ended_by in (("qm2qm", self.service, "EndReceive"),
                                            ("MS-MQRR", self.mqrr_service, "R_EndReceive")):
            if service is None:
                continue
            for state, entries in (("pending", service.pending), (f"awaiting {ended_by}", service.locked)):
                for e in entries:
                    out.append({"hRemoteQueue": e.descriptor_handle, "request_id": e.request_id,
                                "action": f"0x{e.action:08X}", "timeout": e.timeout, "state": state,
                                "protocol": protocol})
        return out
