"""What every seed builder shares: the live-value placeholders, NDR/NDR64 encoding, repeatable referent ids."""
from __future__ import annotations

import random
import struct
from typing import Callable

from impacket.dcerpc.v5.rpcrt import DCERPC_v5

SESSION = b"\x00\x00\x00\x00" + b"SOAK-SESSION-HNDL"[:16]      # 20-byte context handle placeholder
QUEUE_HANDLE = 0x5EED0001                                      # u32 placeholder for hQueue / hRemoteQueue
QUEUE_HANDLE_BYTES = struct.pack("<L", QUEUE_HANDLE)


def ndr(call, ndr64: bool) -> bytes:
    """An impacket NDRCALL's stub in the chosen transfer syntax."""
    if ndr64:
        call.changeTransferSyntax(DCERPC_v5.NDR64Syntax)
    return call.getData()


def repeatable(build: Callable[[bool], dict]) -> Callable[[bool], dict]:
    """Same seeds in every process: impacket draws referent ids from the global random generator when a pointer
    is assigned, so build under a fixed seed (and give the generator its state back)."""
    def wrapped(ndr64: bool) -> dict:
        state = random.getstate()
        random.seed(14)
        try:
            return build(ndr64)
        finally:
            random.setstate(state)
    wrapped.__doc__ = build.__doc__
    return wrapped
