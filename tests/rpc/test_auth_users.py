"""The user file (docs/authentication.md) and the policy values: what is accepted, what each error names."""
from __future__ import annotations

import os
import stat

import pytest

from qm2qm.rpc.auth import AuthPolicy, UserFileError, UserStore

NT_HASH = "8846F7EAEE8FB117AD06BDD830B7586C"       # NT hash of "password" (MS-NLMP 3.3.1 NTOWFv1)


def test_both_library_forms_and_the_sid_column_are_read():
    store = UserStore.parse("# comment\n\nDOM:alice:pw:S-1-5-21-1-2-3-1001\n:bob:pw2\n"
                            f"DOM\\carol:1000:{'X' * 32}:{NT_HASH}:[U]:LCT-0:S-1-5-21-1-2-3-1002\n")
    try:
        assert [(e.domain, e.user, e.sid) for e in store.entries] == [
            ("DOM", "alice", "S-1-5-21-1-2-3-1001"), ("", "bob", None), ("DOM", "carol", "S-1-5-21-1-2-3-1002")]
        assert store.sid_of("dom", "ALICE") == "S-1-5-21-1-2-3-1001"
        with open(store.path) as copy:
            lines = copy.read().splitlines()
        assert lines == ["DOM:alice:pw", ":bob:pw2", f"DOM\\carol:1000:{'0' * 32}:{NT_HASH}:[U]:LCT-0"]
        assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    finally:
        store.close()
    assert not os.path.exists(store.path)


@pytest.mark.parametrize("text, named", [
    ("DOM:alice:pass:word:extra\n", "5 ':'-separated fields"),
    ("DOM:alice:pw:not-a-sid\n", "is not a SID"),
    ("DOM\\carol:1000:x:nothex:[U]:LCT-0\n", "NT hash field"),
    ("DOM::pw\n", "empty user name"),
    ("# nothing\n", "no accounts"),
])
def test_bad_lines_are_named_without_the_secret(text, named):
    with pytest.raises(UserFileError) as info:
        UserStore.parse(text, "users.txt")
    assert named in str(info.value) and "pass:word" not in str(info.value)


def test_unreadable_user_file_is_a_clear_error(tmp_path):
    with pytest.raises(UserFileError, match="cannot read user file"):
        UserStore.load(str(tmp_path / "missing.txt"))


def test_a_user_file_that_is_not_utf8_text_is_a_clear_error_without_its_content(tmp_path):
    path = tmp_path / "users.bin"
    path.write_bytes(b"DOM:alice:S3cret\n\xff\xfeDOM:bob:pw\n")
    with pytest.raises(UserFileError) as info:
        UserStore.load(str(path))
    assert str(info.value) == f"user file {path} is not UTF-8 text (byte 17: 0xff)"


def test_repr_never_shows_a_password():
    store = UserStore.parse("DOM:alice:TopSecret\n")
    try:
        assert "TopSecret" not in repr(store)
    finally:
        store.close()


@pytest.mark.parametrize("kwargs, message", [({"mode": "sometimes"}, "auth mode"), ({"min_level": 7}, "2..6"),
                                             ({"min_level": 1}, "2..6")])
def test_policy_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AuthPolicy(**kwargs)


@pytest.mark.parametrize("mode, authenticated, level, allowed", [
    ("optional", False, 1, True), ("required", False, 1, False), ("required", True, 2, True),
    ("none", False, 1, True)])
def test_policy_call_allowed(mode, authenticated, level, allowed):
    assert AuthPolicy(mode=mode).call_allowed(authenticated, level) is allowed
