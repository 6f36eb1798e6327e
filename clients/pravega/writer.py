"""A typed asyncio writer of events to one segment, optionally surviving a lost connection.

``write`` queues one event and returns a future of its event number; events queued in one
turn of the event loop travel in one append (a lone APPEND_BLOCK_END, or with ``block_size`` an
APPEND_BLOCK cut at that size plus its end, the two shapes the reference allows). DATA_APPENDED
acknowledges every event up to its event number.

There are two ways to get a writer:

* ``SegmentWriter.open(connection, segment)`` writes over a connection you own and may share.
  SETUP_APPEND tells it, in APPEND_SETUP, which of this writer's events the segment already
  holds. A lost connection fails every unacknowledged future with ``ConnectionClosed``.
* ``SegmentWriter.connect(host, port, segment, retry=...)`` opens a connection of its own and
  replaces it when it is lost. The store keeps each writer's last event number and stores no
  event at or below it, which makes appends idempotent. So the writer sends SETUP_APPEND
  again with the same writer id. The futures of events at or below the last event number in
  APPEND_SETUP resolve: the segment holds them, and only their DATA_APPENDED was lost. Every
  later event is sent again with its original event number, in order, before newer ones.
  Nothing is lost and nothing is stored twice. When the ``RetryPolicy`` runs out, the pending
  futures fail with ``StoreUnreachable``. A failure reply about the segment (sealed, missing,
  owned by another host, token refused) fails them at once, because retrying cannot change it.
  That refusal carries no last event number, so events in flight when the connection was lost
  may be in the segment all the same: read it to tell.

Any reply that fails the segment (above) fails every unacknowledged future with its typed
error, and the writer stays failed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from uuid import UUID

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import ConnectionClosed, RequestFailed

from .appends import NO_EVENT_NUMBER, split_into_block
from .connection import ConnectionOptions, PravegaConnection
from .errors import PravegaError, reply_error
from .events import EVENT_HEADER_SIZE, frame_events
from .reconnect import Redialer, RetryPolicy

__all__ = ["MAX_APPEND_SIZE", "SegmentWriter"]

log = logging.getLogger(__name__)

# Data per append; the whole command must stay under the 16 MiB frame limit.
MAX_APPEND_SIZE = 8 << 20
MAX_APPEND_EVENTS = 500

_SEGMENT_FAILURES = (frames.SegmentIsSealed, frames.NoSuchSegment, frames.WrongHost,
                     frames.AuthTokenCheckFailed)

# An event not yet acknowledged: its number, its payload (kept to send it again on a new
# connection) and the future that gives the number to the caller.
_Event = tuple[int, bytes, "asyncio.Future[int]"]


class SegmentWriter:
    """Appends events to ``segment`` as writer ``writer_id``; create it with ``open`` or
    ``connect`` (see the module docstring)."""

    def __init__(self, connection: PravegaConnection, segment: str, writer_id: UUID, *,
                 delegation_token: str = "", block_size: int | None = None,
                 redialer: Redialer | None = None) -> None:
        self.connection = connection  # the current one
        self.segment = segment
        self.writer_id = writer_id
        self.delegation_token = delegation_token
        self.block_size = block_size
        # With a redialer the writer owns its connections and replaces one that is lost.
        self.redialer = redialer
        self.reconnects = 0  # connections set up in place of a lost one
        self.last_event_number = 0  # the newest event number handed out
        self.acked_event_number = 0  # the newest event number the segment confirmed
        self.write_offset = -1  # the segment's length after the latest acknowledged append
        self._queued: deque[_Event] = deque()  # not sent over the current connection
        self._inflight: deque[_Event] = deque()  # sent over it, not acknowledged
        self._pump: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._attached = False  # set up on ``connection``, which was open when last seen
        self._holding = False  # a conditional append awaits its answer; appends wait
        self._failed: BaseException | None = None

    @classmethod
    async def open(cls, connection: PravegaConnection, segment: str, *,
                   writer_id: UUID | None = None, delegation_token: str = "",
                   block_size: int | None = None) -> SegmentWriter:
        """Set up appends over ``connection``, which stays yours; losing it fails the writer.

        Raises ``NoSuchSegment``, ``SegmentIsSealed``, ``WrongHost``...
        """
        writer = cls(connection, segment, writer_id or uuid.uuid4(),
                     delegation_token=delegation_token, block_size=block_size)
        writer._attach(connection, await writer._set_up(connection))
        return writer

    @classmethod
    async def connect(cls, host: str, port: int, segment: str, *,
                      writer_id: UUID | None = None, delegation_token: str = "",
                      block_size: int | None = None, retry: RetryPolicy | None = None,
                      options: ConnectionOptions | None = None) -> SegmentWriter:
        """Open a writer on a connection of its own to the store at ``host:port``, which it
        replaces when it is lost (see the module docstring); ``close`` closes it.

        The first connection is retried within ``retry`` too: this raises ``StoreUnreachable``
        if it cannot be made, and the typed error of a failure reply (``NoSuchSegment``...) at
        once.
        """
        redialer = Redialer(host, port, options=options, policy=retry)
        writer_id = writer_id or uuid.uuid4()
        connection, last = await redialer.dial(
            lambda c: _set_up_append(c, segment, writer_id, delegation_token), immediate=True)
        writer = cls(connection, segment, writer_id, delegation_token=delegation_token,
                     block_size=block_size, redialer=redialer)
        writer._attach(connection, last)
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
        self._start_pump()
        return future

    async def flush(self) -> None:
        """Wait until every event written so far is acknowledged (or raise its error)."""
        futures = [f for _, _, f in self._queued] + [f for _, _, f in self._inflight]
        if futures:
            await asyncio.gather(*futures)

    async def conditional_write(self, payload: bytes, expected_offset: int) -> int:
        """Append one event only if the segment is ``expected_offset`` bytes long.

        Returns the event number; raises ``ConditionalCheckFailed`` when the length differs.
        Every earlier write is acknowledged first, and writes made meanwhile wait for the
        answer, so event numbers reach the segment in order.

        If the connection is lost before the answer, a writer from ``open`` raises
        ``ConnectionClosed`` (the event may or may not be in the segment). A writer from
        ``connect`` waits for its new connection, whose APPEND_SETUP says whether the segment
        holds the event. If it does, the event number is returned. If not, the same
        conditional append is sent again with the same event number and expected offset.
        Since nothing else of this writer was sent in between, the answer is exact.
        """
        while self.pending:  # including writes made while we wait
            await self.flush()
        if self._failed is not None:
            raise self._failed
        self.last_event_number += 1
        number = self.last_event_number
        self._holding = True
        try:
            while True:
                connection = await self._until_attached()
                try:
                    answer = await connection.requests.conditional_append(
                        self.writer_id, number, expected_offset, frames.Event(data=payload))
                except RequestFailed as exc:
                    self._progress()  # an answer, if not the one hoped for
                    raise reply_error(exc) from None
                except ConnectionClosed as exc:
                    if self.redialer is None:
                        raise
                    self._connection_lost(connection, exc)
                    await self._until_attached()
                    if self.acked_event_number >= number:
                        return number  # the segment holds it; only DATA_APPENDED was lost
                    continue  # it never reached the segment: ask again
                self._acknowledged(answer)
                return answer.event_number
        finally:
            self._holding = False
            self._start_pump()

    async def close(self) -> None:
        """Flush, then stop: later writes fail with ``ConnectionClosed``.

        A writer from ``connect`` closes its connection (and stops reconnecting); one from
        ``open`` leaves yours open for its other users.
        """
        try:
            await self.flush()
        finally:
            self._fail(ConnectionClosed(f"{self.segment}: writer closed"))
            task = self._reconnecting
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
            if self.redialer is not None:
                await self.connection.connection.wait_closed()

    # ---- connections -----------------------------------------------------------------------

    async def _set_up(self, connection: PravegaConnection) -> int:
        return await _set_up_append(connection, self.segment, self.writer_id,
                                    self.delegation_token)

    def _attach(self, connection: PravegaConnection, last: int) -> None:
        """Send appends over ``connection``, whose APPEND_SETUP said the segment holds this
        writer's events up to ``last``."""
        self.connection = connection
        if last != NO_EVENT_NUMBER and last > self.last_event_number:
            if self.pending:
                # Events of this id that we never handed out: another writer uses the id, so
                # which of ours the segment holds cannot be told.
                self._fail(PravegaError(
                    f"{self.segment}: the segment holds event {last} of writer "
                    f"{self.writer_id}, past the {self.last_event_number} this writer handed "
                    "out; another writer is using its id"))
                return
            self.last_event_number = last  # an id that wrote before (``open`` with writer_id)
        self._attached = True
        connection.add_listener(self._on_frame)
        # What was in flight on a lost connection goes back to the head of the queue, in order.
        self._queued.extendleft(reversed(self._inflight))
        self._inflight.clear()
        if last != NO_EVENT_NUMBER:
            self.acked_event_number = max(self.acked_event_number, last)
            # The segment holds these; their DATA_APPENDED went down with the old connection.
            while self._queued and self._queued[0][0] <= last:
                number, _, future = self._queued.popleft()
                if not future.done():
                    future.set_result(number)
        if not self.pending and not self._holding:
            self._progress()  # nothing left to prove on this connection
        # Registered last: for a connection that has already closed it runs at once.
        connection.on_close(lambda reason: self._connection_lost(connection, reason))
        self._start_pump()

    def _connection_lost(self, connection: PravegaConnection, reason: BaseException) -> None:
        if connection is not self.connection or not self._attached:
            return  # an old connection, or a loss already dealt with
        self._attached = False
        connection.remove_listener(self._on_frame)
        if self._failed is not None:
            return
        if self.redialer is None:
            self._fail(reason)
            return
        connection.connection.abort()  # it may only be closing; it is of no more use
        log.info("%s: writer %s lost its connection (%s); reconnecting", self.segment,
                 self.writer_id, reason)
        self._reconnecting = asyncio.create_task(self._reconnect(reason))

    async def _reconnect(self, lost: BaseException) -> None:
        assert self.redialer is not None
        try:
            connection, last = await self.redialer.dial(self._set_up, lost=lost)
        except Exception as exc:  # StoreUnreachable, or a failure reply about the segment
            self._fail(exc)
            return
        finally:
            self._reconnecting = None
        if self._failed is not None:  # closed (or failed) while we were reconnecting
            connection.connection.abort()
            return
        self.reconnects += 1
        log.info("%s: writer %s set up again; the segment holds its events up to %d",
                 self.segment, self.writer_id, last)
        self._attach(connection, last)

    async def _until_attached(self) -> PravegaConnection:
        """The connection appends go over, once there is one; raises the writer's failure."""
        while True:
            if self._failed is not None:
                raise self._failed
            if self._attached:
                return self.connection
            task = self._reconnecting
            if task is None:
                raise ConnectionClosed(f"{self.segment}: writer has no connection")
            await asyncio.wait({task})  # ends in _attach or _fail; never raises

    # ---- sending ---------------------------------------------------------------------------

    def _start_pump(self) -> None:
        if self._pump is None and self._queued and self._may_send(self.connection):
            self._pump = asyncio.create_task(self._send_queued(self.connection))

    def _may_send(self, connection: PravegaConnection) -> bool:
        return (connection is self.connection and self._attached and not self._holding
                and self._failed is None)

    async def _send_queued(self, connection: PravegaConnection) -> None:
        try:
            await asyncio.sleep(0)  # let the caller queue the rest of this turn's events
            while self._queued and self._may_send(connection):
                batch: list[_Event] = []
                size = 0
                while self._queued and len(batch) < MAX_APPEND_EVENTS:
                    event_size = len(self._queued[0][1]) + EVENT_HEADER_SIZE
                    if batch and size + event_size > MAX_APPEND_SIZE:
                        break
                    batch.append(self._queued.popleft())
                    size += event_size
                self._inflight.extend(batch)
                await self._send_append(connection, [payload for _, payload, _ in batch],
                                        batch[-1][0])
        except ConnectionClosed as exc:
            self._connection_lost(connection, exc)
        except PravegaError as exc:
            self._fail(exc)
        finally:
            self._pump = None
            task = asyncio.current_task()
            if task is not None and not task.cancelling():
                self._start_pump()  # set up on a new connection meanwhile: carry on there

    async def _send_append(self, connection: PravegaConnection, payloads: list[bytes],
                           last_event_number: int) -> None:
        data = frame_events(payloads)
        request_id = connection.requests.next_id()
        if self.block_size is None:
            await connection.send(frames.Frame(body=frames.AppendBlockEnd(
                writer_id=self.writer_id, size_of_whole_events=len(data), data=data,
                num_events=len(payloads), last_event_number=last_event_number,
                request_id=request_id)))
            return
        block, end = split_into_block(self.writer_id, data, len(payloads), last_event_number,
                                      self.block_size, request_id)
        # Nothing may come between the two on this connection, so no await between them.
        connection.connection.write(frames.Frame(body=block))
        await connection.send(frames.Frame(body=end))

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
            number, _, future = self._inflight.popleft()
            if not future.done():
                future.set_result(number)
        self._progress()

    def _progress(self) -> None:
        """The store answered: an outage is over, and a later loss starts a new one with the
        whole retry budget."""
        if self.redialer is not None:
            self.redialer.budget.reset()

    def _fail(self, exc: BaseException) -> None:
        """Fail every unacknowledged event, and every later write, with ``exc``."""
        if self._failed is None:
            self._failed = exc
        self._attached = False
        self.connection.remove_listener(self._on_frame)
        for events in (self._inflight, self._queued):
            while events:
                _, _, future = events.popleft()
                if not future.done():
                    future.set_exception(exc)
        if self.redialer is not None:
            self.connection.connection.close()  # ours, and of no more use


async def _set_up_append(connection: PravegaConnection, segment: str, writer_id: UUID,
                         delegation_token: str) -> int:
    """SETUP_APPEND: the last event number of ``writer_id`` the segment holds
    (``NO_EVENT_NUMBER`` for none); a failure reply raises its typed error."""
    try:
        setup = await connection.requests.setup_append(writer_id, segment, delegation_token)
    except RequestFailed as exc:
        raise reply_error(exc) from None
    return setup.last_event_number
