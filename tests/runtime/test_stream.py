"""``runtime.codec.stream.FrameStream``: what a bad frame header does to the stream."""

from __future__ import annotations

import struct

import pytest

from protoframe.runtime.codec.stream import FrameStream
from protoframe.runtime.errors import DecodeError, FrameTooLargeError, SizeMismatchError


def frame_length(buf: bytes, pos: int, end: int, limit: int) -> int | None:
    """A toy framing: [i32 body length][body]."""
    if end - pos < 4:
        return None
    size: int = struct.unpack_from(">i", buf, pos)[0]
    if size < 0:
        raise SizeMismatchError(f"negative frame length {size}")
    if 4 + size > limit:
        raise FrameTooLargeError(f"frame of {4 + size} bytes")
    return 4 + size


def decode(buf: bytes, start: int, end: int) -> bytes:
    body = buf[start + 4:end]
    if body == b"bad":
        raise DecodeError("a bad body")
    return body


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def stream() -> FrameStream[bytes]:
    return FrameStream(frame_length, decode, 64)


def test_a_bad_body_is_skipped() -> None:
    s = stream()
    with pytest.raises(DecodeError) as caught:
        s.feed(frame(b"one") + frame(b"bad") + frame(b"two"))
    assert caught.value.frames_before == [b"one"]
    assert s.feed(b"") == [b"two"] and s.buffered == 0


@pytest.mark.parametrize(("header", "error"), [
    (struct.pack(">i", -5), SizeMismatchError),
    (struct.pack(">i", 1000), FrameTooLargeError),
])
def test_a_bad_header_stops_the_stream(header: bytes, error: type[DecodeError]) -> None:
    s = stream()
    with pytest.raises(error) as caught:
        s.feed(frame(b"one") + header + b"rest")
    assert caught.value.frames_before == [b"one"]
    assert s.buffered == 0
    # Nothing after it can be framed: every later feed fails the same way, keeping nothing.
    for later in (b"", frame(b"two")):
        with pytest.raises(error, match="stream stopped after"):
            s.feed(later)
        assert s.buffered == 0
