"""A keep-alive client of the admin API (docs/admin-api.md), raw enough to send malformed bodies."""
from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any


class Admin:
    """One HTTP/1.1 connection to the admin API; reconnects when the server closes it."""

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self.host, self.port = parsed.hostname, parsed.port
        self.base_url = base_url
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def raw(self, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, bytes]:
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        status, raw = self.raw(method, path, data, {"Content-Type": "application/json"} if data else None)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.json(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status}: {data}")
        return data

    def messages(self, pathname: str, body: bool = False) -> list[dict]:
        """Every message of a queue: qm2qm.client.AdminClient.list_messages, which pages through GET …/messages."""
        from qm2qm.client import AdminClient
        return AdminClient(self.base_url, timeout=self.timeout).list_messages(pathname, body=body, limit=None)

    @staticmethod
    def q(pathname: str) -> str:
        return urllib.parse.quote(pathname, safe="")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
