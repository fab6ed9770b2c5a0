"""Arrays of bytes and WCHARs under impacket's NDR declarations, unpacked in one step (C706 14.3.3; MS-RPCE 2.2.5).

impacket's NDRArray.unpack reads an array one item at a time, about a microsecond a byte here: one 8 MB
R_QMCreateRemoteCursor whose ignored transfer buffer carried a body held the event loop (every connection) for
10 s. ScalarArrayItems reads the same items with one C call and gives what impacket's loop gives: the same list,
the same count of bytes consumed, the same struct.error where an item is cut short (tests/rpc/test_ndr_arrays.py
compares the two on every layout, NDR and NDR64). Under items_skipped() a parameter the server ignores is still
checked and stepped over the same way, but its arrays are left empty ([]): no list of a million one-byte items."""
from __future__ import annotations

import contextlib
import contextvars
import struct
from collections.abc import Iterator
from typing import Any, Callable

from impacket.dcerpc.v5.dtypes import WSTR
from impacket.dcerpc.v5.ndr import NDRPOINTER, NDRUniConformantArray


def _bytes(data: bytes, start: int, count: int) -> list[bytes]:
    return memoryview(data)[start:start + count].cast("c").tolist()      # one-byte bytes, as unpack_from("c")


def _wchars(data: bytes, start: int, count: int) -> list[int]:
    return list(struct.unpack_from(f"<{count}H", data, start))


_KEEP_ITEMS = contextvars.ContextVar("qm2qm_ndr_array_items", default=True)


@contextlib.contextmanager
def items_skipped() -> Iterator[None]:
    """Within: every ScalarArrayItems array is read for its size and its errors only, and holds [] (for a parameter
    the processing rules ignore, like R_QMCreateRemoteCursor's transfer buffer, MS-MQMP 3.1.4.4)."""
    token = _KEEP_ITEMS.set(False)
    try:
        yield
    finally:
        _KEEP_ITEMS.reset(token)


# item format -> (its size, which is also its alignment in impacket's calculatePad; the reader of ``count`` items)
_READERS: dict[str, tuple[int, Callable[[bytes, int, int], list]]] = {"c": (1, _bytes), "<H": (2, _wchars)}


class ScalarArrayItems:
    """Mixin, first among the bases of an impacket NDRUniConformantArray or NDRUniConformantVaryingArray whose item
    is "c" or "<H": its items are read at once. Any other field or item goes to impacket's own unpack."""

    def unpack(self, fieldName: str, fieldTypeOrClass: Any, data: bytes, offset: int = 0) -> int:
        reader = _READERS.get(self.item) if isinstance(fieldTypeOrClass, str) else None
        counted_by = fieldTypeOrClass.split("*") if reader is not None else ()
        if len(counted_by) != 2:
            return super().unpack(fieldName, fieldTypeOrClass, data, offset)
        count = self.getArraySize() if isinstance(self, NDRUniConformantArray) else self[counted_by[1]]
        room = len(data) - offset
        if not count or room <= 0:
            self.fields[fieldName] = []
            return 0
        size, read = reader
        pad = self.calculatePad(self.item, offset)
        # impacket's loop reads one more item while the bytes it has read (the pad included) fall short of the
        # room left, so an array whose count outruns the stub ends where the stub does
        taken = min(count, max(1, -(-(room - pad) // size)))
        end = offset + pad + taken * size
        if end > len(data):
            struct.unpack_from(self.item, data, end - size)      # the item cut short: impacket's struct.error
        self.fields[fieldName] = read(data, offset + pad, taken) if _KEEP_ITEMS.get() else []
        return pad + taken * size


def check_varying_counts(maximum: int, offset: int, actual: int, what: str) -> None:
    """MS-RPCE 3.1.1.5.3.2.1.12: in every conformant varying case the maximum count is at least offset + actual
    count; ValueError (the codecs' RPC_X_BAD_STUB_DATA) otherwise. impacket reads the actual count alone."""
    if offset + actual > maximum:
        raise ValueError(f"{what}: offset {offset} + actual count {actual} exceed the maximum count {maximum}")


class StrictWSTR(WSTR):
    """impacket's WSTR (a [string] wchar_t*'s conformant varying string) with the check above."""

    def getDataLen(self, data: bytes, offset: int = 0) -> int:
        check_varying_counts(self["MaximumCount"], self["Offset"], self["ActualCount"], "string")
        return super().getDataLen(data, offset)


class LPWSTR(NDRPOINTER):
    """impacket's LPWSTR over StrictWSTR."""
    referent = (("Data", StrictWSTR),)
