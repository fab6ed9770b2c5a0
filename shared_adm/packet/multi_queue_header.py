"""MultiQueueFormatHeader (MS-MQMQ 2.2.20.1) with MQFAddressHeader (2.2.20.2), MQFSignatureHeader (2.2.20.3)
and MQFFormatNameElement (2.2.18.1.4).

Alignment is relative to the MultiQueueFormatHeader start (itself 4-aligned in the packet): a private
name's GUID and a DL GUID start on a 4-byte boundary (2.2.18.1.4.2, 2.2.18.1.7.2), and so does a public GUID
(the spec is silent; 4-aligned like the other GUIDs), a direct name on a 2-byte boundary, each
FormatNameList ends on a 4-byte boundary and HeaderSize counts that padding. The Signature block is
padded to 4 at the end as every header is (2.2.19.1). Layout UNVERIFIED against a Windows capture.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from shared_adm.packet.format_names import DirectName, DistributionListName, FormatName, PrivateName, PublicName
from shared_adm.packet.layout import (
    MQF_ADDRESS_HEADER, MQF_ADMIN_ID, MQF_DESTINATION_ID, MQF_DIRECT, MQF_DISTRIBUTION_LIST, MQF_PRIVATE,
    MQF_PUBLIC, MQF_RESPONSE_ID, MQF_SIGNATURE_HEADER, MQF_SIGNATURE_ID, U16, U32, ZEROS, pad4,
)
from shared_adm.packet.reader import Reader, encode_wstring

ADDRESS_HEADER_IDS = (("Destination", MQF_DESTINATION_ID), ("Administration", MQF_ADMIN_ID),
                      ("Response", MQF_RESPONSE_ID))


def _pack_element(name: FormatName, offset: int, out: list[bytes]) -> int:
    """Append one MQFFormatNameElement at ``offset`` (relative to the header start); return the new offset."""
    if isinstance(name, PublicName):
        chunk = U16.pack(MQF_PUBLIC) + ZEROS[:pad4(offset + 2)] + name.queue.bytes_le
    elif isinstance(name, PrivateName):
        chunk = (U16.pack(MQF_PRIVATE) + ZEROS[:pad4(offset + 2)] + name.queue_manager.bytes_le
                 + U32.pack(name.identifier))
    elif isinstance(name, DistributionListName):
        chunk = U16.pack(MQF_DISTRIBUTION_LIST) + ZEROS[:pad4(offset + 2)] + name.list_identifier.bytes_le
    else:
        chunk = U16.pack(MQF_DIRECT) + ZEROS[:(offset + 2) & 1] + encode_wstring(
            name.address, "MultiQueueFormatHeader", "MQFDirectQueueFormatName")
    out.append(chunk)
    return offset + len(chunk)


def _parse_element(r: Reader, base: int, where: str) -> FormatName:
    at = r.pos
    (format_type,) = r.unpack(U16, where + ".FormatType")
    if format_type == MQF_PUBLIC:
        r.skip_padding(base, where + ".PublicQueueIdentifier")
        return PublicName(r.guid(where + ".PublicQueueIdentifier"))
    if format_type == MQF_PRIVATE:
        r.skip_padding(base, where + ".SourceQueueManager")
        qm = r.guid(where + ".SourceQueueManager")
        return PrivateName(qm, r.unpack(U32, where + ".PrivateQueueIdentifier")[0])
    if format_type == MQF_DISTRIBUTION_LIST:
        r.skip_padding(base, where + ".DistributionListIdentifier")
        return DistributionListName(r.guid(where + ".DistributionListIdentifier"))
    if format_type == MQF_DIRECT:
        if (r.pos - base) & 1:
            r.take(1, where + ".DirectFormatName padding")
        return DirectName(r.wstring_until_nul(where + ".DirectFormatName"))
    raise r.error(where + ".FormatType", f"{format_type:#06x} is not 1, 2, 3 or 6", at)


@dataclass(slots=True)
class MultiQueueFormatHeader:
    """MS-MQMQ 2.2.20.1: Destination, Administration, Response MQFAddressHeaders + MQFSignatureHeader."""
    destination: list[FormatName] = field(default_factory=list)
    administration: list[FormatName] = field(default_factory=list)
    response: list[FormatName] = field(default_factory=list)
    signature: bytes = b""
    reserved: tuple[int, int, int, int] = (0, 0, 0, 0)

    def pack(self) -> bytes:
        """The header bytes, a multiple of 4 long."""
        out: list[bytes] = []
        offset = 0
        for (_, header_id), names, reserved in zip(ADDRESS_HEADER_IDS,
                                                    (self.destination, self.administration, self.response),
                                                    self.reserved):
            elements: list[bytes] = []
            end = offset + MQF_ADDRESS_HEADER.size
            for name in names:
                end = _pack_element(name, end, elements)
            elements.append(ZEROS[:pad4(end)])
            end += pad4(end)
            out.append(MQF_ADDRESS_HEADER.pack(end - offset, header_id, reserved, len(names)))
            out += elements
            offset = end
        out.append(MQF_SIGNATURE_HEADER.pack(MQF_SIGNATURE_ID, self.reserved[3], len(self.signature)))
        out += (self.signature, ZEROS[:pad4(len(self.signature))])
        return b"".join(out)

    @classmethod
    def parse(cls, r: Reader) -> MultiQueueFormatHeader:
        """Parse at the reader's cursor; HeaderSize must match the elements it announces."""
        base = r.pos
        lists, reserved = [], []
        for name, header_id in ADDRESS_HEADER_IDS:
            at = r.pos
            size, hid, res, count = r.unpack(MQF_ADDRESS_HEADER, name + ".HeaderSize")
            if hid != header_id:
                raise r.error(name + ".HeaderID", f"{hid:#06x}, MUST be {header_id:#06x}", at + 4)
            if size < MQF_ADDRESS_HEADER.size or size > r.end - at:
                raise r.error(name + ".HeaderSize", f"{size} is outside 12..{r.end - at} (bytes left)", at)
            if count > (size - MQF_ADDRESS_HEADER.size) // 2:
                raise r.error(name + ".ElementCount", f"{count} elements cannot fit in HeaderSize {size}", at + 8)
            sub = Reader(r.view, r.pos, at + size, r.header, name + " MQFAddressHeader (HeaderSize)")
            names = [_parse_element(sub, base, f"{name}.FormatNameList[{i}]") for i in range(count)]
            sub.skip_padding(base, name + ".FormatNameList")
            if sub.pos != at + size:
                raise r.error(name + ".HeaderSize", f"{size} but the {count} elements and padding take "
                              f"{sub.pos - at} bytes", at)
            r.pos = sub.pos
            lists.append(names)
            reserved.append(res)
        at = r.pos
        sig_id, res, size = r.unpack(MQF_SIGNATURE_HEADER, "Signature.ID")
        if sig_id != MQF_SIGNATURE_ID:
            raise r.error("Signature.ID", f"{sig_id:#06x}, MUST be 0x015e", at)
        signature = bytes(r.take(size, "Signature.Signature"))
        r.skip_padding(base, "Signature")
        return cls(*lists, signature, (*reserved, res))
