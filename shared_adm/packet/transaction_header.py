"""TransactionHeader (MS-MQMQ 2.2.20.5): transaction flags and id, TxSequenceID, sequence numbers."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from shared_adm.packet.layout import TRANSACTION_HEADER, TX_CG
from shared_adm.packet.reader import Reader


@dataclass(slots=True)
class TransactionHeader:
    """MS-MQMQ 2.2.20.5 (20 bytes, 36 with ConnectorQMGuid)."""
    flags: int
    ordinal: int               # TxSequenceID.Ordinal (low-order half)
    timestamp: int             # TxSequenceID.TimeStamp (high-order half)
    tx_sequence_number: int
    previous_tx_sequence_number: int
    connector_qm_guid: uuid.UUID | None = None

    def pack(self) -> bytes:
        """The header bytes; ConnectorQMGuid is written iff Flags.CG."""
        fixed = TRANSACTION_HEADER.pack(self.flags, self.ordinal, self.timestamp, self.tx_sequence_number,
                                        self.previous_tx_sequence_number)
        return fixed + self.connector_qm_guid.bytes_le if self.flags & TX_CG else fixed

    @classmethod
    def parse(cls, r: Reader) -> TransactionHeader:
        """Parse at the reader's cursor."""
        flags, ordinal, timestamp, number, previous = r.unpack(TRANSACTION_HEADER, "fixed part")
        guid = r.guid("ConnectorQMGuid") if flags & TX_CG else None
        return cls(flags, ordinal, timestamp, number, previous, guid)
