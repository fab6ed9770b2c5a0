"""qm2qm.config: defaults < TOML file < command line; bad keys and values name what is wrong."""
from __future__ import annotations

import pytest

from qm2qm.config import (DEFAULT_ADMIN_PORT, DEFAULT_QM2QM_PORT, DEFAULT_QMCOMM_PORT, ConfigError, ServerConfig,
                          load_config)


def write(tmp_path, text: str):
    path = tmp_path / "qm2qm.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_bind_loopback_on_the_msmq_ports():
    config = load_config()
    assert (config.host, config.port, config.qmcomm_port, config.admin_port) == \
        ("127.0.0.1", DEFAULT_QM2QM_PORT, DEFAULT_QMCOMM_PORT, DEFAULT_ADMIN_PORT)
    assert (DEFAULT_QM2QM_PORT, DEFAULT_QMCOMM_PORT) == (2105, 2103)
    assert config.data_dir == "./qm2qm-data"
    assert config.explicit == frozenset()


def test_file_overrides_defaults_and_command_line_overrides_file(tmp_path):
    path = write(tmp_path, 'data_dir = "/var/q"\nport = 3000\nadmin-port = 0\nqmcomm_port = 2203\n')
    config = load_config(path, {"port": 4000, "host": None})
    assert config.data_dir == "/var/q"
    assert config.port == 4000                 # command line wins
    assert config.admin_port == 0              # hyphenated key accepted
    assert config.qmcomm_port == 2203
    assert config.host == "127.0.0.1"          # None = not given on the command line
    assert config.explicit == {"data_dir", "port", "admin_port", "qmcomm_port"}


def test_keys_may_sit_under_a_server_table(tmp_path):
    path = write(tmp_path, '[server]\nhost = "0.0.0.0"\n')
    assert load_config(path).host == "0.0.0.0"


@pytest.mark.parametrize("text, says", [
    ('[server]\nport = 2105\n[other]\nx = 1\n', "unknown configuration key 'other'"),
    ('[other]\nx = 1\n[server]\nport = 2105\n', "unknown configuration key 'other'"),
    ('prot = 1\n[server]\nport = 2105\n', "unknown configuration key 'prot'"),
    ('host = "0.0.0.0"\n[server]\nport = 2105\n', "key 'host' is outside the [server] table: with one, every key "
                                                   "goes in it"),
])
def test_a_key_beside_a_server_table_is_named_not_server(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert says in str(info.value) and "'server'" not in str(info.value)


def test_unknown_key_in_file_is_named(tmp_path):
    path = write(tmp_path, 'prot = 2105\n')
    with pytest.raises(ConfigError, match=r"unknown configuration key 'prot'"):
        load_config(path)


def test_unknown_key_on_command_line_is_named():
    with pytest.raises(ConfigError, match=r"command line: unknown configuration key 'colour'"):
        load_config(None, {"colour": "blue"})


@pytest.mark.parametrize("text, message", [
    ('port = "2105"\n', r"port: expected an integer port, got '2105'"),
    ('port = 70000\n', r"port: port 70000 is outside 0..65535"),
    ('qmcomm_port = 70000\n', r"qmcomm_port: port 70000 is outside 0..65535"),
    ('allow_anonymous_read = "yes"\n', r"allow_anonymous_read: expected true or false, got 'yes'"),
    ('host = "my host"\n', r"host: 'my host' is not an IP address"),
    ('log_level = "loud"\n', r"log_level: expected one of debug, info, warning, error, got 'loud'"),
    ('data_dir = ""\n', r"data_dir: expected a non-empty path string"),
    ('port = true\n', r"port: expected an integer port, got True"),
    ('port = 1\nport-x = 2\n', r"unknown configuration key 'port-x'"),
    ('port = 1\n"port" = 2\n', r"not valid TOML"),
    ('data_dir = "a"\ndata-dir = "b"\n', r"key 'data-dir' given twice"),
])
def test_bad_values_name_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"config file '.*nope\.toml' does not exist"):
        load_config(missing)


def test_only_the_default_port_is_incremented_when_busy(tmp_path):
    assert load_config().increments_busy_port
    assert not load_config(None, {"port": 2105}).increments_busy_port    # chosen explicitly
    assert not load_config(None, {"port": 0}).increments_busy_port
    assert not ServerConfig(port=3000).increments_busy_port


def test_max_connections_and_computer_name():
    config = load_config(None, {"max_connections": 6000, "computer_name": "QMHOST"})
    assert (config.max_connections, config.computer_name) == (6000, "QMHOST")
    with pytest.raises(ConfigError, match=r"max_connections: expected an integer 1..1000000, got 0"):
        load_config(None, {"max_connections": 0})


def test_open_handle_limits_default_to_the_server_s_and_queue_manager_s_and_are_checked():
    from qm2qm.rpc.handles import MAX_CONTEXT_HANDLES
    from shared_adm.queue_manager import DEFAULT_MAX_CURSORS, DEFAULT_MAX_OPEN_QUEUES
    config = load_config(None, {})
    assert (config.max_context_handles, config.max_open_queues, config.max_cursors) \
        == (MAX_CONTEXT_HANDLES, DEFAULT_MAX_OPEN_QUEUES, DEFAULT_MAX_CURSORS)
    config = load_config(None, {"max_context_handles": 8, "max_open_queues": 9, "max_cursors": 10})
    assert (config.max_context_handles, config.max_open_queues, config.max_cursors) == (8, 9, 10)
    for key in ("max_context_handles", "max_open_queues", "max_cursors"):
        for bad in (0, -1, True, "5", 10**9):
            with pytest.raises(ConfigError, match=rf"{key}: expected an integer 1..100000000, got "):
                load_config(None, {key: bad})


def test_max_reassembly_mib_defaults_to_the_runtime_s_and_admits_one_whole_request():
    from qm2qm.rpc.budget import DEFAULT_MAX_REASSEMBLY_BYTES
    from qm2qm.rpc.limits import MAX_REQUEST_SIZE
    assert load_config(None, {}).max_reassembly_mib * 1024 * 1024 == DEFAULT_MAX_REASSEMBLY_BYTES
    assert load_config(None, {"max_reassembly_mib": 8}).max_reassembly_mib * 1024 * 1024 == MAX_REQUEST_SIZE
    for bad in (7, 0, -1, True, "64", 2**21):
        with pytest.raises(ConfigError, match=r"max_reassembly_mib: expected an integer 8..1048576 \(one request "
                                              r"may be 8 MiB\), got "):
            load_config(None, {"max_reassembly_mib": bad})


def test_max_unread_mib_defaults_to_the_runtime_s_and_admits_a_slow_peer_s_largest_answer():
    from qm2qm.rpc.budget import DEFAULT_MAX_UNREAD_BYTES
    assert load_config(None, {}).max_unread_mib * 1024 * 1024 == DEFAULT_MAX_UNREAD_BYTES
    assert load_config(None, {"max_unread_mib": 16}).max_unread_mib == 16
    for bad in (15, 0, -1, True, "64", 2**21):
        with pytest.raises(ConfigError, match=r"max_unread_mib: expected an integer 16..1048576 \(one answer may "
                                              r"be 8 MiB\), got "):
            load_config(None, {"max_unread_mib": bad})


def test_keepalive_defaults_to_the_rpc_servers_and_windows_and_is_checked():
    from qm2qm.rpc.server import DEFAULT_KEEPALIVE_S
    assert load_config(None, {}).keepalive == DEFAULT_KEEPALIVE_S == 720      # MS-RPCE 3.3.3.2.1 <117>
    assert load_config(None, {"keepalive": 0}).keepalive == 0
    for bad in (-1, True, "60", 1.5, 32768):
        with pytest.raises(ConfigError, match=r"keepalive: expected an integer 0..32767 \(0: no keep-alives\), got "):
            load_config(None, {"keepalive": bad})


def test_idle_timeout_defaults_to_the_rpc_servers_and_is_checked():
    from qm2qm.rpc.server import DEFAULT_IDLE_TIMEOUT_S
    assert load_config(None, {}).idle_timeout == DEFAULT_IDLE_TIMEOUT_S == 60.0
    assert load_config(None, {"idle_timeout": 2}).idle_timeout == 2.0
    for bad in (0, -1, True, "5", 100000):
        with pytest.raises(ConfigError, match=r"idle_timeout: expected seconds 0.1..86400"):
            load_config(None, {"idle_timeout": bad})


def test_localhost_is_the_ipv4_loopback_address():
    # the endpoint mapper's towers carry an IPv4 address, and a name could resolve to two listeners' addresses
    assert load_config(None, {"host": "localhost"}).host == load_config(None, {"host": "LocalHost"}).host == "127.0.0.1"
    with pytest.raises(ConfigError, match=r"host: 'winhost' is not an IP address \(nor localhost\)"):
        load_config(None, {"host": "winhost"})


@pytest.mark.parametrize("values,message", [
    ({"port": 3000, "qmcomm_port": 3000}, "port and qmcomm_port are both 3000"),
    ({"qmcomm_port": 3001, "epm_port": 3001}, "qmcomm_port and epm_port are both 3001"),
    ({"port": 3002, "admin_port": 3002}, "port and admin_port are both 3002"),
    ({"qmcomm_port": 2105}, "port and qmcomm_port are both 2105"),          # against a default
])
def test_two_listeners_on_one_port_are_a_config_error_naming_both(values, message):
    with pytest.raises(ConfigError, match=message + ": each listener needs its own port"):
        load_config(None, values)


def test_ports_zero_and_another_host_for_the_admin_port_are_not_conflicts():
    assert load_config(None, {"port": 0, "qmcomm_port": 0, "admin_port": 0, "epm_port": 0}).port == 0
    assert load_config(None, {"host": "127.0.0.2", "port": 3003, "admin_port": 3003}).admin_port == 3003
