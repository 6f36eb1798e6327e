"""One connection to the segment store, without I/O: a command in, the replies out.

``StoreSession.handle`` answers each decoded command with the frames to send back. Failures
the protocol has replies for (a missing segment, a sealed one, a read past the end) are
replies; a broken rule (append block rules, a writer that never set up, a command only a
server sends) raises a ``PravegaError``, and the caller closes this connection and no other.

Appends are idempotent: the segment keeps each writer's last event number and stores no event
at or below it, so a writer that reconnects may send again whatever it has no acknowledgement
for. Events are numbered one by one, so an append of ``num_events`` ending at
``last_event_number`` holds the events after ``last_event_number - num_events``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from protoframe.generated.pravega import frames
from protoframe.generated.pravega.machines import command_of
from protoframe.runtime.errors import DecodeError

from ..appends import NO_EVENT_NUMBER, Append, AppendAssembler
from ..errors import AppendRuleViolation, IncompatibleVersion, PravegaError, UnexpectedCommand
from ..events import drop_events
from ..versions import HIGH_VERSION, LOW_VERSION, check_overlap
from .segments import Segment, SegmentTable
from .table_requests import TableRequests
from .tables import TableStore

__all__ = ["DEFAULT_READ_SIZE", "StoreSession"]

DEFAULT_READ_SIZE = 1 << 20
ILLEGAL_ARGUMENT = 0  # ERROR_MESSAGE error code


class StoreSession:
    """The segment store's side of one connection.

    After ``handle`` returns, ``close_reason`` is set when the connection must be closed once
    the replies are written (a client whose versions do not overlap ours).
    """

    def __init__(self, table: SegmentTable, *, max_read_size: int = DEFAULT_READ_SIZE,
                 versions: tuple[int, int] = (LOW_VERSION, HIGH_VERSION),
                 tables: TableStore | None = None,
                 max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE) -> None:
        self.table = table
        self.tables = tables if tables is not None else TableStore()
        table_requests = TableRequests(
            self.tables, max_read_size=max_read_size, max_frame_size=max_frame_size,
            name_taken=lambda name: table.get(name) is not None)
        self.max_read_size = max_read_size
        self.versions = versions
        self.appends = AppendAssembler()
        self.writer_segments: dict[UUID, str] = {}
        self.close_reason: PravegaError | None = None
        self._handlers: dict[str, Callable[[Any], list[frames.FrameBody]]] = {
            "HELLO": self._hello,
            "KEEP_ALIVE": self._keep_alive,
            "CREATE_SEGMENT": self._create_segment,
            "SETUP_APPEND": self._setup_append,
            "APPEND_BLOCK": self._append_block,
            "APPEND_BLOCK_END": self._append_block_end,
            "CONDITIONAL_APPEND": self._conditional_append,
            "READ_SEGMENT": self._read_segment,
            "GET_STREAM_SEGMENT_INFO": self._segment_info,
            "SEAL_SEGMENT": self._seal_segment,
            "DELETE_SEGMENT": self._delete_segment,
            "TRUNCATE_SEGMENT": self._truncate_segment,
            **table_requests.handlers,
        }

    def handle(self, frame: frames.Frame) -> list[frames.Frame]:
        """The replies to one received command; raises ``PravegaError`` on a broken rule."""
        name, body = command_of(frame)
        self.appends.check_next(name)
        handler = self._handlers.get(name)
        if handler is None:
            raise UnexpectedCommand(f"{name} is not a request a segment store answers")
        return [frames.Frame(body=reply) for reply in handler(body)]

    # ---- connection ------------------------------------------------------------------------

    def _hello(self, body: frames.Hello) -> list[frames.FrameBody]:
        try:
            check_overlap(self.versions, (body.low_version, body.high_version))
        except IncompatibleVersion as exc:
            self.close_reason = exc
        # Our HELLO goes back either way, so the client learns which versions we speak.
        return [frames.Hello(high_version=self.versions[1], low_version=self.versions[0])]

    def _keep_alive(self, body: frames.KeepAlive) -> list[frames.FrameBody]:
        return [frames.KeepAlive()]

    # ---- segment management ----------------------------------------------------------------

    def _create_segment(self, body: frames.CreateSegment) -> list[frames.FrameBody]:
        if self.tables.get(body.segment) is not None or self.table.create(body.segment) is None:
            return [frames.SegmentAlreadyExists(request_id=body.request_id,
                                                segment=body.segment)]
        return [frames.SegmentCreated(request_id=body.request_id, segment=body.segment)]

    def _seal_segment(self, body: frames.SealSegment) -> list[frames.FrameBody]:
        segment = self.table.get(body.segment)
        if segment is None:
            # A table segment is a segment too: sealing it stops its updates, as in Pravega.
            table = self.tables.get(body.segment)
            if table is None:
                return [_no_such_segment(body.request_id, body.segment)]
            self.tables.seal(table)
            return [frames.SegmentSealed(request_id=body.request_id, segment=body.segment)]
        self.table.seal(segment)
        return [frames.SegmentSealed(request_id=body.request_id, segment=body.segment)]

    def _delete_segment(self, body: frames.DeleteSegment) -> list[frames.FrameBody]:
        if not self.table.delete(body.segment):
            return [_no_such_segment(body.request_id, body.segment)]
        return [frames.SegmentDeleted(request_id=body.request_id, segment=body.segment)]

    def _truncate_segment(self, body: frames.TruncateSegment) -> list[frames.FrameBody]:
        segment = self.table.get(body.segment)
        if segment is None:
            return [_no_such_segment(body.request_id, body.segment)]
        if not segment.start_offset <= body.truncation_offset <= segment.length:
            # As the Java store answers an offset it cannot truncate at: with the start offset.
            return [_truncated(body.request_id, segment, body.truncation_offset)]
        self.table.truncate(segment, body.truncation_offset)
        return [frames.SegmentTruncated(request_id=body.request_id, segment=body.segment)]

    # ---- appends ---------------------------------------------------------------------------

    def _setup_append(self, body: frames.SetupAppend) -> list[frames.FrameBody]:
        segment = self.table.get(body.segment)
        if segment is None:
            return [_no_such_segment(body.request_id, body.segment)]
        if segment.sealed:
            return [_sealed(body.request_id, segment)]
        last = segment.writers.get(body.writer_id, NO_EVENT_NUMBER)
        self.appends.setup(body.writer_id, last)
        self.writer_segments[body.writer_id] = body.segment
        return [frames.AppendSetup(request_id=body.request_id, segment=body.segment,
                                   writer_id=body.writer_id, last_event_number=last)]

    def _append_block(self, body: frames.AppendBlock) -> list[frames.FrameBody]:
        self.appends.block(body)
        return []

    def _append_block_end(self, body: frames.AppendBlockEnd) -> list[frames.FrameBody]:
        append = self.appends.block_end(body)
        segment, refusal = self._segment_for_append(append)
        if segment is None:
            return refusal
        stored = segment.writers.get(append.writer_id, NO_EVENT_NUMBER)
        if append.last_event_number > stored:
            data = append.data
            first = append.last_event_number - append.num_events + 1
            if stored >= first:
                # The segment holds the first of these events already: another connection of
                # this writer brought them (it reconnected while this connection's bytes were
                # still on their way). Store only the rest, so no event is stored twice.
                data = _without_events(data, stored - first + 1)
            self.table.append(segment, data, append.writer_id, append.last_event_number)
        # else: a writer resending events the segment already holds; acknowledge, store nothing
        return [_data_appended(append, segment)]

    def _conditional_append(self, body: frames.ConditionalAppend) -> list[frames.FrameBody]:
        append = self.appends.conditional(body)
        segment, refusal = self._segment_for_append(append)
        if segment is None:
            return refusal
        if body.event_number <= segment.writers.get(body.writer_id, NO_EVENT_NUMBER):
            return [_data_appended(append, segment)]  # held already: sent again after a loss
        if segment.length != body.expected_offset:
            return [frames.ConditionalCheckFailed(writer_id=body.writer_id,
                                                  event_number=body.event_number,
                                                  request_id=body.request_id)]
        self.table.append(segment, append.data, append.writer_id, append.last_event_number)
        return [_data_appended(append, segment)]

    def _segment_for_append(self, append: Append
                            ) -> tuple[Segment | None, list[frames.FrameBody]]:
        name = self.writer_segments[append.writer_id]
        segment = self.table.get(name)
        if segment is None:
            return None, [_no_such_segment(append.request_id, name)]
        if segment.sealed:
            return None, [_sealed(append.request_id, segment)]
        return segment, []

    # ---- reads -----------------------------------------------------------------------------

    def _read_segment(self, body: frames.ReadSegment) -> list[frames.FrameBody]:
        segment = self.table.get(body.segment)
        if segment is None:
            return [_no_such_segment(body.request_id, body.segment, body.offset)]
        if 0 <= body.offset < segment.start_offset:
            return [_truncated(body.request_id, segment, body.offset)]
        if body.offset < 0 or body.offset > segment.length:
            return [frames.ErrorMessage(
                request_id=body.request_id, segment=body.segment,
                message=f"read offset {body.offset} outside [0, {segment.length}]",
                error_code=ILLEGAL_ARGUMENT)]
        size = body.suggested_length if body.suggested_length > 0 else self.max_read_size
        end = min(segment.length, body.offset + min(size, self.max_read_size))
        at_tail = end == segment.length
        return [frames.SegmentRead(segment=body.segment, offset=body.offset, at_tail=at_tail,
                                   end_of_segment=at_tail and segment.sealed,
                                   data=segment.read(body.offset, end),
                                   request_id=body.request_id)]

    def _segment_info(self, body: frames.GetStreamSegmentInfo) -> list[frames.FrameBody]:
        segment = self.table.get(body.segment)
        table = self.tables.get(body.segment) if segment is None else None
        if table is not None:
            return [frames.StreamSegmentInfo(
                request_id=body.request_id, segment=body.segment, exists=True,
                is_sealed=table.sealed, is_deleted=False, last_modified=0,
                write_offset=table.length, start_offset=0)]
        if segment is None:
            # As the Java store answers: a missing segment is described, not refused.
            return [frames.StreamSegmentInfo(
                request_id=body.request_id, segment=body.segment, exists=False,
                is_sealed=True, is_deleted=True, last_modified=0, write_offset=0,
                start_offset=0)]
        return [frames.StreamSegmentInfo(
            request_id=body.request_id, segment=body.segment, exists=True,
            is_sealed=segment.sealed, is_deleted=False,
            last_modified=segment.last_modified_ms, write_offset=segment.length,
            start_offset=segment.start_offset)]


def _without_events(data: bytes, count: int) -> bytes:
    try:
        return drop_events(data, count)
    except DecodeError as exc:
        raise AppendRuleViolation(f"append data is not whole events: {exc}") from exc


def _no_such_segment(request_id: int, segment: str, offset: int = -1) -> frames.NoSuchSegment:
    return frames.NoSuchSegment(request_id=request_id, segment=segment, offset=offset)


def _sealed(request_id: int, segment: Segment) -> frames.SegmentIsSealed:
    return frames.SegmentIsSealed(request_id=request_id, segment=segment.name,
                                  offset=segment.length)


def _truncated(request_id: int, segment: Segment, offset: int) -> frames.SegmentIsTruncated:
    return frames.SegmentIsTruncated(request_id=request_id, segment=segment.name,
                                     start_offset=segment.start_offset, offset=offset)


def _data_appended(append: Append, segment: Segment) -> frames.DataAppended:
    return frames.DataAppended(writer_id=append.writer_id, event_number=append.last_event_number,
                               previous_event_number=append.previous_event_number,
                               request_id=append.request_id,
                               current_segment_write_offset=segment.length)
