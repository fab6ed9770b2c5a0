"""`qm2qm serve --log-format text|json`: one line per connection open/close and per fault with the call's
identifiers (connection, association group, call, interface, opnum), and nothing a peer sent in it."""
from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from qm2qm.client import RpcCallError
from qm2qm.config import ConfigError, load_config
from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE, RR_ACK
from qm2qm.pytest_plugin import start_subprocess, stop_subprocess

CONTEXT_MISMATCH = 0x1C00001A
SECRET = "s3cr3t-" + uuid.uuid4().hex


def run_session(tmp_path, *options: str) -> tuple[str, int]:
    """A server with ``options``; one client session that reads a message carrying SECRET and makes one call
    fault. Returns (the server's stderr, its exit code)."""
    server = start_subprocess(tmp_path / "data", *options)
    try:
        admin = server.admin()
        q = ".\\private$\\logged"
        admin.create_queue(q, label=SECRET)
        admin.send(q, body=SECRET, label=SECRET, correlation_id=SECRET.encode().hex()[:40].ljust(40, "0"))
        handle = admin.open_queue(q)["hRemoteQueue"]
        with server.client() as client:
            assert client.open_queue(handle, lic_guid=uuid.uuid4())[0] == 0
            got = client.start_receive2(handle, action=MQ_ACTION_RECEIVE)
            assert got.message().body == SECRET.encode()
            with pytest.raises(RpcCallError) as fault:
                client.end_receive(b"\0\0\0\0" + os.urandom(16), RR_ACK)
            assert fault.value.status == CONTEXT_MISMATCH
    finally:
        code, err = stop_subprocess(server)
    return err, code


def test_json_lines_carry_connection_and_call_identifiers_and_no_secret(tmp_path):
    err, code = run_session(tmp_path, "--log-format", "json", "--log-level", "debug")
    assert code == 0
    records = [json.loads(line) for line in err.splitlines() if line.strip()]     # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    opened = [r for r in records if r["message"].endswith("connection opened")]
    closed = [r for r in records if r["message"].startswith(f"[conn {opened[0]['conn_id']} ")
              and r["message"].endswith("] connection closed")]
    assert len(opened) == 1 and len(closed) == 1
    assert opened[0]["conn_id"] == closed[0]["conn_id"] and opened[0]["peer"].startswith("127.0.0.1:")
    assert opened[0]["assoc_group"] is None and isinstance(closed[0]["assoc_group"], int)   # bound in between
    faults = [r for r in records if r["message"].split("] ", 1)[-1].startswith("fault ")]
    assert len(faults) == 1
    fault = faults[0]
    assert (fault["level"], fault["logger"], fault["interface"], fault["opnum"], fault["fault"]) == \
        ("info", "qm2qm.rpc", "qm2qm", 1, "0x1c00001a")
    assert fault["conn_id"] == opened[0]["conn_id"] and fault["assoc_group"] == closed[0]["assoc_group"]
    assert isinstance(fault["call_id"], int)
    assert SECRET not in err and SECRET.encode().hex() not in err


def test_text_lines_name_the_fault_with_its_identifiers(tmp_path):
    err, code = run_session(tmp_path, "--log-level", "info")
    assert code == 0
    line = [x for x in err.splitlines() if "fault 0x1c00001a" in x]
    assert len(line) == 1
    assert re.search(r" INFO qm2qm\.rpc: \[conn \d+ 127\.0\.0\.1:\d+\] fault 0x1c00001a: qm2qm opnum 1$", line[0])
    assert len([x for x in err.splitlines() if x.endswith("connection opened")]) == 1
    assert SECRET not in err


def test_log_format_and_metrics_are_config_keys(tmp_path):
    path = tmp_path / "qm2qm.toml"
    path.write_text('log_format = "json"\nmetrics = false\n')
    config = load_config(path)
    assert (config.log_format, config.metrics) == ("json", False)
    assert load_config(path, {"log_format": "text", "metrics": True}).log_format == "text"
    with pytest.raises(ConfigError, match=r"log_format: expected one of text, json, got 'xml'"):
        load_config(None, {"log_format": "xml"})
    path.write_text('metrics = "yes"\n')
    with pytest.raises(ConfigError, match=r"metrics: expected true or false, got 'yes'"):
        load_config(path)
