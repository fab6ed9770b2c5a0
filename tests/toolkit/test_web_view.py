"""The web view (qm2qm/web) in a real headless browser: Debian's chromium loads each page against a server with
data in it, and the test reads what the page rendered from the DOM it dumps (after its scripts ran)."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import urllib.parse
from html.parser import HTMLParser

import pytest

from qm2qm.client import Qm2qmClient
from qm2qm.mqqp.constants import MQ_ACTION_PEEK_CURRENT, MQ_ACTION_RECEIVE

# Hang guard, not a timing assertion.
BROWSER_GUARD_S = 120
# Browser time the page may run (virtual: chromium advances it only while no fetch is outstanding), enough for
# the first render and two refreshes (REFRESH_MS = 2000 in app.js).
VIRTUAL_TIME_MS = 4500
HOSTILE_LABEL = "<b>bold</b> & <img src=x onerror=alert(1)>"


def chromium() -> str:
    path = os.environ.get("QM2QM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("the web view test needs Debian's chromium: apt-get install -y chromium (.ci/run installs it)")
    return path


def browser(url: str, tmp_path, *mode: str) -> str:
    """Run headless chromium on url with ``mode`` (--dump-dom, --screenshot=...); its stdout."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--virtual-time-budget={VIRTUAL_TIME_MS}",
           "--window-size=1400,1000", *mode, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_GUARD_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Dom(HTMLParser):
    """The parts of a dumped page the tests read: body attributes, tables by id (rows of cell texts), elements
    by id (text), and every tag opened inside a table cell."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.body: dict = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.text: dict[str, str] = {}
        self.tags_in_cells: list[str] = []
        self._table = None
        self._in_tbody = False
        self._cell: list[str] | None = None
        self._ids: list[tuple[str, str | None, list[str]]] = []    # open elements: (tag, id, text parts)
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "body":
            self.body = attrs
        if self._cell is not None:
            self.tags_in_cells.append(tag)
        if tag == "table":
            self._table = attrs.get("id")
            self.tables[self._table] = []
        elif tag == "tbody":
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self.tables[self._table].append([])
        elif tag == "td" and self._in_tbody:
            self._cell = []
        if tag not in VOID:
            self._ids.append((tag, attrs.get("id"), []))

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tbody":
            self._in_tbody = False
        if self._ids and self._ids[-1][0] == tag:
            _, ident, parts = self._ids.pop()
            text = "".join(parts)
            if ident is not None:
                self.text[ident] = text.strip()
            if self._ids:
                self._ids[-1][2].append(text)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._ids:
            self._ids[-1][2].append(data)

    def column(self, table: str, index: int) -> list[str]:
        return [row[index] for row in self.tables[table]]

    def row(self, table: str, first_cell: str) -> list[str]:
        rows = [row for row in self.tables[table] if row and row[0] == first_cell]
        assert len(rows) == 1, (first_cell, self.tables[table])
        return rows[0]


@pytest.fixture
def populated(qm2qm_server, qm2qm_queues, qm2qm_admin):
    """A server with two queues, messages of every kind, a session with a cursor, a message awaiting EndReceive
    and a read blocked on an empty queue."""
    orders = qm2qm_queues.make("orders", label=HOSTILE_LABEL[:100])
    qm2qm_queues.send(orders, "first order <script>alert(1)</script>", label=HOSTILE_LABEL, priority=7)
    qm2qm_queues.send(orders, b"\x00\x01\x02\xff" * 8, label="binary", priority=1)
    qm2qm_queues.send(orders, "third", label="plain")
    poisoned = qm2qm_admin.send(orders, body="poisoned")
    qm2qm_admin.move_message(orders, poisoned["lookup_id"], "poison")       # a subqueue of orders, one message
    empty = qm2qm_queues.make("empty")
    session = qm2qm_queues.open_session(orders)
    cursor = qm2qm_admin.open_cursor(session.handle)["hCursor"]
    assert session.client.start_receive2(session.handle, action=MQ_ACTION_PEEK_CURRENT).ok
    held = session.client.start_receive2(session.handle, action=MQ_ACTION_RECEIVE)     # the first order, Locked
    assert held.ok
    waiter = qm2qm_queues.open_session(empty)
    thread = threading.Thread(target=lambda: waiter.client.start_receive2(
        waiter.handle, action=MQ_ACTION_RECEIVE, timeout_ms=0xFFFFFFFF, request_id=4242), daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not any(r["request_id"] == 4242 for r in qm2qm_admin.list_reads()["reads"]):
        assert time.monotonic() < end, "the blocked read never became pending"
        time.sleep(0.01)
    yield {"orders": orders, "empty": empty, "session": session, "cursor": cursor, "waiter": waiter,
           "held_request_id": held.request_id}
    with Qm2qmClient(qm2qm_server.host, qm2qm_server.port) as other:
        other.cancel_receive(waiter.handle, 4242)
    thread.join(timeout=30)


def test_overview_renders_queues_calls_and_pending_reads(qm2qm_server, qm2qm_admin, populated, tmp_path):
    dom = Dom(browser(qm2qm_server.admin_url + "/", tmp_path, "--dump-dom"))
    assert int(dom.body["data-loaded"]) >= 2                    # rendered, and refreshed at least once
    orders = qm2qm_admin.show_queue(populated["orders"])
    row = dom.row("queues", orders["pathname"])
    assert row[1:5] == ["Private", str(orders["messages"]), str(orders["available"]), str(orders["bytes"])]
    assert row[5] == "0.0"                                      # Δ messages/s between two refreshes
    assert row[6] == "1" and row[7] == HOSTILE_LABEL[:100]      # the label shown as text, not as markup
    assert dom.row("queues", qm2qm_admin.show_queue(populated["empty"])["pathname"])[2] == "0"
    assert dom.row("queues", orders["pathname"] + ";poison")[1:3] == ["subqueue", "1"]     # listed under its queue
    calls = {(r[0], r[2]): r for r in dom.tables["calls"]}
    assert calls[("qm2qm", "RemoteQMOpenQueue")][3] == "2"
    assert calls[("qm2qm", "RemoteQMStartReceive2")][3] == "2"    # the blocked one is not answered yet
    assert calls[("qm2qm", "RemoteQMStartReceive2")][5] == "0"
    assert calls[("qm2qm", "RemoteQMStartReceive2")][4] == "0.0"  # calls/s between two refreshes
    reads = dom.tables["reads"]
    assert [r[1] for r in reads if r[4] == "pending"] == ["4242"]
    assert [r[0] for r in reads if r[4] == "awaiting EndReceive"] == [str(populated["session"].handle)]
    server_box = dom.text["server"]
    assert "connections2" in server_box and "association groups2" in server_box
    assert "pending reads1" in server_box and "awaiting EndReceive1" in server_box and "waiting reads1" in server_box
    assert "PCTX_RRSESSION_HANDLE_TYPE: 2" in server_box and "PCTX_REMOTEREAD_HANDLE_TYPE: 1" in server_box
    assert dom.tags_in_cells.count("a") == len(dom.tables["queues"]) and "b" not in dom.tags_in_cells
    assert "img" not in dom.tags_in_cells


def test_queue_page_renders_messages_with_state_priority_label_preview(qm2qm_server, qm2qm_admin, populated,
                                                                        tmp_path):
    name = qm2qm_admin.show_queue(populated["orders"])["pathname"]
    url = f"{qm2qm_server.admin_url}/ui/queue?name={urllib.parse.quote(name, safe='')}"
    dom = Dom(browser(url, tmp_path, "--dump-dom"))
    assert int(dom.body["data-loaded"]) >= 1
    listed = qm2qm_admin.list_messages(populated["orders"])
    rows = dom.tables["messages"]
    assert [r[0] for r in rows] == [str(m["lookup_id"]) for m in listed]
    assert [r[1] for r in rows] == ["Locked", "Available", "Available"]
    assert [r[2] for r in rows] == ["7", "3", "1"]                    # priority order (MS-MQDMPR 3.1.1.2)
    assert [r[3] for r in rows] == [HOSTILE_LABEL, "plain", "binary"]
    assert [r[4] for r in rows] == [str(m["body_size"]) for m in listed]
    assert rows[0][5] == "first order <script>alert(1)</script>"
    assert rows[1][5] == "third"
    assert rows[2][5] == "0x" + (b"\x00\x01\x02\xff" * 8).hex()
    assert dom.text["shown"] == "(3 of 3)"
    assert not {"b", "img", "script"} & set(dom.tags_in_cells)


def test_handles_page_renders_handles_cursors_and_reads(qm2qm_server, qm2qm_admin, populated, tmp_path):
    dom = Dom(browser(qm2qm_server.admin_url + "/ui/handles", tmp_path, "--dump-dom"))
    assert int(dom.body["data-loaded"]) >= 1
    session, waiter = populated["session"], populated["waiter"]
    assert sorted(dom.column("handles", 0)) == sorted(str(d["hRemoteQueue"]) for d in qm2qm_admin.list_handles())
    row = dom.row("handles", str(session.handle))
    assert row[1] == qm2qm_admin.show_queue(populated["orders"])["pathname"]
    assert row[2:5] == ["ReceiveAccess", "DenyNone", "ReadyForRead"]
    assert row[5] == str(populated["cursor"]) and row[6:8] == ["0", "1"]   # one cursor, one Locked message
    assert dom.row("handles", str(waiter.handle))[5:8] == ["none", "1", "0"]  # the blocked read, no cursor
    assert sorted(dom.tables["reads"]) == sorted([
        [str(waiter.handle), "4242", "0x00000000", "INFINITE", "pending"],
        [str(session.handle), str(populated["held_request_id"]), "0x00000000", "0", "awaiting EndReceive"]])
    assert dom.tables["waiting"] == [[str(waiter.handle), "yes", ""]]


def test_queue_page_names_an_unknown_queue(qm2qm_server, tmp_path):
    dom = Dom(browser(qm2qm_server.admin_url + "/ui/queue?name=nosuch", tmp_path, "--dump-dom"))
    assert dom.text["updated"] == "error: /v1/queues/nosuch: unknown queue 'nosuch'"
    assert dom.tables["messages"] == []
