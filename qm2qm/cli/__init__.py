"""The `qm2qm` command: one module per command group, all attached to the root group `main`."""
from __future__ import annotations

from qm2qm.cli._common import main
from qm2qm.cli import handles, messages, queue, read, serve, transactions  # noqa: F401  (each registers its commands)
from qm2qm.cli.mqcn import directory_group, discover_command
from qm2qm.cli.pipeline import pipeline_commands
from qm2qm.cli.read import TimeoutMs  # noqa: F401  (re-exported: tests and scripts use it)
from qm2qm.cli.rpcdump import rpcdump_command

for _command in (rpcdump_command, discover_command, directory_group, *pipeline_commands):
    main.add_command(_command)

__all__ = ["main", "TimeoutMs"]
