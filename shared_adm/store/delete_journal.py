"""DeleteJournal: the deletions of stored MessagePositions (MS-MQDMPR 3.1.1.11) made durable by one append to a file
beside the SQLite store, and moved into the database later, many per transaction.

An acknowledged receive deletes its message, and the ACK's answer waits until the deletion is durable. A SQLite
commit of three DELETEs costs ~40-60 µs (eight WAL pages, locks); one pwrite(2) of their keys costs a few. So the
store makes a batch that holds deletions alone durable here, and moves the deletions into SQLite on its writer thread,
a few hundred per transaction, together with the journal offset they reach (``meta``): a restart replays exactly the
deletions the database does not yet hold.

Durability is a NORMAL commit's: when pwrite returns, the record is in the kernel's page cache, so a kill -9 of the
process cannot lose it and a power loss can (the store does not use the journal under FULL).

File: a 16-byte header (``QM2QMDEL`` and the generation, u64 little-endian), then records: u32 payload length,
u32 CRC-32 of the payload, payload = keys, each u16 length + UTF-8 queue identifier + i64 row key (the database's:
LookupIdentifier - 2**63), little-endian. A record whose length runs past the end of the file or whose CRC does not
match is a write cut short by a crash: its ACKs were never answered, and it and anything after it are ignored.
Starting a new generation empties the file first and then writes the new header, so a crash between the two leaves an
empty file, never the old records under the new generation.
"""
from __future__ import annotations

import logging
import os
import struct
import zlib

__all__ = ["DeleteJournal", "JOURNAL_SUFFIX", "HEADER_SIZE", "encode_keys", "decode_records"]

log = logging.getLogger(__name__)

JOURNAL_SUFFIX = "-deletes"
MAGIC = b"QM2QMDEL"
HEADER_SIZE = 16
_HEADER = struct.Struct("<8sQ")
_RECORD = struct.Struct("<II")
_KEY_TAIL = struct.Struct("<q")
_MAX_ID_BYTES = 0xFFFF


def encode_keys(keys) -> bytes:
    """One record holding ``keys``, (queue identifier, row key) pairs."""
    parts = []
    pack_tail = _KEY_TAIL.pack
    for queue_id, lookup in keys:
        raw = queue_id.encode("utf-8", "surrogatepass")
        if len(raw) > _MAX_ID_BYTES:
            raise ValueError(f"queue identifier of {len(raw)} bytes is too long for the delete journal")
        parts.append(len(raw).to_bytes(2, "little"))
        parts.append(raw)
        parts.append(pack_tail(lookup))
    payload = b"".join(parts)
    return _RECORD.pack(len(payload), zlib.crc32(payload)) + payload


def _decode_payload(payload: bytes) -> list[tuple[str, int]]:
    keys = []
    at, end = 0, len(payload)
    while at < end:
        if at + 2 > end:
            raise ValueError("a key is cut short")
        size = int.from_bytes(payload[at:at + 2], "little")
        at += 2
        if at + size + 8 > end:
            raise ValueError("a key is cut short")
        queue_id = payload[at:at + size].decode("utf-8", "surrogatepass")
        at += size
        keys.append((queue_id, _KEY_TAIL.unpack_from(payload, at)[0]))
        at += 8
    return keys


def decode_records(data: bytes, start: int) -> tuple[list[tuple[str, int]], int, str | None]:
    """The keys of every whole record of ``data`` from offset ``start``, the offset after the last whole record,
    and why reading stopped before the end of ``data`` (None when it did not)."""
    keys: list[tuple[str, int]] = []
    at, end = start, len(data)
    while at < end:
        if at + _RECORD.size > end:
            return keys, at, "a record header cut short"
        size, crc = _RECORD.unpack_from(data, at)
        body_at = at + _RECORD.size
        if body_at + size > end:
            return keys, at, "a record cut short"
        payload = data[body_at:body_at + size]
        if zlib.crc32(payload) != crc:
            return keys, at, "a record whose checksum does not match"
        try:
            keys.extend(_decode_payload(payload))
        except (ValueError, UnicodeDecodeError) as exc:
            return keys, at, f"a record that does not decode ({exc})"
        at = body_at + size
    return keys, at, None


class DeleteJournal:
    """The journal file of one store; every method is called with the store's lock held (one writer at a time)."""

    def __init__(self, path: os.PathLike | str) -> None:
        self.path = os.fspath(path)
        self.generation = 0
        self.end = HEADER_SIZE          # where the next record goes
        self._fd: int | None = None

    @property
    def usable(self) -> bool:
        """Open (a failed restart closes it: deletions then commit in the database)."""
        return self._fd is not None

    def read_unapplied(self, applied_generation: int, applied_offset: int) -> tuple[list[tuple[str, int]], int]:
        """The keys recorded and not yet applied to the database (meta says how far it got in which generation),
        and the generation found (0: no journal). Reading stops at a record cut short by a crash."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return [], 0
        if len(data) < HEADER_SIZE:
            return [], 0                # emptied for a new generation, its header not yet written: nothing
        magic, generation = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise ValueError(f"{self.path}: not a qm2qm delete journal (bad magic {magic!r})")
        start = HEADER_SIZE
        if generation == applied_generation:
            start = max(HEADER_SIZE, min(applied_offset, len(data)))
        keys, stop, why = decode_records(data, start)
        if why is not None:
            log.warning("%s: ignored %d bytes from offset %d: %s (a write cut short by a crash; its deletions were "
                        "never acknowledged)", self.path, len(data) - stop, stop, why)
        return keys, generation

    def start(self, generation: int) -> None:
        """Open the file and begin ``generation``, empty: truncate first, then write the header."""
        if self._fd is None:
            # 0644 less the umask, as SQLite creates the database beside it
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        self.restart(generation)

    def restart(self, generation: int) -> None:
        """Begin ``generation`` in the open file (every record before is applied to the database)."""
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, _HEADER.pack(MAGIC, generation), 0)
        self.generation = generation
        self.end = HEADER_SIZE

    def append(self, record: bytes) -> int:
        """Write one record (encode_keys) at the end; returns the offset after it. A short write (a full disk) is
        undone and raised as OSError: nothing after it may follow a partial record."""
        written = os.pwrite(self._fd, record, self.end)
        if written != len(record):
            os.ftruncate(self._fd, self.end)
            raise OSError(f"{self.path}: short write ({written} of {len(record)} bytes)")
        self.end += written
        return self.end

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
