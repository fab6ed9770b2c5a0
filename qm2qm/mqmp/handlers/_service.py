"""What every qmcomm handler works on (MS-MQMP 3.1.1): the QueueManager, the ports and the
iRemoteQueueOpenContextHandleTable (3.1.1.7) of RemoteQueueOpenContextHandle elements (3.1.1.8)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qm2qm.rpc.interface import ContextHandleType


@dataclass(eq=False)
class RemoteQueueOpenContextHandle:
    """RemoteQueueOpenContextHandle (3.1.1.8): the PCTX_OPENREMOTE_HANDLE_TYPE and the descriptor it refers to."""
    open_queue_descriptor_reference: Any
    closed: bool = False


@dataclass
class QmcommConfig:
    """The ports R_QMGetRTQMServerPort reports (3.1.4.24): the ones actually bound (0 until bound)."""
    qmcomm_port: int = 0
    qm2qm_port: int = 0


@dataclass(eq=False)
class QmcommService:
    """One qmcomm server over a QueueManager (MS-MQDMPR 3.1.1.1)."""
    qm: Any
    config: QmcommConfig = field(default_factory=QmcommConfig)
    # iRemoteQueueOpenContextHandleTable (3.1.1.7); the runtime keys the wire handles, this is the ADM's view
    open_contexts: set = field(default_factory=set)
    open_remote_handle_type: ContextHandleType | None = field(default=None, repr=False)
