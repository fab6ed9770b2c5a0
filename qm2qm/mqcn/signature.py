"""Signature check of version 0x01 notifications (MS-MQCN 3.2.5.1) with the MSMQ 1.0/2.0 digital signature
properties of MS-MQMQ 2.5.1/2.5.2 and the RSA check of MS-MQQB 3.1.5.8.3, against certificates in the directory.

The byte form of each hashed field is not given by MS-MQMQ 2.5; ours is written down in DECISIONS.md (D10) and
``signed_properties`` is the single place that defines it (sender and receiver share it)."""
from __future__ import annotations

import logging
import struct
import uuid

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from shared_adm.directory import Directory, DirectoryOperationResult, equals
from shared_adm.message import Message

log = logging.getLogger(__name__)

SIG10, SIG20 = 1, 3                        # Message.AuthenticationLevel (SecurityHeader.Flags.AS)
SENDER_ID_QUEUE_MANAGER = 2                # SecurityHeader.Flags.ST: QueueManagerIdentifier
CERTIFICATES_ATTRIBUTE = "Certificates"    # DER X.509 certificates of a "QueueManager" directory object
_HASHES = {0x8003: hashes.MD5, 0x8004: hashes.SHA1, 0x800C: hashes.SHA256, 0x800E: hashes.SHA512}


def _wstr(text: str | None) -> bytes:
    return b"" if text is None else text.encode("utf-16-le", errors="surrogatepass") + b"\x00\x00"


def signed_properties(message: Message, version: int = 2) -> bytes:
    """The concatenated fields of MS-MQMQ 2.5.2 (version 2) or 2.5.1 (version 1), in the order listed there."""
    out = [bytes(message.correlation_identifier).ljust(20, b"\x00")[:20],
           struct.pack("<I", message.application_tag & 0xFFFFFFFF), bytes(message.body), _wstr(message.label),
           _wstr(message.response_queue_format_name), _wstr(message.administration_queue_format_name)]
    if version == 2:
        connector = message.connector_type_identifier or uuid.UUID(int=0)
        out += [message.source_machine_identifier.bytes_le, bytes((int(message.delivery_guarantee),)),
                bytes((message.priority & 0xFF,)),
                bytes((int(message.positive_journaling_requested) << 1 | int(message.negative_journaling_requested),)),
                bytes((message.acknowledgements_requested & 0x0F,)), struct.pack("<H", message.class_ & 0xFFFF),
                struct.pack("<I", message.body_type & 0xFFFFFFFF), connector.bytes_le,
                _wstr(message.destination_queue_format_name)]
    return b"".join(out)


def _hash(message: Message):
    algorithm = _HASHES.get(message.hash_algorithm)
    if algorithm is None:
        raise ValueError(f"HashAlgorithm {message.hash_algorithm:#x} is not MD5/SHA1/SHA256/SHA512")
    return algorithm()


def sign(message: Message, private_key: rsa.RSAPrivateKey, version: int = 2) -> bytes:
    """RSA PKCS#1 v1.5 signature over ``signed_properties``, little-endian as CryptSignHash writes it."""
    return private_key.sign(signed_properties(message, version), padding.PKCS1v15(), _hash(message))[::-1]


def _verifies(public_key, signature: bytes, data: bytes, algorithm) -> bool:
    for candidate in (signature[::-1], signature):      # CryptoAPI (little-endian) first, then big-endian
        try:
            public_key.verify(candidate, data, padding.PKCS1v15(), algorithm)
            return True
        except (InvalidSignature, ValueError):
            continue
    return False


class SignatureVerifier:
    """Checks Message.Signature against the sender queue manager's certificates in the directory."""

    def __init__(self, directory: Directory | None, require_verified: bool = False) -> None:
        self.directory = directory
        self.require_verified = require_verified

    def _certificates(self, sender: uuid.UUID) -> list[bytes]:
        if self.directory is None:
            return []
        result, obj = self.directory.read_directory("QueueManager", [equals("Identifier", sender)])
        if result is not DirectoryOperationResult.SUCCESS:
            return []
        certs = obj.attributes.get(CERTIFICATES_ATTRIBUTE) or []
        return [bytes(c) for c in certs if isinstance(c, (bytes, bytearray))]

    def check(self, message: Message) -> str | None:
        """None when the message may be used; otherwise the reason it must be dropped."""
        if not message.signature:
            return None
        if len(message.sender_id) != 16:
            return f"signed, but SenderId is {len(message.sender_id)} bytes, not a queue manager GUID"
        sender = uuid.UUID(bytes_le=bytes(message.sender_id))
        certificates = self._certificates(sender)
        if not certificates:
            if self.require_verified:
                return f"signed by {sender}, whose certificate is not in the directory"
            log.info("notification signed by %s: no certificate in the directory, signature not checked", sender)
            return None
        if message.sender_certificate:
            if bytes(message.sender_certificate) not in certificates:
                return f"SenderCert is not one of the certificates the directory holds for {sender}"
            certificates = [bytes(message.sender_certificate)]
        try:
            algorithm = _hash(message)
        except ValueError as exc:
            return str(exc)
        for version in (2, 1):                     # MS-MQQB 3.1.5.8.3: MSMQ 2.0 first, then 1.0
            data = signed_properties(message, version)
            for der in certificates:
                try:
                    key = x509.load_der_x509_certificate(der).public_key()
                except ValueError as exc:
                    log.warning("directory certificate of %s is not DER X.509: %s", sender, exc)
                    continue
                if isinstance(key, rsa.RSAPublicKey) and _verifies(key, bytes(message.signature), data, algorithm):
                    return None
        return f"signature does not verify with the certificate(s) the directory holds for {sender}"
