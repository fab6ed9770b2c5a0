"""The user file: accounts the NTLM acceptor checks callers against (pyspnego's NTLM_USER_FILE format + SIDs)."""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass

_SID = re.compile(r"^S-1-[0-9]+(-[0-9]+)+$")
_HEX32 = re.compile(r"^[0-9A-Fa-f]{32}$")
# MS-DTYP 2.4.2: IdentifierAuthority is 6 bytes, each SubAuthority 4 bytes, SubAuthorityCount at most 15.
MAX_IDENTIFIER_AUTHORITY = (1 << 48) - 1
MAX_SUB_AUTHORITY = 0xFFFFFFFF
MAX_SUB_AUTHORITIES = 15


def _above(digits: str, most: int) -> bool:
    digits = digits.lstrip("0")
    return len(digits) > len(str(most)) or int(digits or "0") > most     # no int() of a 5000-digit string


def sid_problem(sid: str, max_authority: int = MAX_IDENTIFIER_AUTHORITY) -> str | None:
    """What keeps ``sid`` from being a SID string (S-1-authority-subauthority..., MS-DTYP 2.4.2.1) whose every
    component fits its binary field (MS-DTYP 2.4.2), as a phrase naming it; None when it is one."""
    if not _SID.fullmatch(sid):
        return f"{sid!r} is not a SID (S-1-...; MS-DTYP 2.4.2.1)"
    authority, *subs = sid.split("-")[2:]
    if _above(authority, max_authority):
        return f"{sid!r}: identifier authority {authority} is out of range 0..{max_authority}"
    if len(subs) > MAX_SUB_AUTHORITIES:
        return f"{sid!r}: {len(subs)} subauthorities, more than {MAX_SUB_AUTHORITIES} (MS-DTYP 2.4.2)"
    for sub in subs:
        if _above(sub, MAX_SUB_AUTHORITY):
            return f"{sid!r}: subauthority {sub} is out of range 0..{MAX_SUB_AUTHORITY} (32 bits; MS-DTYP 2.4.2)"
    return None


class UserFileError(ValueError):
    """A user file line that cannot be used; the message names the file and line, never the secret."""


@dataclass(frozen=True)
class UserEntry:
    domain: str
    user: str
    sid: str | None


class UserStore:
    """Accounts from a user file. Each non-blank line not starting with '#' is one of

    ``DOMAIN:USER:PASSWORD`` or ``DOMAIN:USER:PASSWORD:SID`` (pyspnego/Heimdal form; DOMAIN may be empty),
    ``DOMAIN\\USER:UID:LMHASH:NTHASH:FLAGS:LCT`` or the same with ``:SID`` appended (smbpasswd form: NT hash,
    LM hash may be 32 zeros or X's).

    The acceptor (pyspnego) reads a private copy without the SID column; ``close`` deletes it."""

    def __init__(self, entries: list[UserEntry], store_lines: list[str], source: str) -> None:
        self.entries = entries
        self.source = source
        self._sids = {(e.domain.upper(), e.user.upper()): e.sid for e in entries}
        fd, self.path = tempfile.mkstemp(prefix="qm2qm-users-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:      # mkstemp: mode 0600
            out.write("\n".join(store_lines) + "\n")

    @classmethod
    def load(cls, path: str) -> "UserStore":
        """Parse ``path``; UserFileError names the line that is wrong."""
        try:
            with open(path, encoding="utf-8") as src:
                text = src.read()
        except OSError as exc:
            raise UserFileError(f"cannot read user file {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise UserFileError(f"user file {path} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x})"
                                ) from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, source: str = "<users>") -> "UserStore":
        entries: list[UserEntry] = []
        lines: list[str] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(":")
            where = f"{source} line {number}"
            if len(fields) in (3, 4):
                domain, user, _password = fields[:3]
                sid = fields[3] if len(fields) == 4 else None
                store = ":".join(fields[:3])
            elif len(fields) in (6, 7):
                name = fields[0]
                domain, _, user = name.rpartition("\\")
                if not _HEX32.match(fields[3]):
                    raise UserFileError(f"{where}: NT hash field is not 32 hex digits")
                # pyspnego's file format needs an LM hash; none ("XXX…") becomes zeros, never checked: the acceptor
                # takes NTLMv2 responses only (security.NTLM_ACCEPTOR_COMPAT_LEVEL)
                lm = fields[2] if _HEX32.match(fields[2]) else "0" * 32
                sid = fields[6] if len(fields) == 7 else None
                store = ":".join([name, fields[1], lm, fields[3], fields[4], fields[5]])
            else:
                raise UserFileError(f"{where}: expected DOMAIN:USER:PASSWORD[:SID] or an smbpasswd line "
                                    f"(6 or 7 fields), found {len(fields)} ':'-separated fields (a password "
                                    "cannot contain ':')")
            if not user:
                raise UserFileError(f"{where}: empty user name")
            problem = None if sid is None else sid_problem(sid)
            if problem is not None:
                raise UserFileError(f"{where}: {problem}")
            entries.append(UserEntry(domain, user, sid))
            lines.append(store)
        if not entries:
            raise UserFileError(f"{source}: no accounts")
        return cls(entries, lines, source)

    def sid_of(self, domain: str, user: str) -> str | None:
        """The SID configured for DOMAIN\\user (case-insensitive), None when none was given."""
        return self._sids.get((domain.upper(), user.upper()))

    def close(self) -> None:
        """Delete the private copy the acceptor reads."""
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def __repr__(self) -> str:          # never the secrets
        return f"UserStore({self.source!r}, {len(self.entries)} accounts)"
