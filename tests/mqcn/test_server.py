"""MS-MQCN server role (3.2.5): every processing rule of 3.2.5.1 and 3.2.5.2 applied to a QueueManager."""
import logging
import uuid

import pytest

from qm2qm.mqcn import codec as c
from qm2qm.mqcn.client import build_v1_message
from qm2qm.mqcn.signature import CERTIFICATES_ATTRIBUTE, SIG10
from shared_adm import status as st
from shared_adm.directory import DirectoryObject
from shared_adm.enums import QueueAccessType, QueueShareMode, QueueType
from shared_adm.message import Message

from tests.mqcn.conftest import DS_ID, QM_ID

QUEUE_ID = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001")
TYPE_ID = uuid.UUID("bbbbbbbb-0000-0000-0000-000000000002")


def create_update(path="qm2qm\\orders", identifier=QUEUE_ID, overrides=None):
    props = {c.PROPID_Q_TYPE: TYPE_ID, c.PROPID_Q_INSTANCE: identifier, c.PROPID_Q_BASEPRIORITY: -3,
             c.PROPID_Q_JOURNAL: 1, c.PROPID_Q_QUOTA: 4096, c.PROPID_Q_JOURNAL_QUOTA: 2048,
             c.PROPID_Q_CREATE_TIME: 1_600_000_000, c.PROPID_Q_MODIFY_TIME: 1_600_000_100, c.PROPID_Q_SCOPE: 0,
             c.PROPID_Q_SECURITY: b"\x01\x00\x04\x80", c.PROPID_Q_PATHNAME: path, c.PROPID_Q_LABEL: "orders",
             c.PROPID_Q_AUTHENTICATE: 1, c.PROPID_Q_PRIV_LEVEL: 2, c.PROPID_Q_TRANSACTION: 1}
    props.update(overrides or {})
    return c.NotificationUpdate(c.COMMAND_CREATE, DS_ID, tuple(props.items()), path_name=path)


def change_update(identifier=QUEUE_ID, props=((c.PROPID_Q_QMID, QM_ID), (c.PROPID_Q_QUOTA, 77))):
    return c.NotificationUpdate(c.COMMAND_CHANGE, DS_ID, tuple(props), guid_identifier=identifier)


def delete_update(identifier=QUEUE_ID, objtype=c.MQDS_QUEUE):
    return c.NotificationUpdate(c.COMMAND_DELETE, DS_ID, ((c.PROPID_D_SCOPE, 1), (c.PROPID_D_OBJTYPE, objtype)),
                                guid_identifier=identifier)


def v1(*updates, **kwargs):
    return build_v1_message(list(updates), DS_ID, **kwargs)


def v2(event, guid, dc="DC01"):
    cnm = c.ChangeNotificationMessage(2, body=c.NotificationBody(event, guid, dc))
    return Message(body=c.message_body(cnm))


# ---------------------------------------------------------------------------------------------- 3.2.5.1
def test_v1_create_queue_takes_every_property_value(qm, server):
    r = server.process(v1(create_update()))
    assert r.accepted and r.actions and not r.skipped
    q = qm.queue_collection[QUEUE_ID]
    assert (q.queue_type, q.pathname, q.type, q.label) == (QueueType.PUBLIC, "orders", TYPE_ID, "orders")
    assert (q.base_priority, q.journaling, q.quota, q.journal_quota) == (-3, True, 4096, 2048)
    assert (q.create_time, q.modify_time, q.scope, q.security) == (1_600_000_000, 1_600_000_100, "Site",
                                                                   b"\x01\x00\x04\x80")
    assert (q.authentication, q.privacy_level, q.transactional) == (True, "Body", True)
    assert qm.queue_by_pathname("qm2qm\\orders") is q
    status, desc = qm.open_queue(f"PUBLIC={QUEUE_ID}", QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    assert status == st.MQ_OK and desc.queue_reference is q


def test_a_created_queue_name_reaches_the_log_escaped(qm, server, caplog):
    # a path name may hold control characters (only "\\" and newlines are refused): the log line shows them escaped
    with caplog.at_level(logging.INFO, logger="qm2qm.mqcn.server"):
        r = server.process(v1(create_update(path="qm2qm\\red\x1b[31m")))
    assert r.actions and qm.queue_by_pathname("qm2qm\\red\x1b[31m") is not None
    lines = [rec.getMessage() for rec in caplog.records if "created" in rec.getMessage()]
    assert lines and "red\\x1b[31m" in lines[0] and "\x1b" not in lines[0]


def test_v1_create_is_persisted_under_the_given_identifier(qm, server):
    server.process(v1(create_update()))
    stored = {s.identifier: s.attributes for s in qm.store.load().queues}
    assert stored[str(QUEUE_ID)]["label"] == "orders" and stored[str(QUEUE_ID)]["quota"] == 4096


def test_v1_create_twice_is_an_update(qm, server):
    server.process(v1(create_update()))
    r = server.process(v1(create_update(overrides={c.PROPID_Q_LABEL: "renamed"})))
    assert r.accepted and "existed" in r.actions[0]
    assert qm.queue_collection[QUEUE_ID].label == "renamed"


def test_v1_change_queue_updates_only_the_seven_properties(qm, server):
    server.process(v1(create_update()))
    props = ((c.PROPID_Q_QMID, QM_ID), (c.PROPID_Q_BASEPRIORITY, 9), (c.PROPID_Q_JOURNAL, 0), (c.PROPID_Q_QUOTA, 1),
             (c.PROPID_Q_JOURNAL_QUOTA, 2), (c.PROPID_Q_SECURITY, b"sd"), (c.PROPID_Q_AUTHENTICATE, 0),
             (c.PROPID_Q_PRIV_LEVEL, 0), (c.PROPID_Q_LABEL, "ignored"), (c.PROPID_Q_TRANSACTION, 0))
    r = server.process(v1(change_update(props=props)))
    q = qm.queue_collection[QUEUE_ID]
    assert r.accepted and not r.skipped
    assert (q.base_priority, q.journaling, q.quota, q.journal_quota, q.security, q.authentication,
            q.privacy_level) == (9, False, 1, 2, b"sd", False, "None")
    assert (q.label, q.transactional) == ("orders", True)          # "All other PROPIDs ... MUST be ignored"
    assert qm.store.load().queues and any(s.attributes["quota"] == 1 for s in qm.store.load().queues)


def test_v1_change_of_a_queue_owned_elsewhere_or_unknown_is_skipped(qm, server):
    server.process(v1(create_update()))
    elsewhere = change_update(props=((c.PROPID_Q_QMID, uuid.uuid4()), (c.PROPID_Q_QUOTA, 5)))
    r = server.process(v1(elsewhere, change_update(identifier=uuid.uuid4())))
    assert r.accepted and len(r.skipped) == 2 and qm.queue_collection[QUEUE_ID].quota == 4096


def test_v1_change_machine_updates_the_queue_manager(qm, server):
    props = ((c.PROPID_QM_MACHINE_ID, QM_ID), (c.PROPID_QM_FOREIGN, 0), (c.PROPID_QM_QUOTA, 1234),
             (c.PROPID_QM_JOURNAL_QUOTA, 99), (c.PROPID_QM_SECURITY, b"qmsd"), (c.PROPID_QM_OS, 0x500),
             (c.PROPID_QM_CNS, (uuid.uuid4(),)))
    r = server.process(v1(c.NotificationUpdate(c.COMMAND_CHANGE, DS_ID, props, guid_identifier=QM_ID)))
    assert r.accepted and not r.skipped
    assert (qm.queue_manager_quota, qm.journal_quota, qm.security) == (1234, 99, b"qmsd")


def test_v1_change_of_another_machine_is_skipped(qm, server):
    before = qm.queue_manager_quota
    props = ((c.PROPID_QM_MACHINE_ID, uuid.uuid4()), (c.PROPID_QM_QUOTA, 1))
    r = server.process(v1(c.NotificationUpdate(c.COMMAND_CHANGE, DS_ID, props, guid_identifier=uuid.uuid4())))
    assert r.skipped and qm.queue_manager_quota == before


def test_v1_delete_queue_removes_it_and_stales_open_descriptors(qm, server):
    server.process(v1(create_update()))
    _, desc = qm.open_queue(f"PUBLIC={QUEUE_ID}", QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
    r = server.process(v1(delete_update()))
    assert r.accepted and QUEUE_ID not in qm.queue_collection and desc.queue_reference is None
    assert qm.dequeue_message(desc, 0).status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE
    assert str(QUEUE_ID) not in {s.identifier for s in qm.store.load().queues}


def test_v1_never_deletes_a_private_or_system_queue(qm, server):
    _, private = qm.create_queue(".\\private$\\mine")
    system = next(q for q in qm.queue_collection.values() if q.queue_type is QueueType.SYSTEM)
    r = server.process(v1(delete_update(private.identifier), delete_update(system.identifier)))
    assert len(r.skipped) == 2 and private.identifier in qm.queue_collection
    assert system.identifier in qm.queue_collection


def test_v1_create_of_a_private_or_foreign_path_is_skipped(qm, server):
    r = server.process(v1(create_update("qm2qm\\private$\\x", uuid.uuid4()),
                          create_update("otherhost\\x", uuid.uuid4())))
    assert r.accepted and len(r.skipped) == 2 and qm.queue_by_pathname("qm2qm\\x") is None


def test_v1_create_of_a_machine_has_no_rule_and_is_skipped(server):
    update = c.NotificationUpdate(c.COMMAND_CREATE, DS_ID, ((c.PROPID_QM_MACHINE_ID, QM_ID),), path_name="m")
    r = server.process(v1(update))
    assert r.accepted and "no rule" in r.skipped[0]


def test_several_updates_in_one_message_apply_in_order(qm, server):
    r = server.process(v1(create_update(), change_update(props=((c.PROPID_Q_QUOTA, 5),)), delete_update()))
    assert r.accepted and len(r.actions) == 3 and QUEUE_ID not in qm.queue_collection


@pytest.mark.parametrize("message,reason", [
    (lambda: v1(create_update(), authentication_level=0), "AuthenticationLevel None"),
    (lambda: _with(v1(create_update()), sender_id_type=1), "SenderIdType 1"),
    (lambda: _with(v1(create_update()), sender_id_type=0), "SenderIdType 0"),
    (lambda: v1(change_update(props=((c.PROPID_D_SCOPE, 1), (c.PROPID_D_OBJTYPE, 1)))), "object type 4"),
    (lambda: v1(change_update(props=((c.PROPID_D_OBJTYPE, 1),))), "object type 4"),
    (lambda: v1(delete_update(objtype=c.MQDS_MACHINE)), "not MQDS_QUEUE"),
    (lambda: v1(create_update(overrides={c.PROPID_Q_PRIV_LEVEL: 7})), "PROPID_Q_PRIV_LEVEL 7"),
    (lambda: v1(create_update(overrides={c.PROPID_Q_JOURNAL: 2})), "PROPID 104 value 2"),
    (lambda: v1(create_update(overrides={c.PROPID_Q_LABEL: "x" * 125})), "exceeds 124"),
    (lambda: Message(body=b"\x03\x01xyz"), "Version 0x03"),
    (lambda: Message(body=b""), "malformed"),
    (lambda: Message(body=b"\x02\x01" + (f"<Notification><Event>1</Event><ObjectGuid>{QUEUE_ID}</ObjectGuid>"
                                         "<DomainController>D C</DomainController></Notification>").encode(
        "utf-16-le") + b"\x00"), "DomainController"),
])
def test_disregarded_messages_change_nothing_and_say_why(qm, server, caplog, message, reason):
    before = set(qm.queue_collection)
    msg = message()
    with caplog.at_level(logging.WARNING, logger="qm2qm.mqcn.server"):
        r = server.process(msg)
    assert not r.accepted and reason in r.dropped and set(qm.queue_collection) == before
    assert any(reason in rec.getMessage() and "dropped" in rec.getMessage() for rec in caplog.records)


def test_a_bad_later_update_disregards_the_whole_message(qm, server):
    r = server.process(v1(create_update(), delete_update(objtype=c.MQDS_MACHINE)))
    assert not r.accepted and QUEUE_ID not in qm.queue_collection


def test_version_1_only_configuration_ignores_version_2(qm, server):
    server.accepted_versions = (1,)
    r = server.process(v2(3, QUEUE_ID))
    assert "not accepted" in r.dropped


def _with(message, **changes):
    for k, v in changes.items():
        setattr(message, k, v)
    return message


# ---------------------------------------------------------------------------------------------- signatures
def test_signed_v1_from_a_registered_certificate_is_applied(qm, server, directory, signer):
    key, der = signer
    directory.backend.create(DirectoryObject("QueueManager", DS_ID, {CERTIFICATES_ATTRIBUTE: [der]}))
    r = server.process(v1(create_update(), signing_key=key, signing_certificate=der))
    assert r.accepted and QUEUE_ID in qm.queue_collection


def test_tampered_signed_v1_is_rejected_and_logged(qm, server, directory, signer, caplog):
    key, der = signer
    directory.backend.create(DirectoryObject("QueueManager", DS_ID, {CERTIFICATES_ATTRIBUTE: [der]}))
    genuine = v1(create_update(), signing_key=key, signing_certificate=der)
    tampered = v1(create_update(overrides={c.PROPID_Q_QUOTA: 1}))
    tampered.signature, tampered.sender_certificate = genuine.signature, der
    with caplog.at_level(logging.WARNING, logger="qm2qm.mqcn.server"):
        r = server.process(tampered)
    assert not r.accepted and "signature does not verify" in r.dropped
    assert QUEUE_ID not in qm.queue_collection
    assert any("signature does not verify" in rec.getMessage() for rec in caplog.records)


def test_signed_with_an_unregistered_certificate_is_rejected(qm, server, directory, signer):
    key, der = signer
    directory.backend.create(DirectoryObject("QueueManager", DS_ID, {CERTIFICATES_ATTRIBUTE: [b"other"]}))
    r = server.process(v1(create_update(), signing_key=key, signing_certificate=der))
    assert "not one of the certificates" in r.dropped


def test_sig10_signature_verifies_too(qm, server, directory, signer):
    from qm2qm.mqcn.signature import sign
    key, der = signer
    directory.backend.create(DirectoryObject("QueueManager", DS_ID, {CERTIFICATES_ATTRIBUTE: [der]}))
    message = v1(create_update(), authentication_level=SIG10)
    message.sender_certificate, message.signature = der, sign(message, key, version=1)
    assert server.process(message).accepted


def test_signature_without_a_directory_certificate_follows_the_spec_rules_unless_required(server, signer):
    key, der = signer
    message = v1(create_update(), signing_key=key, signing_certificate=der)
    message.body = message.body[:-1] + b"\x01"                      # tampered unused byte: unverifiable anyway
    assert server.process(message).accepted
    server.verifier.require_verified = True
    assert "not in the directory" in server.process(message).dropped


# ---------------------------------------------------------------------------------------------- 3.2.5.2
def queue_object(identifier=QUEUE_ID, owner=QM_ID, **attrs):
    base = {"Pathname": "qm2qm\\orders", "Label": "from-ds", "Type": TYPE_ID, "BasePriority": 4, "Journaling": True,
            "Quota": 300, "JournalQuota": 200, "CreateTime": 10, "ModifyTime": 20, "Security": b"sd",
            "Authentication": True, "PrivacyLevel": "Body", "Transactional": True, "MulticastAddress": None,
            "DirectoryPath": "CN=orders", "QueueManager": owner, "QueueType": "Public"}
    base.update(attrs)
    return DirectoryObject("Queue", identifier, base)


def test_v2_create_reads_the_directory_and_creates(qm, server, directory):
    directory.backend.create(queue_object())
    r = server.process(v2(1, QUEUE_ID))
    q = qm.queue_collection[QUEUE_ID]
    assert r.accepted and (q.label, q.quota, q.base_priority, q.privacy_level, q.directory_path) == (
        "from-ds", 300, 4, "Body", "CN=orders")
    assert (q.create_time, q.transactional, q.type) == (10, True, TYPE_ID)


def test_delete_of_a_queue_already_gone_is_no_warning(qm, server, directory, caplog):
    """The echo of this queue manager's own public-queue deletion (MS-MQDMPR 3.1.7.1.19 notifies the owner): the
    queue is gone before the notification is read, so there is nothing to skip or warn about."""
    directory.backend.create(queue_object())
    server.process(v2(1, QUEUE_ID))
    assert qm.delete_queue(qm.queue_collection[QUEUE_ID]) == st.MQ_OK
    directory.backend.delete("Queue", QUEUE_ID)
    with caplog.at_level(logging.INFO, logger="qm2qm.mqcn"):
        r2, r1 = server.process(v2(3, QUEUE_ID)), server.process(v1(delete_update()))
    assert r2.accepted and r1.accepted and not r2.skipped and not r1.skipped
    assert "already gone" in r2.actions[0] and "already gone" in r1.actions[0]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]


def test_v2_change_replaces_the_queue_attributes(qm, server, directory):
    directory.backend.create(queue_object())
    server.process(v2(1, QUEUE_ID))
    directory.backend.write(queue_object(Label="changed", Quota=1), None)
    r = server.process(v2(2, QUEUE_ID))
    assert r.accepted and (qm.queue_collection[QUEUE_ID].label, qm.queue_collection[QUEUE_ID].quota) == ("changed", 1)


def test_v2_delete_when_the_directory_no_longer_holds_it(qm, server, directory):
    directory.backend.create(queue_object())
    server.process(v2(1, QUEUE_ID))
    assert "still holds" in server.process(v2(3, QUEUE_ID)).dropped and QUEUE_ID in qm.queue_collection
    directory.backend.delete("Queue", QUEUE_ID)
    assert server.process(v2(3, QUEUE_ID)).accepted and QUEUE_ID not in qm.queue_collection


def test_v2_change_machine(qm, server, directory):
    directory.backend.create(DirectoryObject("QueueManager", QM_ID, {"QueueManagerQuota": 555, "JournalQuota": 6,
                                                                     "Security": b"s"}))
    assert server.process(v2(4, QM_ID)).accepted and (qm.queue_manager_quota, qm.journal_quota) == (555, 6)
    assert "not this queue manager" in server.process(v2(4, DS_ID)).dropped


@pytest.mark.parametrize("setup,event,reason", [
    (lambda d: None, 1, "ObjectNotFound"),
    (lambda d: d.backend.create(queue_object(owner=DS_ID)), 1, "owned by"),
    (lambda d: setattr(d.backend, "connected", False), 2, "DirectoryNotConnected"),
    (lambda d: d.backend.create(queue_object(Quota="lots")), 1, "Quota='lots' does not fit"),
    (lambda d: d.backend.create(queue_object(Pathname="")), 1, "has no Pathname"),
])
def test_v2_directory_failures(qm, server, directory, setup, event, reason):
    setup(directory)
    r = server.process(v2(event, QUEUE_ID))
    assert reason in r.dropped and QUEUE_ID not in qm.queue_collection


def test_v2_change_with_a_bad_value_changes_nothing(qm, server, directory):
    directory.backend.create(queue_object())
    server.process(v2(1, QUEUE_ID))
    directory.backend.write(queue_object(Label="new", Journaling=5), None)
    assert "Journaling=5" in server.process(v2(2, QUEUE_ID)).dropped
    assert qm.queue_collection[QUEUE_ID].label == "from-ds"


def test_v2_change_of_an_unknown_queue_is_skipped(server, directory):
    directory.backend.create(queue_object())
    assert server.process(v2(2, QUEUE_ID)).skipped


# ---------------------------------------------------------------------------------------------- hostile input
from hypothesis import HealthCheck, given, settings, strategies as hs  # noqa: E402

_VALUE = {c.VT_CLSID: hs.uuids(), c.VT_LPWSTR: hs.text(hs.characters(blacklist_characters="\x00",
                                                                      blacklist_categories=("Cs",)), max_size=130),
          c.VT_BLOB: hs.binary(max_size=8), c.VT_UI1: hs.integers(0, 255), c.VT_UI4: hs.integers(0, 2**32 - 1),
          c.VT_I4: hs.integers(-2**31, 2**31 - 1), c.VT_I2: hs.integers(-2**15, 2**15 - 1),
          c.VT_CLSID_VECTOR: hs.lists(hs.uuids(), max_size=2).map(tuple),
          c.VT_LPWSTR_VECTOR: hs.lists(hs.just("x"), max_size=2).map(tuple), c.VT_UI1_VECTOR: hs.binary(max_size=4)}
_PROP = hs.sampled_from(sorted(c.PROPID_TYPES)).flatmap(lambda p: _VALUE[c.PROPID_TYPES[p]].map(lambda v: (p, v)))
_UPDATE = hs.builds(
    lambda command, props, path, guid: c.NotificationUpdate(command, DS_ID, tuple(props),
                                                            None if guid else path, QUEUE_ID if guid else None),
    hs.sampled_from([0, 1, 2]), hs.lists(_PROP, max_size=8),
    hs.sampled_from(["qm2qm\\orders", "qm2qm\\private$\\p", "x" * 300, "qm2qm\\a\\b", "", "qm2qm\\"]), hs.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(updates=hs.lists(_UPDATE, min_size=1, max_size=3))
def test_any_well_formed_v1_message_is_applied_or_dropped_never_crashes(qm, server, updates):
    protected = {i for i, q in qm.queue_collection.items() if q.queue_type is not QueueType.PUBLIC}
    result = server.process(v1(*updates))
    assert result.accepted or result.dropped
    assert protected <= set(qm.queue_collection)              # MQCN never removes a private or system queue
    assert all(q.queue_type is QueueType.PUBLIC for i, q in qm.queue_collection.items() if i not in protected)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=hs.binary(max_size=200), version=hs.sampled_from([b"", b"\x01\x01", b"\x02\x01"]))
def test_any_body_is_applied_or_dropped_with_a_reason(qm, server, body, version):
    protected = {i for i, q in qm.queue_collection.items() if q.queue_type is not QueueType.PUBLIC}
    result = server.process(Message(body=version + body, sender_id_type=2, authentication_level=3))
    assert result.accepted or len(result.dropped) > 10
    assert protected <= set(qm.queue_collection)


def test_a_zeroed_update_with_no_properties_is_dropped_for_its_object_type(server):
    body = b"\x01\x01" + b"\x00\x01" + bytes(56) + b"\x00"
    assert "object type None" in server.process(Message(body=body, sender_id_type=2,
                                                        authentication_level=3)).dropped
