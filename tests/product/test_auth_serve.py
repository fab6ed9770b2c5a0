"""`qm2qm serve --users/--auth/--min-auth-level` and the read commands' --user/--auth-level, end to end through a
real server process (docs/authentication.md; MS-MQQP 5: unauthenticated callers refused, GetQMQMServerPort open)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from qm2qm.cli import main
from tests.product.conftest import REPO, server_env, start_server

USERS = "QM2QM:alice:Secret-123:S-1-5-21-1-2-3-1001\n"
QUEUE = ".\\private$\\authq"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    base = tmp_path_factory.mktemp("auth")
    users = base / "users.txt"
    users.write_text(USERS)
    srv = start_server(base / "data", "--users", str(users), "--auth", "required", "--min-auth-level", "5", "--mqrr")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def run(server, *args, env=None, expect=0, input=None):
    result = CliRunner().invoke(main, [*args, "--admin", server.admin], env=env or {}, input=input,
                                catch_exceptions=False)
    assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result


def test_required_refuses_unauthenticated_reads_but_answers_the_port(secured):
    run(secured, "queue", "create", QUEUE)
    run(secured, "send", QUEUE, "--body", "secret body")
    refused = run(secured, "peek", QUEUE, "--json", expect=1)
    assert "0xC00E0025" in refused.output.upper() or "ACCESS_DENIED" in refused.output.upper()
    assert run(secured, "port", "--json").stdout.strip()


@pytest.mark.parametrize("level", ["5", "6"])
def test_user_with_password_from_the_environment_reads(secured, level):
    run(secured, "queue", "create", QUEUE + level)
    run(secured, "send", QUEUE + level, "--body", "secret body")
    out = run(secured, "peek", QUEUE + level, "--json", "--user", "QM2QM\\alice", "--auth-level", level,
              env={"QM2QM_PASSWORD": "Secret-123"})
    assert json.loads(out.stdout)["message"]["body_text"] == "secret body"


@pytest.mark.parametrize("level", ["5", "6"])
def test_mqrr_path_with_ntlm_reads_and_receives(secured, level):
    """--protocol mqrr: R_OpenQueue / R_StartReceive / R_EndReceive on an NTLM binding (MS-MQRR 2.1, 5.1)."""
    q = QUEUE + "rr" + level
    run(secured, "queue", "create", q)
    run(secured, "send", q, "--body", "over remote read")
    env = {"QM2QM_PASSWORD": "Secret-123"}
    out = run(secured, "receive", q, "--json", "--protocol", "mqrr", "--user", "QM2QM\\alice", "--auth-level", level,
              env=env)
    got = json.loads(out.stdout)
    assert got["message"]["body_text"] == "over remote read" and got.get("protocol") == "mqrr"
    assert json.loads(run(secured, "messages", q, "--json").stdout) == []


def test_mqrr_path_unauthenticated_is_refused(secured):
    q = QUEUE + "rr-anon"
    run(secured, "queue", "create", q)
    run(secured, "send", q, "--body", "kept")
    refused = run(secured, "peek", q, "--json", "--protocol", "mqrr", expect=1)
    assert "0XC00E0025" in refused.output.upper() or "ACCESS_DENIED" in refused.output.upper()
    assert len(json.loads(run(secured, "messages", q, "--json").stdout)) == 1


def test_password_prompt_when_not_in_the_environment(secured):
    out = run(secured, "version", "--user", "QM2QM\\alice", input="Secret-123\n", env={"QM2QM_PASSWORD": None})
    assert "Password for QM2QM\\alice" in out.stderr and "Secret-123" not in out.output


def test_level_call_is_sent_as_packet_and_refused_below_the_minimum(secured):
    """MS-RPCE 2.2.1.1.8: the client upgrades call (3) to packet (4); the server's minimum here is 5."""
    out = run(secured, "version", "--user", "QM2QM\\alice", "--auth-level", "3",
              env={"QM2QM_PASSWORD": "Secret-123"}, expect=1)
    assert "MQ_ERROR_ACCESS_DENIED" in out.output


def test_level_below_the_minimum_is_refused(secured):
    out = run(secured, "version", "--user", "QM2QM\\alice", "--auth-level", "2",
              env={"QM2QM_PASSWORD": "Secret-123"}, expect=1)
    assert "0xC00E0025" in out.output.upper() or "ACCESS_DENIED" in out.output.upper()


def test_wrong_password_is_a_one_line_error(secured):
    out = run(secured, "version", "--user", "QM2QM\\alice", env={"QM2QM_PASSWORD": "wrong"}, expect=1)
    assert "access_denied" in out.output.lower() and "wrong" not in out.output
    secured.proc.poll()
    assert secured.proc.returncode is None


def test_auth_level_without_user_is_a_usage_error(secured):
    out = run(secured, "version", "--auth-level", "5", expect=2)
    assert "--auth-level needs --user" in out.output


@pytest.mark.parametrize("args, message", [
    (["--auth", "required"], "--auth required needs --users"),
    (["--users", "{missing}"], "cannot read user file"),
    (["--users", "{bad}"], "line 1: expected DOMAIN:USER:PASSWORD"),
    (["--users", "{binary}"], "is not UTF-8 text (byte 0: 0xff)"),
])
def test_serve_auth_configuration_errors_are_one_line(tmp_path, args, message):
    bad = tmp_path / "bad.txt"
    bad.write_text("just-a-name\n")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00junk")
    args = [a.format(missing=tmp_path / "none.txt", bad=bad, binary=binary) for a in args]
    cmd = [sys.executable, "-m", "qm2qm", "serve", "--data-dir", ":memory:", "--port", "0", "--admin-port", "0",
           "--epm-port", "0", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=server_env(), cwd=str(REPO), timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_toml_keys_configure_authentication(tmp_path):
    from qm2qm.config import ConfigError, load_config
    cfg = tmp_path / "c.toml"
    cfg.write_text('users = "u.txt"\nauth = "required"\nmin_auth_level = 6\nallow_anonymous_ntlm = true\n')
    config = load_config(cfg)
    assert (config.users, config.auth, config.min_auth_level, config.allow_anonymous_ntlm) == \
        ("u.txt", "required", 6, True)
    cfg.write_text("min_auth_level = 7\n")
    with pytest.raises(ConfigError, match="min_auth_level"):
        load_config(cfg)
    cfg.write_text('auth = "maybe"\n')
    with pytest.raises(ConfigError, match="auth: expected one of"):
        load_config(cfg)
