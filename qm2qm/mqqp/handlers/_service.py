"""What every qm2qm handler works on: the QueueManager, the private ADM and the two handle types (MS-MQQP 3.1.1)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qm2qm.mqqp.adm import ServerAdm
from qm2qm.mqqp.handlers._packet_cache import PacketCache
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.interface import ContextHandleType


@dataclass(eq=False)
class Service:
    """One qm2qm server: its QueueManager (MS-MQDMPR 3.1.1.1), private ADM (3.1.1.2–3.1.1.5) and handle types."""
    qm: Any
    adm: ServerAdm
    config: MqqpConfig
    # PCTX_RRSESSION_HANDLE_TYPE (2.2.1.1) and PCTX_REMOTEREAD_HANDLE_TYPE (2.2.1.2); their rundowns hold self
    rrsession_handle_type: ContextHandleType | None = field(default=None, repr=False)
    remoteread_handle_type: ContextHandleType | None = field(default=None, repr=False)
    # serialized UserMessage packets of recently peeked messages (a memo, see _packet_cache.py)
    packets: PacketCache = field(default_factory=PacketCache, repr=False)
