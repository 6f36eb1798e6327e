"""A typed asyncio reader of the events in one segment.

``SegmentReader`` sends READ_SEGMENT from an offset and cuts the bytes of each SEGMENT_READ
into events (``EventScanner``), carrying an event split across two reads over to the next.
``events()`` stops at the end of a sealed segment, and by default also at the tail of an
open one; ``follow=True`` keeps polling the tail for new events instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import RequestFailed, TruncatedError

from .connection import PravegaConnection
from .errors import reply_error
from .events import EventScanner, ReadEvent

__all__ = ["DEFAULT_READ_LENGTH", "SegmentReader"]

DEFAULT_READ_LENGTH = 1 << 20


class SegmentReader:
    """Reads ``segment`` from ``offset`` (which must be where an event starts)."""

    def __init__(self, connection: PravegaConnection, segment: str, *, offset: int = 0,
                 delegation_token: str = "", read_length: int = DEFAULT_READ_LENGTH) -> None:
        self.connection = connection
        self.segment = segment
        self.delegation_token = delegation_token
        self.read_length = read_length
        self.scanner = EventScanner(offset)
        self.read_offset = offset  # where the next READ_SEGMENT starts
        self.end_of_segment = False

    @property
    def offset(self) -> int:
        """Where the next event starts."""
        return self.scanner.offset

    async def read_chunk(self) -> frames.SegmentRead:
        """One READ_SEGMENT at ``read_offset``; raises the typed error of a failure reply."""
        try:
            chunk = await self.connection.requests.read_segment(
                self.segment, self.read_offset, self.read_length, self.delegation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        self.read_offset += len(chunk.data)
        self.end_of_segment = chunk.end_of_segment
        return chunk

    async def events(self, *, follow: bool = False, poll_interval: float = 0.05
                     ) -> AsyncIterator[ReadEvent]:
        """Every event from the current offset to the end of the segment (or its tail)."""
        while not self.end_of_segment:
            chunk = await self.read_chunk()
            for event in self.scanner.feed(chunk.data):
                yield event
            if chunk.end_of_segment:
                break
            if chunk.at_tail:
                if not follow:
                    break
                if not chunk.data:
                    await asyncio.sleep(poll_interval)
        if self.end_of_segment and self.scanner.buffered:
            raise TruncatedError(
                f"{self.segment}: ends {self.scanner.buffered} bytes into an event")

    async def read_all(self) -> list[ReadEvent]:
        """``events()`` as a list."""
        return [event async for event in self.events()]
