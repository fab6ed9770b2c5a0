"""MessagePropertiesHeader (MS-MQMQ 2.2.19.3): acks, label, class, correlation id, extension and body."""
from __future__ import annotations

from dataclasses import dataclass

from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import MAX_LABEL_LENGTH, PROPERTIES_HEADER, ZEROS, pad4
from shared_adm.packet.reader import Reader, decode_wstring


@dataclass(slots=True)
class MessagePropertiesHeader:
    """MS-MQMQ 2.2.19.3. ``label`` is None when LabelLength is 0; ``body_tail`` holds the
    AllocationBodySize - MessageSize bytes allocated after the body (empty for packets we build)."""
    flags: int
    message_class: int
    correlation_id: bytes
    body_type: int
    application_tag: int
    privacy_level: int
    hash_algorithm: int
    encryption_algorithm: int
    label: str | None
    extension: bytes
    body: bytes
    body_tail: bytes = b""

    def pack_parts(self) -> list[bytes]:
        """The header as chunks (fixed part + label, extension, body, tail, padding), for one final join."""
        if self.label is None:
            label, label_length = b"", 0
        else:
            label = self.label.encode("utf-16-le", "surrogatepass") + b"\x00\x00"
            label_length = len(label) // 2
            if label_length > MAX_LABEL_LENGTH:
                raise PacketError("MessagePropertiesHeader", "Label", None,
                                  f"{label_length - 1} UTF-16 code units, at most {MAX_LABEL_LENGTH - 1} allowed")
        size = len(self.body)
        allocation = size + len(self.body_tail)
        fixed = PROPERTIES_HEADER.pack(self.flags, label_length, self.message_class, self.correlation_id,
                                       self.body_type, self.application_tag, size, allocation,
                                       self.privacy_level, self.hash_algorithm, self.encryption_algorithm,
                                       len(self.extension))
        total = len(fixed) + len(label) + len(self.extension) + allocation
        return [fixed, label, self.extension, self.body, self.body_tail, ZEROS[:pad4(total)]]

    @classmethod
    def parse(cls, r: Reader) -> MessagePropertiesHeader:
        """Parse at the reader's cursor, including the padding to a multiple of 4."""
        base = r.pos
        (flags, label_length, message_class, correlation_id, body_type, application_tag, message_size,
         allocation, privacy, hash_alg, enc_alg, ext_size) = r.unpack(PROPERTIES_HEADER, "fixed part")
        if label_length > MAX_LABEL_LENGTH:
            raise r.error("LabelLength", f"{label_length} exceeds 0xFA", base + 1)
        if allocation < message_size:
            raise r.error("AllocationBodySize", f"{allocation} is less than MessageSize {message_size}", base + 36)
        label = None
        if label_length:
            offset = r.pos
            label = decode_wstring(bytes(r.take(2 * label_length, "Label")), r.header, "Label", offset)
        extension = bytes(r.take(ext_size, "ExtensionData"))
        body = bytes(r.take(message_size, "MessageBody"))
        body_tail = bytes(r.take(allocation - message_size, "MessageBody (AllocationBodySize)"))
        r.skip_padding(base, "end")
        return cls(flags, message_class, correlation_id, body_type, application_tag, privacy, hash_alg,
                   enc_alg, label, extension, body, body_tail)
