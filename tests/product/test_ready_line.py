"""The ready line `qm2qm serve` prints (README "qm2qm serve"): written by App.ready_line, read by qm2qm.ready."""
from __future__ import annotations

import pytest

from qm2qm.ready import ReadyLine, host_port, parse_ready_line, split_host_port


@pytest.mark.parametrize("host, text", [("127.0.0.1", "127.0.0.1:2105"), ("::1", "[::1]:2105"),
                                        ("fe80::1%eth0", "[fe80::1%eth0]:2105"), ("vm", "vm:2105")])
def test_an_ipv6_host_is_bracketed_so_its_port_reads_back(host, text):
    assert host_port(host, 2105) == text
    assert split_host_port(text) == (host, 2105)


def test_a_ready_line_with_every_listener_reads_back():
    line = ("qm2qm listening rpc=[::1]:2105 admin=http://127.0.0.1:8105 epm=[::1]:135 mqsd=udp:0.0.0.0:1801\n")
    assert parse_ready_line(line) == ReadyLine("::1", 2105, "http://127.0.0.1:8105", ("::1", 135), ("0.0.0.0", 1801))
    assert parse_ready_line("qm2qm listening rpc=127.0.0.1:2105 admin=http://127.0.0.1:8105") == \
        ReadyLine("127.0.0.1", 2105, "http://127.0.0.1:8105")


@pytest.mark.parametrize("line", ["", "qm2qm: error: port in use", "qm2qm listening rpc=::1:2105 admin=http://x:1",
                                  "qm2qm listening rpc=h:2105 admin=http://x:1 epm=h:1 epm=h:2",
                                  "qm2qm listening rpc=h:2105 admin=http://x:1 other=h:1"])
def test_anything_else_is_not_a_ready_line(line):
    assert parse_ready_line(line) is None


def test_serve_on_ipv6_loopback_prints_a_bracketed_address_its_clients_read(tmp_path):
    import socket
    import subprocess
    import sys
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    proc = subprocess.Popen([sys.executable, "-m", "qm2qm", "serve", "--data-dir", str(tmp_path / "d"), "--host",
                             "::1", "--port", "0", "--qmcomm-port", "0", "--admin-port", "0", "--epm-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        ready = parse_ready_line(line)
        assert ready is not None and ready.host == "::1" and line.startswith("qm2qm listening rpc=[::1]:"), line
        with socket.create_connection((ready.host, ready.port), timeout=30):
            pass
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


@pytest.mark.parametrize("text", ["::1:2105", "[::1]", "host:", "host:²", "host:٣", "host:123456", "[::1]:x"])
def test_what_is_not_host_port_is_refused(text):
    assert split_host_port(text) is None
