"""How records sit in the broker's log file, and reading them back after damage.

Format 2 (written since the log could be damaged in the middle and still be read): the file
starts with ``FILE_MAGIC``; each record is ``u32 RECORD_MAGIC, u32 length, u32 crc32c(body),
u32 crc32c(the 12 bytes before)``, then the body. The magic lets a reader find the next record
after damaged bytes, and the header's own checksum stops a damaged length from sending it far
off before the body's checksum is even looked at.

Format 1 (the original, no file header): ``u32 length, u32 crc32c(body), body``. It is still
read; the broker rewrites the log in format 2 on every start (compaction), so a data directory
is upgraded the first time the new broker starts on it. A format-1 log cannot be resynchronised:
its first bad record is taken as the end of the readable data.

Reading streams the file through a bounded window, never the whole file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from protoframe.runtime.codec.checksums import crc32c

FILE_MAGIC = b"PFBLOG2\n"
RECORD_MAGIC = 0x50464C52  # "PFLR"
_MAGIC_BYTES = struct.pack(">I", RECORD_MAGIC)
_HEAD = struct.Struct(">III")
_HDR_CRC = struct.Struct(">I")
HEADER_SIZE = _HEAD.size + _HDR_CRC.size
_V1_HDR = struct.Struct(">II")
# A record bigger than this is taken as a damaged length (the broker's frames are far smaller).
MAX_RECORD = 256 * 1024 * 1024
_WINDOW = 1 << 20

# The payload section of a Pulsar message: magic 0x0e01, then CRC32C of everything after it.
_PULSAR_MAGIC = b"\x0e\x01"
_PULSAR_CRC = struct.Struct(">I")


def record_header(body_size: int, body_crc: int) -> bytes:
    """The header of a format-2 record whose body has this size and CRC32C."""
    head = _HEAD.pack(RECORD_MAGIC, body_size, body_crc)
    return head + _HDR_CRC.pack(crc32c(head))


def frame_record(body: bytes) -> bytes:
    return record_header(len(body), crc32c(body)) + body


def message_crc_ok(payload: bytes | memoryview) -> bool:
    """Whether a stored payload section passes Pulsar's own CRC32C (true if it carries none)."""
    if len(payload) < 6 or bytes(payload[:2]) != _PULSAR_MAGIC:
        return True
    (expected,) = _PULSAR_CRC.unpack_from(payload, 2)
    return bool(crc32c(memoryview(payload)[6:]) == expected)


@dataclass(slots=True)
class Damage:
    """Bytes of the log that hold no valid record."""

    start: int
    end: int
    tail: bool  # reaches the end of the file with nothing valid after it
    reason: str
    # Best-effort names of what the bytes held: (ledger id, entry id) of entry records whose
    # header could still be read.
    entries: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.end - self.start


class _Window:
    """Reads of a file at any offset through one bounded buffer."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self._start = 0
        self._buf = b""

    def read(self, pos: int, n: int) -> bytes:
        end = min(pos + n, self.size)
        if pos >= self._start and end <= self._start + len(self._buf):
            return self._buf[pos - self._start:end - self._start]
        if end - pos > _WINDOW:
            return os.pread(self.fd, end - pos, pos)
        self._buf = os.pread(self.fd, _WINDOW, pos)
        self._start = pos
        return self._buf[:end - pos]

    def find(self, needle: bytes, pos: int) -> int:
        """Offset of the next ``needle`` at or after ``pos``; -1 if none."""
        while pos < self.size:
            chunk = self.read(pos, _WINDOW)
            found = chunk.find(needle)
            if found >= 0:
                return pos + found
            if pos + len(chunk) >= self.size:
                return -1
            pos += len(chunk) - len(needle) + 1
        return -1


@dataclass(slots=True)
class ScannedRecord:
    offset: int  # of the record's header
    body_offset: int
    body: bytes


ScanItem = ScannedRecord | Damage


def scan(fd: int, size: int, entry_check: EntryCheck) -> Iterator[ScanItem]:
    """The valid records of a log file and the damaged ranges between them, in file order."""
    window = _Window(fd, size)
    start = window.read(0, len(FILE_MAGIC) + 4)
    # A damaged file header must not make a format-2 log read as format 1 (which cannot
    # resynchronise): a record magic right after it says format 2 as well.
    if start[:len(FILE_MAGIC)] == FILE_MAGIC or start[len(FILE_MAGIC):] == _MAGIC_BYTES:
        yield from _scan_v2(window, entry_check)
    else:
        yield from _scan_v1(window, entry_check)


class EntryCheck:
    """Decides whether a record body whose checksum holds is usable, and names damaged ones."""

    def usable(self, body: bytes, body_offset: int) -> str | None:
        """None if usable, else why not (``body_offset``: where the body is in the file)."""
        return None

    def names(self, body: bytes) -> tuple[int, int] | None:
        """(ledger id, entry id) if this body reads as an entry record."""
        return None


def _try_v2(window: _Window, pos: int, check: EntryCheck) -> tuple[ScannedRecord | None, str,
                                                                   int]:
    """The record at ``pos`` (or None with the reason) and where the next one would start."""
    head = window.read(pos, HEADER_SIZE)
    if len(head) < HEADER_SIZE:
        return None, "incomplete record header", -1
    magic, size, body_crc = _HEAD.unpack_from(head)
    if magic != RECORD_MAGIC:
        return None, "no record magic", -1
    if _HDR_CRC.unpack_from(head, _HEAD.size)[0] != crc32c(head[:_HEAD.size]):
        return None, "record header fails its checksum", -1
    body_offset = pos + HEADER_SIZE
    if size > MAX_RECORD or body_offset + size > window.size:
        return None, "record runs past the end of the file", -1
    body = window.read(body_offset, size)
    if crc32c(body) != body_crc:
        return None, "record fails its checksum", body_offset + size
    why = check.usable(body, body_offset)
    if why is not None:
        return None, why, body_offset + size
    return ScannedRecord(pos, body_offset, body), "", body_offset + size


def _scan_v2(window: _Window, check: EntryCheck) -> Iterator[ScanItem]:
    pos = len(FILE_MAGIC)
    while pos < window.size:
        record, reason, after = _try_v2(window, pos, check)
        if record is not None:
            yield record
            pos = after
            continue
        damage = Damage(pos, window.size, True, reason)
        _name_damaged(window, pos, check, damage)
        candidate = after if after > 0 else pos + 1
        while candidate < window.size:
            found = window.find(_MAGIC_BYTES, candidate)
            if found < 0:
                break
            if _try_v2(window, found, check)[0] is not None:
                damage.end, damage.tail = found, False
                break
            _name_damaged(window, found, check, damage)
            candidate = found + 1
        yield damage
        pos = damage.end


def _name_damaged(window: _Window, pos: int, check: EntryCheck, damage: Damage) -> None:
    """Add the entry a damaged record at ``pos`` probably held to ``damage``, if it says."""
    head = window.read(pos, HEADER_SIZE)
    if len(head) < HEADER_SIZE or _HEAD.unpack_from(head)[0] != RECORD_MAGIC:
        return
    size = min(_HEAD.unpack_from(head)[1], 4096)
    name = check.names(window.read(pos + HEADER_SIZE, size))
    if name is not None and name not in damage.entries:
        damage.entries.append(name)


def _scan_v1(window: _Window, check: EntryCheck) -> Iterator[ScanItem]:
    pos = 0
    while pos + _V1_HDR.size <= window.size:
        size, body_crc = _V1_HDR.unpack(window.read(pos, _V1_HDR.size))
        body_offset = pos + _V1_HDR.size
        if size == 0 or body_offset + size > window.size:
            break
        body = window.read(body_offset, size)
        reason = ("record fails its checksum" if crc32c(body) != body_crc
                  else check.usable(body, body_offset))
        if reason is not None:
            damage = Damage(pos, window.size, body_offset + size >= window.size, reason)
            name = check.names(body)
            if name is not None:
                damage.entries.append(name)
            yield damage
            return
        yield ScannedRecord(pos, body_offset, body)
        pos = body_offset + size
    if pos < window.size:
        yield Damage(pos, window.size, True, "incomplete record")
