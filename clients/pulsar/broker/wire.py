"""What the broker needs on the wire beyond the generated codecs.

The broker stores a SEND's payload section (magic, checksum, metadata, data) exactly as the
producer sent it and forwards those bytes in MESSAGE frames: no re-encoding, and the client's
own checksum travels with the message. ``RawStreamDecoder`` decodes frames as the generated
``StreamDecoder`` does and also keeps each frame's payload bytes (``RawFrame.raw_payload``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protoframe.generated.pulsar import frames
from protoframe.runtime.codec.stream import FrameStream
from protoframe.runtime.errors import SizeMismatchError

_U32 = struct.Struct(">I")
_FRAME_HEAD = struct.Struct(">II")


@dataclass(slots=True, kw_only=True)
class RawFrame(frames.Frame):
    """A decoded frame that also holds its payload section as received."""

    raw_payload: bytes = b""


def _decode_raw(buf: bytes, pos: int, end: int) -> frames.Frame:
    frame, used = RawFrame.decode_from(buf, pos, end)
    if used != end:
        raise SizeMismatchError(f"Frame: {end - used} bytes left in the frame")
    if frame.payload is not None:
        command_size = _U32.unpack_from(buf, pos + 4)[0]
        frame.raw_payload = buf[pos + 8 + command_size:end]
    return frame


class RawStreamDecoder(frames.StreamDecoder):
    """``frames.StreamDecoder`` whose frames are ``RawFrame``s."""

    def __init__(self, max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE) -> None:
        FrameStream.__init__(self, frames.frame_length, _decode_raw, max_frame_size)


def frame_with_payload(command: bytes, payload: bytes) -> bytes:
    """The head of a frame carrying an encoded command and a raw payload section; the payload
    is written after it separately so it is not copied."""
    return _FRAME_HEAD.pack(4 + len(command) + len(payload), len(command)) + command
