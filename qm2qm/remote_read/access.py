"""Access checks with the caller's identity for both remote-read protocols (MS-MQRR 2.1, MS-MQQP 5).

SHIM (to be removed at merge): shared_adm.security is being written on another branch. Until it lands, every
check is allowed; once it is importable, its rights_for_access / check_access are used as they are.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from shared_adm import security as _security
except ImportError:         # SHIM: no shared_adm.security on this branch yet → allow
    _security = None

MQSEC_RECEIVE_MESSAGE = 0x3
MQSEC_PEEK_MESSAGE = 0x2


def rights_for_access(access: Any) -> int:
    """The MQSEC_* rights a QueueAccessType needs."""
    if _security is not None:
        return _security.rights_for_access(access)
    return MQSEC_RECEIVE_MESSAGE if getattr(access, "name", "") == "RECEIVE_ACCESS" else MQSEC_PEEK_MESSAGE


def check_access(qm: Any, queue: Any, sids: Sequence[str], rights: int) -> bool:
    """Whether ``sids`` hold ``rights`` on ``queue`` (always True until shared_adm.security exists)."""
    if _security is None:
        return True
    return _security.check_access(qm, queue, sids, rights)
