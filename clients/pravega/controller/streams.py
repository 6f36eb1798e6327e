"""A stream's segments across scales, as the controller keeps them, without any messages.

A segment id packs the epoch that created the segment (high 32 bits) and its number (low 32).
A stream starts in epoch 0 with segments 0..N-1 splitting the routing-key space [0, 1) evenly.
A scale seals some of the current segments and creates, in the next epoch, segments numbered
after every earlier one that own exactly the key ranges sealed; the segments it did not seal
carry over. A new segment's predecessors are the sealed segments whose ranges overlap its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["KeyRange", "ScaleRefused", "StreamSegment", "StreamSegments", "pack_id"]

KeyRange = tuple[float, float]  # [low, high) of the routing-key space


class ScaleRefused(ValueError):  # noqa: N818 - a refusal of the request, answered as such
    """The scale's sealed segments or new key ranges do not fit the stream."""


def pack_id(epoch: int, number: int) -> int:
    """The segment id of segment ``number`` created in ``epoch``."""
    return (epoch << 32) | number


@dataclass
class StreamSegment:
    """One segment of a stream: its id, key range and the segments it replaced."""

    id: int
    low: float
    high: float
    predecessors: tuple[int, ...] = ()
    sealed: bool = False

    def overlaps(self, low: float, high: float) -> bool:
        return self.low < high and low < self.high


@dataclass
class StreamSegments:
    """Every segment a stream ever had, and the ids making up each epoch."""

    segments: dict[int, StreamSegment] = field(default_factory=dict)
    epochs: list[list[int]] = field(default_factory=list)
    # Every segment ever created by the scale that created each segment, so successors are
    # found without scanning the whole history.
    successors: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def even(cls, count: int) -> StreamSegments:
        """Epoch 0 of a stream created with ``count`` segments."""
        out = cls()
        for number in range(count):
            out.segments[number] = StreamSegment(number, number / count, (number + 1) / count)
        out.epochs.append(list(range(count)))
        return out

    @property
    def epoch(self) -> int:
        return len(self.epochs) - 1

    @property
    def current(self) -> list[StreamSegment]:
        """The segments of the latest epoch, in key order."""
        return self.in_epoch(self.epoch)

    def in_epoch(self, epoch: int) -> list[StreamSegment]:
        """The segments of ``epoch`` in key order (none for an epoch that never was)."""
        if not 0 <= epoch < len(self.epochs):
            return []
        return sorted((self.segments[i] for i in self.epochs[epoch]), key=lambda s: s.low)

    def scale(self, sealed: Iterable[int], ranges: Sequence[KeyRange]) -> list[StreamSegment]:
        """Seal ``sealed`` and create segments owning ``ranges``; the new segments.

        ``ScaleRefused`` (and nothing changed) unless every sealed id is a current segment and
        the new ranges, each non-empty, cover exactly the key space the sealed ones owned.
        """
        current = {s.id: s for s in self.current}
        sealed_ids = sorted(set(sealed))
        if not sealed_ids or any(i not in current for i in sealed_ids):
            raise ScaleRefused(f"sealed segments {sealed_ids} are not all current segments "
                               f"{sorted(current)}")
        if not ranges or any(not 0.0 <= low < high <= 1.0 for low, high in ranges):
            raise ScaleRefused(f"bad key ranges {list(ranges)}")
        if _covered([(current[i].low, current[i].high) for i in sealed_ids]) != \
                _covered(list(ranges)) or _overlapping(ranges):
            raise ScaleRefused(f"key ranges {list(ranges)} do not replace exactly those of "
                               f"segments {sealed_ids}")
        epoch = self.epoch + 1
        number = 1 + max(i & 0xFFFFFFFF for i in self.segments)
        created = []
        for offset, (low, high) in enumerate(sorted(ranges)):
            predecessors = tuple(i for i in sealed_ids if current[i].overlaps(low, high))
            segment = StreamSegment(pack_id(epoch, number + offset), low, high, predecessors)
            self.segments[segment.id] = segment
            created.append(segment)
        for i in sealed_ids:
            current[i].sealed = True
            self.successors[i] = [s.id for s in created if i in s.predecessors]
        kept = [i for i in current if i not in sealed_ids]
        self.epochs.append(kept + [s.id for s in created])
        return created

    def following(self, segment_id: int) -> list[StreamSegment]:
        """The segments that replaced ``segment_id`` (none while it is open)."""
        return [self.segments[i] for i in self.successors.get(segment_id, [])]

    def before(self, ids: Iterable[int]) -> set[int]:
        """Every segment that some segment of ``ids`` replaced, directly or not."""
        out: set[int] = set()
        todo = [p for i in ids for p in self.segments[i].predecessors]
        while todo:
            i = todo.pop()
            if i not in out:
                out.add(i)
                todo.extend(self.segments[i].predecessors)
        return out

    def is_cut(self, ids: Iterable[int]) -> bool:
        """Whether ``ids`` are segments of the stream whose key ranges cover [0, 1) exactly,
        none of them replacing another: a position of the stream as a whole."""
        chosen = set(ids)
        if not chosen or any(i not in self.segments for i in chosen):
            return False
        if self.before(chosen) & chosen:
            return False
        ranges = [(self.segments[i].low, self.segments[i].high) for i in chosen]
        return not _overlapping(ranges) and _covered(ranges) == [(0.0, 1.0)]


def _covered(ranges: list[KeyRange]) -> list[KeyRange]:
    """The union of ``ranges`` as sorted disjoint intervals (adjacent ones merged)."""
    out: list[KeyRange] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _overlapping(ranges: Sequence[KeyRange]) -> bool:
    ordered = sorted(ranges)
    return any(a[1] > b[0] for a, b in zip(ordered, ordered[1:], strict=False))
