"""Events as they sit in a segment and travel in append data: ``i32 0``, ``i32 length``, payload.

Writers frame each payload with ``frame_events``; readers cut segment bytes back into events
with ``EventScanner``, which keeps an event split across two reads until its rest arrives.
``drop_events`` cuts the first records off append data (the store, for events it holds).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import SizeMismatchError

__all__ = ["EVENT_HEADER_SIZE", "EventScanner", "ReadEvent", "drop_events", "frame_events"]

EVENT_HEADER_SIZE = 8
_HEADER = struct.Struct(">ii")


def frame_events(payloads: Iterable[bytes]) -> bytes:
    """The append data for ``payloads``: each one as a whole EVENT record, in order."""
    return frames.EventRun(events=[frames.Event(data=p) for p in payloads]).encode()


def drop_events(data: bytes, count: int) -> bytes:
    """``data`` (whole records, as appends carry them) without its first ``count`` records;
    raises ``SizeMismatchError`` if it does not hold that many."""
    pos = 0
    for index in range(count):
        if len(data) - pos < EVENT_HEADER_SIZE:
            raise SizeMismatchError(f"append data ends after {index} of {count} records")
        _, length = _HEADER.unpack_from(data, pos)
        pos += EVENT_HEADER_SIZE + length
        if length < 0 or pos > len(data):
            raise SizeMismatchError(f"record {index} of the append data does not fit it")
    return data[pos:]


@dataclass(frozen=True, slots=True)
class ReadEvent:
    """One event read back: where its record starts in the segment, and its payload."""

    offset: int
    data: bytes


class EventScanner:
    """Cuts a segment's bytes, fed in order from ``offset``, into whole events.

    A record whose type is not EVENT, or whose length is negative or over ``max_event_size``,
    raises a ``DecodeError`` subclass: the bytes are not an event stream.
    """

    def __init__(self, offset: int = 0, *, max_event_size: int = frames.DEFAULT_MAX_FRAME_SIZE
                 ) -> None:
        self.offset = offset  # segment offset of the first byte not yet returned as an event
        self.max_event_size = max_event_size
        self._pending = b""

    @property
    def buffered(self) -> int:
        """Bytes of an event that has not arrived whole yet."""
        return len(self._pending)

    def feed(self, data: bytes) -> list[ReadEvent]:
        """Add the next bytes of the segment; return the events they complete."""
        buf = self._pending + data if self._pending else data
        pos, end = 0, len(buf)
        events: list[ReadEvent] = []
        while end - pos >= EVENT_HEADER_SIZE:
            _, length = _HEADER.unpack_from(buf, pos)
            if length < 0 or length > self.max_event_size:
                raise SizeMismatchError(
                    f"event at offset {self.offset}: length {length} is not a valid size")
            if end - pos < EVENT_HEADER_SIZE + length:
                break
            event, after = frames.Event.decode_from(buf, pos, pos + EVENT_HEADER_SIZE + length)
            events.append(ReadEvent(self.offset, event.data))
            self.offset += after - pos
            pos = after
        self._pending = buf[pos:]
        return events
