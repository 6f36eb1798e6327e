"""Incremental frame decoding: bytes in, whole frames out.

Generated code supplies two functions per protocol, ``frame_length`` (how long the frame that
starts at a position is, once enough of its header has arrived) and ``decode_frame``. This
class handles the buffering: frames split across reads, many frames in one read, and the size
limit, which is checked from the header before a byte of the body is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from protoframe.runtime.errors import DecodeError, FrameTooLargeError

T = TypeVar("T")

FrameLength = Callable[[bytes, int, int, int], "int | None"]


class FrameStream(Generic[T]):
    """Turns a byte stream into frames of type ``T``.

    ``feed`` returns every frame completed by the new bytes. A frame that fails to decode
    raises its ``DecodeError`` with ``frames_before`` set to the frames completed earlier in
    the same call; the bad frame's bytes are skipped, so ``feed(b"")`` continues after it.
    A bad frame header is different (an oversize frame, or a length no frame can have):
    without a frame size there is nothing to skip to and nothing after it can be trusted,
    so the stream drops what it holds and refuses further input with the same error class.
    """

    def __init__(
        self,
        frame_length: FrameLength,
        decode_frame: Callable[[bytes, int, int], T],
        max_frame_size: int,
    ) -> None:
        self._frame_length = frame_length
        self._decode = decode_frame
        self.max_frame_size = max_frame_size
        # Bytes of an unfinished frame grow in place: a frame trickled in n pieces costs O(size)
        # copying, not O(n * size) as re-joining the whole tail on every read would.
        self._pending = bytearray()
        # The size of the frame in progress once its header has arrived (0: not yet); below it
        # a read only appends, with no header parsing and no decode attempt.
        self._need = 0
        self._broken: DecodeError | None = None

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
