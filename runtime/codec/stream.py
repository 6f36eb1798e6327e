"""Incremental frame decoding: bytes in, whole frames out.

Generated code supplies two functions per protocol, ``frame_length`` (how long the frame that
starts at a position is, once enough of its header has arrived) and ``decode_frame``. This
class handles the buffering: frames split across reads, many frames in one read, and the size
limit, which is checked from the header before a byte of the body is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from protoframe.runtime.errors import DecodeError, FrameTooLargeError, SizeMismatchError

T = TypeVar("T")
U = TypeVar("U")

FrameLength = Callable[[bytes, int, int, int], "int | None"]


class FrameStream(Generic[T]):
    """Turns a byte stream into frames of type ``T``.

    ``feed`` returns every frame completed by the new bytes. A frame that fails to decode
    raises its ``DecodeError`` with ``frames_before`` set to the frames completed earlier in
    the same call; the bad frame's bytes are skipped, so ``feed(b"")`` continues after it.
    A bad frame header is different (an oversize frame, or a length no frame can have):
    without a frame size there is nothing to skip to and nothing after it can be trusted,
    so the stream drops what it holds and refuses further input with the same error class.

    With ``first_length`` and ``first_decode`` the stream starts in a handshake state: the
    first message is cut and decoded by those (a layout of its own, such as PostgreSQL's
    StartupMessage), the frames after it by ``frame_length`` and ``decode_frame``.
    """

    def __init__(
        self,
        frame_length: FrameLength,
        decode_frame: Callable[[bytes, int, int], T],
        max_frame_size: int,
        first_length: FrameLength | None = None,
        first_decode: Callable[[bytes, int, int], T] | None = None,
    ) -> None:
        self._frame_length = frame_length
        self._decode = decode_frame
        self._in_handshake = first_length is not None and first_decode is not None
        if first_length is not None and first_decode is not None:
            # The handshake state: the first message has a layout (and length rule) of its
            # own; once it is decoded, ordinary frames follow. A first message that fails to
            # decode is skipped like a bad frame, and the next bytes are a first message again.
            def decode_first(buf: bytes, pos: int, end: int) -> T:
                message = first_decode(buf, pos, end)
                self._frame_length, self._decode = frame_length, decode_frame
                self._in_handshake = False
                return message

            self._frame_length, self._decode = first_length, decode_first
        self.max_frame_size = max_frame_size
        # Bytes of an unfinished frame grow in place: a frame trickled in n pieces costs O(size)
        # copying, not O(n * size) as re-joining the whole tail on every read would.
        self._pending = bytearray()
        # The size of the frame in progress once its header has arrived (0: not yet); below it
        # a read only appends, with no header parsing and no decode attempt.
        self._need = 0
        self._broken: DecodeError | None = None

    @property
    def in_handshake(self) -> bool:
        """Whether the next message is still the first one (``first_length`` was given and no
        first message has been decoded yet)."""
        return self._in_handshake

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._pending)

    @property
    def expected(self) -> int:
        """The size the header of the frame in progress announced (0: no header yet)."""
        return self._need

    def feed(self, data: bytes | bytearray | memoryview) -> list[T]:
        """Add received bytes; return the frames they complete, in order."""
        if self._broken is not None:
            raise _stopped(self._broken)
        pending = self._pending
        if pending:
            pending += data
            if len(pending) < self._need:
                return []
            if not self._need and isinstance(self._frame_length, DelimitedLength) and \
                    not self._delimiter_arrived(pending):
                return []
            buf = bytes(pending)
        else:
            buf = data if isinstance(data, bytes) else bytes(data)
        pos, end = 0, len(buf)
        need = 0
        frames: list[T] = []
        limit = self.max_frame_size
        try:
            while pos < end:
                try:
                    size = self._frame_length(buf, pos, end, limit)
                except DecodeError as exc:
                    self._broken = exc
                    self._keep(b"", 0)
                    raise
                if size is None:
                    if end - pos > limit:
                        self._broken = FrameTooLargeError(
                            f"{end - pos} bytes without a complete frame header")
                        raise self._broken
                    break
                if end - pos < size:
                    need = size
                    break
                start, pos = pos, pos + size
                frames.append(self._decode(buf, start, pos))
        except DecodeError as exc:
            exc.frames_before = frames
            if self._broken is None:
                self._keep(buf[pos:], 0)
            else:
                self._keep(b"", 0)
            raise
        self._keep(buf[pos:] if pos < end else b"", need)
        return frames

    def _delimiter_arrived(self, pending: bytearray) -> bool:
        """Whether the frame in progress, which a delimiter ends, is complete: searched in
        place, so a frame trickling in costs no copy of what came before on each read."""
        probe = self._frame_length
        assert isinstance(probe, DelimitedLength)
        try:
            return probe(pending, 0, len(pending), self.max_frame_size) is not None
        except DecodeError as exc:
            self._broken = exc
            self._keep(b"", 0)
            raise

    def _keep(self, tail: bytes, need: int) -> None:
        self._pending = bytearray(tail)
        self._need = need


def _stopped(cause: DecodeError) -> DecodeError:
    """The error a stopped stream raises: ``cause``'s class, saying the stream has stopped."""
    what = "an oversize frame" if isinstance(cause, FrameTooLargeError) else "a bad frame header"
    message = f"stream stopped after {what}: {cause}"
    try:
        return type(cause)(message)
    except TypeError:  # a subclass with a richer constructor
        return DecodeError(message)


def whole_message(decode_from: Callable[[bytes, int, int], tuple[U, int]], name: str
                  ) -> Callable[[bytes, int, int], U]:
    """A stream's decode function for a message class: ``decode_from`` on the bytes the length
    rule gave it, which it must use up (``SizeMismatchError`` otherwise)."""
    def decode(buf: bytes, pos: int, end: int) -> U:
        message, used = decode_from(buf, pos, end)
        if used != end:
            raise SizeMismatchError(f"{name}: {end - used} bytes left in the message")
        return message

    return decode


def find_delimited(buf: bytes | bytearray, pos: int, end: int, limit: int, delimiter: bytes,
                   searched: int = 0) -> int | None:
    """The length of the frame at ``pos`` that ends with ``delimiter`` (included), None while
    no delimiter has arrived; ``searched``: bytes after ``pos`` already searched in vain.
    ``FrameTooLargeError`` when none appears within ``limit`` bytes."""
    stop = min(end, pos + limit)
    found = buf.find(delimiter, pos + max(0, searched - len(delimiter) + 1), stop)
    if found >= 0:
        return found + len(delimiter) - pos
    if end - pos >= limit:
        raise FrameTooLargeError(f"no {delimiter!r} delimiter within the {limit}-byte limit")
    return None


class DelimitedLength:
    """A stream's ``frame_length`` for frames ended by a delimiter: it remembers how far the
    frame in progress has been searched, so each read searches only the new bytes (the
    stream keeps a frame's bytes from its start, and asks again at that start)."""

    __slots__ = ("delimiter", "_searched")

    def __init__(self, delimiter: bytes) -> None:
        self.delimiter = delimiter
        self._searched = 0

    def __call__(self, buf: bytes | bytearray, pos: int, end: int, limit: int) -> int | None:
        size = find_delimited(buf, pos, end, limit, self.delimiter, self._searched)
        self._searched = 0 if size is not None else end - pos
        return size
