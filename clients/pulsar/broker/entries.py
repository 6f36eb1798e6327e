"""What a topic stores and what a subscription reads of it.

``Entry`` is one stored entry. ``EntryLog`` is the part of a topic a subscription reads: the
entries, the positions that bound them and the ids messages carry. ``topics.Topic`` is one;
subscriptions know the log only through this ``Protocol``, so that a topic can hold its
subscriptions without the two modules importing each other.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Entry", "EntryLog", "PayloadSource"]


class PayloadSource(Protocol):
    """Where a persisted entry's payload is read back from (the log, through a cache)."""

    def read_payload(self, offset: int, size: int) -> bytes: ...


class Entry:
    """One stored entry: a single message or a whole batch, kept as the bytes the producer sent.

    ``payload`` is the frame's payload section (magic, checksum, metadata, data), so it is
    forwarded to consumers without re-encoding. ``key`` is what Key_Shared routes on.

    Until it is persisted an entry holds its payload; once it is in the log it keeps only where
    (``stored``), and ``payload`` reads it back, so that a backlog costs disk, not memory.
    """

    __slots__ = ("entry_id", "_payload", "num_messages", "is_batch", "publish_time", "key",
                 "size", "offset", "source")

    def __init__(self, entry_id: int, payload: bytes, num_messages: int, is_batch: bool,
                 publish_time: int, key: bytes, *, size: int | None = None) -> None:
        self.entry_id = entry_id
        self._payload: bytes | None = payload
        self.num_messages = num_messages
        self.is_batch = is_batch
        self.publish_time = publish_time
        self.key = key
        self.size = len(payload) if size is None else size
        self.offset = -1
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


class EntryLog(Protocol):
    """A topic as its subscriptions, and the commands acting on one, read it."""

    name: str
    ledger_id: int
    first_id: int  # entry id of the oldest entry held
    durable_id: int  # highest entry id that is persisted, so dispatchable
    partition: int  # -1 for a topic that is not a partition

    def entry(self, entry_id: int) -> Entry | None: ...

    @property
    def last_id(self) -> int: ...

    @property
    def first_available_id(self) -> int: ...

    def find_by_publish_time(self, timestamp: int) -> int: ...
