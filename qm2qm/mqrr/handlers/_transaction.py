"""XACTUOW → Transaction (MS-MQRR 2.2.8, 3.1.4.10, 3.1.4.13): the shared_adm Transaction named by a UOW."""
from __future__ import annotations

from typing import Any

NULL_UOW = bytes(16)


def uow_of(xactuow: Any) -> bytes:
    """The 16 bytes of a decoded XACTUOW."""
    rgb = xactuow["rgb"]
    return rgb if isinstance(rgb, bytes) else b"".join(rgb)


def find_transaction(qm: Any, uow: bytes) -> Any | None:
    """The Transaction whose Identifier is the UOW in QueueManager.TransactionCollection, or None."""
    return qm.transaction_collection.get(uow)
