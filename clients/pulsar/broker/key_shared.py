"""Key_Shared consumer selection as Pulsar 4 does it.

A key's hash is Murmur3_32 (x86, seed 0) of the sticky key (ordering key, else partition key),
masked to 31 bits as Pulsar's ``Murmur3_32Hash.makeHash``. What a selector does with it:

* AUTO_SPLIT (Pulsar 4's default ``subscriptionKeySharedUseConsistentHashing=true``): a hash
  ring. Each consumer has ``REPLICA_POINTS`` points, the hash of ``name \\0 index \\0 i`` (index:
  the lowest number not taken by another consumer of the same name), in 1..65535; a key goes to
  the first point at or after its hash in that range, wrapping round. A point two consumers
  hash to belongs to the one added first, then to the next, as they leave.
* STICKY: each consumer declares ranges of 0..65535; overlapping ranges are refused with
  Pulsar's messages (``ConsumerAssignError``).

The entries' column keeps the 31-bit hash, so each selector reduces it to its own range.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from functools import lru_cache
from typing import Generic, TypeVar

from protoframe.clients.pulsar.routing import murmur3_32

__all__ = ["REPLICA_POINTS", "STICKY_RANGE", "AssignError", "HashRing", "StickyRanges",
           "murmur3_32", "sticky_key_hash"]

REPLICA_POINTS = 100  # Pulsar's subscriptionKeySharedConsistentHashingReplicaPoints
STICKY_RANGE = 65536  # hashes 0..65535, as the ranges consumers declare
_RING_RANGE = 65535  # the ring's hashes are 1..65535 (Pulsar's Range.of(1, 65535))

@lru_cache(maxsize=4096)
def sticky_key_hash(key: bytes) -> int:
    """Pulsar's hash of a sticky key: Murmur3_32 masked to a non-negative Java int (cached:
    keys repeat, which is what Key_Shared is for)."""
    return murmur3_32(key) & 0x7FFFFFFF


def ring_hash(key_hash: int) -> int:
    """Where a key hash falls on the consistent-hashing ring (1..65535)."""
    return key_hash % _RING_RANGE + 1


def sticky_slot(key_hash: int) -> int:
    """Where a key hash falls in the STICKY ranges (0 is not used: Pulsar maps it to 1)."""
    return key_hash % STICKY_RANGE or 1


class AssignError(Exception):
    """A consumer's Key_Shared ranges cannot be taken (Pulsar's ``ConsumerAssignError``)."""


C = TypeVar("C")


class HashRing(Generic[C]):
    """AUTO_SPLIT consumers on a consistent-hashing ring."""

    def __init__(self, points: int = REPLICA_POINTS) -> None:
        self.points = points
        self._hashes: list[int] = []  # sorted ring positions
        self._owners: dict[int, list[C]] = {}  # position -> consumers, the first selected
        self._index: dict[int, tuple[str, int]] = {}  # id(consumer) -> (name, name index)

    def __len__(self) -> int:
        return len(self._index)

    def _point(self, name: str, index: int, i: int) -> int:
        return ring_hash(sticky_key_hash(f"{name}\0{index}\0{i}".encode()))

    def add(self, consumer: C, name: str) -> None:
        taken = {index for other, index in self._index.values() if other == name}
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        self._index[id(consumer)] = (name, index)
        for i in range(self.points):
            point = self._point(name, index, i)
            owners = self._owners.get(point)
            if owners is None:
                self._owners[point] = [consumer]
                bisect.insort(self._hashes, point)
            elif consumer not in owners:
                owners.append(consumer)

    def remove(self, consumer: C) -> None:
        place = self._index.pop(id(consumer), None)
        if place is None:
            return
        name, index = place
        for i in range(self.points):
            point = self._point(name, index, i)
            owners = self._owners.get(point)
            if owners is None or consumer not in owners:
                continue
            owners.remove(consumer)
            if not owners:
                del self._owners[point]
                del self._hashes[bisect.bisect_left(self._hashes, point)]

    def select(self, key_hash: int) -> C | None:
        if not self._hashes:
            return None
        at = bisect.bisect_left(self._hashes, ring_hash(key_hash))
        point = self._hashes[at if at < len(self._hashes) else 0]
        return self._owners[point][0]


class StickyRanges(Generic[C]):
    """STICKY consumers, each owning the hash ranges it declared."""

    def __init__(self) -> None:
        self._starts: list[int] = []  # sorted range starts
        self._ranges: dict[int, tuple[int, C, str]] = {}  # start -> (end, consumer, name)

    def __len__(self) -> int:
        return len({id(c) for _, c, _ in self._ranges.values()})

    def check(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Raise ``AssignError`` (with Pulsar's message) if these ranges cannot be taken."""
        if not ranges:
            raise AssignError("Ranges for KeyShared policy must not be empty.")
        for start, end in ranges:
            if start > end:
                raise AssignError(
                    f"Fixed hash range start > end for range: [{start},{end}]")
        ordered = sorted(ranges)
        for (a_start, a_end), (b_start, b_end) in zip(ordered, ordered[1:], strict=False):
            if b_start <= a_end:
                raise AssignError(f"Consumer's own ranges conflict: [{a_start},{a_end}] "
                                  f"overlaps with [{b_start},{b_end}]")
        for start, end in ranges:
            holder = self._overlapping(start, end)
            if holder is not None:
                raise AssignError(f"Range conflict with consumer {holder}")

    def _overlapping(self, start: int, end: int) -> str | None:
        at = bisect.bisect_right(self._starts, end)
        if at:
            other_end, _, name = self._ranges[self._starts[at - 1]]
            if other_end >= start:
                return name
        return None

    def add(self, consumer: C, name: str, ranges: Sequence[tuple[int, int]]) -> None:
        self.check(ranges)
        for start, end in ranges:
            bisect.insort(self._starts, start)
            self._ranges[start] = (end, consumer, name)

    def remove(self, consumer: C) -> None:
        for start in [s for s, (_, c, _) in self._ranges.items() if c is consumer]:
            del self._ranges[start]
            del self._starts[bisect.bisect_left(self._starts, start)]

    def select(self, key_hash: int) -> C | None:
        slot = sticky_slot(key_hash)
        at = bisect.bisect_right(self._starts, slot)
        if not at:
            return None
        end, consumer, _ = self._ranges[self._starts[at - 1]]
        return consumer if slot <= end else None
