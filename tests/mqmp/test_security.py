"""Queue security (shared_adm.security; MS-MQMQ 2.2.24, MS-DTYP 2.4.6) and the access check R_QMOpenRemoteQueue
applies with the caller's identity (MS-MQMP 5.1), at unit level with constructed principals and over the admin API,
the CLI and the wire."""
from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from qm2qm.app import App
from qm2qm.cli import main
from qm2qm.client import AdminClient, AdminError
from qm2qm.mqmp.client import QmcommClient
from qm2qm.mqmp.constants import MQ_PEEK_ACCESS, MQ_RECEIVE_ACCESS
from qm2qm.mqmp.handlers.open_remote_queue import open_remote_queue
from qm2qm.mqmp.interface import build_service
from qm2qm.rpc.interface import ANONYMOUS, Principal
from shared_adm import security
from shared_adm import status as st
from shared_adm.enums import QueueAccessType
from shared_adm.queue_manager import QueueManager
from shared_adm.store.sqlite import SqliteStore
from tests.mqmp.test_serve_wiring import config

ALICE = Principal(domain="QM2QM", user="alice", sid="S-1-5-21-1-2-3-1001", authenticated=True)
QUEUE = ".\\private$\\secured"
FORMAT = "DIRECT=OS:qm2qm\\private$\\secured"


def test_rights_are_the_mqqueueaccessmask_values():
    assert (security.MQSEC_DELETE_MESSAGE, security.MQSEC_PEEK_MESSAGE, security.MQSEC_RECEIVE_MESSAGE) == (1, 2, 3)


def test_rights_for_access():
    assert security.rights_for_access(QueueAccessType.RECEIVE_ACCESS) == security.MQSEC_RECEIVE_MESSAGE
    assert security.rights_for_access(QueueAccessType.PEEK_ACCESS) == security.MQSEC_PEEK_MESSAGE


def test_default_security_lets_owner_and_everyone_read_but_not_anonymous():
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    assert security.check_access(qm, queue, ALICE.sids, security.MQSEC_RECEIVE_MESSAGE)
    assert security.check_access(qm, queue, (security.DEFAULT_OWNER_SID,), security.MQSEC_RECEIVE_MESSAGE)
    assert not security.check_access(qm, queue, ANONYMOUS.sids, security.MQSEC_PEEK_MESSAGE)
    qm.allow_anonymous_read = True
    assert security.check_access(qm, queue, ANONYMOUS.sids, security.MQSEC_RECEIVE_MESSAGE)
    assert not security.check_access(qm, queue, ANONYMOUS.sids, security.MQSEC_WRITE_MESSAGE)


def test_descriptor_round_trips_and_survives_a_restart(tmp_path):
    qm = QueueManager(SqliteStore(tmp_path), computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    sec = security.QueueSecurity.default()
    sec.revoke(security.EVERYONE_SID, security.MQSEC_DELETE_MESSAGE)
    sec.grant(ALICE.sid, security.MQSEC_RECEIVE_MESSAGE)
    security.set_queue_security(qm, queue, sec)
    assert security.QueueSecurity.from_bytes(queue.security) == sec
    qm.store.flush()
    qm.store.close()
    again = QueueManager(SqliteStore(tmp_path), computer_name="qm2qm")
    again.initialize()
    restored = security.queue_security(again.queue_by_pathname(QUEUE))
    assert restored == sec and restored.allowed((security.EVERYONE_SID,)) == security.MQSEC_PEEK_MESSAGE
    again.store.close()


def test_malformed_descriptor_grants_nothing():
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    queue.security = b"\x01\x00garbage"
    assert not security.check_access(qm, queue, ALICE.sids, security.MQSEC_PEEK_MESSAGE)


def test_unknown_principal_and_right_are_named():
    with pytest.raises(security.SecurityError, match="unknown principal 'bob'"):
        security.principal_sid("bob")
    with pytest.raises(security.SecurityError, match="unknown right 'write'"):
        security.right_mask("write")
    assert security.principal_sid("anonymous logon") == security.ANONYMOUS_SID


class _Ctx:
    """A CallContext with a chosen principal (the authenticated path, until the auth branch lands)."""
    ndr64 = False

    def __init__(self, principal):
        self.principal = principal
        self.peer_host = "127.0.0.1"
        self.handles = []

    def new_handle(self, handle_type, obj):
        self.handles.append(obj)
        return bytes(4) + len(self.handles).to_bytes(16, "little")


@pytest.mark.parametrize("principal, access, expected", [
    (ALICE, MQ_RECEIVE_ACCESS, st.MQ_OK),
    (ALICE, MQ_PEEK_ACCESS, st.MQ_OK),
    (ANONYMOUS, MQ_RECEIVE_ACCESS, st.MQ_ERROR_ACCESS_DENIED),
    (Principal(user="eve", sid="S-1-5-21-9", authenticated=True), MQ_RECEIVE_ACCESS, st.MQ_ERROR_ACCESS_DENIED),
])
def test_open_remote_queue_checks_the_callers_sids(principal, access, expected):
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    if principal.user == "eve":     # a queue whose DACL leaves Everyone out
        security.set_queue_security(qm, queue, security.QueueSecurity(security.DEFAULT_OWNER_SID,
                                                                      [(ALICE.sid, security.MQSEC_RECEIVE_MESSAGE)]))
    service = build_service(qm)
    status, _, handle = open_remote_queue(service, _Ctx(principal), FORMAT, access, 0)
    assert status == expected
    assert (qm.descriptor_by_handle(handle) is not None) == (expected == st.MQ_OK)
    assert len(queue.open_queue_descriptor_collection) == (expected == st.MQ_OK)


@pytest.mark.parametrize("name", ["DIRECT=OS:qm2qm\\system$;deadletter", "DIRECT=OS:qm2qm\\system$;deadxact",
                                  "DIRECT=OS:qm2qm\\system$;journal", "MACHINE={qm};DEADLETTER"])
def test_the_dead_letter_and_computer_journal_queues_are_the_owners_until_granted(name):
    """Found by a hostile probe: they had the default descriptor, so any authenticated caller read the dead letters
    of queues it may not read (Windows: the computer's "Receive Dead letter" right, which Everyone lacks)."""
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    name = name.format(qm=qm.identifier)
    service = build_service(qm)
    for access in (MQ_RECEIVE_ACCESS, MQ_PEEK_ACCESS):
        assert open_remote_queue(service, _Ctx(ALICE), name, access, 0)[0] == st.MQ_ERROR_ACCESS_DENIED
    owner = Principal(user="admin", sid=security.DEFAULT_OWNER_SID, authenticated=True)
    assert open_remote_queue(service, _Ctx(owner), name, MQ_PEEK_ACCESS, 0)[0] == st.MQ_OK
    target = qm.queue_for_access_check(name)
    granted = security.queue_security(target)
    granted.grant(security.EVERYONE_SID, security.MQSEC_PEEK_MESSAGE)
    security.set_queue_security(qm, target, granted)
    assert open_remote_queue(service, _Ctx(ALICE), name, MQ_PEEK_ACCESS, 0)[0] == st.MQ_OK


@pytest.mark.parametrize("journal", [FORMAT + ";journal", "PRIVATE={qm}\\{number:x};journal"])
def test_a_queues_journal_is_opened_under_the_queues_own_rights(journal):
    """Found by a hostile probe: the journal Queue object had the default descriptor whatever its queue's."""
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    journal = journal.format(qm=qm.identifier, number=queue.private_queue_number)
    service = build_service(qm)
    assert open_remote_queue(service, _Ctx(ALICE), journal, MQ_PEEK_ACCESS, 0)[0] == st.MQ_OK
    security.set_queue_security(qm, queue, security.QueueSecurity(security.DEFAULT_OWNER_SID, []))
    for access in (MQ_RECEIVE_ACCESS, MQ_PEEK_ACCESS):
        assert open_remote_queue(service, _Ctx(ALICE), journal, access, 0)[0] == st.MQ_ERROR_ACCESS_DENIED


@pytest.mark.parametrize("principal, expected", [(ANONYMOUS, st.MQ_ERROR_ACCESS_DENIED), (ALICE, st.MQ_OK)])
def test_open_remote_queue_of_a_subqueue_refused_to_the_caller_makes_and_stores_nothing(principal, expected):
    # the first open naming a subqueue makes it and writes it to the store: a caller refused the queue must not
    # (each refused anonymous open used to make, store and delete one)
    qm = QueueManager(computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(QUEUE)
    written = []
    store_put, store_delete = qm.store.put_queue, qm.store.delete_queue
    qm.store.put_queue = lambda stored: (written.append("put"), store_put(stored))[1]
    qm.store.delete_queue = lambda *a: (written.append("delete"), store_delete(*a))[1]
    status, _, handle = open_remote_queue(build_service(qm), _Ctx(principal), FORMAT + ";fresh", MQ_PEEK_ACCESS, 0)
    assert status == expected
    made = qm.subqueue(queue, "fresh")
    if expected == st.MQ_OK:
        assert made is not None and qm.descriptor_by_handle(handle).queue_reference is made and written == ["put"]
    else:
        assert made is None and written == [] and not queue.subqueue_collection


async def test_admin_grant_revoke_and_show_change_what_an_anonymous_reader_may_open(tmp_path):
    app = App(config(tmp_path, computer_name="qm2qm"))
    await app.start()
    try:
        def scenario():
            admin = AdminClient(app.admin_url)
            admin.create_queue(QUEUE)
            shown = admin.permissions(QUEUE)
            assert shown["allow_anonymous_read"] is False
            assert {(a["sid"], a["rights"]) for a in shown["aces"]} == {(security.EVERYONE_SID, 3),
                                                                        (security.DEFAULT_OWNER_SID, 3)}
            with QmcommClient("127.0.0.1", app.qmcomm.port) as qmcomm:
                denied = qmcomm.open_remote_queue(FORMAT)
                admin.change_permissions(QUEUE, "grant", "ANONYMOUS LOGON", "receive")
                allowed = qmcomm.open_remote_queue(FORMAT)
                admin.change_permissions(QUEUE, "revoke", security.ANONYMOUS_SID, "delete")
                peek_only = (qmcomm.open_remote_queue(FORMAT, access=MQ_PEEK_ACCESS),
                             qmcomm.open_remote_queue(FORMAT))
            with pytest.raises(AdminError, match="unknown principal"):
                admin.change_permissions(QUEUE, "grant", "nobody", "peek")
            # the admin API's own open is loopback administration: no access check
            assert admin.open_queue(QUEUE)["hRemoteQueue"]
            return denied.status, allowed.status, [p.status for p in peek_only]

        assert await asyncio.to_thread(scenario) == (
            st.MQ_ERROR_ACCESS_DENIED, st.MQ_OK, [st.MQ_OK, st.MQ_ERROR_ACCESS_DENIED])
    finally:
        await app.close()


async def test_cli_queue_grant_revoke_permissions(tmp_path):
    app = App(config(tmp_path))
    await app.start()
    try:
        def cli(*args):
            result = CliRunner().invoke(main, [*args, "--admin", app.admin_url, "--json"])
            return result.exit_code, result.stdout, result.stderr

        def scenario():
            assert cli("queue", "create", QUEUE)[0] == 0
            code, out, _ = cli("queue", "grant", QUEUE, "S-1-5-21-1-2-3-1001", "peek")
            assert code == 0 and {"sid": "S-1-5-21-1-2-3-1001", "rights": 2, "names": ["peek"]} in \
                json.loads(out)["aces"]
            code, out, _ = cli("queue", "revoke", QUEUE, "Everyone", "receive")
            assert code == 0 and security.EVERYONE_SID not in [a["sid"] for a in json.loads(out)["aces"]]
            code, out, _ = cli("queue", "permissions", QUEUE)
            assert code == 0 and json.loads(out)["owner"] == security.DEFAULT_OWNER_SID
            code, _, err = cli("queue", "grant", QUEUE, "nobody", "peek")
            assert code == 1 and "unknown principal 'nobody'" in err

        await asyncio.to_thread(scenario)
    finally:
        await app.close()
