"""Parse a stub with an impacket NDR declaration without impacket's own ERROR log lines (MS-RPCE 3.1.3.5.2).

impacket logs two ERROR records for every field it fails to unpack; a peer sending bad stubs must not fill the
server log with them (the rpc_x_bad_stub_data fault it gets says what was wrong)."""
from __future__ import annotations

import logging
from typing import Any

_IMPACKET_LOG = logging.getLogger("impacket")


def parse_quietly(call: Any, stub: bytes) -> int:
    """``call.fromString(stub)`` with the impacket logger off; the bytes consumed (exceptions propagate)."""
    was = _IMPACKET_LOG.disabled
    _IMPACKET_LOG.disabled = True
    try:
        return call.fromString(bytes(stub))
    finally:
        _IMPACKET_LOG.disabled = was
