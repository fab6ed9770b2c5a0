"""Server configuration: defaults < TOML file < command line (ports per MS-MQQP 3.1.4.8, MS-MQMP 3.1.4.24)."""
from __future__ import annotations

import ipaddress
import re
import socket
import tomllib
import uuid
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

# MS-MQQP 3.1.4.8: IP_READ (qm2qm) default 2105, IP_HANDSHAKE (qmcomm/qmcomm2) default 2103; a busy default
# port is incremented by 11 until a free one is found.
DEFAULT_QM2QM_PORT = 2105
DEFAULT_QMCOMM_PORT = 2103
PORT_INCREMENT = 11
# Not from any spec: the admin API's own default, chosen next to 2105 so it is easy to remember.
DEFAULT_ADMIN_PORT = 8105
DEFAULT_DATA_DIR = "./qm2qm-data"
# The endpoint mapper's well-known port (MS-RPCE 2.2.1.2); 0 = no endpoint-mapper listener of our own.
DEFAULT_EPM_PORT = 135
# MS-MQSD 2.1: the discovery responder's port when it is enabled (it is off unless mqsd_port is set).
MQSD_DEFAULT_PORT = 1801
# Same as qm2qm.rpc.server.DEFAULT_MAX_CONNECTIONS; each connection is one file descriptor (mind ulimit -n).
DEFAULT_MAX_CONNECTIONS = 1024
# Same as qm2qm.rpc.handles.MAX_CONTEXT_HANDLES (per association group) and shared_adm.queue_manager's
# DEFAULT_MAX_OPEN_QUEUES / DEFAULT_MAX_CURSORS and shared_adm.subqueues' DEFAULT_MAX_SUBQUEUES (over every caller):
# what a caller may keep open, so that opening queues, cursors or subqueues in a loop meets an error answer instead of
# the memory's end.
DEFAULT_MAX_CONTEXT_HANDLES = 4096
DEFAULT_MAX_OPEN_QUEUES = 262144
DEFAULT_MAX_CURSORS = 1048576
DEFAULT_MAX_SUBQUEUES = 65536
# Same as qm2qm.rpc.budget.DEFAULT_MAX_REASSEMBLY_BYTES, in MiB: unfinished fragmented requests over every
# connection of every listener (one request may be 8 MiB, so less than that would refuse a legal one).
DEFAULT_MAX_REASSEMBLY_MIB = 256
_LEAST_REASSEMBLY_MIB, _MOST_REASSEMBLY_MIB = 8, 1_048_576
# Same as qm2qm.rpc.budget.DEFAULT_MAX_UNREAD_BYTES, in MiB: answers left unread by peers that stopped reading, over
# every connection (one answer may be 8 MiB; fewer than 16 would close a peer that is only slow).
DEFAULT_MAX_UNREAD_MIB = 1024
_LEAST_UNREAD_MIB, _MOST_UNREAD_MIB = 16, 1_048_576
_MOST_OPEN = 100_000_000
# Same as qm2qm.rpc.server.DEFAULT_IDLE_TIMEOUT_S: a connection that is not bound, or stops inside a PDU, is closed
# after this many seconds without a complete PDU (C706 and MS-RPCE leave it to the implementation). Bound
# connections resting between calls are kept: Windows peers hold their association open while they hold handles.
DEFAULT_IDLE_TIMEOUT_S = 60.0
# Same as qm2qm.rpc.server.DEFAULT_KEEPALIVE_S: Windows' default (MS-RPCE 3.3.3.2.1 <117>); 0 turns them off.
DEFAULT_KEEPALIVE_S = 720
_MOST_KEEPALIVE_S = 32767       # Linux's TCP_KEEPIDLE bound
# Loopback by default: a queue manager that answers unauthenticated remote reads (MS-MQQP 5) must not be
# exposed by accident. Windows peers need --host 0.0.0.0 (or the host's address).
DEFAULT_HOST = "127.0.0.1"
ADMIN_HOST = "127.0.0.1"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
# The SQLite store's durability and group commit (shared_adm/store/sqlite.py): "normal" survives kill -9, "full" also
# power loss (an fsync per commit); an ACK's commit waits at most group_wait_ms for the ACKs of other recently Locked
# messages; a change nobody awaits is committed within commit_interval_ms.
STORE_SYNCHRONOUS = ("normal", "full")
DEFAULT_STORE_GROUP_WAIT_MS = 1.0
DEFAULT_STORE_COMMIT_INTERVAL_MS = 10.0
AUTH_MODES = ("none", "optional", "required")        # qm2qm.rpc.auth.policy.AUTH_MODES
# The event loop `qm2qm serve` runs on; "auto" = uvloop when it is installed, else asyncio's own.
EVENT_LOOPS = ("auto", "asyncio", "uvloop")
# MS-MQMQ 2.1.1: Computer = 1*256(VCHAR); a backslash would split the path name.
_COMPUTER_NAME = re.compile(r"[\x21-\x5b\x5d-\x7e]{1,256}")


def default_computer_name() -> str:
    """This host's short name: the Computer part of local path names and DIRECT=OS: format names."""
    return socket.gethostname().split(".")[0] or "qm2qm"


class ConfigError(ValueError):
    """A configuration value or file that cannot be used; the message names the key or the file."""


@dataclass(frozen=True)
class ServerConfig:
    """What `qm2qm serve` runs with. ``explicit`` names the keys set by the file or the command line."""
    data_dir: str = DEFAULT_DATA_DIR
    host: str = DEFAULT_HOST
    port: int = DEFAULT_QM2QM_PORT
    qmcomm_port: int = DEFAULT_QMCOMM_PORT
    admin_port: int = DEFAULT_ADMIN_PORT
    log_level: str = "warning"
    computer_name: str = field(default_factory=default_computer_name)
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_context_handles: int = DEFAULT_MAX_CONTEXT_HANDLES
    max_open_queues: int = DEFAULT_MAX_OPEN_QUEUES
    max_cursors: int = DEFAULT_MAX_CURSORS
    max_subqueues: int = DEFAULT_MAX_SUBQUEUES
    max_reassembly_mib: int = DEFAULT_MAX_REASSEMBLY_MIB
    max_unread_mib: int = DEFAULT_MAX_UNREAD_MIB
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    keepalive: int = DEFAULT_KEEPALIVE_S
    epm_port: int = DEFAULT_EPM_PORT
    trace: str | None = None
    mqsd_port: int = 0
    mqsd_site_id: str | None = None
    mqsd_networks: tuple[str, ...] = ()
    mqsd_directory_servers: tuple[str, ...] = ()
    mqrr: bool = False          # register MS-MQRR RemoteRead beside qm2qm (off: Windows falls back to qm2qm)
    allow_anonymous_read: bool = False
    metrics: bool = True                # per-call RPC counters for /metrics and the web view (the hot-path observer)
    log_format: str = "text"            # "text" or "json" (one JSON object per line)
    # authenticated DCE/RPC (docs/authentication.md; MS-RPCE 3.3.1.5.2)
    users: str | None = None                # user file the NTLM / SPNEGO acceptor checks callers against
    auth: str = "optional"                  # none | optional | required
    min_auth_level: int = 2                 # RPC_C_AUTHN_LEVEL_CONNECT .. PKT_PRIVACY (2..6)
    allow_anonymous_ntlm: bool = False
    keytab: str | None = None               # Kerberos keytab (needs python-gssapi)
    loop: str = "auto"
    store_synchronous: str = "normal"
    store_group_wait_ms: float = DEFAULT_STORE_GROUP_WAIT_MS
    store_commit_interval_ms: float = DEFAULT_STORE_COMMIT_INTERVAL_MS
    explicit: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def store_options(self) -> dict[str, Any]:
        """The SqliteStore keyword arguments these settings make."""
        return {"synchronous": self.store_synchronous.upper(), "group_wait_ms": self.store_group_wait_ms,
                "commit_interval_ms": self.store_commit_interval_ms}

    @property
    def epm_port_is_default(self) -> bool:
        """The endpoint mapper port was not chosen: failing to bind it is a warning, not a start-up error."""
        return "epm_port" not in self.explicit

    @property
    def increments_busy_port(self) -> bool:
        """MS-MQQP 3.1.4.8: only the *default* qm2qm port is moved by +11 when busy; a chosen one must bind or fail."""
        return "port" not in self.explicit and self.port == DEFAULT_QM2QM_PORT

    @property
    def increments_busy_qmcomm_port(self) -> bool:
        """MS-MQMP 3.1.4.24: only the *default* qmcomm port (2103) is moved by +11 when busy."""
        return "qmcomm_port" not in self.explicit and self.qmcomm_port == DEFAULT_QMCOMM_PORT


KEYS = tuple(f.name for f in fields(ServerConfig) if f.name != "explicit")


def _check_port(key: str, value: Any, *, allow_zero: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: expected an integer port, got {value!r}")
    low = 0 if allow_zero else 1
    if not low <= value <= 65535:
        raise ConfigError(f"{key}: port {value} is outside {low}..65535")
    return value


def _check_host(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected an IP address string, got {value!r}")
    if value.lower() == "localhost":
        return "127.0.0.1"      # one address: the listeners' ports and the endpoint mapper's IPv4 towers agree
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not an IP address (nor localhost)") from None
    return value


def _check_guid(key: str, value: Any) -> str:
    try:
        return str(uuid.UUID(value))
    except (TypeError, ValueError, AttributeError):
        raise ConfigError(f"{key}: expected a GUID string, got {value!r}") from None


def _check_list(key: str, value: Any) -> list:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{key}: expected a non-empty list, got {value!r}")
    return list(value)


def _check_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _check_ms(key: str, value: Any, most: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= most:
        raise ConfigError(f"{key}: expected milliseconds 0..{most}, got {value!r}")
    return float(value)


def _check_int_range(key: str, value: Any, least: int, most: int, why: str = "") -> int:
    """An integer option in least..most; ``why`` follows the range in the error (what the least must admit)."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ConfigError(f"{key}: expected an integer {least}..{most}{why}, got {value!r}")
    return value


def _check_path(key: str, value: Any, expected: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected {expected}, got {value!r}")
    if "\x00" in value:    # TOML can write one ("\u0000"); no file path can hold it
        raise ConfigError(f"{key}: {value!r} contains a NUL character, which no file path can hold")
    return value


def _check_value(key: str, value: Any) -> Any:
    if key == "data_dir":
        return _check_path(key, value, "a non-empty path string")
    if key == "host":
        return _check_host(key, value)
    if key == "port":
        return _check_port(key, value, allow_zero=True)
    if key == "qmcomm_port":
        # The qmcomm listener (MS-MQMP 3.1.4.24); 0 = ephemeral: the port queries answer the one bound.
        return _check_port(key, value, allow_zero=True)
    if key == "allow_anonymous_read":
        if not isinstance(value, bool):
            raise ConfigError(f"allow_anonymous_read: expected true or false, got {value!r}")
        return value
    if key == "admin_port":
        return _check_port(key, value, allow_zero=True)
    if key == "computer_name":
        if not isinstance(value, str) or not _COMPUTER_NAME.fullmatch(value):
            raise ConfigError(f"computer_name: expected 1 to 256 printable characters without '\\' "
                              f"(MS-MQMQ 2.1.1), got {value!r}")
        return value
    if key == "max_connections":
        return _check_int_range(key, value, 1, 1_000_000)
    if key in ("max_context_handles", "max_open_queues", "max_cursors", "max_subqueues"):
        return _check_int_range(key, value, 1, _MOST_OPEN)
    if key == "max_reassembly_mib":
        return _check_int_range(key, value, _LEAST_REASSEMBLY_MIB, _MOST_REASSEMBLY_MIB, " (one request may be 8 MiB)")
    if key == "max_unread_mib":
        return _check_int_range(key, value, _LEAST_UNREAD_MIB, _MOST_UNREAD_MIB, " (one answer may be 8 MiB)")
    if key == "idle_timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 86400:
            raise ConfigError(f"idle_timeout: expected seconds 0.1..86400, got {value!r}")
        return float(value)
    if key == "keepalive":
        return _check_int_range(key, value, 0, _MOST_KEEPALIVE_S, " (0: no keep-alives)")
    if key in ("epm_port", "mqsd_port"):
        return _check_port(key, value, allow_zero=True)
    if key == "trace":
        return _check_path(key, value, "a file path (.parquet or .jsonl)")
    if key == "mqsd_site_id":
        return _check_guid(key, value)
    if key == "mqsd_networks":
        return tuple(_check_guid(key, v) for v in _check_list(key, value))
    if key == "mqsd_directory_servers":
        names = _check_list(key, value)
        if not all(isinstance(v, str) and _COMPUTER_NAME.fullmatch(v) for v in names):
            raise ConfigError(f"mqsd_directory_servers: expected computer names, got {value!r}")
        return tuple(names)
    if key == "mqrr":
        if not isinstance(value, bool):
            raise ConfigError(f"mqrr: expected true or false, got {value!r}")
        return value
    if key == "loop":
        if value not in EVENT_LOOPS:
            raise ConfigError(f"loop: expected one of {', '.join(EVENT_LOOPS)}, got {value!r}")
        return value
    if key == "metrics":
        if not isinstance(value, bool):
            raise ConfigError(f"metrics: expected true or false, got {value!r}")
        return value
    if key == "log_format":
        if value not in LOG_FORMATS:
            raise ConfigError(f"log_format: expected one of {', '.join(LOG_FORMATS)}, got {value!r}")
        return value
    if key in ("users", "keytab"):
        return _check_path(key, value, "a file path string")
    if key == "auth":
        return _check_choice(key, value, AUTH_MODES)
    if key == "min_auth_level":
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 6:
            raise ConfigError(f"min_auth_level: expected an integer 2..6 (MS-RPCE 2.2.1.1.8), got {value!r}")
        return value
    if key == "allow_anonymous_ntlm":
        if not isinstance(value, bool):
            raise ConfigError(f"allow_anonymous_ntlm: expected true or false, got {value!r}")
        return value
    if key == "log_level":
        return _check_choice(key, value, LOG_LEVELS)
    if key == "store_synchronous":
        return _check_choice(key, value, STORE_SYNCHRONOUS)
    if key == "store_group_wait_ms":
        return _check_ms(key, value, 1000)
    if key == "store_commit_interval_ms":
        return _check_ms(key, value, 60_000)
    raise ConfigError(f"unknown configuration key {key!r} (known: {', '.join(KEYS)})")


def normalize(values: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """Check keys and types; keys may be spelled like the options (``data-dir``) or in snake_case."""
    out: dict[str, Any] = {}
    for raw_key, value in values.items():
        key = raw_key.replace("-", "_")
        if key not in KEYS:
            raise ConfigError(f"{source}: unknown configuration key {raw_key!r} (known: {', '.join(KEYS)})")
        if key in out:
            raise ConfigError(f"{source}: key {raw_key!r} given twice")
        try:
            out[key] = _check_value(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return out


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a config file: top-level keys, or the same keys under a ``[server]`` table."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    if isinstance(doc.get("server"), dict):
        source = f"config file {str(p)!r}"
        for raw_key in (k for k in doc if k != "server"):
            if raw_key.replace("-", "_") not in KEYS:
                raise ConfigError(f"{source}: unknown configuration key {raw_key!r} (known: {', '.join(KEYS)})")
            raise ConfigError(f"{source}: key {raw_key!r} is outside the [server] table: with one, every key goes "
                              "in it")
        doc = doc["server"]
    return normalize(doc, source=f"config file {str(p)!r}")


def load_config(config_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> ServerConfig:
    """Defaults, then the TOML file, then the command-line ``overrides`` (None values mean 'not given')."""
    values: dict[str, Any] = {}
    if config_file is not None:
        values.update(read_toml(config_file))
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(normalize(given, source="command line"))
    tuned = sorted(k for k in values if k.startswith("store_"))
    if tuned and values.get("data_dir") == ":memory:":
        raise ConfigError(f"{tuned[0]}: tunes the SQLite store, but data_dir ':memory:' is the volatile store")
    config = replace(ServerConfig(), **values, explicit=frozenset(values))
    _check_distinct_ports(config)
    return config


def _check_distinct_ports(config: ServerConfig) -> None:
    """Two TCP listeners of one server on one port: a ConfigError naming both (else the second one's start-up error
    would blame another program for the port)."""
    listeners = {"port": config.port, "qmcomm_port": config.qmcomm_port, "epm_port": config.epm_port}
    if config.host in ("127.0.0.1", "0.0.0.0", "::"):         # where the admin API listens too
        listeners["admin_port"] = config.admin_port
    seen: dict[int, str] = {}
    for key, port in listeners.items():
        if port in seen and port:
            raise ConfigError(f"{seen[port]} and {key} are both {port}: each listener needs its own port")
        seen.setdefault(port, key)
