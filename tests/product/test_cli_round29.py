"""The client commands against peers and input they did not expect: a silent RPC peer, a server on another host
address, a non-admin HTTP server, bad hashes and ports, and the options whose effect was missing."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from qm2qm.cli import main
from tests.product.conftest import REPO, Cli, server_env, start_server

Q = ".\\private$\\round29"
NO_ADMIN = "http://127.0.0.1:9"
# A hang guard, not a timing assertion: a command still running by then is the defect.
GUARD_S = 60


@pytest.fixture
def silent_peer():
    """A loopback TCP listener that accepts connections and never answers; its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for conn in held:
        conn.close()


def qm2qm(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python -m qm2qm ...` of this checkout, guarded against a hang."""
    return subprocess.run([sys.executable, "-m", "qm2qm", *args], capture_output=True, text=True,
                          env=server_env(), cwd=str(REPO), timeout=GUARD_S, **kwargs)


# ---------------------------------------------------------------------------------------------- a silent RPC peer

@pytest.mark.parametrize("args", [
    ["version"], ["port"],
    ["peek", Q, "--qmcomm-port", "{port}"], ["receive", Q, "--timeout", "infinite", "--qmcomm-port", "{port}"],
    ["lookup", Q, "1", "--qmcomm-port", "{port}"], ["purge", Q, "--qmcomm-port", "{port}"],
])
def test_rpc_commands_give_up_on_a_peer_that_never_answers_after_call_timeout(silent_peer, args):
    args = [a.format(port=silent_peer) for a in args]
    proc = qm2qm(*args, "--rpc", f"127.0.0.1:{silent_peer}", "--call-timeout", "1", "--admin", NO_ADMIN)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("qm2qm: error: cannot bind") and proc.stderr.count("\n") == 1, proc.stderr
    assert f"127.0.0.1:{silent_peer}" in proc.stderr and "timed out" in proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf"])
def test_call_timeout_must_be_a_positive_number(value):
    result = CliRunner().invoke(main, ["version", "--call-timeout", value, "--admin", NO_ADMIN])
    assert result.exit_code == 2 and "Invalid value for '--call-timeout'" in result.output, result.output


def test_a_read_waits_its_own_timeout_beyond_call_timeout(cli):
    cli.run("queue", "create", Q + "wait")
    out = cli.json("receive", Q + "wait", "--timeout", "2500", "--call-timeout", "1", expect=1)
    assert out["status"].startswith("MQ_ERROR_IO_TIMEOUT"), out


def test_an_infinite_receive_is_not_cut_off_by_call_timeout(server, cli):
    cli.run("queue", "create", Q + "inf")
    reader = subprocess.Popen([sys.executable, "-m", "qm2qm", "receive", Q + "inf", "--timeout", "infinite",
                               "--call-timeout", "1", "--json", "--admin", server.admin],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(),
                              cwd=str(REPO))
    try:
        time.sleep(3)       # longer than --call-timeout: the receive must still be waiting
        assert reader.poll() is None, reader.communicate()
        cli.run("send", Q + "inf", "--body", "late")
        out, err = reader.communicate(timeout=GUARD_S)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err
    assert json.loads(out)["message"]["body_text"] == "late"


# ---------------------------------------------------------------------------------------------- the server's host

@pytest.fixture(scope="module")
def server_on_127_0_0_2(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("serve2") / "data", "--host", "127.0.0.2", "--mqrr")
    Cli(srv.admin).run("queue", "create", Q + "host")
    Cli(srv.admin).run("send", Q + "host", "--body", "there")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


@pytest.mark.parametrize("extra", [["--protocol", "mqrr"], ["--protocol", "auto"], ["--epm-port", "{port}"],
                                   ["--protocol", "mqrr", "--epm-port", "{port}"]])
def test_reads_without_rpc_go_to_the_host_qm2qm_info_reports(server_on_127_0_0_2, extra):
    cli = Cli(server_on_127_0_0_2.admin)
    extra = [a.format(port=server_on_127_0_0_2.port) for a in extra]
    out = cli.json("peek", Q + "host", *extra)
    assert out["message"]["body_text"] == "there", out


# ---------------------------------------------------------------------------------------------- send --body-file

@pytest.mark.parametrize("source", ["sparse", "/dev/zero"])
def test_send_body_file_stops_reading_past_the_4_mib_body_limit(cli, tmp_path, source):
    if source == "sparse":
        source = str(tmp_path / "big")
        with open(source, "wb") as fh:
            fh.truncate(300 * 1024 * 1024)
    result = cli.runner.invoke(main, ["send", Q, "--body-file", source, "--admin", cli.admin])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for --body-file: {source!r} holds more than the 4194304-byte (4 MiB) body limit" \
        in result.output


async def test_a_request_too_large_says_the_message_body_limit(api):
    resp = await api.request("POST", "/v1/queues", data=b"x" * (7 * 1024 * 1024))
    data = await resp.json()
    assert (resp.status, data["error"]) == (413, "request_too_large"), data
    assert data["message"] == "request body larger than 6356992 bytes (a message body is at most 4194304 bytes, 4 MiB)"


# ---------------------------------------------------------------------------------------------- peek --count

def test_peek_count_above_one_without_cursor_is_a_usage_error():
    result = CliRunner().invoke(main, ["peek", Q, "--count", "3", "--admin", NO_ADMIN])
    assert result.exit_code == 2, result.output
    assert "--count 3 needs --cursor: without a cursor every peek is PEEK_CURRENT, the same head message" \
        in result.output


def test_peek_count_with_cursor_walks_the_queue(cli):
    cli.run("queue", "create", Q + "walk")
    for body in ("one", "two", "three"):
        cli.run("send", Q + "walk", "--body", body)
    out = cli.json("peek", Q + "walk", "--cursor", "--count", "3")
    assert [m["message"]["body_text"] for m in out] == ["one", "two", "three"]


# ---------------------------------------------------------------------------------------------- not the admin API

ODD_ROUTES = {"/v1/info": (200, b"[1,2]"), "/v1/queues": (200, b'"str"'), "/v1/reads": (400, b"[1]"),
              "/v1/queues/x/messages": (200, b"null"), "/v1/handles": (200, b'{"other": 1}'),
              "/v1/transactions": (404, b"")}


@pytest.fixture(scope="module")
def odd_http():
    """An HTTP server that is not the qm2qm admin API: JSON of other shapes, an empty error body."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code, body = ODD_ROUTES.get(self.path.split("?")[0], (404, b"{}"))
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("args, says", [
    (["info"], "GET {url}/v1/info answered an array, not a JSON object: is it the qm2qm admin API?"),
    (["version"], "GET {url}/v1/info answered an array, not a JSON object"),
    (["peek", "x"], "GET {url}/v1/info answered an array, not a JSON object"),
    (["queue", "list"], "GET {url}/v1/queues answered a string, not a JSON object"),
    (["messages", "x"], "GET {url}/v1/queues/x/messages?limit=1000 answered null, not a JSON object"),
    (["reads"], "GET {url}/v1/reads: Bad Request, with no error message (HTTP 400)"),
    (["transaction", "list"], "GET {url}/v1/transactions: Not Found, with no error message (HTTP 404)"),
    (["handles"], "unexpected answer from the admin API (KeyError: 'handles'): is --admin the qm2qm admin"),
])
def test_an_admin_url_that_is_not_the_admin_api_is_a_one_line_error(odd_http, args, says):
    result = CliRunner().invoke(main, [*args, "--admin", odd_http])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("qm2qm: error: ") and result.output.count("\n") == 1, result.output
    assert says.format(url=odd_http) in result.output


# ---------------------------------------------------------------------------------------------- QM2QM_NTHASH

@pytest.mark.parametrize("nthash, says", [
    ("zz", "QM2QM_NTHASH must be an NT hash, 32 hex digits; it holds 2 characters that are not all hex digits"),
    ("0011", "QM2QM_NTHASH must be an NT hash, 32 hex digits; it holds 4 characters"),
    ("g" * 32, "it holds 32 characters that are not all hex digits"),
])
def test_a_malformed_nthash_is_a_usage_error(nthash, says):
    result = CliRunner().invoke(main, ["version", "--rpc", "127.0.0.1:1", "--user", "DOM\\alice",
                                       "--admin", NO_ADMIN], env={"QM2QM_NTHASH": nthash})
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_a_well_formed_nthash_goes_on_to_connect():
    result = CliRunner().invoke(main, ["version", "--rpc", "127.0.0.1:1", "--user", "DOM\\alice",
                                       "--admin", NO_ADMIN], env={"QM2QM_NTHASH": "8846F7EAEE8FB117AD06BDD830B7586C"})
    assert result.exit_code == 1 and "qm2qm: error: cannot reach 127.0.0.1:1" in result.output, result.output


# ---------------------------------------------------------------------------------------------- read ports

@pytest.mark.parametrize("option", ["--qmcomm-port", "--epm-port", "--mqrr-port"])
@pytest.mark.parametrize("value", ["-1", "0", "65536", "70000"])
def test_read_ports_out_of_range_are_usage_errors(option, value):
    result = CliRunner().invoke(main, ["peek", Q, option, value, "--rpc", "127.0.0.1:1", "--admin", NO_ADMIN])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}': {value} is not in the range 1<=x<=65535" in result.output


# ---------------------------------------------------------------------------------------------- messages --body

def test_messages_body_shows_a_body_column_in_the_table(cli, tmp_path):
    cli.run("queue", "create", Q + "bodies")
    cli.run("send", Q + "bodies", "--body", "hello text")
    (tmp_path / "bin").write_bytes(b"\xff\x00\x01")
    cli.run("send", Q + "bodies", "--body-file", str(tmp_path / "bin"))
    plain = cli.run("messages", Q + "bodies").stdout
    assert "BODY" not in plain and "hello text" not in plain
    lines = cli.run("messages", Q + "bodies", "--body").stdout.splitlines()
    assert lines[0].split()[-1] == "BODY" and len(lines) == 3, lines
    assert lines[1].endswith("  hello text") and lines[2].endswith("  (binary) /wAB"), lines


# ---------------------------------------------------------------------------------------------- directory values

@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999", "[1, NaN]"])
def test_a_directory_value_that_is_not_json_is_a_string(text):
    from qm2qm.cli.mqcn import parse_value
    assert parse_value(text) == text


def test_directory_show_json_stays_json_for_nan_like_values(tmp_path):
    data_dir = tmp_path / "data"
    start_server(data_dir).stop()                    # a store with its directory
    runner = CliRunner()
    ident = "00000000-0000-0000-0000-000000000042"
    result = runner.invoke(main, ["directory", "set", "Queue", ident, "Label=NaN", "--create",
                                  "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output

    def strict(constant):
        raise AssertionError(f"not JSON: {constant}")

    shown = runner.invoke(main, ["directory", "show", "Queue", ident, "--data-dir", str(data_dir), "--json"])
    assert json.loads(shown.stdout, parse_constant=strict)["attributes"]["Label"] == "NaN", shown.output
