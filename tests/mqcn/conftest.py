"""Fixtures for MS-MQCN tests: a QueueManager on a ManualScheduler, an in-memory directory, the MQCN roles."""
from __future__ import annotations

import datetime
import uuid

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from qm2qm.mqcn.client import ChangeNotificationClient
from qm2qm.mqcn.server import ChangeNotificationServer
from shared_adm.clock import ManualScheduler
from shared_adm.directory import Directory, MemoryDirectory
from shared_adm.queue_manager import QueueManager

QM_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
DS_ID = uuid.UUID("99999999-8888-7777-6666-555555555555")


@pytest.fixture
def qm():
    manager = QueueManager(scheduler=ManualScheduler(), identifier=QM_ID, computer_name="qm2qm")
    manager.initialize()
    return manager


@pytest.fixture
def directory(qm):
    return Directory(MemoryDirectory(), local_queue_manager=qm)


@pytest.fixture
def server(qm, directory):
    return ChangeNotificationServer(qm, directory)


@pytest.fixture
def client(qm, directory):
    notifier = ChangeNotificationClient(qm, "DC01")
    directory.send_change_notification = notifier.send_change_notification
    return notifier


@pytest.fixture(scope="session")
def signer():
    """An RSA key and its self-signed DER certificate (the DS's signing identity)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mqcn-test-ds")])
    now = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .sign(key, hashes.SHA256()))
    return key, cert.public_bytes(serialization.Encoding.DER)
