"""The read-only web view and `/metrics` on the admin port: pages under `/`, their JSON under `/v1/stats` and
`/v1/ui/...`, Prometheus text at `/metrics` (no build step: plain HTML, CSS and a little JS in static/)."""
from __future__ import annotations

from qm2qm.web.routes import attach_app, register

__all__ = ["attach_app", "register"]
