"""One partition's log, in memory: bundles as they go out on the wire, found by seq num."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from protoframe.runtime.codec.protowire import varint_bytes

__all__ = ["LogRead", "PartitionLog", "StoredBundle"]


@dataclass(frozen=True, slots=True)
class StoredBundle:
    """A bundle's bytes with its length prefix (ready for a chunk) and the seq nums it holds."""

    first_seq: int
    last_seq: int
    sparse: bool
    entry: bytes


@dataclass(frozen=True, slots=True)
class LogRead:
    """Bundles from a seq num on, cut to a fetch size.

    ``base_seq`` is the first message of the first bundle sent (the seq num asked for when
    there is none); ``available`` counts every byte from there to the end of the log, for
    comparing with a consumer's ``min_bytes``.
    """

    chunk: bytes
    base_seq: int
    first_sparse: bool
    available: int


class PartitionLog:
    """Bundles in seq num order. Seq nums start at 1; the high-water mark is the last one."""

    def __init__(self) -> None:
        self.bundles: list[StoredBundle] = []
        self._last_seqs: list[int] = []
        self._ends: list[int] = []  # bytes of entries up to and including each bundle
        self.highwater_mark = 0

    @property
    def first_available(self) -> int:
        """The seq num of the oldest message (the next one when the log is empty)."""
        return self.bundles[0].first_seq if self.bundles else self.highwater_mark + 1

    @property
    def size(self) -> int:
        """Bytes of the stored entries."""
        return self._ends[-1] if self._ends else 0

    def append(self, bundle: bytes, first_seq: int, last_seq: int, sparse: bool) -> None:
        """Store an encoded bundle holding ``first_seq``..``last_seq`` (above the high-water
        mark; the caller checks)."""
        assert self.highwater_mark < first_seq <= last_seq
        entry = varint_bytes(len(bundle)) + bundle
        self.bundles.append(StoredBundle(first_seq, last_seq, sparse, entry))
        self._last_seqs.append(last_seq)
        self._ends.append(self.size + len(entry))
        self.highwater_mark = last_seq

    def read(self, from_seq: int, max_bytes: int) -> LogRead:
        """Up to ``max_bytes`` of entries from the bundle holding ``from_seq`` on.

        The cut is not rounded to a bundle, as TANK's is not: the last bundle may arrive in
        part, and the consumer asks again from it.
        """
        index = bisect.bisect_left(self._last_seqs, from_seq)
        if index == len(self.bundles):
            return LogRead(b"", from_seq, False, 0)
        start = self._ends[index - 1] if index else 0
        parts: list[bytes] = []
        taken = 0
        for stored in self.bundles[index:]:
            if taken >= max_bytes:
                break
            parts.append(stored.entry)
            taken += len(stored.entry)
        first = self.bundles[index]
        chunk = b"".join(parts)[:max_bytes]
        return LogRead(chunk, first.first_seq, first.sparse, self.size - start)
