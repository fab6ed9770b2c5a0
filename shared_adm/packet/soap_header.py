"""SoapHeader (MS-MQMQ 2.2.20.7): application SOAP header and body strings.

The spec gives no alignment inside this header. We start the body section on a 4-byte boundary and
pad the header end to 4 (every header starts 4-aligned, 2.2.19.1) — UNVERIFIED against Windows.
"""
from __future__ import annotations

from dataclasses import dataclass

from shared_adm.packet.layout import SOAP_BODY_SECTION_ID, SOAP_HEADER_SECTION_ID, SOAP_SECTION, ZEROS, pad4
from shared_adm.packet.reader import Reader, encode_wstring


@dataclass(slots=True)
class SoapHeader:
    """MS-MQMQ 2.2.20.7. A string is None when its DataLength is 0."""
    header: str | None
    body: str | None
    reserved: int = 0
    reserved1: int = 0

    def pack(self) -> bytes:
        """The header bytes, a multiple of 4 long."""
        head = b"" if self.header is None else encode_wstring(self.header, "SoapHeader", "Header")
        body = b"" if self.body is None else encode_wstring(self.body, "SoapHeader", "Body")
        return b"".join((
            SOAP_SECTION.pack(SOAP_HEADER_SECTION_ID, self.reserved, len(head) // 2), head,
            ZEROS[:pad4(len(head))],
            SOAP_SECTION.pack(SOAP_BODY_SECTION_ID, self.reserved1, len(body) // 2), body,
            ZEROS[:pad4(len(body))],
        ))

    @classmethod
    def parse(cls, r: Reader) -> SoapHeader:
        """Parse at the reader's cursor."""
        base = r.pos
        strings, reserved = [], []
        for expected, name in ((SOAP_HEADER_SECTION_ID, "Header"), (SOAP_BODY_SECTION_ID, "Body")):
            at = r.pos
            section_id, res, length = r.unpack(SOAP_SECTION, name + "SectionID")
            if section_id != expected:
                raise r.error(name + "SectionID", f"{section_id:#06x}, MUST be {expected:#06x}", at)
            if length > (r.end - r.pos) // 2:
                raise r.error(name + "DataLength", f"{length} WCHARs run past the end of the packet", at + 4)
            strings.append(r.wstring(2 * length, name) if length else None)
            reserved.append(res)
            r.skip_padding(base, name)
        return cls(strings[0], strings[1], reserved[0], reserved[1])
