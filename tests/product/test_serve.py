"""`qm2qm serve` as a subprocess, driven by the CLI: admin commands and remote reads over qm2qm (MS-MQQP 3.2.4)."""
from __future__ import annotations

import errno
import signal
import socket

import pytest
from click.testing import CliRunner

from qm2qm.app import App, StartupError
from qm2qm.cli import main
from qm2qm.config import ServerConfig, load_config

from tests.product.conftest import Cli, start_server


def test_serve_prints_one_line_with_both_addresses(server):
    assert server.line == f"qm2qm listening rpc=127.0.0.1:{server.port} admin={server.admin}"
    assert server.port != 0 and not server.admin.endswith(":0")


def test_cli_admin_then_remote_read_end_to_end(cli, server):
    q = ".\\private$\\e2e"
    created = cli.json("queue", "create", q, "--label", "end to end")
    assert created["label"] == "end to end"
    for body, priority in (("low", "1"), ("high", "6"), ("mid", "3")):
        cli.json("send", q, "--body", body, "--priority", priority, "--app-specific", "42")
    listed = cli.json("messages", q)
    assert [m["priority"] for m in listed] == [6, 3, 1] and {m["state"] for m in listed} == {"Available"}

    peeked = cli.json("peek", q)
    assert peeked["status"] == "MQ_OK (0x00000000)"
    assert peeked["message"]["body_text"] == "high" and peeked["message"]["app_specific"] == 42
    assert peeked["sequential_id"] == listed[0]["lookup_id"] & ((1 << 56) - 1)   # low 7 bytes (3.1.4.10)
    assert len(cli.json("messages", q)) == 3                                    # a peek removes nothing

    received = cli.json("receive", q)
    assert received["message"]["body_text"] == "high" and received["end_receive"] == "MQ_OK (0x00000000)"
    assert [m["lookup_id"] for m in cli.json("messages", q)] == [m["lookup_id"] for m in listed[1:]]

    low_id = listed[2]["lookup_id"]
    by_id = cli.json("lookup", q, str(low_id))
    assert by_id["message"]["body_text"] == "low" and by_id["sequential_id"] == low_id & ((1 << 56) - 1)
    taken = cli.json("lookup", q, str(low_id), "--action", "receive-current")
    assert taken["message"]["body_text"] == "low"
    assert [m["lookup_id"] for m in cli.json("messages", q)] == [listed[1]["lookup_id"]]

    assert cli.json("purge", q)["status"] == "MQ_OK (0x00000000)"
    assert cli.json("messages", q) == []
    assert cli.json("handles") == []          # every session closed its descriptor (RemoteQMCloseQueue)
    assert cli.json("reads") == {"reads": [], "waiting": []}


def test_peek_with_a_cursor_walks_the_queue(cli):
    q = ".\\private$\\cursor"
    cli.json("queue", "create", q)
    for i in range(3):
        cli.json("send", q, "--body", f"m{i}")
    walked = cli.json("peek", q, "--cursor", "--count", "3")
    assert [r["message"]["body_text"] for r in walked] == ["m0", "m1", "m2"]
    assert cli.json("handles") == []


def test_legacy_opnum0_and_ndr64(cli):
    q = ".\\private$\\legacy"
    cli.json("queue", "create", q)
    cli.json("send", q, "--body", "old")
    legacy = cli.json("peek", q, "--legacy")
    assert legacy["message"]["body_text"] == "old" and "sequential_id" not in legacy
    wide = cli.json("receive", q, "--ndr64")
    assert wide["message"]["body_text"] == "old"
    assert cli.json("version", "--ndr64") == {"major": 6, "minor": 1, "build": 20348}


def test_receive_on_an_empty_queue_times_out_with_exit_1(cli):
    q = ".\\private$\\empty"
    cli.json("queue", "create", q)
    result = cli.json("receive", q, "--timeout", "0", expect=1)
    assert result["status"] == "MQ_ERROR_IO_TIMEOUT (0xC00E001B)" and "message" not in result
    assert cli.json("handles") == []


def test_version_and_ports(cli, server):
    assert cli.json("version") == {"major": 6, "minor": 1, "build": 20348}
    assert cli.json("port")["port"] == server.port                      # IP_READ: the bound port
    qmcomm = cli.json("info")["qmcomm_port"]
    assert cli.json("port", "--type", "ip-handshake")["port"] == qmcomm != 0   # IP_HANDSHAKE: the bound qmcomm port
    assert cli.json("port", "--type", "ipx-read")["port"] == 0           # SPX: not supported (<20>)


def test_cli_errors_are_one_line(cli):
    result = cli.run("queue", "show", ".\\private$\\missing", expect=1)
    assert result.stderr == "qm2qm: error: unknown queue '.\\private$\\missing' (HTTP 404)\n"
    result = cli.run("send", ".\\private$\\missing", "--body", "x", "--priority", "9", expect=1)
    assert result.stderr.startswith("qm2qm: error: ")
    dead = Cli("http://127.0.0.1:9")
    result = dead.run("queue", "list", expect=1)
    assert result.stderr.startswith("qm2qm: error: cannot reach the admin API at http://127.0.0.1:9")


@pytest.mark.parametrize("url, says", [
    ("not a url", "admin API URL 'not a url' is not an http:// or https:// URL with a host"),
    ("ftp://127.0.0.1:9", "admin API URL 'ftp://127.0.0.1:9' is not an http:// or https:// URL with a host"),
    ("http://[::1", "admin API URL 'http://[::1' is not a URL: Invalid IPv6 URL"),
    ("http://127.0.0.1:notaport", "admin API URL 'http://127.0.0.1:notaport' is not a URL: Port could not be cast"),
    ("http://127.0.0.1:99999", "admin API URL 'http://127.0.0.1:99999' is not a URL: Port out of range"),
])
def test_a_malformed_admin_url_is_a_one_line_error_naming_it(url, says):
    result = Cli(url).run("queue", "list", expect=1)
    assert result.stderr.startswith("qm2qm: error: " + says) and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("name", ["DIRECT=OS:", "FORMATNAME=xyz", "PUBLIC=not-a-guid"])
def test_a_format_name_a_remote_read_cannot_open_is_a_one_line_error(cli, name):
    for command in ("peek", "purge"):
        result = cli.run(command, name, expect=1)
        assert result.stderr == f"qm2qm: error: {name!r} is not a format name a remote read can open (PUBLIC=, " \
                                "PRIVATE=, DIRECT=)\n", result.stderr


def test_a_lookup_id_outside_64_bits_is_a_usage_error(cli):
    result = cli.run("lookup", ".\\private$\\orders", str(1 << 64), expect=2)
    assert "is not in the range 0<=x<=18446744073709551615" in result.stderr


def test_send_priority_out_of_range_is_rejected_by_the_api(cli):
    q = ".\\private$\\prio"
    cli.json("queue", "create", q)
    result = cli.run("send", q, "--body", "x", "--priority", "9", expect=1)
    assert result.stderr == "qm2qm: error: priority: 9 is out of range 0..7 (HTTP 400)\n"


# ---------------------------------------------------------------------------------------------- lifecycle

def test_sigint_exits_0_and_recoverable_data_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    srv = start_server(data)
    try:
        cli = Cli(srv.admin)
        q = ".\\private$\\durable"
        cli.json("queue", "create", q, "--transactional")
        cli.json("send", q, "--body", "kept", "--delivery", "recoverable", "--label", "R")
        cli.json("send", q, "--body", "volatile", "--delivery", "express")
        before = cli.json("messages", q)
    finally:
        code, err = srv.stop(signal.SIGINT)
    assert code == 0 and "Traceback" not in err, err
    srv = start_server(data)
    try:
        cli = Cli(srv.admin)
        shown = cli.json("queue", "show", q)
        assert shown["transactional"] is True
        after = cli.json("messages", q)
        # MS-MQDMPR 3.1.1.12: Recoverable messages MUST survive a restart; Express ones MAY be lost (we lose them).
        assert [m["label"] for m in after] == ["R"] and after[0]["lookup_id"] == before[0]["lookup_id"]
        assert cli.json("receive", q)["message"]["body_text"] == "kept"
    finally:
        code, err = srv.stop(signal.SIGTERM)
    assert code == 0 and "Traceback" not in err, err


def test_shutdown_answers_a_blocked_receive(tmp_path):
    import threading
    from qm2qm.client import AdminClient, Qm2qmClient, RpcCallError
    srv = start_server(tmp_path / "data")
    outcome = {}
    try:
        admin = AdminClient(srv.admin)
        admin.create_queue(".\\private$\\block")
        h = admin.open_queue(".\\private$\\block")["hRemoteQueue"]
        client = Qm2qmClient(srv.host, srv.port).connect()
        assert client.open_queue(h)[0] == 0

        def blocked():
            try:
                outcome["result"] = client.start_receive2(h, action=0, timeout_ms=0xFFFFFFFF)
            except RpcCallError as exc:
                outcome["error"] = exc
        thread = threading.Thread(target=blocked)
        thread.start()
        while not admin.list_reads()["reads"]:     # the receive is pending on the server
            thread.join(0.01)
    finally:
        code, err = srv.stop(signal.SIGINT)
    thread.join(30)
    assert not thread.is_alive()
    assert code == 0 and "Traceback" not in err, err
    # the pending call is answered (cancel fault) rather than left hanging
    assert "error" in outcome and outcome["error"].status == 0x1C00000D, outcome


def test_corrupt_store_is_a_one_line_error_naming_the_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "qm2qm.sqlite3").write_bytes(b"this is not a database" * 100)
    import subprocess, sys
    from tests.product.conftest import server_env
    proc = subprocess.run([sys.executable, "-m", "qm2qm", "serve", "--data-dir", str(data), "--port", "0",
                           "--admin-port", "0"], capture_output=True, text=True, env=server_env(), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("qm2qm: error: ")
    assert str(data / "qm2qm.sqlite3") in proc.stderr and "Traceback" not in proc.stderr


def test_data_dir_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(path), "--port", "0", "--admin-port", "0"])
    assert result.exit_code == 2
    assert result.stderr == f"qm2qm: error: data directory '{path}' is not a directory\n"


@pytest.mark.parametrize("option", ["--max-context-handles", "--max-open-queues", "--max-cursors"])
def test_open_handle_limit_options_out_of_range_are_one_line_errors(tmp_path, option):
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), option, "0"])
    key = option[2:].replace("-", "_")
    assert result.exit_code == 2
    assert result.stderr == f"qm2qm: error: command line: {key}: expected an integer 1..100000000, got 0\n"


def test_max_reassembly_mib_below_one_whole_request_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--max-reassembly-mib", "4"])
    assert result.exit_code == 2
    assert result.stderr == ("qm2qm: error: command line: max_reassembly_mib: expected an integer 8..1048576 "
                             "(one request may be 8 MiB), got 4\n")


def test_max_unread_mib_below_two_whole_answers_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--max-unread-mib", "8"])
    assert result.exit_code == 2
    assert result.stderr == ("qm2qm: error: command line: max_unread_mib: expected an integer 16..1048576 "
                             "(one answer may be 8 MiB), got 8\n")


def test_config_file_errors_and_precedence(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('port = 0\nadmin_prot = 0\n')
    result = CliRunner().invoke(main, ["serve", "--config", str(bad)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "unknown configuration key 'admin_prot'" in result.stderr and str(bad) in result.stderr
    good = tmp_path / "good.toml"
    good.write_text(f'data_dir = "{tmp_path / "from-file"}"\nport = 0\nadmin_port = 0\nqmcomm_port = 3103\n')
    try:
        import subprocess, sys
        from qm2qm.ready import parse_ready_line
        from tests.product.conftest import server_env
        proc = subprocess.Popen([sys.executable, "-m", "qm2qm", "serve", "--config", str(good), "--qmcomm-port",
                                 "4103"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=server_env())
        line = proc.stdout.readline().strip()
        ready = parse_ready_line(line)
        assert ready, (line, proc.stderr)
        cli = Cli(ready.admin)
        info = cli.json("info")
        assert info["data_dir"] == str(tmp_path / "from-file")                  # from the file
        assert info["qmcomm_port"] == 4103                                      # command line beats the file
        assert cli.json("port", "--type", "ip-handshake")["port"] == 4103
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_explicit_busy_port_is_an_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--port", str(port),
                                           "--admin-port", "0"])
    assert result.exit_code == 2
    assert result.stderr == f"qm2qm: error: cannot listen on 127.0.0.1:{port}: address already in use\n"


class _FakeRpc:
    """Stands in for RpcServer: ports in ``busy`` fail to bind with EADDRINUSE."""
    busy: set[int] = set()
    tried: list[int] = []

    def __init__(self, interfaces, host, port, max_connections, **kwargs):
        self.port = port

    async def start(self):
        _FakeRpc.tried.append(self.port)
        if self.port in _FakeRpc.busy:
            raise OSError(errno.EADDRINUSE, "Address already in use")


async def test_busy_default_port_moves_by_11():
    _FakeRpc.busy, _FakeRpc.tried = {2105, 2116}, []
    app = App(load_config())
    server = await app._bind_rpc(_FakeRpc, None)
    assert server.port == 2127 and _FakeRpc.tried == [2105, 2116, 2127]     # MS-MQQP 3.1.4.8


async def test_busy_explicit_port_does_not_move():
    _FakeRpc.busy, _FakeRpc.tried = {2105}, []
    app = App(load_config(None, {"port": 2105}))
    with pytest.raises(StartupError, match=r"cannot listen on 127.0.0.1:2105: address already in use"):
        await app._bind_rpc(_FakeRpc, None)
    assert _FakeRpc.tried == [2105]
    app = App(ServerConfig(port=3000))
    _FakeRpc.busy, _FakeRpc.tried = {3000}, []
    with pytest.raises(StartupError):
        await app._bind_rpc(_FakeRpc, None)


def test_second_server_on_the_same_data_dir_is_refused(tmp_path):
    import subprocess, sys
    from tests.product.conftest import server_env
    data = tmp_path / "data"
    first = start_server(data)
    try:
        proc = subprocess.run([sys.executable, "-m", "qm2qm", "serve", "--data-dir", str(data), "--port", "0",
                               "--admin-port", "0"], capture_output=True, text=True, env=server_env(), timeout=60)
    finally:
        code, _ = first.stop()
    assert code == 0
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and str(data) in proc.stderr, proc.stderr


def test_admin_url_from_env_and_rpc_address_override(server):
    runner = CliRunner()
    result = runner.invoke(main, ["info", "--json"], env={"QM2QM_ADMIN": server.admin})
    assert result.exit_code == 0 and f'"port": {server.port}' in result.stdout
    # --rpc needs no admin API for commands that do not open a queue
    result = runner.invoke(main, ["version", "--rpc", f"127.0.0.1:{server.port}", "--admin", "http://127.0.0.1:9"])
    assert (result.exit_code, result.stdout) == (0, "6.1.20348\n")
    result = runner.invoke(main, ["version", "--rpc", "nonsense", "--admin", server.admin])
    assert result.exit_code == 2 and "'nonsense' is not HOST:PORT" in result.output


def test_a_remote_read_from_a_separate_cli_process(server):
    import json, subprocess, sys
    from tests.product.conftest import server_env
    env = dict(server_env(), QM2QM_ADMIN=server.admin)
    q = ".\\private$\\subprocess"

    def qm2qm(*args):
        proc = subprocess.run([sys.executable, "-m", "qm2qm", *args, "--json"], capture_output=True, text=True,
                              env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    qm2qm("queue", "create", q)
    qm2qm("send", q, "--body", "from another process", "--label", "sub")
    got = qm2qm("receive", q)
    assert got["message"]["body_text"] == "from another process" and got["message"]["label"] == "sub"


def test_timeout_option_accepts_infinite_and_rejects_garbage(cli):
    result = cli.run("receive", ".\\private$\\x", "--timeout", "soon", expect=2)
    assert "'soon' is not a number of milliseconds or 'infinite'" in result.output
    result = cli.run("receive", ".\\private$\\x", "--timeout", "4294967296", expect=2)
    assert "4294967296 is outside 0..4294967295" in result.output
    from qm2qm.cli import TimeoutMs
    assert TimeoutMs().convert("infinite", None, None) == 0xFFFFFFFF
    assert TimeoutMs().convert("0x10", None, None) == 16
