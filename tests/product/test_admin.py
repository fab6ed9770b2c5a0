"""Admin API (qm2qm.admin): every endpoint, and bad input answered with an exact 4xx status and message."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse

import pytest
from aiohttp.test_utils import TestClient, TestServer

from qm2qm.admin import AdminApi, MAX_BODY
from shared_adm.queue_manager import QueueManager
from shared_adm.store.base import MemoryStore

Q = ".\\private$\\orders"


def url(pathname: str) -> str:
    return urllib.parse.quote(pathname, safe="")


async def call(client, method, path, body=None, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body))
    resp = await client.request(method, path, data=data)
    return resp.status, await resp.json()


async def make_queue(client, pathname=Q, **attrs):
    status, data = await call(client, "POST", "/v1/queues", {"pathname": pathname, **attrs})
    assert status == 201, data
    return data


# ---------------------------------------------------------------------------------------------- happy paths

async def test_create_list_show_delete_queue(api):
    data = await make_queue(api, label="Orders", transactional=True, journal=True, quota=100)
    assert data["pathname"] == "testhost\\private$\\orders"
    assert data["format_name"] == "DIRECT=OS:testhost\\private$\\orders"
    assert (data["label"], data["transactional"], data["journal"], data["quota"]) == ("Orders", True, True, 100)
    status, listing = await call(api, "GET", "/v1/queues")
    assert status == 200 and "testhost\\private$\\orders" in [q["pathname"] for q in listing["queues"]]
    status, shown = await call(api, "GET", "/v1/queues/" + url("testhost\\private$\\orders"))
    assert status == 200 and shown["identifier"] == data["identifier"]
    status, gone = await call(api, "DELETE", "/v1/queues/" + url(Q))
    assert (status, gone) == (200, {"deleted": "testhost\\private$\\orders"})
    status, _ = await call(api, "GET", "/v1/queues/" + url(Q))
    assert status == 404


async def test_public_queue_pathname(api):
    data = await make_queue(api, "testhost\\prices")
    assert data["type"] == "Public" and data["pathname"] == "testhost\\prices"


async def test_send_sets_every_attribute_and_show_returns_it(api):
    await make_queue(api)
    body = {"body_base64": base64.b64encode(b"\x00\x01binary").decode(), "label": "L" * 249, "priority": 7,
            "time_to_be_received": 60, "time_to_reach_queue": 30, "correlation_id": "ab" * 20,
            "app_specific": 0xDEADBEEF, "body_type": 0x11, "delivery": "recoverable",
            "acknowledgement": ["full_receive"], "admin_queue": "DIRECT=OS:testhost\\private$\\acks",
            "response_queue": "DIRECT=OS:testhost\\private$\\replies", "journal": True, "dead_letter": True}
    status, sent = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", body)
    assert status == 201, sent
    status, shown = await call(api, "GET", f"/v1/queues/{url(Q)}/messages/{sent['lookup_id']}")
    assert status == 200
    assert base64.b64decode(shown["body_base64"]) == b"\x00\x01binary"
    expected = {"label": "L" * 249, "priority": 7, "time_to_be_received": 60, "time_to_reach_queue": 30,
                "correlation_id": "ab" * 20, "app_specific": 0xDEADBEEF, "body_type": 0x11,
                "delivery": "recoverable", "acknowledgement": 0x0E, "journal": True, "dead_letter": True,
                "admin_queue": "DIRECT=OS:testhost\\private$\\acks", "state": "Available",
                "response_queue": "DIRECT=OS:testhost\\private$\\replies",
                "destination_queue": "DIRECT=OS:testhost\\private$\\orders"}
    assert {k: shown[k] for k in expected} == expected
    assert sent["lookup_id"] >> 56 == 0    # high byte 7 - Priority (MS-MQDMPR 3.1.7.1.9, DEFECTS #12)


async def test_list_messages_in_queue_order_with_states(api):
    await make_queue(api)
    for priority in (1, 6, 3):
        status, _ = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": f"p{priority}",
                                                                            "priority": priority})
        assert status == 201
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?body=1")
    assert status == 200
    assert [m["body_text"] for m in data["messages"]] == ["p6", "p3", "p1"]
    assert {m["state"] for m in data["messages"]} == {"Available"}


async def test_send_count_enqueues_copies(api):
    await make_queue(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x", "count": 5})
    assert status == 201 and data["count"] == 5 and data["last_lookup_id"] > data["lookup_id"]
    status, listing = await call(api, "GET", f"/v1/queues/{url(Q)}/messages")
    assert len(listing["messages"]) == 5


async def test_open_returns_the_handle_values_of_r_qmopenremotequeue(api):
    await make_queue(api)
    status, opened = await call(api, "POST", f"/v1/queues/{url(Q)}/open", {"access": "peek"})
    assert status == 201
    h = opened["hRemoteQueue"]
    # MS-MQMP 3.1.4.2 <28>: pdwContext = phQueue = dwpQueue = OpenQueueDescriptor.Handle
    assert opened["dwQueue"] == h and opened["pdwContext"] == h
    desc = api.qm.descriptor_by_handle(h)
    assert desc.context_value == opened["context_value"]
    assert (opened["remote_read_state"], opened["access"], opened["share_mode"]) == ("Opened", "PeekAccess",
                                                                                      "DenyNone")
    status, cur = await call(api, "POST", f"/v1/handles/{h}/cursors", {})
    assert status == 201 and api.qm.cursor_by_handle(cur["hCursor"]) is not None
    status, handles = await call(api, "GET", "/v1/handles")
    assert [x["cursors"] for x in handles["handles"] if x["hRemoteQueue"] == h] == [[cur["hCursor"]]]
    status, closed = await call(api, "DELETE", f"/v1/handles/{h}")
    assert (status, closed) == (200, {"closed": h})
    assert api.qm.descriptor_by_handle(h) is None


async def test_reads_lists_pending_and_waiting(api):
    status, data = await call(api, "GET", "/v1/reads")
    assert (status, data) == (200, {"reads": [], "waiting": []})


async def test_open_and_cursor_past_the_queue_manager_s_limits_answer_507_naming_the_limit(api):
    await make_queue(api)
    api.qm.max_open_queues, api.qm.max_cursors = 1, 1
    status, opened = await call(api, "POST", f"/v1/queues/{url(Q)}/open", {"access": "peek"})
    assert status == 201
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/open", {"access": "peek"})
    assert (status, data["error"]) == (507, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    h = opened["hRemoteQueue"]
    assert (await call(api, "POST", f"/v1/handles/{h}/cursors", {}))[0] == 201
    status, data = await call(api, "POST", f"/v1/handles/{h}/cursors", {})
    assert (status, data["error"]) == (507, "too_many_cursors")
    assert data["message"] == "the queue manager already holds 1 cursors: close some first (serve --max-cursors)"


async def test_info(api):
    status, data = await call(api, "GET", "/v1/info")
    assert status == 200 and data["rpc"]["port"] == 1


# ---------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("raw, message", [
    ("{not json", "request body is not valid JSON: "),
    ("", "request body is empty; expected a JSON object"),
    ("[1, 2]", "request body must be a JSON object, got list"),
])
async def test_bad_json(api, raw, message):
    status, data = await call(api, "POST", "/v1/queues", raw=raw)
    assert status == 400 and data["error"] == "bad_json" and data["message"].startswith(message)


@pytest.mark.parametrize("body, code, message", [
    ({"pathname": "orders"}, "bad_pathname",
     "pathname: 'orders' is not 'Computer\\QueueName' or 'Computer\\private$\\QueueName' (MS-MQMQ 2.1.1)"),
    ({"pathname": ".\\private$\\a;b"}, "bad_pathname",
     "pathname: bad queue name 'a;b' in '.\\private$\\a;b': 1 to 124 printable characters, none of \\ / ; + , \" "
     "(MS-MQMQ 2.1.1)"),
    ({"pathname": ".\\private$\\" + "q" * 125}, "bad_pathname", None),
    ({"pathname": 5}, "bad_pathname", "pathname: expected a queue path name string, got 5"),
    ({"pathname": Q, "colour": 1}, "unknown_field", "unknown field(s): colour (known: "),
    ({"pathname": Q, "quota": -1}, "bad_value", "quota: -1 is out of range 0..4294967295"),
    ({"pathname": Q, "transactional": "yes"}, "bad_value", "transactional: expected true or false, got 'yes'"),
    ({"pathname": "otherhost\\private$\\q"}, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME",
     "pathname: 'otherhost\\private$\\q' does not name a queue on this queue manager: its computer must be '.', "
     "'localhost' or 'testhost' (MS-MQMQ 2.1.1)"),
])
async def test_create_queue_bad_input(api, body, code, message):
    status, data = await call(api, "POST", "/v1/queues", body)
    assert status == 400 and data["error"] == code
    if message is not None:
        assert data["message"].startswith(message)


async def test_create_existing_queue_is_a_conflict(api):
    await make_queue(api)
    status, data = await call(api, "POST", "/v1/queues", {"pathname": "TESTHOST\\PRIVATE$\\Orders"})
    assert (status, data["error"], data["hresult"]) == (409, "MQ_ERROR_QUEUE_EXISTS", "0xC00E0005")
    assert data["message"] == "queue 'TESTHOST\\PRIVATE$\\Orders' already exists"


async def test_unknown_queue(api):
    nope = url(".\\private$\\nope")
    status, data = await call(api, "POST", f"/v1/queues/{nope}/messages", {"body": "x"})
    assert (status, data) == (404, {"error": "MQ_ERROR_QUEUE_NOT_FOUND", "message": "unknown queue '.\\private$\\nope'"})


@pytest.mark.parametrize("body, status_code, code, message", [
    ({"priority": 8}, 400, "bad_value", "priority: 8 is out of range 0..7"),
    ({"priority": -1}, 400, "bad_value", "priority: -1 is out of range 0..7"),
    ({"priority": "high"}, 400, "bad_value", "priority: expected an integer, got 'high'"),
    ({"label": "x" * 250}, 400, "label_too_long", "label: 250 characters is longer than 249 (MS-MQDMPR 3.1.1.12)"),
    ({"correlation_id": "zz"}, 400, "bad_value", "correlation_id: 'zz' is not hexadecimal"),
    ({"correlation_id": "ab"}, 400, "bad_value", "correlation_id: 1 bytes, expected 20 (40 hex digits)"),
    ({"body": "a", "body_base64": "YQ=="}, 400, "bad_value",
     "give either body (text, sent as UTF-8) or body_base64, not both"),
    ({"body_base64": "***"}, 400, "bad_value", "body_base64: not valid base64"),
    ({"delivery": "fast"}, 400, "bad_value", "delivery: expected 'express' or 'recoverable', got 'fast'"),
    ({"acknowledgement": ["pos_arrival"]}, 400, "bad_value",
     "acknowledgement requested without admin_queue (MS-MQMQ 2.2.19.2: an administration queue MUST be given "
     "when acknowledgements are requested)"),
    ({"acknowledgement": ["sometimes"], "admin_queue": "DIRECT=OS:x\\q"}, 400, "bad_value",
     "acknowledgement: unknown flag 'sometimes'"),
    ({"acknowledgement": 16, "admin_queue": "DIRECT=OS:x\\q"}, 400, "bad_value",
     "acknowledgement: 16 is out of range 0..15 (PA/PR/NA/NR bits)"),
    ({"time_to_be_received": 2 ** 32}, 400, "bad_value", "time_to_be_received: 4294967296 is out of range 0..4294967295"),
    ({"count": 0}, 400, "bad_value", "count: 0 is out of range 1..100000"),
    ({"bdy": "x"}, 400, "unknown_field", "unknown field(s): bdy"),
    ({"body_base64": base64.b64encode(bytes(MAX_BODY + 1)).decode()}, 413, "body_too_large",
     f"body: {MAX_BODY + 1} bytes is larger than {MAX_BODY}"),
])
async def test_send_bad_input(api, body, status_code, code, message):
    await make_queue(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", body)
    assert status == status_code and data["error"] == code and data["message"].startswith(message), data
    status, listing = await call(api, "GET", f"/v1/queues/{url(Q)}/messages")
    assert listing["messages"] == []


async def test_queue_quota_exceeded_is_507(api):
    await make_queue(api, quota=1)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x" * 2000})
    assert status == 507 and data["error"] == "quota_exceeded"
    assert data["message"] == ("queue 'testhost\\private$\\orders': its quota of 1 KB would be exceeded "
                               "(MS-MQDMPR 3.1.7.1.9 rStatus 1)")


async def test_unknown_lookup_id(api):
    await make_queue(api)
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages/12345")
    assert (status, data["error"]) == (404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages/abc")
    assert (status, data["message"]) == (400, "lookup_id: 'abc' is not a number")


async def test_delete_system_queue_is_forbidden(api):
    status, data = await call(api, "DELETE", "/v1/queues/" + url(".\\private$\\admin_queue$"))
    assert status == 403 and data["message"] == \
        "'testhost\\private$\\admin_queue$' is a system queue and cannot be deleted"


@pytest.mark.parametrize("body, message", [
    ({"access": "write"}, "access: expected one of receive, peek, got 'write'"),
    ({"share_mode": "exclusive"}, "share_mode: expected one of deny-none, deny-receive, got 'exclusive'"),
    ({"acess": "peek"}, "unknown field(s): acess"),
])
async def test_open_bad_input(api, body, message):
    await make_queue(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/open", body)
    assert status == 400 and data["message"].startswith(message)


async def test_open_sharing_violation_is_a_conflict(api):
    await make_queue(api)
    status, _ = await call(api, "POST", f"/v1/queues/{url(Q)}/open", {"share_mode": "deny-receive"})
    assert status == 201
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/open", {"access": "receive"})
    assert (status, data["error"], data["hresult"]) == (409, "MQ_ERROR_SHARING_VIOLATION", "0xC00E0009")


@pytest.mark.parametrize("path, status_code, message", [
    ("/v1/handles/abc", 400, "handle: 'abc' is not a number"),
    ("/v1/handles/0", 400, "handle: 0 is not a DWORD handle (1..0xFFFFFFFF)"),
    ("/v1/handles/4294967296", 400, "handle: 4294967296 is not a DWORD handle (1..0xFFFFFFFF)"),
    ("/v1/handles/77", 404, "no open queue descriptor with handle 77"),
])
async def test_bad_handles(api, path, status_code, message):
    status, data = await call(api, "DELETE", path)
    assert (status, data["message"]) == (status_code, message)
    status, data = await call(api, "POST", path + "/cursors", {})
    assert (status, data["message"]) == (status_code, message)


async def test_unknown_endpoint_and_method_answer_json(api):
    status, data = await call(api, "GET", "/v1/nothing")
    assert (status, data["message"]) == (404, "no such endpoint: GET /v1/nothing")
    status, data = await call(api, "PUT", "/v1/queues")
    assert (status, data["message"]) == (405, "method not allowed for this endpoint: PUT /v1/queues")


async def test_list_messages_limit(api):
    await make_queue(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x", "count": 5})
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?limit=2")
    assert status == 200 and data["total"] == 5 and len(data["messages"]) == 2
    for bad in ("0", "10001", "x"):
        status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?limit={bad}")
        assert (status, data["message"]) == (400, f"limit: '{bad}' is not an integer from 1 to 10000; page on with "
                                                  "after=<next_after of the previous page>")
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?after=-1")
    assert (status, data["message"]) == (400, "after: '-1' is not a lookup_id")


async def test_list_messages_pages_with_after_from_where_the_last_page_ended(api):
    await make_queue(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x", "count": 5})
    pages, after = [], None
    while True:
        query = "limit=2" + ("" if after is None else f"&after={after}")
        status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?{query}")
        assert status == 200
        pages.append([m["lookup_id"] for m in data["messages"]])
        after = data["next_after"]
        if after is None:
            break
    everything = (await call(api, "GET", f"/v1/queues/{url(Q)}/messages"))[1]
    assert [len(p) for p in pages] == [2, 2, 1] and sum(pages, []) == [m["lookup_id"] for m in everything["messages"]]
    assert everything["next_after"] is None


async def test_a_page_with_bodies_ends_once_its_bodies_reach_the_byte_bound(api, monkeypatch):
    import qm2qm.admin
    monkeypatch.setattr(qm2qm.admin, "MAX_PAGE_BODY_BYTES", 250)
    await make_queue(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "y" * 100, "count": 4})
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?body=1&limit=10")
    assert status == 200 and len(data["messages"]) == 3 and data["next_after"] == data["messages"][-1]["lookup_id"]
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?limit=10")
    assert len(data["messages"]) == 4        # without bodies the bound does not apply


async def test_the_client_lists_every_message_a_page_at_a_time(monkeypatch, tmp_path):
    from qm2qm.pytest_plugin import start_in_process
    handle, server = start_in_process(tmp_path / "data")
    try:
        admin = handle.admin()
        admin.create_queue(Q)
        admin.send(Q, body="z", count=25)
        import qm2qm.admin
        monkeypatch.setattr(qm2qm.admin, "MAX_PAGE_BODY_BYTES", 1)      # one message a page with bodies
        assert len(admin.list_messages(Q, body=True, limit=None)) == 25
        assert len(admin.list_messages(Q, limit=7)) == 7
        first = admin.list_messages(Q, limit=3)
        assert admin.list_messages(Q, limit=3, after=first[-1]["lookup_id"])[0]["lookup_id"] > first[-1]["lookup_id"]
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------- fuzz

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) | st.text(max_size=300) | \
    st.floats(allow_nan=False)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=3), max_leaves=6)
_fields = sorted({"pathname", "label", "transactional", "journal", "quota", "journal_quota", "body", "body_base64",
                  "body_type", "priority", "time_to_be_received", "time_to_reach_queue", "correlation_id",
                  "app_specific", "delivery", "acknowledgement", "admin_queue", "response_queue", "dead_letter",
                  "extension_base64", "trace", "count", "access", "share_mode"})
_bodies = st.dictionaries(st.sampled_from(_fields) | st.text(max_size=6), _json, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies, target=st.sampled_from(["/v1/queues", "/messages", "/open"]))
async def test_any_json_object_gets_a_json_answer_never_a_500(api, body, target):
    if api.qm.queue_by_pathname(Q) is None:
        await make_queue(api)
    path = target if target == "/v1/queues" else f"/v1/queues/{url(Q)}{target}"
    if "count" in body and isinstance(body["count"], int) and body["count"] > 50:
        body["count"] = 50                                   # keep the run fast; ranges are tested above
    status, data = await call(api, "POST", path, body)
    assert status in (201, 400, 404, 409, 413, 507), (status, data)
    if status >= 400:
        assert isinstance(data["message"], str) and data["message"] and data["error"]


@pytest.mark.parametrize("body, fragment", [
    ({"admin_queue": "garbage", "acknowledgement": 1}, "'garbage' is not a format name"),
    ({"response_queue": "PRIVATE=not-a-guid\\1"}, "malformed GUID"),
])
async def test_a_message_no_packet_can_carry_is_refused(api, body, fragment):
    await make_queue(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", body)
    assert status == 400 and data["error"] == "bad_message" and fragment in data["message"], data
    assert data["message"].startswith("the message cannot be carried in a UserMessage packet (MS-MQMQ 2.2.20): ")


async def test_a_body_that_overflows_the_packet_limit_is_refused(api):
    await make_queue(api)
    body = base64.b64encode(bytes(4 * 1024 * 1024)).decode()     # 4 MiB + headers > 0x400000 (MS-MQMQ 2.2.19.1)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body_base64": body})
    assert status == 400 and data["error"] == "bad_message" and "0x400000" in data["message"], data
    body = base64.b64encode(bytes(4 * 1024 * 1024 - 1024)).decode()
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body_base64": body})
    assert status == 201, data


async def test_an_enqueue_the_store_cannot_commit_is_answered_507_message_storage_failed():
    # disk full / read-only store (found by scripts/soak.py storage faults): a clear 507, never a 500
    from shared_adm.store.base import StoreError

    class FullDisk(MemoryStore):
        async def durable(self):
            raise StoreError("qm2qm.sqlite3: commit failed: database or disk is full")

    qm = QueueManager(FullDisk(), computer_name="testhost")
    qm.initialize()
    client = TestClient(TestServer(AdminApi(qm, info=lambda: {}).app))
    await client.start_server()
    try:
        status, data = await call(client, "POST", "/v1/queues", {"pathname": Q})
        assert (status, data["error"], data["hresult"]) == (507, "MQ_ERROR_INSUFFICIENT_RESOURCES", "0xC00E0027")
        status, data = await call(client, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x"})
        assert (status, data["error"], data["hresult"]) == (507, "MQ_ERROR_MESSAGE_STORAGE_FAILED", "0xC00E002A")
        assert "disk is full" in data["message"] and "not durable" in data["message"]
    finally:
        await client.close()


@pytest.mark.parametrize("raw", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000],
                         ids=["array", "object"])
async def test_a_body_nested_too_deeply_is_400_bad_json_not_500(api, raw):
    # found by scripts/soak.py admin fuzz: json.loads raised RecursionError, answered as a 500
    status, data = await call(api, "POST", "/v1/queues", raw=raw)
    assert (status, data["error"]) == (400, "bad_json") and "nested too deeply" in data["message"]


async def test_a_malformed_http_request_is_a_400_and_one_warning_line_without_traceback(caplog):
    # found by scripts/soak.py admin fuzz: a request line over aiohttp's limit was logged as ERROR + traceback
    import asyncio
    from aiohttp import web
    from qm2qm.admin import HTTP_LOG
    qm = QueueManager(MemoryStore(), computer_name="testhost")
    qm.initialize()
    runner = web.AppRunner(AdminApi(qm, info=lambda: {}).app, access_log=None, logger=HTTP_LOG)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        with caplog.at_level("WARNING"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /v1/queues/" + b"x" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n")
            status_line = await asyncio.wait_for(reader.readline(), 60)
            writer.close()
        assert status_line.split()[1] == b"400"
        records = [r for r in caplog.records if r.name == "qm2qm.admin.http"]
        assert records and all(r.levelname == "WARNING" and not r.exc_info for r in records)
        assert "malformed HTTP request answered 400" in records[0].getMessage()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("path, body", [("/messages", b'{"body": "x"}'), ("/open", b'{"access": "peek"}'),
                                        ("/permissions", b'{"grant": "peek", "principal": "Everyone"}')])
async def test_a_queue_deleted_while_the_request_body_arrives_is_not_found_not_an_internal_error(api, path, body):
    await make_queue(api)
    deleted = asyncio.Event()

    async def slowly():
        yield body[:1]
        await deleted.wait()
        yield body[1:]

    sent = asyncio.ensure_future(api.post(f"/v1/queues/{url(Q)}{path}", data=slowly()))
    await asyncio.sleep(0.2)            # the handler has begun and waits for the rest of the body
    assert (await call(api, "DELETE", f"/v1/queues/{url(Q)}"))[0] == 200
    deleted.set()
    response = await sent
    assert response.status == 404 and (await response.json())["error"] == "MQ_ERROR_QUEUE_NOT_FOUND"


async def test_one_message_is_found_by_its_lookup_id_without_rebuilding_the_messages_before_it(api, monkeypatch):
    from shared_adm.queue import MessagePosition
    await make_queue(api)
    status, sent = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x", "count": 50})
    rebuilt = []
    plain = MessagePosition.message
    monkeypatch.setattr(MessagePosition, "message", property(lambda p: rebuilt.append(p) or plain.fget(p)))
    status, shown = await call(api, "GET", f"/v1/queues/{url(Q)}/messages/{sent['last_lookup_id']}")
    assert (status, shown["lookup_id"], len(rebuilt)) == (200, sent["last_lookup_id"], 1)
    for missing in (-1, 1 << 64, sent["last_lookup_id"] + 1):
        status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages/{missing}")
        assert (status, data["error"]) == (404, "MQ_ERROR_MESSAGE_NOT_FOUND")


async def test_the_dead_letter_queues_are_found_by_the_path_names_the_queue_list_shows_and_take_no_sends(api):
    status, listed = await call(api, "GET", "/v1/queues")
    dead = [q for q in listed["queues"] if q["pathname"].lower().endswith(("system$;deadletter", "system$;deadxact"))]
    assert [q["pathname"] for q in dead] == ["testhost\\system$;deadletter", "testhost\\system$;deadxact"]
    for queue in dead:
        for name in (queue["pathname"], queue["pathname"].upper(), ".\\" + queue["pathname"].split("\\")[1]):
            status, shown = await call(api, "GET", f"/v1/queues/{url(name)}")
            assert (status, shown["identifier"]) == (200, queue["identifier"])
        assert queue["format_name"] == "DIRECT=OS:" + queue["pathname"]
        status, data = await call(api, "POST", f"/v1/queues/{url(queue['pathname'])}/messages", {"body": "x"})
        assert (status, data["error"]) == (403, "system_queue")
        assert (await call(api, "GET", f"/v1/queues/{url(queue['pathname'])}/messages"))[0] == 200
        assert (await call(api, "POST", f"/v1/queues/{url(queue['pathname'])}/open", {"access": "peek"}))[0] == 201
    assert (await call(api, "GET", f"/v1/queues/{url('elsewhere' + chr(92) + 'system$;deadletter')}"))[0] == 404


async def test_a_text_body_with_a_lone_surrogate_is_a_bad_value_not_an_internal_error(api):
    await make_queue(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages", raw='{"body": "ab\\ud800"}')
    assert (status, data["error"]) == (400, "bad_value")
    assert data["message"] == ("body: character 2 is a lone surrogate (U+D800), which UTF-8 cannot carry; "
                               "send such bytes as body_base64")
    assert (await call(api, "GET", f"/v1/queues/{url(Q)}/messages"))[1]["total"] == 0


# ---------------------------------------------------------------------------------------------- subqueues

POISON = Q + ";poison"


async def send_one(client, pathname=Q, body="m"):
    status, data = await call(client, "POST", f"/v1/queues/{url(pathname)}/messages", {"body": body})
    assert status == 201, data
    return data["lookup_id"]


async def test_move_to_a_subqueue_lists_it_under_its_queue_and_back_again(api):
    await make_queue(api)
    lookup_id = await send_one(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id}/move", {"to": "poison"})
    assert (status, data) == (200, {"moved": lookup_id, "from": "testhost\\private$\\orders",
                                    "to": "testhost\\private$\\orders;poison"})
    status, shown = await call(api, "GET", f"/v1/queues/{url(Q)}")
    assert shown["subqueues"] == [{"name": "poison", "messages": 1}] and shown["messages"] == 0
    status, sub = await call(api, "GET", f"/v1/queues/{url(POISON)}")
    assert (status, sub["parent"], sub["format_name"]) == (200, "testhost\\private$\\orders",
                                                           "DIRECT=OS:testhost\\private$\\orders;poison")
    status, listed = await call(api, "GET", f"/v1/queues/{url(POISON)}/messages")
    assert [m["lookup_id"] for m in listed["messages"]] == [lookup_id]
    status, data = await call(api, "POST", f"/v1/queues/{url(POISON)}/messages/{lookup_id}/move", {})
    assert (status, data["to"]) == (200, "testhost\\private$\\orders")
    assert (await call(api, "GET", f"/v1/queues/{url(POISON)}"))[0] == 404      # empty and closed: gone
    assert (await call(api, "GET", f"/v1/queues/{url(Q)}"))[1]["subqueues"] == []


async def test_a_subqueue_takes_no_sends_no_delete_and_no_permission_change(api):
    await make_queue(api)
    lookup_id = await send_one(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id}/move", {"to": "poison"})
    status, data = await call(api, "POST", f"/v1/queues/{url(POISON)}/messages", {"body": "x"})
    assert (status, data["error"]) == (403, "subqueue")
    status, data = await call(api, "DELETE", f"/v1/queues/{url(POISON)}")
    assert (status, data["error"]) == (409, "subqueue")
    status, data = await call(api, "POST", f"/v1/queues/{url(POISON)}/permissions",
                              {"grant": "receive", "principal": "Everyone"})
    assert (status, data["error"]) == (400, "subqueue")
    assert (await call(api, "GET", f"/v1/queues/{url(POISON)}/permissions"))[0] == 200


@pytest.mark.parametrize("body, code, error", [
    ({"to": "a b"}, 400, "bad_value"), ({"to": "x" * 33}, 400, "bad_value"), ({"to": 5}, 400, "bad_value"),
    ({"to": ""}, 400, "bad_value"), ({"where": "poison"}, 400, "unknown_field"),
    ({"to": "Journal"}, 400, "bad_value"),
])
async def test_move_with_a_bad_target_is_refused_and_moves_nothing(api, body, code, error):
    await make_queue(api)
    lookup_id = await send_one(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id}/move", body)
    assert (status, data["error"]) == (code, error), data
    assert (await call(api, "GET", f"/v1/queues/{url(Q)}"))[1]["messages"] == 1
    assert list(api.qm.queue_by_pathname(Q).subqueue_collection) == []


async def test_move_of_a_locked_or_missing_message_is_refused(api):
    await make_queue(api)
    lookup_id = await send_one(api)
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id + 1}/move", {"to": "p"})
    assert (status, data["error"]) == (404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    queue = api.qm.queue_by_pathname(Q)
    status, desc = api.qm.open_queue("DIRECT=OS:testhost\\private$\\orders", _receive(), _deny_none())
    assert api.qm.dequeue_message_begin(desc, 0).status == 0
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id}/move", {"to": "p"})
    assert (status, data["error"]) == (409, "message_locked")
    assert list(queue.subqueue_collection) == []


async def test_the_dead_letter_queue_has_no_subqueues(api):
    qm = api.qm
    from shared_adm.message import Message
    assert qm.enqueue_message(qm.system_deadletter_queue, Message(body=b"dead")) == 0
    lookup_id = next(iter(qm.system_deadletter_queue.message_position_list)).lookup_identifier
    dlq = "testhost\\system$;deadletter"
    status, data = await call(api, "POST", f"/v1/queues/{url(dlq)}/messages/{lookup_id}/move", {"to": "x"})
    assert (status, data["error"]) == (400, "no_subqueues")


def _receive():
    from shared_adm.enums import QueueAccessType
    return QueueAccessType.RECEIVE_ACCESS


def _deny_none():
    from shared_adm.enums import QueueShareMode
    return QueueShareMode.DENY_NONE


async def test_delete_one_message_takes_an_available_one_away_and_refuses_a_locked_one(api):
    await make_queue(api)
    first = await send_one(api, body="first")
    second = await send_one(api, body="second")
    status, data = await call(api, "DELETE", f"/v1/queues/{url(Q)}/messages/{first}")
    assert (status, data) == (200, {"deleted": first, "queue": "testhost\\private$\\orders"})
    listed = (await call(api, "GET", f"/v1/queues/{url(Q)}/messages"))[1]["messages"]
    assert [m["lookup_id"] for m in listed] == [second]
    assert (await call(api, "DELETE", f"/v1/queues/{url(Q)}/messages/{first}"))[0] == 404
    _, desc = api.qm.open_queue("DIRECT=OS:testhost\\private$\\orders", _receive(), _deny_none())
    assert api.qm.dequeue_message_begin(desc, 0).status == 0
    status, data = await call(api, "DELETE", f"/v1/queues/{url(Q)}/messages/{second}")
    assert (status, data["error"]) == (409, "message_locked")


async def test_deleting_a_subqueue_s_last_message_removes_the_subqueue(api):
    await make_queue(api)
    lookup_id = await send_one(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{lookup_id}/move", {"to": "poison"})
    status, data = await call(api, "DELETE", f"/v1/queues/{url(POISON)}/messages/{lookup_id}")
    assert (status, data["queue"]) == (200, "testhost\\private$\\orders;poison")
    assert (await call(api, "GET", f"/v1/queues/{url(POISON)}"))[0] == 404


async def test_a_long_page_is_built_a_chunk_a_turn_and_stays_in_order_while_the_queue_changes(api, monkeypatch):
    import qm2qm.admin
    monkeypatch.setattr(qm2qm.admin, "LIST_CHUNK", 3)
    await make_queue(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages", {"body": "x", "count": 10})
    queue = api.qm.queue_by_pathname(Q)
    first = next(iter(queue.message_position_list))
    turns = []
    real_messages = qm2qm.admin.Backend.messages

    def messages(self, *args):
        turns.append(args[2])          # where each chunk starts
        if len(turns) == 2:            # between two turns the first message, already listed, goes
            api.qm.message_position_deleted(queue, first, _purged())
        return real_messages(self, *args)

    monkeypatch.setattr(qm2qm.admin.Backend, "messages", messages)
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?limit=8")
    ids = [m["lookup_id"] for m in data["messages"]]
    assert status == 200 and len(ids) == 8 and ids == sorted(ids) and len(set(ids)) == 8
    assert turns[0] is None and len(turns) == 3 and data["next_after"] == ids[-1]


def _purged():
    from shared_adm.enums import MessageClass
    return MessageClass.NACK_QUEUE_PURGED


async def test_a_move_that_would_make_a_subqueue_past_the_limit_is_507(api):
    api.qm.max_subqueues = 1
    await make_queue(api)
    first, second = await send_one(api), await send_one(api)
    assert (await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{first}/move", {"to": "a"}))[0] == 200
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{second}/move", {"to": "b"})
    assert (status, data["error"]) == (507, "too_many_subqueues")
    assert (await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{second}/move", {"to": "a"}))[0] == 200


async def test_a_browser_page_cannot_drive_the_api_by_dns_rebinding_or_cross_site_requests(api):
    """Found by a hostile probe: a page on evil.example (its name rebound to 127.0.0.1) read and changed the API, and
    a cross-site text/plain form POST granted ANONYMOUS LOGON read. Host must be a loopback name; a state-changing
    request must not come from another origin (Origin, Sec-Fetch-Site)."""
    create = json.dumps({"pathname": Q})
    for headers in ({"Host": "evil.example"}, {"Host": "evil.example:8105"}, {"Host": "127.0.0.1.evil.example"},
                    {"Host": "127.0.0.1:8105.evil.example"}, {"Host": "[::1]:x"}):
        resp = await api.get("/v1/queues", headers=headers)
        assert resp.status == 403 and (await resp.json())["error"] == "forbidden_host"
        resp = await api.post("/v1/queues", data=create, headers=headers)
        assert resp.status == 403
    for headers in ({"Origin": "http://evil.example", "Content-Type": "text/plain"}, {"Origin": "null"},
                    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}):
        resp = await api.post("/v1/queues", data=create, headers=headers)
        assert resp.status == 403 and (await resp.json())["error"] == "cross_origin", headers
    assert [q for q in (await (await api.get("/v1/queues")).json())["queues"] if q["pathname"].endswith("orders")] \
        == []                                                               # nothing was created
    port = api.server.port
    for headers in ({}, {"Host": f"localhost:{port}"}, {"Host": f"[::1]:{port}"},
                    {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}):
        resp = await api.get("/v1/info", headers=headers)
        assert resp.status == 200, headers
    resp = await api.post("/v1/queues", data=create, headers={"Origin": f"http://127.0.0.1:{port}"})
    assert resp.status == 201


async def test_a_queue_whose_name_holds_braces_is_reachable_by_every_route(api):
    """Found by a hostile probe: aiohttp's {name} stops at braces, so such a queue was created, listed, and then
    404 "no such endpoint" for show, send, messages, delete — a queue nobody could remove."""
    pathname = ".\\private$\\brace}q{x"
    status, _ = await call(api, "POST", "/v1/queues", {"pathname": pathname})
    assert status == 201
    assert (await call(api, "GET", f"/v1/queues/{url(pathname)}"))[0] == 200
    assert (await call(api, "POST", f"/v1/queues/{url(pathname)}/messages", {"body": "x"}))[0] == 201
    assert (await call(api, "GET", f"/v1/queues/{url(pathname)}/messages"))[0] == 200
    assert (await call(api, "GET", f"/v1/ui/queues/{url(pathname)}/messages"))[0] == 200
    assert (await call(api, "DELETE", f"/v1/queues/{url(pathname)}"))[0] == 200


async def test_a_path_name_ending_in_a_semicolon_names_no_queue(api):
    """"orders;" names no subqueue (MS-MQMQ 2.1.1: 1 to 32 characters) and not the queue: DELETE of it deleted
    orders and its messages."""
    await make_queue(api)
    await call(api, "POST", "/v1/queues/" + url(Q) + "/messages", {"body": "kept"})
    for method in ("GET", "DELETE"):
        status, _ = await call(api, method, "/v1/queues/" + url(Q + ";"))
        assert status == 404
    status, shown = await call(api, "GET", "/v1/queues/" + url(Q))
    assert status == 200 and shown["messages"] == 1


async def test_handles_lists_descriptors_on_subqueues_and_on_deleted_queues(api):
    """GET /v1/handles lists every descriptor opened for remote read: one on a subqueue, and one whose queue was
    deleted since (it stays open, and counts against --max-open-queues, until closed)."""
    await make_queue(api)
    _, sent = await call(api, "POST", "/v1/queues/" + url(Q) + "/messages", {"body": "poisoned"})
    status, _ = await call(api, "POST", f"/v1/queues/{url(Q)}/messages/{sent['lookup_id']}/move", {"to": "poison"})
    assert status == 200
    _, on_subqueue = await call(api, "POST", f"/v1/queues/{url(Q + ';poison')}/open", {"access": "peek"})
    await make_queue(api, ".\\private$\\doomed")
    _, on_doomed = await call(api, "POST", f"/v1/queues/{url('.' + chr(92) + 'private$' + chr(92) + 'doomed')}/open",
                              {"access": "peek"})
    status, _ = await call(api, "DELETE", f"/v1/queues/{url('.' + chr(92) + 'private$' + chr(92) + 'doomed')}")
    assert status == 200
    _, listing = await call(api, "GET", "/v1/handles")
    queues = {h["hRemoteQueue"]: h["queue"] for h in listing["handles"]}
    assert queues == {on_subqueue["hRemoteQueue"]: "testhost\\private$\\orders;poison",
                      on_doomed["hRemoteQueue"]: None}


async def test_a_gzip_body_that_does_not_decode_is_a_400_naming_it(api, caplog):
    with caplog.at_level(logging.ERROR, logger="qm2qm"):
        response = await api.post("/v1/queues", data=b"{}", headers={"Content-Type": "application/json",
                                                                        "Content-Encoding": "gzip"})
    assert response.status == 400 and await response.json() == {
        "error": "bad_body", "message": "request body: Can not decode content-encoding: gzip"}
    assert not [r for r in caplog.records if r.name.startswith("qm2qm")]     # aiohttp's own line: HTTP_LOG's filter


async def test_a_client_leaving_in_the_middle_of_its_body_is_no_error_in_the_log(caplog):
    """As `qm2qm serve` runs the admin app (web.AppRunner, HTTP_LOG): the read of the body fails when the client
    goes; that is no internal error."""
    from aiohttp import web
    from qm2qm.admin import HTTP_LOG
    from qm2qm.mqqp.interface import build_service
    qm = QueueManager(MemoryStore(), computer_name="testhost")
    qm.initialize()
    runner = web.AppRunner(AdminApi(qm, info=dict, service=build_service(qm)).app, access_log=None,
                           handle_signals=False, logger=HTTP_LOG)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        with caplog.at_level(logging.DEBUG, logger="qm2qm"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{}")
            await writer.drain()
            writer.close()
            for _ in range(500):                 # until the server has seen it go (a hang guard, not a timing)
                if any("the client left" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
        assert any("the client left" in r.getMessage() for r in caplog.records)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("qm2qm")]
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("pathname, says", [
    (".\\private$\\a/b", "bad queue name 'a/b' in '.\\private$\\a/b': 1 to 124 printable characters, none of \\ / ;"),
    ("c" * 200 + "\\private$\\" + "q" * 60, "has 270 characters; a path name has at most 248"),
])
async def test_a_path_name_the_queue_manager_refuses_is_named_for_what_it_is(api, pathname, says):
    # both passed the API's own check, and the answer blamed the computer name
    status, data = await call(api, "POST", "/v1/queues", {"pathname": pathname})
    assert status == 400 and data["error"] == "bad_pathname" and says in data["message"]


async def test_an_open_of_a_subqueue_not_made_yet_makes_it_as_qmcomm_does(api):
    # MS-MQDMPR 3.1.7.1.5: the first Open Queue naming a subqueue makes it (R_QMOpenRemoteQueue and R_OpenQueue did;
    # the admin API answered 404)
    await make_queue(api)
    status, opened = await call(api, "POST", f"/v1/queues/{url(Q + ';retry')}/open", {"access": "peek"})
    assert status == 201 and opened["queue"] == "testhost\\private$\\orders;retry"
    for name in (Q + ";journal", Q + ";", ".\\private$\\nosuch;retry", Q + ";retry;again"):
        status, data = await call(api, "POST", f"/v1/queues/{url(name)}/open", {})
        assert status == 404 and data["error"] == "MQ_ERROR_QUEUE_NOT_FOUND", name
