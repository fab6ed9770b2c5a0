"""Routes of the web view and of `/metrics`, added to the admin aiohttp app (qm2qm/admin.py) by ``register``."""
from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from qm2qm.metrics import build_registry, exposition, live_context_handles

STATIC = Path(__file__).parent / "static"
PAGES = {"/": "index.html", "/ui/queue": "queue.html", "/ui/handles": "handles.html"}
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
PREVIEW_CHARS = 80
# PROPVARIANT types of a string body (MS-MQMQ 2.2.19.3 BodyType, 2.2.12): VT_BSTR, VT_LPWSTR.
UTF16_BODY_TYPES = (8, 31)
MAX_PREVIEW_MESSAGES = 500
APP_KEY = web.AppKey("qm2qm_app", object)
REGISTRY_KEY = web.AppKey("qm2qm_metrics_registry", object)


def register(api: Any) -> None:
    """Add the pages, their JSON and /metrics to an AdminApi (qm2qm.admin) app."""
    router = api.app.router
    for path, page in PAGES.items():
        router.add_get(path, _file(page, "text/html"))
    for name, content_type in ASSETS.items():
        router.add_get(f"/ui/static/{name}", _file(name, content_type))
    view = WebView(api)
    router.add_get("/metrics", view.metrics)
    router.add_get("/v1/stats", view.stats)
    router.add_get("/v1/ui/queues/{name:[^/]+}/messages", view.message_previews)
    api.app[APP_KEY] = SimpleNamespace(metrics=None, rpc=None, listeners=list, service=api.backend.service,
                                       qm=api.qm)


def attach_app(api: Any, app: Any) -> None:
    """Let /metrics and /v1/stats read a running qm2qm.app.App (its RPC server, observer and store)."""
    api.app[APP_KEY] = app


def _file(name: str, content_type: str):
    body = (STATIC / name).read_bytes()

    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8",
                            headers={"Cache-Control": "no-cache"})
    return serve


def preview(body: bytes, body_type: int = 0) -> str:
    """The first characters of a body: text when it is a UTF-16 string (VT_LPWSTR / VT_BSTR body type, as
    MSMQ sends strings) or printable UTF-8, else hex."""
    head = body[:PREVIEW_CHARS * 4]
    encoding = "utf-16-le" if body_type in UTF16_BODY_TYPES else "utf-8"
    try:
        text = head.decode(encoding)
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\r\n\t" for c in text):
        more = len(body) > len(head) or len(text) > PREVIEW_CHARS
        return text[:PREVIEW_CHARS] + ("…" if more else "")
    return "0x" + body[:PREVIEW_CHARS // 2].hex() + ("…" if len(body) > PREVIEW_CHARS // 2 else "")


class WebView:
    """JSON the pages poll, and the Prometheus scrape."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self._registry = None

    def _app(self, request: web.Request) -> Any:
        return request.app[APP_KEY]

    async def metrics(self, request: web.Request) -> web.Response:
        """GET /metrics: the Prometheus text format (qm2qm.metrics)."""
        app = self._app(request)
        if self._registry is None:
            self._registry = build_registry(app)
        return web.Response(body=exposition(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stats(self, request: web.Request) -> web.Response:
        """GET /v1/stats: running totals the pages turn into rates (calls per opnum, connections, handles)."""
        app = self._app(request)
        calls = []
        if app.metrics is not None:
            for op in app.metrics.operations():
                calls.append({"interface": op.interface, "opnum": op.opnum, "operation": op.operation,
                              "calls": op.latency.total, "faults": sum(op.faults.values()),
                              "seconds": op.latency.sum})
        listeners = app.listeners()
        queues = [{"pathname": self.api.backend.pathname(q), "messages": len(q.message_position_list),
                   "bytes": q.total_bytes} for q in self.api.backend.queues()]
        return web.json_response({
            "time": time.monotonic(),
            "metrics": app.metrics is not None,
            "calls": calls,
            "connections": sum(len(rpc.connections) for rpc in listeners),
            "association_groups": sum(len(rpc.groups) for rpc in listeners),
            "context_handles": live_context_handles(listeners),
            "queues": queues,
        })

    async def message_previews(self, request: web.Request) -> web.Response:
        """GET /v1/ui/queues/{name}/messages?limit=N: messages with a short body preview, not whole bodies."""
        from qm2qm.admin import AdminError, ascii_decimal
        name = request.match_info["name"]
        backend = self.api.backend
        queue = backend.find_queue(name)
        if queue is None:
            raise AdminError(404, "MQ_ERROR_QUEUE_NOT_FOUND", f"unknown queue '{name}'")
        text = request.query.get("limit", "100")
        limit = ascii_decimal(text, MAX_PREVIEW_MESSAGES)
        if not limit:
            raise AdminError(400, "bad_value", f"limit: {text!r} is not an integer 1..{MAX_PREVIEW_MESSAGES}")
        rows = []
        for message, state in backend.messages(queue, limit)[0]:
            # a string: lookup identifiers are 64-bit (MS-MQDMPR 3.1.1.12), beyond a JavaScript Number's 2**53
            rows.append({"lookup_id": str(message.lookup_identifier), "state": state, "priority": message.priority,
                         "label": message.label, "body_size": len(message.body), "preview": preview(message.body, message.body_type),
                         "arrival_time": message.arrival_time})
        return web.json_response({"queue": backend.pathname(queue), "total": len(queue.message_position_list),
                                  "messages": rows})
