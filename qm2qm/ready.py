"""The line `qm2qm serve` prints once every listener is bound (README "qm2qm serve"): written and read here only."""
from __future__ import annotations

import re
from dataclasses import dataclass

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]\s]+)\]|(?P<host>[^\s:\[\]]+)):(?P<port>[0-9]{1,5})$")
_LINE = re.compile(r"^qm2qm listening rpc=(?P<rpc>\S+) admin=(?P<admin>http://\S+)(?P<extras>(?: \S+)*)$")


def host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets (RFC 3986 3.2.2), so the port cannot be read as part of it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(text: str) -> tuple[str, int] | None:
    """host_port's inverse (brackets removed); None for anything else."""
    match = _HOST_PORT.match(text)
    if match is None:
        return None
    return match["v6"] or match["host"], int(match["port"])


@dataclass(frozen=True)
class ReadyLine:
    host: str
    port: int
    admin: str
    epm: tuple[str, int] | None = None      # the endpoint mapper's own listener, when bound
    mqsd: tuple[str, int] | None = None     # the MS-MQSD discovery responder (UDP), when enabled


def parse_ready_line(line: str) -> ReadyLine | None:
    """The listeners a ready line names; None when ``line`` is not one."""
    match = _LINE.match(line.rstrip("\n"))
    rpc = match and split_host_port(match["rpc"])
    if not rpc:
        return None
    found: dict[str, tuple[str, int]] = {}
    for extra in match["extras"].split():
        key, _, value = extra.partition("=")
        address = split_host_port(value.removeprefix("udp:") if key == "mqsd" else value)
        if key not in ("epm", "mqsd") or key in found or address is None:
            return None
        found[key] = address
    return ReadyLine(rpc[0], rpc[1], match["admin"], found.get("epm"), found.get("mqsd"))
