"""The append block rules, both ways, without I/O.

A writer may send its append data in one APPEND_BLOCK_END (as the Rust client does) or as an
APPEND_BLOCK whose bytes end in a PADDING or a PARTIAL_EVENT, followed by the APPEND_BLOCK_END
that carries the rest (as the Java client does). ``split_into_block`` builds the second form;
``AppendAssembler`` is the segment store's side: it checks every rule of the reference and
gives back each append's data, raising ``AppendRuleViolation`` for a connection that breaks
one (the caller then closes that connection).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from uuid import UUID

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import DecodeError

from .errors import AppendRuleViolation

__all__ = ["Append", "AppendAssembler", "NO_EVENT_NUMBER", "split_into_block"]

# What APPEND_SETUP reports for a writer the segment has never seen (Long.MIN_VALUE).
NO_EVENT_NUMBER = -(1 << 63)
_RECORD_HEADER = struct.Struct(">ii")
_PADDING, _PARTIAL_EVENT = -1, -2


def split_into_block(writer_id: UUID, data: bytes, num_events: int, last_event_number: int,
                     block_size: int, request_id: int = -1
                     ) -> tuple[frames.AppendBlock, frames.AppendBlockEnd]:
    """Send ``data`` (whole EVENT records) as one block of ``block_size`` bytes plus its end.

    The block holds the records that fit whole, then a PARTIAL_EVENT with the first bytes of
    the next record (its rest opens the end's data) or, when everything fit, a PADDING.
    """
    room = block_size - _RECORD_HEADER.size
    if room < 0:
        raise ValueError(f"block_size {block_size} leaves no room for the closing record")
    whole = 0
    while whole + _RECORD_HEADER.size <= len(data):
        size = _RECORD_HEADER.size + _RECORD_HEADER.unpack_from(data, whole)[1]
        if whole + size > room:
            break
        whole += size
    if whole == len(data):
        trailer = frames.Padding(zeros=bytes(room - whole)).encode()
        rest = b""
    else:
        cut = min(room, len(data))
        trailer = frames.PartialEvent(data=data[whole:cut]).encode()
        rest = data[cut:]
    block = frames.AppendBlock(writer_id=writer_id, data=data[:whole] + trailer)
    end = frames.AppendBlockEnd(writer_id=writer_id, size_of_whole_events=whole, data=rest,
                                num_events=num_events, last_event_number=last_event_number,
                                request_id=request_id)
    return block, end


@dataclass(frozen=True, slots=True)
class Append:
    """One append, reassembled: the bytes to add to the writer's segment."""

    writer_id: UUID
    data: bytes
    num_events: int
    last_event_number: int
    previous_event_number: int
    request_id: int


class AppendAssembler:
    """One connection's append state: which writers are set up, and an open block.

    ``setup`` records a writer after SETUP_APPEND succeeds; ``check_next`` must see every
    other command first (only APPEND_BLOCK_END may follow APPEND_BLOCK).
    """

    def __init__(self) -> None:
        self.last_event_numbers: dict[UUID, int] = {}
        self._block: frames.AppendBlock | None = None

    def setup(self, writer_id: UUID, last_event_number: int) -> None:
        """Accept appends from ``writer_id``, whose segment holds its events up to this one."""
        self.last_event_numbers[writer_id] = last_event_number

    def check_next(self, command: str) -> None:
        """Raise if ``command`` may not come next (an APPEND_BLOCK is waiting for its end)."""
        if self._block is not None and command != "APPEND_BLOCK_END":
            raise AppendRuleViolation(f"{command} after APPEND_BLOCK; expected APPEND_BLOCK_END")

    def block(self, body: frames.AppendBlock) -> None:
        """Hold an APPEND_BLOCK until the APPEND_BLOCK_END that must follow it."""
        self._known(body.writer_id, "APPEND_BLOCK")
        self._block = body

    def block_end(self, body: frames.AppendBlockEnd) -> Append:
        """The append that ``body`` completes (with the open block, if there is one)."""
        previous = self._known(body.writer_id, "APPEND_BLOCK_END")
        block, self._block = self._block, None
        if block is None:
            data = body.data
        else:
            if block.writer_id != body.writer_id:
                raise AppendRuleViolation(
                    f"APPEND_BLOCK_END of writer {body.writer_id} ends the block of "
                    f"writer {block.writer_id}")
            data = _join_block(block.data, body)
        if body.num_events <= 0:
            raise AppendRuleViolation(f"APPEND_BLOCK_END with {body.num_events} events")
        self._advance(body.writer_id, previous, body.last_event_number)
        return Append(body.writer_id, data, body.num_events, body.last_event_number, previous,
                      body.request_id)

    def conditional(self, body: frames.ConditionalAppend) -> Append:
        """The one-event append of a CONDITIONAL_APPEND (its offset is checked by the caller)."""
        previous = self._known(body.writer_id, "CONDITIONAL_APPEND")
        self._advance(body.writer_id, previous, body.event_number)
        return Append(body.writer_id, body.event.encode(), 1, body.event_number, previous,
                      body.request_id)

    def _known(self, writer_id: UUID, command: str) -> int:
        last = self.last_event_numbers.get(writer_id)
        if last is None:
            raise AppendRuleViolation(f"{command} from writer {writer_id} without SETUP_APPEND")
        return last

    def _advance(self, writer_id: UUID, previous: int, last: int) -> None:
        if last < previous:
            raise AppendRuleViolation(
                f"writer {writer_id}: last event number went backwards ({previous} -> {last})")
        self.last_event_numbers[writer_id] = last


def _join_block(block: bytes, end: frames.AppendBlockEnd) -> bytes:
    whole = end.size_of_whole_events
    if whole < 0 or whole > len(block):
        raise AppendRuleViolation(
            f"size_of_whole_events {whole} outside the {len(block)}-byte block")
    if whole == len(block):
        return block + end.data
    rest = block[whole:]
    kind = _RECORD_HEADER.unpack_from(rest)[0] if len(rest) >= _RECORD_HEADER.size else None
    try:
        if kind == _PARTIAL_EVENT:
            return block[:whole] + frames.PartialEvent.decode(rest).data + end.data
        if kind == _PADDING:
            frames.Padding.decode(rest)
        else:
            raise AppendRuleViolation(
                f"the {len(rest)} bytes after the whole events are not one PARTIAL_EVENT "
                "or PADDING")
    except DecodeError as exc:
        raise AppendRuleViolation(f"the block's closing record does not decode: {exc}") from exc
    if end.data:
        raise AppendRuleViolation(
            f"APPEND_BLOCK_END carries {len(end.data)} bytes after a PADDING")
    return block[:whole]
