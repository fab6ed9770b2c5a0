"""SecurityHeader (MS-MQMQ 2.2.20.6): sender id, key, signature, certificate, provider info."""
from __future__ import annotations

from dataclasses import dataclass

from shared_adm.packet.errors import PacketError
from shared_adm.packet.layout import SEC_ST, SECURITY_HEADER, SENDER_ID_TYPES, U32, ZEROS, pad4
from shared_adm.packet.reader import Reader, decode_wstring, encode_wstring, find_wchar_nul


@dataclass(slots=True)
class ProviderInfo:
    """SecurityData.ProviderInfo: ProviderType + NUL-terminated ProviderName. ``extension`` holds any bytes
    after the name's NUL (Windows appends extended security data there and sets Flags.AI)."""
    provider_type: int
    provider_name: str
    extension: bytes = b""


@dataclass(slots=True)
class SecurityHeader:
    """MS-MQMQ 2.2.20.6. SecurityData items are each aligned to 4 bytes; empty items take no space."""
    flags: int
    security_id: bytes = b""
    encryption_key: bytes = b""
    signature: bytes = b""
    sender_cert: bytes = b""
    provider_info: ProviderInfo | None = None

    def pack(self) -> bytes:
        """The header bytes, a multiple of 4 long."""
        info = b""
        if self.provider_info is not None:
            info = (U32.pack(self.provider_info.provider_type)
                    + encode_wstring(self.provider_info.provider_name, "SecurityHeader", "ProviderInfo.ProviderName")
                    + self.provider_info.extension)
        items = (self.security_id, self.encryption_key, self.signature, self.sender_cert, info)
        for name, item, limit in zip(("SenderIdSize", "EncryptionKeySize", "SignatureSize", "SenderCertSize"),
                                     items, (0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF)):
            if len(item) > limit:
                raise PacketError("SecurityHeader", name, None, f"{len(item)} bytes exceeds {limit:#x}")
        if not any(items):
            raise PacketError("SecurityHeader", "", None, "at least one SecurityData item MUST be non-empty")
        parts = [SECURITY_HEADER.pack(self.flags, *(len(i) for i in items))]
        for item in items:
            if item:
                parts += (item, ZEROS[:pad4(len(item))])
        return b"".join(parts)

    @classmethod
    def parse(cls, r: Reader) -> SecurityHeader:
        """Parse at the reader's cursor, including the padding after each SecurityData item."""
        base = r.pos
        flags, *sizes = r.unpack(SECURITY_HEADER, "fixed part")
        if flags & SEC_ST not in SENDER_ID_TYPES:
            raise r.error("Flags.ST", f"sender id type {flags & SEC_ST} is invalid (MUST be 0, 1 or 2)", base)
        if flags & SEC_ST == 0 and sizes[0]:
            raise r.error("SenderIdSize", f"{sizes[0]}, MUST be 0 when Flags.ST is 0 (no sender id)", base + 2)
        if not any(sizes):
            raise r.error("SenderIdSize", "all SecurityData sizes are zero (at least one MUST be non-zero)", base + 2)
        if sizes[3] > 0xFFFF:
            raise r.error("SenderCertSize", f"{sizes[3]} exceeds 0xFFFF", base + 8)
        names = ("SecurityID", "EncryptionKey", "Signature", "SenderCert", "ProviderInfo")
        items = []
        for name, size in zip(names, sizes):
            items.append(bytes(r.take(size, "SecurityData." + name)))
            if size:
                r.skip_padding(base, "SecurityData." + name)
        info = None
        if items[4]:
            at = r.pos - len(items[4]) - pad4(len(items[4]))
            info = _parse_provider_info(items[4], r, at)
        return cls(flags, *items[:4], info)


def _parse_provider_info(raw: bytes, r: Reader, at: int) -> ProviderInfo:
    """ProviderType, then ProviderName up to its NUL WCHAR; what follows the NUL is kept as ``extension``."""
    if len(raw) < 6:
        raise r.error("SecurityData.ProviderInfo", f"{len(raw)} bytes cannot hold ProviderType and a "
                      "NUL-terminated ProviderName", at)
    (ptype,) = U32.unpack_from(raw)
    end = find_wchar_nul(raw, 4)
    if end < 0:
        raise r.error("SecurityData.ProviderInfo.ProviderName", "no terminating NUL within ProviderInfoSize", at + 4)
    name = decode_wstring(raw[4:end + 2], r.header, "ProviderInfo.ProviderName", at + 4)
    return ProviderInfo(ptype, name, raw[end + 2:])
