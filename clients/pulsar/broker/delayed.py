"""Delayed delivery: a Shared or Key_Shared subscription holds a message whose metadata has
``deliver_at_time`` until that time (Pulsar ignores it on Exclusive and Failover subscriptions,
and so does this broker).

The time is read from the entry's own metadata when the subscription first reads the entry, so
nothing is stored besides the log: after a restart the cursor reads the unacknowledged entries
again and holds the ones not yet due. The index of held entries is bounded
(``Limits.max_delayed_messages`` per subscription): when it is full, reading stops at the next
delayed entry until held ones fall due, rather than delivering anything early.
"""

from __future__ import annotations

import heapq
import struct

from protoframe.generated.pulsar.pulsar_api import MessageMetadata

from .entries import Entry

__all__ = ["DEFAULT_MAX_DELAYED", "DelayedIndex", "deliver_at_of"]

DEFAULT_MAX_DELAYED = 100_000
_MAGIC = b"\x0e\x01"
_SIZE = struct.Struct(">I")
_DELIVER_AT_KEY = b"\x98\x01"  # MessageMetadata.deliver_at_time: field 19, varint


def deliver_at_of(entry: Entry) -> int:
    """The entry's ``deliver_at_time`` (ms since the epoch), or 0 if it has none."""
    payload = entry.payload
    # magic (2), checksum (4), metadata size (4), metadata: as the producer sent it.
    if payload[:2] != _MAGIC or len(payload) < 10:
        return 0
    size = _SIZE.unpack_from(payload, 6)[0]
    # Most entries have no delay: without the field's key bytes anywhere in the metadata it
    # cannot be there, and a search is a small part of a decode's cost (a match elsewhere, in
    # a string, only costs the decode).
    if payload.find(_DELIVER_AT_KEY, 10, 10 + size) < 0:
        return 0
    try:
        metadata = MessageMetadata.decode_from(payload, 10, 10 + size)
    except Exception:  # noqa: BLE001 - stored as received: an undecodable one is not delayed
        return 0
    return metadata.deliver_at_time if metadata.has_deliver_at_time() else 0


class DelayedIndex:
    """Entries a subscription holds until their time: a heap of (deliver at, entry id)."""

    def __init__(self, limit: int = DEFAULT_MAX_DELAYED) -> None:
        self.limit = limit
        self._heap: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, entry_id: int, deliver_at: int) -> bool:
        """Hold an entry; False if the index is full."""
        if len(self._heap) >= self.limit:
            return False
        heapq.heappush(self._heap, (deliver_at, entry_id))
        return True

    def due(self, now_ms: int) -> list[int]:
        """The entries whose time has come, in the order of their times; no longer held."""
        out: list[int] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            out.append(heapq.heappop(heap)[1])
        return out

    @property
    def next_due(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
