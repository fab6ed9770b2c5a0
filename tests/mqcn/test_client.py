"""MS-MQCN client role (3.3) hooked to the directory events (MS-MQDMPR 3.1.7.1.18/19/24), and both roles
end to end through the notification queue, the server's Dequeue loop and a qm2qm remote reader."""
import asyncio
import uuid

import pytest

from qm2qm.mqcn import codec as c
from qm2qm.mqcn.client import ChangeNotificationClient
from qm2qm.mqcn.server import ChangeNotificationServer, notify_queue_format_name
from shared_adm import status as st
from shared_adm.directory import ChangeOperation, DirectoryObject, equals
from shared_adm.enums import QueueAccessType, QueueShareMode, QueueType
from shared_adm.message import DeliveryGuarantee

from tests.mqcn.conftest import QM_ID

QUEUE_ID = uuid.UUID("cccccccc-0000-0000-0000-000000000003")
HANG_GUARD_S = 30          # bound for a hung test, not a speed assertion


def notify_queue(qm):
    return next(q for q in qm.queue_collection.values() if q.private_queue_number == 3)


def notifications(qm):
    return [p.message for p in notify_queue(qm).message_position_list]


def public_queue_object(owner=QM_ID, **attrs):
    base = {"Pathname": "qm2qm\\pub", "Label": "pub", "QueueType": "Public", "QueueManager": owner, "Quota": 64}
    base.update(attrs)
    return DirectoryObject("Queue", QUEUE_ID, base)


@pytest.mark.parametrize("operation,event", [("create", 1), ("write", 2), ("delete", 3)])
def test_directory_events_send_the_version_2_notification(qm, directory, client, operation, event):
    obj = public_queue_object()
    if operation != "create":
        directory.backend.create(obj)
    result = {"create": lambda: directory.create_directory_object(obj)[0],
              "write": lambda: directory.write_directory(obj),
              "delete": lambda: directory.delete_directory_object(obj)}[operation]()
    assert result.value == "Success"
    [message] = notifications(qm)
    cnm = c.decode_message(message.body)
    assert (cnm.version, cnm.body) == (2, c.NotificationBody(event, QUEUE_ID, "DC01"))
    assert message.body == c.message_body(cnm)                            # CNM + 1 unused byte (3.3.5.3)
    assert (message.time_to_reach_queue, message.delivery_guarantee, message.class_) == (
        300, DeliveryGuarantee.EXPRESS, 0)
    assert message.hash_algorithm == 0x8004
    assert message.destination_queue_format_name == notify_queue_format_name(QM_ID)


def test_write_of_the_queue_manager_object_sends_event_4(qm, directory, client):
    directory.backend.create(DirectoryObject("QueueManager", QM_ID, {"QueueManagerQuota": 1}))
    directory.write_directory(DirectoryObject("QueueManager", QM_ID, {"QueueManagerQuota": 2}))
    assert c.decode_message(notifications(qm)[0].body).body.event == 4


def test_private_queues_and_failed_writes_send_nothing(qm, directory, client):
    directory.create_directory_object(public_queue_object(QueueType="Private"))
    missing = DirectoryObject("Queue", uuid.uuid4(), public_queue_object().attributes)
    assert directory.write_directory(missing).value == "ObjectNotFound"
    assert notifications(qm) == []


def test_remote_owner_goes_through_the_transport(qm, directory, client):
    sent = []

    class Transport:
        def send(self, destination, message):
            sent.append((destination, message))
            return st.MQ_OK

    other = uuid.uuid4()
    directory.create_directory_object(public_queue_object(owner=other))       # no transport: logged, not sent
    assert sent == [] and notifications(qm) == [] and client.sent == 0
    client.transport = Transport()
    directory.backend.delete("Queue", QUEUE_ID)
    directory.create_directory_object(public_queue_object(owner=other))
    [(destination, message)] = sent
    assert destination == other and message.destination_queue_format_name == notify_queue_format_name(other)


def test_owner_from_the_pathname_when_the_object_does_not_name_it(qm):
    client = ChangeNotificationClient(qm, "DC01")
    assert client.owner_of(DirectoryObject("Queue", QUEUE_ID, {"Pathname": "QM2QM\\pub"})) == QM_ID
    assert client.owner_of(DirectoryObject("Queue", QUEUE_ID, {"Pathname": "far\\pub"})) is None
    assert client.send_change_notification(ChangeOperation.QUEUE_UPDATE, DirectoryObject(
        "Queue", QUEUE_ID, {"Pathname": "far\\pub"})) == st.MQ_ERROR_QUEUE_NOT_FOUND


def test_bad_directory_server_name_is_refused_at_construction(qm):
    with pytest.raises(c.MqcnError, match="DomainController"):
        ChangeNotificationClient(qm, "has space")


def test_signed_version_2_notifications_carry_the_sender(qm, signer):
    key, der = signer
    client = ChangeNotificationClient(qm, "DC01", signing_key=key, signing_certificate=der)
    client.send_change_notification(ChangeOperation.QUEUE_UPDATE, public_queue_object())
    [message] = notifications(qm)
    assert message.authentication_level == 3 and message.sender_id_type == 2 and message.sender_id == QM_ID.bytes_le
    assert message.sender_certificate == der and len(message.signature) == 256


async def _until(predicate):
    async def poll():
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), HANG_GUARD_S)


async def test_server_loop_consumes_what_the_client_sends(qm, directory, client):
    server = ChangeNotificationServer(qm, directory)
    assert await server.start() == st.MQ_OK
    try:
        directory.create_directory_object(public_queue_object())
        await _until(lambda: server.processed == 1)
        queue = qm.queue_collection[QUEUE_ID]
        assert (queue.queue_type, queue.pathname, queue.label, queue.quota) == (QueueType.PUBLIC, "pub", "pub", 64)
        assert notifications(qm) == []                                       # dequeued (AckReceive)
        directory.write_directory(public_queue_object(Label="relabelled"))
        await _until(lambda: server.processed == 2)
        assert queue.label == "relabelled"
        directory.delete_directory_object(public_queue_object())
        await _until(lambda: server.processed == 3)
        assert QUEUE_ID not in qm.queue_collection
    finally:
        await server.stop()
    assert server.descriptor is None
    assert [d.access_type for d in notify_queue(qm).open_queue_descriptor_collection] == [QueueAccessType.SEND_ACCESS]


async def test_a_malformed_notification_does_not_stop_the_loop(qm, directory, client):
    server = ChangeNotificationServer(qm, directory)
    await server.start()
    try:
        from shared_adm.message import Message
        qm.enqueue_message(notify_queue(qm), Message(body=b"\xff\xff\xff"))
        directory.create_directory_object(public_queue_object())
        await _until(lambda: server.processed == 2)
        assert server.dropped == 1 and QUEUE_ID in qm.queue_collection
    finally:
        await server.stop()


def test_server_open_fails_cleanly_without_the_notification_queue(qm, directory):
    qm.delete_queue(notify_queue(qm))
    server = ChangeNotificationServer(qm, directory)
    assert server.open() == st.MQ_ERROR_QUEUE_NOT_FOUND and server.descriptor is None


# ---------------------------------------------------------------------------------------------- qm2qm reader
async def test_a_queue_created_by_notification_is_served_to_a_qm2qm_remote_reader(qm, directory, client):
    from qm2qm.mqqp.constants import MQ_ACTION_RECEIVE
    from qm2qm.mqqp.interface import build_service, service_interface
    from qm2qm.mqqp.server_config import MqqpConfig
    from qm2qm.rpc.server import RpcServer
    from shared_adm.enums import RemoteReadState
    from shared_adm.message import Message
    from shared_adm.packet import deserialize_message_from_buffer
    from tests.mqqp.conftest import NDR, Client

    server = ChangeNotificationServer(qm, directory)
    await server.start()
    config = MqqpConfig(qmcomm_port=2103)
    rpc = RpcServer([service_interface(build_service(qm, config))], host="127.0.0.1", port=0, idle_timeout_s=None)
    await rpc.start()
    config.bound_port = rpc.port
    reader = None
    try:
        directory.create_directory_object(public_queue_object())
        await _until(lambda: QUEUE_ID in qm.queue_collection)
        queue = qm.queue_collection[QUEUE_ID]
        message = Message(body=b"hello", destination_queue_format_name=f"PUBLIC={QUEUE_ID}")
        assert qm.enqueue_message(queue, message) == 0
        status, desc = qm.open_queue(f"PUBLIC={QUEUE_ID}", QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE,
                                     RemoteReadState.OPENED)
        assert status == st.MQ_OK
        reader = await asyncio.to_thread(Client, rpc.port, NDR)
        status, _ = await reader.call(reader.open_queue, desc.handle)
        assert status == st.MQ_OK
        read = await reader.call(reader.start_receive, desc.handle, MQ_ACTION_RECEIVE, timeout=0)
        assert read.status == st.MQ_OK and deserialize_message_from_buffer(read.buffer).body == b"hello"
        directory.delete_directory_object(public_queue_object())            # MQCN deletes it under the reader
        await _until(lambda: QUEUE_ID not in qm.queue_collection)
        again = await reader.call(reader.start_receive, desc.handle, MQ_ACTION_RECEIVE, timeout=0)
        assert again.status == st.MQ_ERROR_QUEUE_NOT_AVAILABLE, hex(again.status)
    finally:
        if reader is not None:
            await asyncio.to_thread(reader.disconnect)
        await rpc.close()
        await server.stop()


# ---------------------------------------------------------------------------------------------- QM -> directory
def test_create_public_queue_publishes_and_notifies_the_owner(qm, directory, client):
    from shared_adm.directory import create_public_queue, delete_public_queue, publish_queue, publish_queue_manager
    status, queue = create_public_queue(qm, directory, "qm2qm\\published", label="p")
    assert status == st.MQ_OK and queue.queue_type is QueueType.PUBLIC
    result, obj = directory.read_directory("Queue", [equals("Identifier", queue.identifier)])
    assert obj.attributes["Pathname"] == "qm2qm\\published" and obj.attributes["QueueManager"] == QM_ID
    queue.quota = 5
    assert publish_queue(directory, queue) == st.MQ_OK
    directory.backend.create(DirectoryObject("QueueManager", QM_ID, {}))
    assert publish_queue_manager(directory, qm) == st.MQ_OK
    assert delete_public_queue(qm, directory, queue) == st.MQ_OK
    events = [c.decode_message(m.body).body.event for m in notifications(qm)]
    assert events == [1, 2, 4, 3]
    assert create_public_queue(qm, directory, "qm2qm\\private$\\no")[0] == st.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME


def test_create_public_queue_is_undone_when_the_directory_refuses(qm, directory, client):
    from shared_adm.directory import create_public_queue
    directory.backend.connected = False
    status, queue = create_public_queue(qm, directory, "qm2qm\\offline")
    assert status == st.MQ_ERROR_NO_DS and queue is None and qm.queue_by_pathname("qm2qm\\offline") is None


async def test_signed_v1_through_the_notification_queue_genuine_applied_tampered_logged(qm, directory, signer,
                                                                                        caplog):
    import logging
    from qm2qm.mqcn.client import build_v1_message
    from qm2qm.mqcn.signature import CERTIFICATES_ATTRIBUTE
    from tests.mqcn.conftest import DS_ID
    from tests.mqcn.test_server import QUEUE_ID as CREATED, create_update
    key, der = signer
    directory.backend.create(DirectoryObject("QueueManager", DS_ID, {CERTIFICATES_ATTRIBUTE: [der]}))
    server = ChangeNotificationServer(qm, directory)
    await server.start()
    try:
        tampered = build_v1_message([create_update()], DS_ID, signing_key=key, signing_certificate=der)
        tampered.body = tampered.body.replace("orders".encode("utf-16-le"), "ordprs".encode("utf-16-le"))
        with caplog.at_level(logging.WARNING, logger="qm2qm.mqcn.server"):
            assert qm.enqueue_message(notify_queue(qm), tampered) == 0
            await _until(lambda: server.processed == 1)
        assert CREATED not in qm.queue_collection and server.dropped == 1
        assert any("signature does not verify" in r.getMessage() for r in caplog.records)
        genuine = build_v1_message([create_update()], DS_ID, signing_key=key, signing_certificate=der)
        assert qm.enqueue_message(notify_queue(qm), genuine) == 0
        await _until(lambda: server.processed == 2)
        assert qm.queue_collection[CREATED].label == "orders"
    finally:
        await server.stop()
