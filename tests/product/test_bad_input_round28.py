"""Bad input answered with a specific 4xx or a one-line CLI error, never a 500 or a traceback: lone surrogates in
text fields and in stored labels, out-of-range SID components, non-ASCII digits, NUL in config paths, --count < 1."""
from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from qm2qm.admin import Backend
from qm2qm.config import ConfigError, load_config
from qm2qm.rpc.auth import UserFileError, UserStore
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from tests.product.conftest import REPO, Cli, server_env, start_server
from tests.product.test_admin import Q, url


async def call(client, method, path, raw: str | None = None):
    resp = await client.request(method, path, data=raw)
    return resp.status, await resp.json()


async def make_queue(client, pathname=Q):
    status, data = await call(client, "POST", "/v1/queues", json.dumps({"pathname": pathname}))
    assert status == 201, data


# ---------------------------------------------------------------------------------------------- lone surrogates

@pytest.mark.parametrize("path, raw, key", [
    ("/v1/queues", '{"pathname": ".\\\\private$\\\\surr", "label": "\\ud800"}', "label"),
    ("/v1/queues/{q}/messages", '{"label": "ok\\ud800"}', "label"),
    ("/v1/queues/{q}/messages", '{"admin_queue": "\\udc80"}', "admin_queue"),
    ("/v1/queues/{q}/messages", '{"response_queue": "DIRECT=OS:.\\\\\\ud800"}', "response_queue"),
    ("/v1/queues/{q}/open", '{"access": "\\ud800"}', "access"),
    ("/v1/queues/{q}/permissions", '{"grant": "receive", "principal": "\\ud800"}', "principal"),
])
async def test_a_lone_surrogate_in_any_text_field_is_a_bad_value_like_the_body_s(api, path, raw, key):
    await make_queue(api)
    status, data = await call(api, "POST", path.format(q=url(Q)), raw)
    assert (status, data["error"]) == (400, "bad_value"), data
    start = json.loads(raw)[key].index(next(c for c in json.loads(raw)[key] if 0xD800 <= ord(c) <= 0xDFFF))
    assert data["message"].startswith(f"{key}: character {start} is a lone surrogate (U+")
    assert data["message"].endswith("), which UTF-8 cannot carry")
    queues = (await call(api, "GET", "/v1/queues"))[1]["queues"]
    assert not any(q["pathname"].endswith("surr") for q in queues)
    assert (await call(api, "GET", f"/v1/queues/{url(Q)}/messages"))[1]["total"] == 0


# ---------------------------------------------------------------------------------------------- SIDs

@pytest.mark.parametrize("sid, problem", [
    ("S-1-5-4294967296", "subauthority 4294967296 is out of range 0..4294967295 (32 bits; MS-DTYP 2.4.2)"),
    ("S-1-5-21-99999999999999999999", "subauthority 99999999999999999999 is out of range 0..4294967295"),
    ("S-1-99999999999999999-1", "identifier authority 99999999999999999 is out of range 0..255"),
    ("S-1-256-1", "identifier authority 256 is out of range 0..255"),
    ("S-1-5" + "-1" * 16, "16 subauthorities, more than 15 (MS-DTYP 2.4.2)"),
    ("S-1-5-00000000000000000000004294967296", "subauthority 00000000000000000000004294967296 is out of range"),
])
async def test_a_sid_whose_components_overflow_their_fields_is_a_bad_value_naming_it(api, sid, problem):
    await make_queue(api)
    before = await call(api, "GET", f"/v1/queues/{url(Q)}/permissions")
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/permissions",
                              json.dumps({"grant": "receive", "principal": sid}))
    assert (status, data["error"]) == (400, "bad_value"), data
    assert data["message"].startswith(f"principal {sid!r}: {problem}"), data
    assert await call(api, "GET", f"/v1/queues/{url(Q)}/permissions") == before


async def test_a_sid_at_the_edge_of_its_fields_is_granted(api):
    await make_queue(api)
    sid = "S-1-255" + "-4294967295" * 15
    status, data = await call(api, "POST", f"/v1/queues/{url(Q)}/permissions",
                              json.dumps({"grant": "peek", "principal": sid}))
    assert status == 200 and sid in [ace["sid"] for ace in data["aces"]], data


@pytest.mark.parametrize("sid, problem", [
    ("S-1-5-21-99999999999999999999-1", "'S-1-5-21-99999999999999999999-1': subauthority 99999999999999999999 is "
                                        "out of range 0..4294967295 (32 bits; MS-DTYP 2.4.2)"),
    ("S-1-5-4294967296", "'S-1-5-4294967296': subauthority 4294967296 is out of range"),
    ("S-1-281474976710656-1", "'S-1-281474976710656-1': identifier authority 281474976710656 is out of range "
                              "0..281474976710655"),
    ("S-1-5" + "-1" * 16, "16 subauthorities, more than 15"),
    ("S-1-5-" + "9" * 5000, "subauthority 9999"),           # past int()'s 4300 digits: no ValueError
    ("S-1-5-\u0663", "is not a SID"),       # ARABIC-INDIC DIGIT THREE: a digit to \d, not to MS-DTYP
])
@pytest.mark.parametrize("line", ["DOM:alice:S3cret:{sid}",
                                  "DOM\\bob:1000:" + "X" * 32 + ":" + "0123456789ABCDEF" * 2 + ":[U ]:LCT-0:{sid}"])
def test_a_users_file_sid_out_of_range_is_refused_naming_file_and_line(sid, problem, line):
    with pytest.raises(UserFileError) as info:
        UserStore.parse("DOM:carol:pw\n" + line.format(sid=sid) + "\n", "users.txt")
    assert str(info.value).startswith("users.txt line 2: ") and problem in str(info.value)
    assert "S3cret" not in str(info.value) and "0123456789ABCDEF" not in str(info.value)


def test_a_users_file_sid_at_the_edge_of_its_fields_is_kept():
    sid = "S-1-281474976710655" + "-4294967295" * 15
    store = UserStore.parse(f"DOM:alice:pw:{sid}\n", "users.txt")
    try:
        assert store.sid_of("dom", "alice") == sid
    finally:
        store.close()


def test_serve_refuses_a_users_file_sid_out_of_range_in_one_line(tmp_path):
    users = tmp_path / "users.txt"
    users.write_text("DOM:alice:S3cret:S-1-5-21-99999999999999999999-1\n")
    proc = subprocess.run([sys.executable, "-m", "qm2qm", "serve", "--data-dir", ":memory:", "--port", "0",
                           "--admin-port", "0", "--qmcomm-port", "0", "--epm-port", "0", "--users", str(users)],
                          capture_output=True, text=True, env=server_env(), cwd=str(REPO), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"qm2qm: error: {users} line 1: 'S-1-5-21-99999999999999999999-1': subauthority "
                           "99999999999999999999 is out of range 0..4294967295 (32 bits; MS-DTYP 2.4.2)\n")


# ---------------------------------------------------------------------------------------------- digits

@pytest.mark.parametrize("query, message", [
    ("limit=%C2%B2", "limit: '²' is not an integer from 1 to 10000; page on with after=<next_after of the previous "
                     "page>"),
    ("limit=" + "1" * 5000, "limit: '" + "1" * 5000 + "' is not an integer from 1 to 10000; page on with "
                            "after=<next_after of the previous page>"),
    ("after=%C2%B2", "after: '²' is not a lookup_id"),
    ("after=%D9%A3", "after: '\u0663' is not a lookup_id"),
    ("after=" + "1" * 5000, "after: '" + "1" * 5000 + "' is not a lookup_id"),
    ("after=18446744073709551616", "after: '18446744073709551616' is not a lookup_id"),
])
async def test_a_listing_query_with_non_ascii_or_endless_digits_is_a_bad_value(api, query, message):
    await make_queue(api)
    status, data = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?{query}")
    assert (status, data) == (400, {"error": "bad_value", "message": message})


async def test_a_listing_query_with_ascii_digits_still_pages(api):
    await make_queue(api)
    await call(api, "POST", f"/v1/queues/{url(Q)}/messages", json.dumps({"body": "x", "count": 3}))
    status, first = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?limit=002")
    assert status == 200 and len(first["messages"]) == 2
    status, rest = await call(api, "GET", f"/v1/queues/{url(Q)}/messages?after={first['next_after']}")
    assert status == 200 and len(rest["messages"]) == 1


@pytest.mark.parametrize("limit", ["%C2%B2", "%D9%A3", "1" * 5000, "0", "501"])
async def test_the_web_view_s_message_limit_with_non_ascii_digits_is_a_bad_value(api, limit):
    await make_queue(api)
    status, data = await call(api, "GET", f"/v1/ui/queues/{url(Q)}/messages?limit={limit}")
    assert (status, data["error"]) == (400, "bad_value")
    assert data["message"].endswith("is not an integer 1..500")
    assert (await call(api, "GET", f"/v1/ui/queues/{url(Q)}/messages?limit=3"))[0] == 200


def test_rpc_and_rpcdump_ports_with_non_ascii_digits_are_usage_errors():
    from click.testing import CliRunner
    from qm2qm.cli import main
    from qm2qm.cli.rpcdump import parse_target
    for port in ("²", "\u0663", "1" * 5000, "0", "65536"):
        result = CliRunner().invoke(main, ["version", "--rpc", f"127.0.0.1:{port}", "--admin", "http://127.0.0.1:9"])
        assert result.exit_code == 2 and f"'127.0.0.1:{port}' is not HOST:PORT" in result.output, result.output
        with pytest.raises(click.BadParameter, match="port must be 1..65535"):
            parse_target(f"127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------------- config paths

@pytest.mark.parametrize("key", ["data_dir", "trace", "users", "keytab"])
def test_a_nul_in_a_config_path_is_a_config_error_naming_the_key(tmp_path, key):
    path = tmp_path / "qm2qm.toml"
    path.write_text(f'{key} = "/tmp/x\\u0000y"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"config file {str(path)!r}: {key}: '/tmp/x\\x00y' contains a NUL character, which "
                               "no file path can hold")


def test_serve_with_a_nul_in_data_dir_exits_2_in_one_line(tmp_path):
    path = tmp_path / "qm2qm.toml"
    path.write_text('data_dir = "/tmp/x\\u0000y"\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "qm2qm", "serve", "--config", str(path), "--port", "0",
                           "--admin-port", "0", "--qmcomm-port", "0", "--epm-port", "0"],
                          capture_output=True, text=True, env=server_env(), cwd=str(REPO), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "data_dir: '/tmp/x\\x00y' contains a NUL character" in proc.stderr


# ---------------------------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("command", ["peek", "receive"])
@pytest.mark.parametrize("count", ["0", "-1"])
def test_peek_and_receive_count_below_one_is_a_usage_error(command, count):
    from click.testing import CliRunner
    from qm2qm.cli import main
    result = CliRunner().invoke(main, [command, Q, "--count", count, "--admin", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "Invalid value for '--count'" in result.output, result.output
    assert f"{count} is not in the range x>=1" in result.output


def test_queue_grant_of_an_out_of_range_sid_is_a_one_line_error_not_an_internal_error(cli):
    cli.run("queue", "create", ".\\private$\\grants")
    result = cli.run("queue", "grant", ".\\private$\\grants", "S-1-5-21-99999999999999999999", "receive", expect=1)
    assert result.stderr == ("qm2qm: error: principal 'S-1-5-21-99999999999999999999': subauthority "
                             "99999999999999999999 is out of range 0..4294967295 (32 bits; MS-DTYP 2.4.2) (HTTP 400)\n")


def test_cli_shows_labels_a_store_holds_with_lone_surrogates_escaped(tmp_path):
    """A store written before the admin API refused lone surrogates (or a UTF-16 peer's label) can hold one: every
    listing still prints, the odd characters escaped."""
    from shared_adm.store.sqlite import SqliteStore
    data = tmp_path / "data"
    data.mkdir()
    store = SqliteStore(data)
    qm = QueueManager(store, computer_name="testhost")
    qm.initialize()
    status, queue = qm.create_queue(".\\private$\\odd", label="bad\ud800label")
    assert status == 0
    message = Message(body=b"line\x1b[2J", label="m\udc80\nx", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    Backend(qm).prepare(queue, message)
    Backend(qm).enqueue(queue, message)
    store.flush()
    store.close()
    server = start_server(data)
    try:
        cli = Cli(server.admin)
        assert "bad\\ud800label" in cli.run("queue", "list").stdout
        assert "bad\\ud800label\n" in cli.run("queue", "show", ".\\private$\\odd").stdout
        listed = cli.run("messages", ".\\private$\\odd").stdout
        assert "m\\udc80\\nx" in listed and len(listed.splitlines()) == 2
        lookup_id = cli.json("messages", ".\\private$\\odd")[0]["lookup_id"]
        shown = cli.run("message", ".\\private$\\odd", str(lookup_id)).stdout
        assert "m\\udc80\\nx" in shown and "line\\x1b[2J" in shown
        peeked = cli.run("peek", ".\\private$\\odd").stdout
        assert "  label:    m\\udc80\\nx\n" in peeked and "  body:     line\\x1b[2J\n" in peeked
        assert cli.json("peek", ".\\private$\\odd")["message"]["label"] == "m\udc80\nx"     # JSON keeps it exact
    finally:
        server.stop()
