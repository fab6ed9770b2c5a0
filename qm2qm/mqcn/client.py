"""MS-MQCN client role (3.3): Send Change Notification (3.3.4.1) builds the version 0x02 message (3.3.5.1) and
sends it (3.3.5.3) to the owning queue manager's notification queue: Enqueue Message locally, or through a
``NotificationTransport`` for a remote owner. ``build_v1_message`` is the directory-service form (3.3.5.2),
used by tests and replay tools to play the MSMQ 1.0 DS.

Hook it to the directory events (MS-MQDMPR 3.1.7.1.18/19/24)::

    client = ChangeNotificationClient(qm, directory_server="DC01")
    directory = Directory(SqliteDirectory(path), send_change_notification=client.send_change_notification)
"""
from __future__ import annotations

import itertools
import logging
import uuid
from typing import Protocol

from qm2qm.mqcn import codec as c
from qm2qm.mqcn.server import notify_queue_format_name
from qm2qm.mqcn.signature import SENDER_ID_QUEUE_MANAGER, SIG20, sign
from shared_adm import status as st
from shared_adm.directory import ChangeOperation, DirectoryObject
from shared_adm.enums import QueueAccessType, QueueShareMode
from shared_adm.format_name import pathname_key
from shared_adm.message import DeliveryGuarantee, Message

log = logging.getLogger(__name__)

TIME_TO_REACH_QUEUE_S = 300                 # 3.3.5.3: 5 minutes
CALG_SHA1 = 0x8004                          # 3.3.5.3 <12>: HashAlgorithm MUST be set
MESSAGE_CLASS_NORMAL = 0x0000
EVENTS = {ChangeOperation.QUEUE_CREATION: c.EVENT_CREATE_QUEUE, ChangeOperation.QUEUE_UPDATE: c.EVENT_CHANGE_QUEUE,
          ChangeOperation.QUEUE_DELETION: c.EVENT_DELETE_QUEUE,
          ChangeOperation.QUEUE_MANAGER_UPDATE: c.EVENT_CHANGE_MACHINE}


class NotificationTransport(Protocol):
    """Carries a notification Message to a remote queue manager's notification queue (MS-MQQB in production)."""

    def send(self, destination_queue_manager: uuid.UUID, message: Message) -> int: ...


class ChangeNotificationClient:
    """MQCN client (3.3): one version 0x02 notification per directory change, to the object's owner."""

    def __init__(self, queue_manager, directory_server: str | None = None, *,
                 transport: NotificationTransport | None = None, signing_key=None,
                 signing_certificate: bytes = b"") -> None:
        self.qm = queue_manager
        self.directory_server = directory_server or queue_manager.computer_name
        self.transport = transport
        self.signing_key = signing_key                  # RSA private key: sign as [2024] 3.3.5.3 (Sig20)
        self.signing_certificate = signing_certificate
        self.open_notify_queue_descriptor = None
        self.sent = 0
        self._uniquifier = itertools.count(1)
        c.NotificationBody(1, uuid.UUID(int=0), self.directory_server).text()   # validates the name now

    # -------------------------------------------------------------- 3.3.3
    def open(self) -> int:
        """Open Queue (3.3.3) on the local NOTIFY_QUEUE_PRIVATE with SendAccess, DenyNone (remote: the transport)."""
        if self.open_notify_queue_descriptor is not None:
            return st.MQ_OK
        status, desc = self.qm.open_queue(notify_queue_format_name(self.qm.identifier), QueueAccessType.SEND_ACCESS,
                                          QueueShareMode.DENY_NONE)
        if status == st.MQ_OK:
            self.open_notify_queue_descriptor = desc
        return status

    def close(self) -> None:
        """Close the local notification queue descriptor."""
        if self.open_notify_queue_descriptor is not None:
            self.qm.close_queue(self.open_notify_queue_descriptor)
            self.open_notify_queue_descriptor = None

    # -------------------------------------------------------------- 3.3.4.1
    def send_change_notification(self, operation: ChangeOperation, directory_object: DirectoryObject) -> int:
        """Send Change Notification (3.3.4.1): prepare the version 0x02 message and send it to the owner."""
        owner = self.owner_of(directory_object)
        if owner is None:
            log.warning("MQCN client: owner of %s %s unknown; no notification sent",
                        directory_object.object_type, directory_object.identifier)
            return st.MQ_ERROR_QUEUE_NOT_FOUND
        body = c.NotificationBody(EVENTS[operation], directory_object.identifier, self.directory_server)
        cnm = c.ChangeNotificationMessage(c.VERSION_QUEUE_MANAGER, body=body)
        message = self.prepare_message(cnm, owner)
        return self.send(owner, message)

    def owner_of(self, obj: DirectoryObject) -> uuid.UUID | None:
        """The owning queue manager: the machine itself, Queue.QueueManager, or the local one by Pathname host."""
        if obj.object_type == "QueueManager":
            return obj.identifier
        owner = obj.attributes.get("QueueManager")
        if isinstance(owner, uuid.UUID):
            return owner
        key = pathname_key(obj.attributes.get("Pathname") or "")
        if key is not None:
            host, local = key[0].lower(), self.qm.computer_name.lower()
            if host in (".", "localhost", local) or host.split(".")[0] == local:
                return self.qm.identifier
        return None

    # -------------------------------------------------------------- 3.3.5.3
    def prepare_message(self, cnm: c.ChangeNotificationMessage, destination: uuid.UUID) -> Message:
        """The Message of 3.3.5.3: TTRQ 5 min, Express, Normal, HashAlgorithm set, Body = CNM + 1 unused byte."""
        message = Message(
            identifier=(self.qm.identifier, next(self._uniquifier) & 0xFFFFFFFF),
            time_to_reach_queue=TIME_TO_REACH_QUEUE_S, delivery_guarantee=DeliveryGuarantee.EXPRESS,
            class_=MESSAGE_CLASS_NORMAL, hash_algorithm=CALG_SHA1, body=c.message_body(cnm),
            destination_queue_format_name=notify_queue_format_name(destination),
            destination_queue_manager_identifier=destination, source_machine_identifier=self.qm.identifier,
            sent_time=int(self.qm.scheduler.wall_time()))
        if cnm.version == c.VERSION_DIRECTORY_SERVICE or self.signing_key is not None:
            message.sender_id = self.qm.identifier.bytes_le
            message.sender_id_type = SENDER_ID_QUEUE_MANAGER
        if self.signing_key is not None:
            message.authentication_level = SIG20
            message.sender_certificate = self.signing_certificate
            message.signature = sign(message, self.signing_key)
        return message

    def send(self, destination: uuid.UUID, message: Message) -> int:
        """Enqueue Message (MS-MQDMPR 3.1.7.1.9) locally, or hand the message to the transport."""
        if destination == self.qm.identifier:
            status = self.open()
            if status != st.MQ_OK:
                log.error("MQCN client: cannot open the local notification queue (%#010x)", status)
                return status
            queue = self.open_notify_queue_descriptor.queue_reference
            if queue is None:
                self.open_notify_queue_descriptor = None
                return st.MQ_ERROR_QUEUE_NOT_AVAILABLE
            result = self.qm.enqueue_message(queue, message)
            if result != 0:
                log.warning("MQCN client: notification queue over quota (%d); notification lost", result)
                return st.MQ_ERROR_INSUFFICIENT_RESOURCES
        elif self.transport is None:
            log.warning("MQCN client: no transport to queue manager %s; notification not sent", destination)
            return st.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE
        else:
            status = self.transport.send(destination, message)
            if status != st.MQ_OK:
                return status
        self.sent += 1
        return st.MQ_OK


def build_v1_message(updates: list[c.NotificationUpdate], sender: uuid.UUID, *,
                     authentication_level: int = SIG20, signing_key=None, signing_certificate: bytes = b"",
                     destination: uuid.UUID | None = None) -> Message:
    """A version 0x01 notification Message as the MSMQ 1.0 directory service sends it (3.3.5.2, 3.3.5.3)."""
    cnm = c.ChangeNotificationMessage(c.VERSION_DIRECTORY_SERVICE, tuple(updates))
    message = Message(identifier=(sender, 1), time_to_reach_queue=TIME_TO_REACH_QUEUE_S,
                      delivery_guarantee=DeliveryGuarantee.EXPRESS, class_=MESSAGE_CLASS_NORMAL,
                      hash_algorithm=CALG_SHA1, body=c.message_body(cnm), sender_id=sender.bytes_le,
                      sender_id_type=SENDER_ID_QUEUE_MANAGER, authentication_level=authentication_level,
                      source_machine_identifier=sender,
                      destination_queue_format_name=None if destination is None else notify_queue_format_name(
                          destination))
    if signing_key is not None:
        message.sender_certificate = signing_certificate
        message.signature = sign(message, signing_key)
    return message
