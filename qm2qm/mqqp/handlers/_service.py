"""What every qm2qm handler works on: the shared ReadCore, the private ADM and the two handle types (MS-MQQP 3.1.1)."""
from __future__ import annotations

from dataclasses import dataclass, field

from qm2qm.mqqp.adm import ServerAdm
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.remote_read.core import ReadCore
from qm2qm.rpc.interface import ContextHandleType


@dataclass(eq=False, kw_only=True)
class Service(ReadCore):
    """One qm2qm server: its QueueManager (MS-MQDMPR 3.1.1.1) and read tables (ReadCore), its private ADM
    (3.1.1.2–3.1.1.5, over the same tables) and handle types."""
    config: MqqpConfig
    adm: ServerAdm = field(init=False, repr=False)
    # PCTX_RRSESSION_HANDLE_TYPE (2.2.1.1) and PCTX_REMOTEREAD_HANDLE_TYPE (2.2.1.2); their rundowns hold self
    rrsession_handle_type: ContextHandleType | None = field(default=None, repr=False)
    remoteread_handle_type: ContextHandleType | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.adm = ServerAdm(self.pending, self.locked)
