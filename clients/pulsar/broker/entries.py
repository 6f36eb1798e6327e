"""What a topic stores and what a subscription reads of it.

``Entry`` is one stored entry. ``EntryLog`` is the part of a topic a subscription reads: the
entries, the positions that bound them and the ids messages carry. ``topics.Topic`` is one;
subscriptions know the log only through this ``Protocol``, so that a topic can hold its
subscriptions without the two modules importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Entry", "EntryLog"]


@dataclass(slots=True)
class Entry:
    """One stored entry: a single message or a whole batch, kept as the bytes the producer sent.

    ``payload`` is the frame's payload section (magic, checksum, metadata, data), so it is
    forwarded to consumers without re-encoding. ``key`` is what Key_Shared routes on.
    """

    entry_id: int
    payload: bytes
    num_messages: int
    is_batch: bool
    publish_time: int
    key: bytes


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
