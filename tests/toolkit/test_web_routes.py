"""The web view's routes on a bare AdminApi (qm2qm/web/routes.py): pages and assets, the preview endpoint's
answers to bad input, and body previews."""
from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from qm2qm.admin import AdminApi
from qm2qm.mqqp.interface import build_service
from qm2qm.web.routes import PREVIEW_CHARS, preview
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

VT_LPWSTR = 31


@pytest.fixture
async def api():
    qm = QueueManager(MemoryStore(), computer_name="webhost")
    qm.initialize()
    admin = AdminApi(qm, info=lambda: {}, service=build_service(qm))
    client = TestClient(TestServer(admin.app))
    await client.start_server()
    yield client
    await client.close()


@pytest.mark.parametrize("path,content_type,marker", [
    ("/", "text/html", "<table id=\"queues\">"), ("/ui/queue", "text/html", "<table id=\"messages\">"),
    ("/ui/handles", "text/html", "<table id=\"handles\">"), ("/ui/static/app.js", "text/javascript", "const QM"),
    ("/ui/static/style.css", "text/css", "table {"),
])
async def test_pages_and_assets(api, path, content_type, marker):
    response = await api.get(path)
    assert response.status == 200 and response.content_type == content_type
    assert marker in await response.text()


async def test_metrics_and_stats_without_a_running_app(api):
    await api.post("/v1/queues", json={"pathname": ".\\private$\\a"})
    text = await (await api.get("/metrics")).text()
    assert 'qm2qm_queue_messages{queue="webhost\\\\private$\\\\a"} 0.0' in text
    stats = await (await api.get("/v1/stats")).json()
    assert stats["metrics"] is False and stats["calls"] == [] and stats["connections"] == 0
    assert {"pathname": "webhost\\private$\\a", "messages": 0, "bytes": 0} in stats["queues"]


@pytest.mark.parametrize("limit", ["0", "501", "x", "-1"])
async def test_preview_limit_out_of_range_is_a_400_naming_it(api, limit):
    await api.post("/v1/queues", json={"pathname": ".\\private$\\a"})
    response = await api.get(f"/v1/ui/queues/private$%5Ca/messages?limit={limit}")
    assert response.status == 400
    assert (await response.json())["message"] == f"limit: {limit!r} is not an integer 1..500"


async def test_preview_of_an_unknown_queue_is_a_404(api):
    response = await api.get("/v1/ui/queues/nosuch/messages")
    assert response.status == 404 and (await response.json())["message"] == "unknown queue 'nosuch'"


def test_preview_text_utf16_binary_and_long():
    assert preview(b"hello\nworld") == "hello\nworld"
    assert preview("grüße".encode("utf-16-le"), VT_LPWSTR) == "grüße"
    assert preview(b"\x00\x01\xff") == "0x0001ff"
    assert preview(b"a" * (PREVIEW_CHARS + 1)) == "a" * PREVIEW_CHARS + "…"
    assert preview(bytes(range(256))) == "0x" + bytes(range(PREVIEW_CHARS // 2)).hex() + "…"
    assert preview(b"") == ""
