"""Queue security: the rights of MS-MQMQ 2.2.24 over a queue's security descriptor (MS-MQDMPR 3.1.1.2 Security;
MS-DTYP 2.4.6 self-relative SECURITY_DESCRIPTOR) and the access check remote-read opens apply (MS-MQMP 2.1, 5.1).

A queue whose Security attribute is empty has the default descriptor: its owner and Everyone (S-1-1-0) may peek
and receive. ANONYMOUS LOGON (S-1-5-7) is not a member of Everyone (Windows XP and later), so an unauthenticated
reader is refused unless the queue grants it, or the queue manager's ``allow_anonymous_read`` policy is on. A system
queue (the dead-letter queues, the computer journal) with an empty Security lets only its owner read; a queue's
journal is opened under the queue's own descriptor (QueueManager.queue_for_access_check).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from impacket.ldap import ldaptypes

from shared_adm import status as st
from shared_adm.enums import QueueAccessType, QueueShareMode, QueueType, RemoteReadState

# MS-MQMQ 2.2.24 MQQUEUEACCESSMASK (the same values as Windows' mq.h)
MQSEC_DELETE_MESSAGE = 0x00000001
MQSEC_PEEK_MESSAGE = 0x00000002
MQSEC_RECEIVE_MESSAGE = MQSEC_DELETE_MESSAGE | MQSEC_PEEK_MESSAGE   # 0x3
MQSEC_WRITE_MESSAGE = 0x00000004

# MS-DTYP 2.4.2.4 well-known SIDs
EVERYONE_SID = "S-1-1-0"
ANONYMOUS_SID = "S-1-5-7"
ADMINISTRATORS_SID = "S-1-5-32-544"
# The owner of a queue created without a known caller (the loopback admin API, the CLI): BUILTIN\Administrators,
# the owner Windows gives objects an administrator creates.
DEFAULT_OWNER_SID = ADMINISTRATORS_SID

# Names the CLI and the admin API accept for the well-known principals (case-insensitive).
WELL_KNOWN_NAMES = {
    "everyone": EVERYONE_SID,
    "anonymous": ANONYMOUS_SID,
    "anonymous logon": ANONYMOUS_SID,
    "nt authority\\anonymous logon": ANONYMOUS_SID,
    "authenticated users": "S-1-5-11",
    "nt authority\\authenticated users": "S-1-5-11",
    "administrators": ADMINISTRATORS_SID,
    "builtin\\administrators": ADMINISTRATORS_SID,
}
RIGHT_NAMES = {"receive": MQSEC_RECEIVE_MESSAGE, "peek": MQSEC_PEEK_MESSAGE, "delete": MQSEC_DELETE_MESSAGE}

_SID = re.compile(r"S-1-\d+(-\d+)+")
_SE_SELF_RELATIVE = 0x8000
_SE_DACL_PRESENT = 0x0004


class SecurityError(ValueError):
    """A principal, right or security descriptor that cannot be used; the message names it."""


def principal_sid(principal: str) -> str:
    """A SID string (S-1-...) or a well-known name (Everyone, ANONYMOUS LOGON, ...) → its SID."""
    text = principal.strip()
    if _SID.fullmatch(text.upper()):
        return text.upper()
    sid = WELL_KNOWN_NAMES.get(text.lower())
    if sid is None:
        raise SecurityError(f"unknown principal {principal!r}: give a SID (S-1-5-21-...) or one of "
                            f"{', '.join(sorted(set(WELL_KNOWN_NAMES) - {'anonymous logon'}))}")
    return sid


def right_mask(name: str) -> int:
    """'receive' | 'peek' | 'delete' → its MQQUEUEACCESSMASK bits."""
    try:
        return RIGHT_NAMES[name.lower()]
    except KeyError:
        raise SecurityError(f"unknown right {name!r}: expected one of {', '.join(RIGHT_NAMES)}") from None


@dataclass
class QueueSecurity:
    """A queue's owner SID and its access-allowed ACEs as (sid, MQQUEUEACCESSMASK) pairs."""
    owner: str = DEFAULT_OWNER_SID
    aces: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def default(cls, owner: str = DEFAULT_OWNER_SID) -> "QueueSecurity":
        """Owner and Everyone may peek and receive; ANONYMOUS LOGON may not (it is not in Everyone)."""
        return cls(owner, [(owner, MQSEC_RECEIVE_MESSAGE), (EVERYONE_SID, MQSEC_RECEIVE_MESSAGE)])

    @classmethod
    def owner_only(cls, owner: str = DEFAULT_OWNER_SID) -> "QueueSecurity":
        """Only the owner may peek and receive (a system queue's default)."""
        return cls(owner, [(owner, MQSEC_RECEIVE_MESSAGE)])

    def allowed(self, sids: Sequence[str]) -> int:
        """The union of the rights granted to any of ``sids``."""
        wanted = set(sids)
        mask = 0
        for sid, rights in self.aces:
            if sid in wanted:
                mask |= rights
        return mask

    def grant(self, sid: str, rights: int) -> None:
        """Add ``rights`` to sid's ACE (creating it)."""
        for index, (ace_sid, mask) in enumerate(self.aces):
            if ace_sid == sid:
                self.aces[index] = (sid, mask | rights)
                return
        self.aces.append((sid, rights))

    def revoke(self, sid: str, rights: int) -> None:
        """Remove ``rights`` from sid's ACE; an ACE left without rights is dropped."""
        kept = []
        for ace_sid, mask in self.aces:
            if ace_sid == sid:
                mask &= ~rights
            if mask:
                kept.append((ace_sid, mask))
        self.aces = kept

    def to_json(self) -> dict:
        """What the admin API shows."""
        return {"owner": self.owner, "aces": [{"sid": s, "rights": m, "names": rights_names(m)} for s, m in self.aces]}

    def to_bytes(self) -> bytes:
        """A self-relative SECURITY_DESCRIPTOR (MS-DTYP 2.4.6) with owner and DACL of ACCESS_ALLOWED_ACEs."""
        sd = ldaptypes.SR_SECURITY_DESCRIPTOR()
        sd["Revision"] = b"\x01"
        sd["Sbz1"] = b"\x00"
        sd["Control"] = _SE_SELF_RELATIVE | _SE_DACL_PRESENT
        sd["OwnerSid"] = _sid(self.owner)
        sd["GroupSid"] = b""
        sd["Sacl"] = b""
        acl = ldaptypes.ACL()
        acl["AclRevision"] = 2
        acl["Sbz1"] = 0
        acl["Sbz2"] = 0
        acl.aces = [_ace(sid, mask) for sid, mask in self.aces]
        sd["Dacl"] = acl
        return sd.getData()

    @classmethod
    def from_bytes(cls, data: bytes) -> "QueueSecurity":
        """Parse what to_bytes wrote (only access-allowed ACEs are kept); SecurityError if malformed."""
        try:
            sd = ldaptypes.SR_SECURITY_DESCRIPTOR(data=bytes(data))
            owner = sd["OwnerSid"].formatCanonical() if sd["OffsetOwner"] else DEFAULT_OWNER_SID
            aces = []
            if sd["OffsetDacl"]:
                for ace in sd["Dacl"].aces:
                    if ace["AceType"] == ldaptypes.ACCESS_ALLOWED_ACE.ACE_TYPE:
                        aces.append((ace["Ace"]["Sid"].formatCanonical(), ace["Ace"]["Mask"]["Mask"]))
        except Exception as exc:   # impacket raises assorted errors on a malformed descriptor
            raise SecurityError(f"malformed security descriptor: {exc}") from None
        return cls(owner, aces)


def _sid(text: str) -> Any:
    sid = ldaptypes.LDAP_SID()
    sid.fromCanonical(text)
    return sid


def _ace(sid: str, mask: int) -> Any:
    ace = ldaptypes.ACE()
    ace["AceType"] = ldaptypes.ACCESS_ALLOWED_ACE.ACE_TYPE
    ace["AceFlags"] = 0
    body = ldaptypes.ACCESS_ALLOWED_ACE()
    body["Mask"] = ldaptypes.ACCESS_MASK()
    body["Mask"]["Mask"] = mask
    body["Sid"] = _sid(sid)
    ace["Ace"] = body
    return ace


def rights_names(mask: int) -> list[str]:
    """The names of the rights a mask holds ('receive' implies 'peek' and 'delete')."""
    return [name for name, bits in RIGHT_NAMES.items() if mask & bits == bits]


def queue_security(queue: Any) -> QueueSecurity:
    """The queue's security (its Security attribute parsed), or the default one when it has none; a subqueue has
    its queue's."""
    queue = getattr(queue, "parent_queue", None) or queue
    if not queue.security:
        if queue.queue_type is QueueType.SYSTEM:
            # the computer journal and dead-letter queues hold other queues' messages: like Windows, whose
            # "Receive Dead letter" / "Receive Journal" computer rights Everyone lacks, only the owner reads them
            # until an operator grants more (`qm2qm queue grant`)
            return QueueSecurity.owner_only()
        return QueueSecurity.default()
    return QueueSecurity.from_bytes(queue.security)


def set_queue_security(qm: Any, queue: Any, security: QueueSecurity) -> None:
    """Store ``security`` as the queue's Security attribute, durably (it survives a restart)."""
    from shared_adm.store.base import StoredQueue
    queue.security = security.to_bytes()
    qm.store.put_queue(StoredQueue(queue.store_identifier, queue.persistent_attributes()))


def rights_for_access(access: QueueAccessType) -> int:
    """The MQQUEUEACCESSMASK an open for ``access`` needs: receive → RECEIVE_MESSAGE, peek → PEEK_MESSAGE."""
    if access in (QueueAccessType.RECEIVE_ACCESS, QueueAccessType.RECEIVE_ADMIN_ACCESS):
        return MQSEC_RECEIVE_MESSAGE
    if access is QueueAccessType.MOVE_ACCESS:
        return MQSEC_RECEIVE_MESSAGE        # a move takes the message off the queue as a receive does (MS-MQRR 3.1.4.11)
    if access in (QueueAccessType.PEEK_ACCESS, QueueAccessType.PEEK_ADMIN_ACCESS):
        return MQSEC_PEEK_MESSAGE
    if access is QueueAccessType.SEND_ACCESS:
        return MQSEC_WRITE_MESSAGE
    raise SecurityError(f"no queue right is defined for {access}")


def check_access(qm: Any, queue: Any, sids: Sequence[str], rights: int) -> bool:
    """True if the caller holding ``sids`` has every bit of ``rights`` on ``queue``. The queue manager's
    ``allow_anonymous_read`` policy lets ANONYMOUS LOGON peek and receive whatever the queue's DACL says."""
    if rights & ~MQSEC_RECEIVE_MESSAGE == 0 and ANONYMOUS_SID in sids and getattr(qm, "allow_anonymous_read", False):
        return True
    try:
        security = queue_security(queue)
    except SecurityError:
        return False        # an unreadable descriptor grants nothing
    return security.allowed(sids) & rights == rights


def open_queue_as(qm: Any, sids: Sequence[str], format_name: str, access: QueueAccessType, share: QueueShareMode,
                  remote_read_state: RemoteReadState) -> tuple[int, Any]:
    """Open Queue (MS-MQDMPR 3.1.7.1.5) for a caller holding ``sids``: (status, OpenQueueDescriptor or None).
    MQ_ERROR_ACCESS_DENIED when its rights on the queue do not cover ``access`` (the check MS-MQMP 5.1 and MS-MQRR
    2.1 leave to the server), decided before Open Queue would make a subqueue the name names, so a refused caller
    makes and stores nothing; a queue found only by opening it is checked after, and its open undone if refused."""
    rights = rights_for_access(access)
    target = qm.queue_for_access_check(format_name)
    if target is not None and not check_access(qm, target, sids, rights):
        return st.MQ_ERROR_ACCESS_DENIED, None
    status, descriptor = qm.open_queue(format_name, access, share, remote_read_state)
    if status != st.MQ_OK:
        return status, None
    if target is None and not check_access(qm, descriptor.queue_reference, sids, rights):
        qm.close_queue(descriptor)
        return st.MQ_ERROR_ACCESS_DENIED, None
    return st.MQ_OK, descriptor
