"""A typed asyncio writer of events to one segment.

``SegmentWriter.open`` sends SETUP_APPEND and learns from APPEND_SETUP which of this writer's
events the segment already holds. ``write`` queues one event and returns a future of its event
number; events queued in one turn of the event loop travel in one append (a lone
APPEND_BLOCK_END, or with ``block_size`` an APPEND_BLOCK cut at that size plus its end, the
two shapes the reference allows). DATA_APPENDED acknowledges every event up to its event
number; a failure reply for the segment or a lost connection fails every unacknowledged
future with its typed error.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from uuid import UUID

from generated.pravega import frames
from runtime.errors import ConnectionClosed, RequestFailed

from .appends import NO_EVENT_NUMBER, split_into_block
from .connection import PravegaConnection
from .errors import PravegaError, reply_error
from .events import EVENT_HEADER_SIZE, frame_events

__all__ = ["MAX_APPEND_SIZE", "SegmentWriter"]

# Data per append; the whole command must stay under the 16 MiB frame limit.
MAX_APPEND_SIZE = 8 << 20
MAX_APPEND_EVENTS = 500

_SEGMENT_FAILURES = (frames.SegmentIsSealed, frames.NoSuchSegment, frames.WrongHost,
                     frames.AuthTokenCheckFailed)


class SegmentWriter:
    """Appends events to ``segment`` as writer ``writer_id`` over one connection."""

    def __init__(self, connection: PravegaConnection, segment: str, writer_id: UUID, *,
                 delegation_token: str = "", block_size: int | None = None) -> None:
        self.connection = connection
        self.segment = segment
        self.writer_id = writer_id
        self.delegation_token = delegation_token
        self.block_size = block_size
        self.last_event_number = 0  # the newest event number handed out
        self.acked_event_number = 0  # the newest event number the segment confirmed
        self.write_offset = -1  # the segment's length after the latest acknowledged append
        self._queued: deque[tuple[int, bytes, asyncio.Future[int]]] = deque()
        self._inflight: deque[tuple[int, asyncio.Future[int]]] = deque()
        self._pump: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None

    @classmethod
    async def open(cls, connection: PravegaConnection, segment: str, *,
                   writer_id: UUID | None = None, delegation_token: str = "",
                   block_size: int | None = None) -> SegmentWriter:
        """Set up appends; raises ``NoSuchSegment``, ``SegmentIsSealed``, ``WrongHost``..."""
        writer = cls(connection, segment, writer_id or uuid.uuid4(),
                     delegation_token=delegation_token, block_size=block_size)
        try:
            setup = await connection.requests.setup_append(writer.writer_id, segment,
                                                           delegation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        if setup.last_event_number != NO_EVENT_NUMBER:
            writer.last_event_number = writer.acked_event_number = setup.last_event_number
        connection.add_listener(writer._on_frame)
        connection.on_close(writer._fail)
        return writer

    @property
    def pending(self) -> int:
        """Events written but not yet acknowledged."""
        return len(self._queued) + len(self._inflight)

    def write(self, payload: bytes) -> asyncio.Future[int]:
        """Queue one event; the future gives its event number once the segment holds it."""
        if len(payload) + EVENT_HEADER_SIZE > MAX_APPEND_SIZE:
            raise ValueError(f"event of {len(payload)} bytes is over the append limit")
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._failed is not None:
            future.set_exception(self._failed)
            return future
        self.last_event_number += 1
        self._queued.append((self.last_event_number, payload, future))
        if self._pump is None:
            self._pump = asyncio.create_task(self._send_queued())
        return future

    async def flush(self) -> None:
        """Wait until every event written so far is acknowledged (or raise its error)."""
        futures = [f for _, _, f in self._queued] + [f for _, f in self._inflight]
        if futures:
            await asyncio.gather(*futures)

    async def conditional_write(self, payload: bytes, expected_offset: int) -> int:
        """Append one event only if the segment is ``expected_offset`` bytes long.

        Returns the event number; raises ``ConditionalCheckFailed`` when the length differs.
        Earlier writes are flushed first, so event numbers reach the segment in order.
        """
        await self.flush()
        if self._failed is not None:
            raise self._failed
        self.last_event_number += 1
        try:
            answer = await self.connection.requests.conditional_append(
                self.writer_id, self.last_event_number, expected_offset,
                frames.Event(data=payload))
        except RequestFailed as exc:
            raise reply_error(exc) from None
        self._acknowledged(answer)
        return answer.event_number

    async def close(self) -> None:
        """Flush, then stop listening; the connection stays open for its other users."""
        try:
            await self.flush()
        finally:
            self.connection.remove_listener(self._on_frame)

    # ---- sending ---------------------------------------------------------------------------

    async def _send_queued(self) -> None:
        try:
            await asyncio.sleep(0)  # let the caller queue the rest of this turn's events
            while self._queued and self._failed is None:
                batch: list[tuple[int, bytes, asyncio.Future[int]]] = []
                size = 0
                while self._queued and len(batch) < MAX_APPEND_EVENTS:
                    event_size = len(self._queued[0][1]) + EVENT_HEADER_SIZE
                    if batch and size + event_size > MAX_APPEND_SIZE:
                        break
                    batch.append(self._queued.popleft())
                    size += event_size
                self._inflight.extend((number, future) for number, _, future in batch)
                await self._send_append([payload for _, payload, _ in batch], batch[-1][0])
        except (ConnectionClosed, PravegaError) as exc:
            self._fail(exc)
        finally:
            self._pump = None

    async def _send_append(self, payloads: list[bytes], last_event_number: int) -> None:
        data = frame_events(payloads)
        request_id = self.connection.requests.next_id()
        if self.block_size is None:
            await self.connection.send(frames.Frame(body=frames.AppendBlockEnd(
                writer_id=self.writer_id, size_of_whole_events=len(data), data=data,
                num_events=len(payloads), last_event_number=last_event_number,
                request_id=request_id)))
            return
        block, end = split_into_block(self.writer_id, data, len(payloads), last_event_number,
                                      self.block_size, request_id)
        # Nothing may come between the two on this connection, so no await between them.
        self.connection.connection.write(frames.Frame(body=block))
        await self.connection.send(frames.Frame(body=end))

    # ---- replies ---------------------------------------------------------------------------

    def _on_frame(self, frame: frames.Frame) -> None:
        body = frame.body
        if isinstance(body, frames.DataAppended):
            if body.writer_id == self.writer_id:
                self._acknowledged(body)
        elif isinstance(body, _SEGMENT_FAILURES):
            if getattr(body, "segment", self.segment) == self.segment:
                self._fail(reply_error(body))

    def _acknowledged(self, body: frames.DataAppended) -> None:
        self.acked_event_number = max(self.acked_event_number, body.event_number)
        if body.current_segment_write_offset >= 0:
            self.write_offset = body.current_segment_write_offset
        while self._inflight and self._inflight[0][0] <= body.event_number:
            number, future = self._inflight.popleft()
            if not future.done():
                future.set_result(number)

    def _fail(self, exc: BaseException) -> None:
        if self._failed is None:
            self._failed = exc
        while self._inflight:
            _, future = self._inflight.popleft()
            if not future.done():
                future.set_exception(exc)
        while self._queued:
            _, _, future = self._queued.popleft()
            if not future.done():
                future.set_exception(exc)
