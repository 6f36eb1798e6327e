"""An event reader that is a member of a reader group.

```python
reader = await GroupReader.join(group, "reader-1", checkpoint_every=100)
events = await reader.read_available()   # what its segments hold now, from the recorded spot
await reader.checkpoint()                # store its positions in the group
await reader.close()                     # store them, free its segments, leave the group
```

A segment's position only moves past an event once the event was returned to the caller, and
is stored on ``checkpoint()``, every ``checkpoint_every`` events and on ``close()``: a reader
taking the segment over later starts there, so nothing checkpointed is read twice. A position
below a segment's truncation point moves up to it.

A segment read to its sealed end (or deleted, as a stream truncation deletes the segments before
its cut) is handed back to the group as ended; the group adds its successors once all their
predecessors ended (see ``reader_group``), and the reader takes its share of them and reads on
in the same ``read_available`` call. If the controller cannot be asked for the successors, the
reader keeps the segment (at its end) and tries again on its next ``read_available``.
"""

from __future__ import annotations

import logging
import uuid

from .connection import PravegaConnection
from .errors import NoSuchSegment, SegmentIsTruncated
from .events import EVENT_HEADER_SIZE, ReadEvent
from .reader import SegmentReader
from .reader_group import ReaderGroup
from .stream_segments import ControllerError

__all__ = ["GroupEvent", "GroupReader"]

log = logging.getLogger(__name__)

GroupEvent = tuple[str, ReadEvent]  # the segment it came from, and the event


class GroupReader:
    """Reader ``reader_id`` of ``group``; ``positions`` are those of the segments it holds."""

    def __init__(self, group: ReaderGroup, reader_id: str, *,
                 checkpoint_every: int | None = None) -> None:
        self.group = group
        self.reader_id = reader_id
        self.checkpoint_every = checkpoint_every
        self.positions: dict[str, int] = {}
        self._since_checkpoint = 0
        self.closed = False

    @property
    def connection(self) -> PravegaConnection:
        return self.group.table.connection

    @classmethod
    async def join(cls, group: ReaderGroup, reader_id: str | None = None, *,
                   checkpoint_every: int | None = None) -> GroupReader:
        """Join ``group`` and take a fair share of its free segments."""
        reader = cls(group, reader_id or uuid.uuid4().hex, checkpoint_every=checkpoint_every)
        await group.add_reader(reader.reader_id)
        await reader.rebalance()
        return reader

    @property
    def segments(self) -> list[str]:
        return sorted(self.positions)

    async def rebalance(self) -> None:
        """Give back segments over the fair share (at their current positions), then take
        free ones up to it."""
        share = await self.group.fair_share()
        for segment in self.segments[share:]:
            await self.group.record(self.reader_id, segment, self.positions.pop(segment),
                                    release=True)
        wanted = share - len(self.positions)
        if wanted > 0:
            for claim in await self.group.acquire(self.reader_id, wanted):
                self.positions[claim.segment] = claim.offset

    async def read_available(self) -> list[GroupEvent]:
        """Every event its segments hold past their positions, up to each one's tail, going
        on into the successors of the segments that end."""
        if self.closed:
            raise RuntimeError("the reader is closed")
        events: list[GroupEvent] = []
        read: set[str] = set()
        while todo := [segment for segment in self.segments if segment not in read]:
            ended = False
            for segment in todo:
                read.add(segment)
                if await self._read_held(segment, events):
                    try:
                        await self.group.end(self.reader_id, segment, self.positions[segment])
                    except ControllerError as exc:
                        # The events read are the caller's all the same; ending waits.
                        log.warning("%s: ended, successors unknown for now: %s", segment, exc)
                        continue
                    del self.positions[segment]
                    ended = True
            if not ended:
                break
            await self.rebalance()  # successors may have joined the group
        return events

    async def _read_held(self, segment: str, events: list[GroupEvent]) -> bool:
        """Read ``segment`` to its tail; whether it ended (sealed and read, or deleted)."""
        try:
            try:
                return await self._read_segment(segment, events)
            except SegmentIsTruncated as exc:
                if exc.start_offset <= self.positions[segment]:
                    raise
                # The data before the cut is gone for every reader: go on from where the
                # segment now starts, as a reader group that starts at a stream's head does.
                self.positions[segment] = exc.start_offset
                return await self._read_segment(segment, events)
        except NoSuchSegment:
            return True  # its events are gone for every reader: nothing more to wait for

    async def _read_segment(self, segment: str, events: list[GroupEvent]) -> bool:
        reader = SegmentReader(self.connection, segment, offset=self.positions[segment],
                               delegation_token=self.group.table.delegation_token)
        async for event in reader.events():
            events.append((segment, event))
            self.positions[segment] = event.offset + EVENT_HEADER_SIZE + len(event.data)
            self._since_checkpoint += 1
            if self.checkpoint_every and self._since_checkpoint >= self.checkpoint_every:
                await self.checkpoint()
        return reader.end_of_segment

    async def checkpoint(self) -> None:
        """Store the position of every segment it holds."""
        for segment, offset in sorted(self.positions.items()):
            await self.group.record(self.reader_id, segment, offset)
        self._since_checkpoint = 0

    async def close(self) -> None:
        """Store its positions, free its segments and leave the group."""
        if self.closed:
            return
        self.closed = True
        for segment, offset in sorted(self.positions.items()):
            await self.group.record(self.reader_id, segment, offset, release=True)
        self.positions.clear()
        await self.group.remove_reader(self.reader_id)
