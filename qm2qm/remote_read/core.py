"""What every remote read works on, whichever protocol carries it: the QueueManager and the read tables."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qm2qm.remote_read.entries import ReadEntryTable
from qm2qm.remote_read.packet_cache import PacketCache


@dataclass(eq=False, kw_only=True)
class ReadCore:
    """The QueueManager (MS-MQDMPR 3.1.1.1), the reads in progress (``pending``: MS-MQQP
    rRemoteReadEntryCollection, the waiting part of MS-MQRR's PendingRequestTable), the receives holding a
    Locked message until their End (``locked``) and the packet memo. A protocol's service extends it."""
    qm: Any
    pending: ReadEntryTable = field(default_factory=lambda: ReadEntryTable(count_receives=True), repr=False)
    locked: ReadEntryTable = field(default_factory=ReadEntryTable, repr=False)
    packets: PacketCache = field(default_factory=PacketCache, repr=False)
