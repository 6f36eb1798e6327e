"""What a topic stores and what a subscription reads of it.

``EntryTable`` holds a topic's entries as columns (about 33 bytes an entry, whatever the
payload), so that a backlog of millions of entries costs tens of megabytes, not gigabytes:
Python objects for each entry cost about 210 bytes. ``Entry`` is one entry as the broker
handles it: a new one before it is stored, or a view the table makes on demand.
``EntryLog`` is the part of a topic a subscription reads: the entries, the positions that bound
them and the ids messages carry. ``topics.Topic`` is one; subscriptions know the log only
through this ``Protocol``, so that a topic can hold its subscriptions without the two modules
importing each other.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import Protocol, overload

from .key_shared import STICKY_RANGE, sticky_key_hash

__all__ = ["KEY_HASH_RANGE", "Entry", "EntryLog", "EntryTable", "PayloadSource", "key_hash"]

KEY_HASH_RANGE = STICKY_RANGE
# What Pulsar routes a message without a key by (Commands.peekStickyKey's NONE_KEY).
NONE_KEY = b"NONE_KEY"

# The offset column's values that are not places in the log.
HELD = -1  # the payload is still in memory (not written yet, or no log at all)
HOLE = -2  # no entry: lost to damage in the log (repaired), or its write failed


_NONE_KEY_HASH = sticky_key_hash(NONE_KEY)


def key_hash(key: bytes) -> int:
    """The Key_Shared hash of a key (31 bits; each selector reduces it to its own range)."""
    return sticky_key_hash(key) if key else _NONE_KEY_HASH


class PayloadSource(Protocol):
    """Where a persisted entry's payload is read back from (the log, through a cache)."""

    def read_payload(self, offset: int, size: int) -> bytes: ...

    def read_key(self, offset: int, size: int) -> bytes:
        """The key stored right before a payload (needed only to rewrite its record)."""
        ...


class Entry:
    """One stored entry: a single message or a whole batch, kept as the bytes the producer sent.

    ``payload`` is the frame's payload section (magic, checksum, metadata, data), so it is
    forwarded to consumers without re-encoding. ``key`` is what Key_Shared routes on (its slot:
    ``key_hash``).

    Until it is persisted an entry holds its payload; once it is in the log only where it is
    (``offset`` in ``source``) is kept, and ``payload`` and ``key`` read it back, so that a
    backlog costs disk, not memory.
    """

    __slots__ = ("entry_id", "_payload", "num_messages", "is_batch", "publish_time", "_key",
                 "key_hash", "key_size", "size", "offset", "source")

    def __init__(self, entry_id: int, payload: bytes, num_messages: int, is_batch: bool,
                 publish_time: int, key: bytes, *, size: int | None = None) -> None:
        self.entry_id = entry_id
        self._payload: bytes | None = payload
        self.num_messages = num_messages
        self.is_batch = is_batch
        self.publish_time = publish_time
        self._key: bytes | None = key
        self.key_hash = key_hash(key)
        self.key_size = len(key)
        self.size = len(payload) if size is None else size
        self.offset = HELD
        self.source: PayloadSource | None = None

    @classmethod
    def in_log(cls, entry_id: int, source: PayloadSource, offset: int, size: int,
               num_messages: int, is_batch: bool, publish_time: int, key: bytes) -> Entry:
        """An entry whose payload is only in the log."""
        entry = cls(entry_id, b"", num_messages, is_batch, publish_time, key, size=size)
        entry.stored(source, offset)
        return entry

    @property
    def payload(self) -> bytes:
        if self._payload is not None:
            return self._payload
        assert self.source is not None
        return self.source.read_payload(self.offset, self.size)

    @property
    def key(self) -> bytes:
        if self._key is not None:
            return self._key
        if not self.key_size:
            return b""
        assert self.source is not None
        return self.source.read_key(self.offset - self.key_size, self.key_size)

    def stored(self, source: PayloadSource, offset: int) -> None:
        """The payload is now at ``offset`` in ``source``; drop the copy in memory."""
        self.source, self.offset, self._payload = source, offset, None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return ((self.entry_id, self.num_messages, self.is_batch, self.publish_time, self.key,
                 self.payload) == (other.entry_id, other.num_messages, other.is_batch,
                                   other.publish_time, other.key, other.payload))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = "memory" if self._payload is not None else f"log@{self.offset}"
        return (f"Entry(entry_id={self.entry_id}, size={self.size}, "
                f"num_messages={self.num_messages}, {where})")


def _view(entry_id: int, payload: bytes | None, num_messages: int, is_batch: bool,
          publish_time: int, key: bytes | None, slot: int, key_size: int, size: int,
          offset: int, source: PayloadSource | None) -> Entry:
    entry = Entry.__new__(Entry)
    entry.entry_id, entry._payload, entry.num_messages = entry_id, payload, num_messages
    entry.is_batch, entry.publish_time, entry._key = is_batch, publish_time, key
    entry.key_hash, entry.key_size, entry.size = slot, key_size, size
    entry.offset, entry.source = offset, source
    return entry


class EntryTable:
    """A topic's entries by position (``first_id`` is the id of position 0), as columns.

    It reads as a sequence of ``Entry | None`` (None: a hole, an id with no entry); each
    item is made when asked for. Entries whose payload is not in the log yet keep it (and their
    key) in ``_held`` until ``stored`` says where it was written. Deleting positions does not
    move ``first_id``: as with a list and a separate counter, the caller does.
    """

    def __init__(self) -> None:
        self.first_id = 0
        self.source: PayloadSource | None = None
        self._offset = array("q")
        self._size = array("I")
        self._count = array("i")
        self._time = array("q")
        self._slot = array("I")
        self._key_size = array("I")
        self._batch = bytearray()
        self._held: dict[int, tuple[bytes, bytes]] = {}  # entry id -> (payload, key)

    def __len__(self) -> int:
        return len(self._offset)

    # --- reading ---------------------------------------------------------------------------

    def _at(self, index: int) -> Entry | None:
        offset = self._offset[index]
        if offset == HOLE:
            return None
        entry_id = self.first_id + index
        payload: bytes | None = None
        key: bytes | None = None
        source = self.source
        if offset == HELD:
            payload, key = self._held[entry_id]
            source = None
        return _view(entry_id, payload, self._count[index], bool(self._batch[index]),
                     self._time[index], key, self._slot[index], self._key_size[index],
                     self._size[index], offset, source)

    def get(self, entry_id: int) -> Entry | None:
        """The entry with this id (None for a hole or an id outside the table)."""
        index = entry_id - self.first_id
        if 0 <= index < len(self._offset):
            return self._at(index)
        return None

    @overload
    def __getitem__(self, index: int) -> Entry | None: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry | None]: ...

    def __getitem__(self, index: int | slice) -> Entry | None | list[Entry | None]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self._offset)))]
        return self._at(self._index(index))

    def __iter__(self) -> Iterator[Entry | None]:
        for index in range(len(self._offset)):
            yield self._at(index)

    def _index(self, index: int) -> int:
        size = len(self._offset)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("entry table index out of range")
        return index

    def is_hole(self, index: int) -> bool:
        return self._offset[index] == HOLE

    def size_at(self, index: int) -> int:
        """Payload bytes at a position (0 for a hole)."""
        return 0 if self._offset[index] == HOLE else self._size[index]

    def hole_ids(self) -> list[int]:
        first, offsets = self.first_id, self._offset
        return [first + i for i in range(len(offsets)) if offsets[i] == HOLE]

    def first_published_at(self, timestamp: int) -> int:
        """Position of the first entry published at or after ``timestamp`` (-1 if none)."""
        offsets, times = self._offset, self._time
        for index in range(len(offsets)):
            if times[index] >= timestamp and offsets[index] != HOLE:
                return index
        return -1

    # --- changing --------------------------------------------------------------------------

    def append(self, entry: Entry | None) -> None:
        if entry is None:
            self.extend_holes(1)
            return
        offset = entry.offset
        if entry._payload is not None or entry.source is None:
            offset = HELD
            self._held[self.first_id + len(self._offset)] = (entry.payload, entry.key)
        elif self.source is None:
            self.source = entry.source
        elif entry.source is not self.source:
            raise ValueError("the entries of one table are read from one source")
        self._push(offset, entry.size, entry.num_messages, entry.is_batch, entry.publish_time,
                   entry.key_hash, entry.key_size)

    def append_stored(self, source: PayloadSource, offset: int, size: int, num_messages: int,
                      is_batch: bool, publish_time: int, key: bytes) -> None:
        """An entry read back from the log: only its place and what dispatch needs are kept."""
        if self.source is None:
            self.source = source
        elif source is not self.source:
            raise ValueError("the entries of one table are read from one source")
        self._push(offset, size, num_messages, is_batch, publish_time,
                   key_hash(key), len(key))

    def _push(self, offset: int, size: int, num_messages: int, is_batch: bool,
              publish_time: int, slot: int, key_size: int) -> None:
        self._offset.append(offset)
        self._size.append(size)
        self._count.append(num_messages)
        self._time.append(publish_time)
        self._slot.append(slot)
        self._key_size.append(key_size)
        self._batch.append(1 if is_batch else 0)

    def extend_holes(self, count: int) -> None:
        if count <= 0:
            return
        self._offset.extend(array("q", [HOLE]) * count)
        self._size.extend(array("I", [0]) * count)
        self._count.extend(array("i", [0]) * count)
        self._time.extend(array("q", [0]) * count)
        self._slot.extend(array("I", [0]) * count)
        self._key_size.extend(array("I", [0]) * count)
        self._batch.extend(bytes(count))

    def __setitem__(self, index: int, entry: Entry | None) -> None:
        index = self._index(index)
        entry_id = self.first_id + index
        self._held.pop(entry_id, None)
        if entry is None:
            self._offset[index] = HOLE
            return
        if entry._payload is not None or entry.source is None:
            self._offset[index] = HELD
            self._held[entry_id] = (entry.payload, entry.key)
        else:
            if self.source is None:
                self.source = entry.source
            elif entry.source is not self.source:
                raise ValueError("the entries of one table are read from one source")
            self._offset[index] = entry.offset
        self._size[index] = entry.size
        self._count[index] = entry.num_messages
        self._time[index] = entry.publish_time
        self._slot[index] = entry.key_hash
        self._key_size[index] = entry.key_size
        self._batch[index] = 1 if entry.is_batch else 0

    def __delitem__(self, index: slice) -> None:
        start, stop, step = index.indices(len(self._offset))
        if step != 1:
            raise ValueError("only a contiguous range of entries can be deleted")
        if self._held:
            for entry_id in range(self.first_id + start, self.first_id + max(start, stop)):
                self._held.pop(entry_id, None)
        for column in (self._offset, self._size, self._count, self._time, self._slot,
                       self._key_size, self._batch):
            del column[start:stop]

    def stored(self, entry_id: int, source: PayloadSource, offset: int) -> None:
        """The payload of ``entry_id`` is now at ``offset`` in ``source``: drop the copy held."""
        index = entry_id - self.first_id
        if not 0 <= index < len(self._offset) or self._offset[index] != HELD:
            return  # trimmed, forgotten, or already stored
        if self.source is None:
            self.source = source
        elif source is not self.source:
            raise ValueError("the entries of one table are read from one source")
        self._held.pop(entry_id, None)
        self._offset[index] = offset

    def relocate(self, source: PayloadSource, offsets: Iterable[int]) -> None:
        """Every entry (holes aside, in order) was written again at these offsets."""
        self.source = source
        self._held.clear()
        column = self._offset
        index = 0
        for offset in offsets:
            while column[index] == HOLE:
                index += 1
            column[index] = offset
            index += 1


class EntryLog(Protocol):
    """A topic as its subscriptions, and the commands acting on one, read it."""

    name: str
    ledger_id: int
    durable_id: int  # highest entry id that is persisted, so dispatchable
    partition: int  # -1 for a topic that is not a partition

    @property
    def first_id(self) -> int:
        """Entry id of the oldest entry held."""
        ...

    def entry(self, entry_id: int) -> Entry | None: ...

    @property
    def last_id(self) -> int: ...

    @property
    def first_available_id(self) -> int: ...

    def find_by_publish_time(self, timestamp: int) -> int: ...
