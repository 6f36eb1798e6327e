"""``delimiter:``: structs and frames ended by a byte string: STOMP 1.2 frames (a command line
ended by LF, a body, then NUL) after an HTTP/1.1 request head ended by CRLF CRLF as the first
message (as a WebSocket handshake opens), against bytes written out by hand from those
specifications, through the stream decoder (which searches each byte once and refuses a frame
with no delimiter within max_frame_size), in round trips, and the specs it is refused in."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate, load_frame_specs
from protoframe.generator.errors import SpecErrors
from protoframe.generator.layout_plan import plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec.stream import DelimitedLength, find_delimited
from protoframe.runtime.errors import (
    EncodeError,
    FrameTooLargeError,
    SizeMismatchError,
    TruncatedError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: st
doc: STOMP-style frames ended by NUL, after an HTTP request head.
byte_order: big
structs:
  Head:
    doc: An HTTP/1.1 request head, ended by an empty line.
    delimiter: "\\r\\n\\r\\n"
    fields:
      - {name: text, type: string, size: rest}
  Line:
    doc: A line of text ended by LF.
    delimiter: "\\n"
    fields:
      - {name: text, type: string, size: rest}
  Version:
    doc: Two bytes, then a CRLF.
    delimiter: "\\r\\n"
    fields:
      - {name: major, type: u8}
      - {name: minor, type: u8}
first:
  to_server: Head
frame:
  name: Frame
  delimiter: "\\0"
  fields:
    - {name: command, type: struct, struct: Line}
    - {name: body, type: bytes, size: rest}
"""

HEAD = (b"GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n")


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("delimiter")
    generate_text(tmp, "st", SPEC, "st_pkg")
    return tmp


@pytest.fixture(scope="module")
def st_frames(package: Path) -> ModuleType:
    return import_generated(package, "st.frames", "st_pkg")


def stomp(command: bytes, body: bytes) -> bytes:
    return command + b"\n" + body + b"\x00"


def test_a_stomp_frame_is_what_the_specification_writes(st_frames: ModuleType) -> None:
    wire = stomp(b"SEND", b"destination:/queue/a\n\nhello")
    frame = st_frames.Frame(command=st_frames.Line(text="SEND"),
                            body=b"destination:/queue/a\n\nhello")
    assert frame.encode() == wire
    assert st_frames.Frame.decode(wire) == frame
    assert st_frames.frame_length(wire + b"rest", 0, len(wire) + 4, 1000) == len(wire)
    assert st_frames.frame_length(wire, 0, len(wire) - 1, 1000) is None


def test_the_head_comes_first_then_frames(st_frames: ModuleType) -> None:
    wire = HEAD + stomp(b"CONNECT", b"") + stomp(b"SEND", b"x\ny")
    stream = st_frames.StreamDecoder(to_server=True)
    got = [m for i in range(len(wire)) for m in stream.feed(wire[i:i + 1])]
    assert got == [st_frames.Head(text=HEAD[:-4].decode()),
                   st_frames.Frame(command=st_frames.Line(text="CONNECT"), body=b""),
                   st_frames.Frame(command=st_frames.Line(text="SEND"), body=b"x\ny")]
    assert st_frames.Head(text=HEAD[:-4].decode()).encode() == HEAD


def test_a_nested_struct_ends_at_its_own_delimiter(st_frames: ModuleType) -> None:
    assert st_frames.Version(major=1, minor=2).encode() == b"\x01\x02\r\n"
    assert st_frames.Version.decode(b"\x01\x02\r\n") == st_frames.Version(major=1, minor=2)
    with pytest.raises(SizeMismatchError):  # a byte too many before the delimiter
        st_frames.Version.decode(b"\x01\x02\x03\r\n")
    with pytest.raises(TruncatedError):
        st_frames.Version.decode(b"\x01\x02\r")


def test_missing_delimiters_are_truncated(st_frames: ModuleType) -> None:
    with pytest.raises(TruncatedError, match="Frame: no delimiter"):
        st_frames.Frame.decode(b"SEND\nbody")
    with pytest.raises(TruncatedError, match="Line: no delimiter"):
        st_frames.Frame.decode(b"SEND body\x00")


def test_content_holding_the_delimiter_cannot_be_encoded(st_frames: ModuleType) -> None:
    with pytest.raises(EncodeError, match="the fields hold the delimiter"):
        st_frames.Frame(command=st_frames.Line(text="SEND"), body=b"a\x00b").encode()
    with pytest.raises(EncodeError):
        st_frames.Frame(command=st_frames.Line(text="SE\nND"), body=b"").encode()


def test_no_delimiter_within_the_limit_is_too_large(st_frames: ModuleType) -> None:
    stream = st_frames.StreamDecoder(max_frame_size=64)
    assert stream.feed(b"x" * 63) == []
    with pytest.raises(FrameTooLargeError):
        stream.feed(b"y")
    ok = st_frames.StreamDecoder(max_frame_size=64)
    wire = stomp(b"SEND", b"z" * 58)
    assert len(wire) == 64
    assert ok.feed(wire) == [st_frames.Frame.decode(wire)]
    with pytest.raises(FrameTooLargeError):
        find_delimited(b"a" * 10, 0, 10, 10, b"\x00")


def test_each_byte_is_searched_once() -> None:
    # A counting bytes look-alike would not go through bytes.find; count the bytes searched by
    # where each search starts instead.
    probe = DelimitedLength(b"\r\n\r\n")
    data = HEAD
    starts: list[int] = []
    for end in range(1, len(data) + 1):
        starts.append(max(0, probe._searched - 3))
        size = probe(data, 0, end, 1 << 16)
        if size is not None:
            assert size == len(HEAD) and end == len(HEAD)
            break
    # Each search starts at most 3 bytes (the delimiter's length less one) before the last end.
    assert all(b - a <= 1 for a, b in zip(starts, starts[1:], strict=False))
    assert starts[-1] == len(HEAD) - 4


@settings(max_examples=150, deadline=None)
@given(commands=st.lists(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1,
                                 max_size=10), max_size=6),
       bodies=st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\x00", b"")),
                       min_size=6, max_size=6),
       cut=st.integers(1, 40))
def test_round_trips_and_streams(st_frames: ModuleType, commands: list[str],
                                 bodies: list[bytes], cut: int) -> None:
    frames = [st_frames.Frame(command=st_frames.Line(text=c), body=b)
              for c, b in zip(commands, bodies, strict=False)]
    wire = b"".join(f.encode() for f in frames)
    assert wire == b"".join(stomp(c.encode(), b) for c, b in zip(commands, bodies,
                                                                 strict=False))
    stream = st_frames.StreamDecoder()
    got: list[Any] = []
    for i in range(0, len(wire), cut):
        got += stream.feed(wire[i:i + cut])
    assert got == frames
    assert stream.buffered == 0


def test_delimited_structs_take_the_compiled_codec(tmp_path: Path) -> None:
    """A delimited row of its own (tests/runtime/test_compiled_terminated.py)."""
    specs = write_spec(tmp_path, "st", SPEC)
    [spec] = load_frame_specs(specs, "specs", load_protocol(specs, "st", "specs"))
    plans = plan_spec(spec)
    assert plans["Version"].delimiter == b"\r\n"
    assert plans["Version"].unknown_to_c == ()
    assert plans["Version"].compiled


def test_the_reference_page_names_the_delimiters(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "st", SPEC), "specs", ["st"]).docs["st.md"]
    assert "ends with the delimiter `00`" in page
    assert "ends with the delimiter `0d 0a 0d 0a`" in page


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "st_pkg")


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ('  delimiter: "\\0"\n', '  delimiter: "\\u20ac"\n', '"\\u20ac"',
     "delimiter: each character is one byte"),
    ('  delimiter: "\\0"\n', '  delimiter: ""\n', '""', "should be non-empty"),
    ('  delimiter: "\\0"\n', "", "command, type: struct",
     "'command' has no fixed size and comes before any size_of field"),
])
def test_where_a_delimiter_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                      message: str) -> None:
    assert old in SPEC, old
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "st", text), "specs", ["st"])
    error = str(info.value.errors[0])
    assert message in error, error
    at = text.index(new) + new.index(token) if new else text.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/st/st.yaml:{line}:{column}:"), error


def test_a_trickling_frame_is_searched_in_place() -> None:
    from protoframe.runtime.codec.stream import FrameStream

    seen: list[type] = []

    class Recording(DelimitedLength):
        __slots__ = ()

        def __call__(self, buf: bytes | bytearray, pos: int, end: int,
                     limit: int) -> int | None:
            seen.append(type(buf))
            return super().__call__(buf, pos, end, limit)

    frame = b"x" * 10_000 + b"\x00"
    stream = FrameStream(Recording(b"\x00"), lambda b, p, e: e - p, 1 << 16)
    got = [n for i in range(0, len(frame), 100) for n in stream.feed(frame[i:i + 100])]
    assert got == [len(frame)]
    # The first of the 101 reads is searched where it arrived, the other 100 in the buffer they
    # grow, and only the read that completes the frame is copied out (and searched again).
    assert seen.count(bytearray) == 100
    assert seen.count(bytes) == 2
