"""A reader group: readers sharing a stream's segments, its state in a table segment.

```python
group = await ReaderGroup.create(connection, "scope", "group", segments)  # or .join(...)
reader = await GroupReader.join(group, "reader-1")     # see group_reader.py
```

Each change of a segment's entry reads the entry and puts it back conditioned on the version
read; a ``TableKeyBadVersion`` means another reader changed it in between, so the change is
decided again on the fresh entry (``conflicts`` counts these retries).

A segment read to its sealed end is marked ended and never held again. Its successors (asked of
``controller``) join the group, free and at offset 0, once every one of their predecessors has
ended, as in Pravega: events of one routing key are then never read out of order. Each reader
marks its segment ended before it looks at the others, so of two readers ending the last two
predecessors at once at least one sees both ended, and the successor is added (once: the put
is conditional on the key not existing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .connection import PravegaConnection
from .errors import PravegaError, SegmentAlreadyExists, TableKeyBadVersion
from .group_state import (
    READER_PREFIX,
    SEGMENT_PREFIX,
    SegmentClaim,
    decode_claim,
    encode_claim,
    group_table_name,
    reader_key,
    segment_key,
)
from .stream_segments import successors
from .table_keys import NOT_EXISTS
from .tables import TableSegmentClient

__all__ = ["ClaimChange", "ReaderGroup", "SegmentNotHeld"]

# Given a segment's current entry: the (owner, offset) to write, or None to leave it.
ClaimChange = Callable[[SegmentClaim], tuple[str | None, int] | None]

MAX_ATTEMPTS = 32


class SegmentNotHeld(PravegaError):
    """A reader tried to record or release a segment that another reader (or none) holds."""


class ReaderGroup:
    """The reader group whose state is the table segment ``table``."""

    def __init__(self, table: TableSegmentClient, scope: str, name: str, *,
                 controller: str | None = None) -> None:
        self.table = table
        self.scope = scope
        self.name = name
        self.controller = controller  # asked for successors; None: ended segments have none
        self.conflicts = 0

    @classmethod
    async def create(cls, connection: PravegaConnection, scope: str, name: str,
                     segments: Sequence[str], *, start_offsets: Sequence[int] | None = None,
                     controller: str | None = None) -> ReaderGroup:
        """Create the group for ``segments`` (free, read from ``start_offsets`` or 0), or
        join it if it exists: entries already there, with their positions, are kept."""
        table_name = group_table_name(scope, name)
        try:
            table = await TableSegmentClient.create(connection, table_name)
        except SegmentAlreadyExists:
            table = TableSegmentClient(connection, table_name)
        offsets = list(start_offsets) if start_offsets is not None else [0] * len(segments)
        if len(offsets) != len(segments):
            raise ValueError("one start offset per segment")
        group = cls(table, scope, name, controller=controller)
        for segment, offset in zip(segments, offsets, strict=True):
            await group._add_segment(segment, offset)
        return group

    @classmethod
    def join(cls, connection: PravegaConnection, scope: str, name: str, *,
             controller: str | None = None) -> ReaderGroup:
        """The existing group ``scope``/``name`` (its requests fail if there is none)."""
        return cls(TableSegmentClient(connection, group_table_name(scope, name)), scope, name,
                   controller=controller)

    async def _add_segment(self, segment: str, offset: int) -> None:
        try:
            await self.table.put(segment_key(segment), encode_claim(None, offset),
                                 version=NOT_EXISTS)
        except TableKeyBadVersion:
            pass  # another process added it first: its entry wins

    async def claims(self) -> dict[str, SegmentClaim]:
        """Every segment's entry, by segment name."""
        claims: dict[str, SegmentClaim] = {}
        async for entry in self.table.entries():
            if entry.key.startswith(SEGMENT_PREFIX):
                segment = entry.key[len(SEGMENT_PREFIX):].decode()
                claims[segment] = decode_claim(segment, entry.value, entry.version)
        return claims

    async def readers(self) -> list[str]:
        """The members, sorted."""
        return sorted([key[len(READER_PREFIX):].decode() async for key, _ in self.table.keys()
                       if key.startswith(READER_PREFIX)])

    async def add_reader(self, reader: str) -> None:
        await self.table.put(reader_key(reader), b"")

    async def remove_reader(self, reader: str) -> None:
        await self.table.remove(reader_key(reader))

    async def fair_share(self) -> int:
        """How many segments one member should hold: an even split of those not ended,
        rounded up."""
        segments = sum(not claim.ended for claim in (await self.claims()).values())
        return math.ceil(segments / max(1, len(await self.readers())))

    async def change(self, segment: str, decide: ClaimChange, *, end: bool = False
                     ) -> SegmentClaim | None:
        """Apply ``decide`` to the segment's entry with a conditional put, deciding again on
        the fresh entry after each version conflict; the entry written, None if left.
        ``end`` marks the segment ended (``decide`` must then free it)."""
        for _ in range(MAX_ATTEMPTS):
            entry = await self.table.get(segment_key(segment))
            if entry is None:
                raise KeyError(f"{segment} is not in reader group {self.scope}/{self.name}")
            current = decode_claim(segment, entry.value, entry.version)
            wanted = decide(current)
            if wanted is None:
                return None
            ended = end or current.ended
            try:
                version = await self.table.put(segment_key(segment),
                                               encode_claim(*wanted, ended=ended),
                                               version=current.version)
            except TableKeyBadVersion:
                self.conflicts += 1
                continue
            return SegmentClaim(segment, wanted[0], wanted[1], version, ended)
        raise PravegaError(f"{segment}: still conflicting after {MAX_ATTEMPTS} attempts")

    async def acquire(self, reader: str, count: int) -> list[SegmentClaim]:
        """Take up to ``count`` free segments for ``reader``; those it got."""
        taken: list[SegmentClaim] = []
        for claim in (await self.claims()).values():
            if len(taken) >= count:
                break
            if claim.owner is not None or claim.ended:
                continue
            got = await self.change(claim.segment,
                                    lambda c: (reader, c.offset)
                                    if c.owner is None and not c.ended else None)
            if got is not None:
                taken.append(got)
        return taken

    async def reader_offline(self, reader: str) -> list[str]:
        """Free every segment ``reader`` holds, at its last recorded position, and drop it
        from the members: for a reader that died without ``close()``. Events it read after
        its last checkpoint are read again by the next holder. The segments freed."""
        freed: list[str] = []
        for claim in (await self.claims()).values():
            if claim.owner != reader:
                continue
            got = await self.change(claim.segment,
                                    lambda c: (None, c.offset) if c.owner == reader else None)
            if got is not None:
                freed.append(claim.segment)
        await self.remove_reader(reader)
        return sorted(freed)

    async def record(self, reader: str, segment: str, offset: int, *, release: bool = False
                     ) -> None:
        """Store ``reader``'s position in ``segment``; ``release`` also frees the segment.
        ``SegmentNotHeld`` if ``reader`` does not hold it."""
        def decide(claim: SegmentClaim) -> tuple[str | None, int]:
            if claim.owner != reader:
                raise SegmentNotHeld(f"{segment} is held by {claim.owner!r}, not {reader!r}")
            return (None if release else reader, offset)

        await self.change(segment, decide)

    async def end(self, reader: str, segment: str, offset: int) -> list[str]:
        """Mark ``segment``, which ``reader`` holds and read to its end at ``offset``, ended;
        then add each of its successors whose predecessors have all ended. The successors
        added (by this call, or by another reader's racing with it).

        The successors are asked for first: if the controller cannot be reached, this raises
        and the segment stays held, to be ended again later, rather than ending with nobody
        left to add what follows it.
        """
        following = await successors(self.controller, segment) \
            if self.controller is not None else {}

        def decide(claim: SegmentClaim) -> tuple[str | None, int]:
            if claim.owner != reader:
                raise SegmentNotHeld(f"{segment} is held by {claim.owner!r}, not {reader!r}")
            return (None, offset)

        await self.change(segment, decide, end=True)
        if not following:
            return []
        claims = await self.claims()
        added = []
        for successor, predecessors in sorted(following.items()):
            # A predecessor the group never had is not the group's to wait for.
            if all(claims[p].ended for p in predecessors if p in claims):
                await self._add_segment(successor, 0)
                added.append(successor)
        return added
