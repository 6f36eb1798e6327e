"""The segment store's table segments: versioned key-value maps, in memory and optionally on disk.

A table segment is, as in Pravega, a log of updates: every put or removal is a record at the
end of the segment, and a key's *version* is the offset of the record that last wrote it. So
versions only grow, a conditional update names the version it read, and "what changed since
position P" (a delta read) is every key whose latest record lies at or after P.

With a directory, each table segment is ``<name>.table`` there: its records in the order they
happened, each batch written and flushed (to the OS, as segments are) before the update is
acknowledged, and replayed when the store starts again. A record cut short by a crash was
never acknowledged and is dropped on load. Records are ours (a tag, then the key and the value
with i32 lengths), not Pravega's on-disk format; the file starts with a settings record (the
fixed key length as its key length, no key or value bytes).

A table segment is sealed, as a stream segment is, by SEAL_SEGMENT: it keeps its entries for
reads and refuses every update and removal from then on. Sealing is a record of its own in the
file (no key or value), so it survives a restart; it does not move the segment's length.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from ..table_keys import NO_VERSION, NOT_EXISTS, TableEntry

__all__ = [
    "NOT_EXISTS",
    "NO_VERSION",
    "BadKeyVersion",
    "KeyDoesNotExist",
    "TableConflict",
    "TableEntry",
    "TableSealed",
    "TableSegment",
    "TableStore",
    "record_size",
]

log = logging.getLogger(__name__)

_PUT, _REMOVE, _SETTINGS, _SEAL = 1, 2, 3, 4
_HEADER = struct.Struct(">Bii")  # tag, key length, value length


def record_size(key: bytes, value: bytes | None) -> int:
    """How far one update moves a table segment's length (so the next version is above it)."""
    return _HEADER.size + len(key) + (len(value) if value is not None else 0)


class TableConflict(Exception):  # noqa: N818 - a refusal, not an internal failure
    """A conditional update or removal did not match; nothing was written."""

    def __init__(self, key: bytes) -> None:
        super().__init__(key)
        self.key = key


class TableSealed(Exception):  # noqa: N818 - a refusal, not an internal failure
    """An update or removal of a sealed table segment; nothing was written."""


def _check_open(segment: TableSegment) -> None:
    if segment.sealed:
        raise TableSealed(segment.name)


class KeyDoesNotExist(TableConflict):
    """A version was expected for a key that is absent."""


class BadKeyVersion(TableConflict):
    """The key's version is not the one expected (or it exists and must not)."""


@dataclass
class TableSegment:
    """One table segment: the live entries, and where each key last changed."""

    name: str
    entries: dict[bytes, TableEntry] = field(default_factory=dict)
    # The offset of each key's latest record, removals included, for delta reads.
    changed_at: dict[bytes, int] = field(default_factory=dict)
    length: int = 0
    key_length: int = 0
    # The live keys in byte order, kept as they change so a page does not sort the table.
    ordered: list[bytes] = field(default_factory=list)
    sealed: bool = False

    def check(self, key: bytes, expected: int) -> None:
        """Raise the refusal for an update of ``key`` conditional on ``expected``."""
        if expected == NO_VERSION:
            return
        current = self.entries.get(key)
        if expected == NOT_EXISTS:
            if current is not None:
                raise BadKeyVersion(key)
        elif current is None:
            raise KeyDoesNotExist(key)
        elif current.version != expected:
            raise BadKeyVersion(key)

    def apply(self, key: bytes, value: bytes | None) -> int:
        """Record a put (``value``) or a removal (``None``) at the end; the record's offset."""
        version = self.length
        self.length += record_size(key, value)
        self.changed_at[key] = version
        if value is None:
            if self.entries.pop(key, None) is not None:
                del self.ordered[bisect_left(self.ordered, key)]
        else:
            if key not in self.entries:
                insort(self.ordered, key)
            self.entries[key] = TableEntry(key, value, version)
        return version

    def keys_from(self, after: bytes | None, lowest: bytes | None = None,
                  limit: int | None = None) -> list[bytes]:
        """Live keys in byte order: above ``after`` and at or above ``lowest`` (each when
        given), at most ``limit`` of them."""
        start = bisect_right(self.ordered, after) if after is not None else 0
        if lowest is not None:
            start = max(start, bisect_left(self.ordered, lowest))
        end = len(self.ordered) if limit is None else start + max(limit, 0)
        return self.ordered[start:end]

    def changes_since(self, position: int
                      ) -> list[tuple[int, bytes, TableEntry | None]]:
        """Each key changed at or after ``position``, by offset: the offset, the key and its
        entry (None if removed)."""
        changed = sorted((offset, key) for key, offset in self.changed_at.items()
                         if offset >= position)
        return [(offset, key, self.entries.get(key)) for offset, key in changed]


class TableStore:
    """Every table segment of one store; ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.segments: dict[str, TableSegment] = {}
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._load()

    def get(self, name: str) -> TableSegment | None:
        """The table segment called ``name``, if it exists."""
        return self.segments.get(name)

    def create(self, name: str, key_length: int = 0) -> TableSegment | None:
        """Create an empty table segment; None if one of that name exists."""
        if name in self.segments:
            return None
        segment = TableSegment(name, key_length=key_length)
        self.segments[name] = segment
        if self.directory is not None:
            self._path(name).write_bytes(_HEADER.pack(_SETTINGS, key_length, 0))
        return segment

    def seal(self, segment: TableSegment) -> None:
        """Refuse further updates and removals of ``segment`` (sealing twice is harmless)."""
        if segment.sealed:
            return
        if self.directory is not None:
            with self._path(segment.name).open("ab") as file:
                file.write(_HEADER.pack(_SEAL, 0, 0))
                file.flush()
        segment.sealed = True

    def delete(self, name: str) -> bool:
        """Forget a table segment; False if there was none."""
        if self.segments.pop(name, None) is None:
            return False
        if self.directory is not None:
            self._path(name).unlink(missing_ok=True)
        return True

    def put(self, segment: TableSegment,
            updates: Sequence[tuple[bytes, bytes, int]]) -> list[int]:
        """Write ``(key, value, expected_version)`` updates, all or none; their versions.

        Every condition is checked against the segment as the batch finds it before anything
        is written, so a refusal (``KeyDoesNotExist``, ``BadKeyVersion``) leaves it unchanged.
        A sealed segment refuses with ``TableSealed``.
        """
        _check_open(segment)
        for key, _, expected in updates:
            segment.check(key, expected)
        self._persist(segment, ((key, value) for key, value, _ in updates))
        return [segment.apply(key, value) for key, value, _ in updates]

    def remove(self, segment: TableSegment, keys: Sequence[tuple[bytes, int]]) -> None:
        """Remove ``(key, expected_version)`` keys, all or none; an absent key removed
        unconditionally is no error (and no record); ``TableSealed`` if sealed."""
        _check_open(segment)
        for key, expected in keys:
            segment.check(key, expected)
        present = [key for key, _ in keys if key in segment.entries]
        self._persist(segment, ((key, None) for key in present))
        for key in present:
            segment.apply(key, None)

    # ---- the directory -------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{quote(name, safe='')}.table"

    def _persist(self, segment: TableSegment,
                 records: Iterable[tuple[bytes, bytes | None]]) -> None:
        if self.directory is None:
            return
        out = bytearray()
        for key, value in records:
            tag = _PUT if value is not None else _REMOVE
            data = value if value is not None else b""
            out += _HEADER.pack(tag, len(key), len(data)) + key + data
        if out:
            with self._path(segment.name).open("ab") as file:
                file.write(out)
                file.flush()

    def _load(self) -> None:
        assert self.directory is not None
        for path in sorted(self.directory.glob("*.table")):
            name = unquote(path.name.removesuffix(".table"))
            segment = TableSegment(name)
            data = path.read_bytes()
            position = 0
            if len(data) >= _HEADER.size and data[0] == _SETTINGS:
                segment.key_length = max(_HEADER.unpack_from(data)[1], 0)
                position = _HEADER.size
            while position + _HEADER.size <= len(data):
                tag, key_size, value_size = _HEADER.unpack_from(data, position)
                end = position + _HEADER.size + key_size + value_size
                if tag not in (_PUT, _REMOVE, _SEAL) or key_size < 0 or value_size < 0 \
                        or end > len(data):
                    break
                if tag == _SEAL:
                    segment.sealed = True
                    position = end
                    continue
                key = data[position + _HEADER.size:position + _HEADER.size + key_size]
                value = data[position + _HEADER.size + key_size:end]
                segment.apply(key, value if tag == _PUT else None)
                position = end
            if position < len(data):
                # A record the crash cut short: its update was never acknowledged.
                log.warning("table segment %s: dropping %d bytes of an unfinished record",
                            name, len(data) - position)
                with path.open("r+b") as file:
                    file.truncate(position)
            self.segments[name] = segment
