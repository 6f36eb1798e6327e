"""A frame length that measures a field with a fixed-size trailer after it: AMQP 0-9-1's frames
(type, channel, payload size, payload, the frame-end octet 0xCE), against bytes packed by hand
with ``struct``, bad input refused by its own errors, the stream cut anywhere, the Python and
compiled codecs agreeing, and the trailers the frame's length cannot tell refused at their
position."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.errors import (
    BadMagicError,
    FrameTooLargeError,
    TruncatedError,
)
from tests.support.generate import generate_text, write_spec

SPEC = """\
protocol: trail
doc: Tables measured in bytes, in frames with a trailer.
byte_order: big
structs:
  Entry:
    fields:
      - {name: key, type: u8}
      - {name: value, type: u16}
  Table:
    fields:
      - {name: size, type: u32, size_of: entries}
      - {name: entries, type: array, of: Entry, until_end: true}
  Pair:
    fields:
      - {name: table, type: struct, struct: Table}
      - {name: tail, type: u8}
  Counted:
    fields:
      - {name: size, type: u8, size_of: items}
      - {name: items, type: array, of: u16, count: "2"}
  Data:
    fields:
      - {name: data, type: bytes, size: rest}
frame:
  name: Frame
  fields:
    - {name: type, type: u8}
    - {name: size, type: u32, size_of: payload}
    - name: payload
      type: switch
      on: type
      cases: {1: Pair, 2: Data, 3: Counted}
    - {name: end, type: u8, const: 0xCE}
"""

PLAIN = """\
protocol: plain
doc: A frame without a switch, its payload measured, then a trailer.
byte_order: big
frame:
  name: Frame
  fields:
    - {name: size, type: u16, size_of: data}
    - {name: data, type: bytes}
    - {name: crc, type: u16}
    - {name: end, type: u8, const: 0xCE}
"""


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("trail"), "trail", SPEC, "trail_pkg")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("plain"), "plain", PLAIN, "plain_pkg")


def table(*entries: tuple[int, int]) -> bytes:
    body = b"".join(struct.pack(">BH", k, v) for k, v in entries)
    return struct.pack(">I", len(body)) + body


def test_a_frame_length_measures_the_payload_before_a_trailer(trail: ModuleType) -> None:
    frame = trail.Frame(payload=trail.Data(data=b"hello"))
    wire = struct.pack(">BI", 2, 5) + b"hello" + b"\xce"
    assert frame.encode() == wire
    assert trail.Frame.decode(wire) == frame  # size: rest stops at the payload's end
    assert trail.frame_length(wire, 0, 5, 1 << 20) == len(wire)
    assert trail.frame_length(wire, 0, 4, 1 << 20) is None
    with pytest.raises(BadMagicError):
        trail.Frame.decode(wire[:-1] + b"\xcf")
    with pytest.raises(FrameTooLargeError):
        trail.StreamDecoder(max_frame_size=100).feed(struct.pack(">BI", 2, 200))
    with pytest.raises(TruncatedError):
        trail.Frame.decode(wire[:-1])


def test_a_stream_of_trailed_frames_cut_anywhere(trail: ModuleType) -> None:
    frames = [trail.Frame(payload=trail.Data(data=b"")),
              trail.Frame(payload=trail.Pair(table=trail.Table(
                  entries=[trail.Entry(key=9, value=65535)]), tail=1)),
              trail.Frame(payload=trail.Counted(items=[5, 6]))]
    wire = b"".join(f.encode() for f in frames)
    for cut in range(len(wire) + 1):
        stream = trail.StreamDecoder()
        assert [*stream.feed(wire[:cut]), *stream.feed(wire[cut:])] == frames


entries = st.lists(st.builds(lambda k, v: (k, v), st.integers(0, 255), st.integers(0, 65535)),
                   max_size=5)


@settings(max_examples=100, deadline=None)
@given(st.one_of(entries.map(lambda e: ("pair", e)), st.binary(max_size=40).map(
    lambda d: ("data", d))), st.integers(0, 255))
def test_round_trips(trail: ModuleType, payload: tuple[str, object], tail: int) -> None:
    kind, value = payload
    if kind == "pair":
        assert isinstance(value, list)
        body = trail.Pair(table=trail.Table(entries=[trail.Entry(key=k, value=v)
                                                     for k, v in value]), tail=tail)
    else:
        body = trail.Data(data=value)
    frame = trail.Frame(payload=body)
    assert trail.Frame.decode(frame.encode()) == frame


def test_the_compiled_and_python_codecs_agree(plain: ModuleType) -> None:
    from protoframe.runtime.codec.compiled import pure_python

    frame = plain.Frame(data=b"abc", crc=0x1234)
    wire = struct.pack(">H", 3) + b"abc" + struct.pack(">H", 0x1234) + b"\xce"
    assert frame.encode() == wire
    assert plain.Frame.decode(wire) == frame
    assert plain.frame_length(wire, 0, 2, 1 << 20) == len(wire)
    assert plain.StreamDecoder().feed(wire + wire) == [frame, frame]
    with pure_python():
        assert frame.encode() == wire
        assert plain.Frame.decode(wire) == frame
        assert plain.StreamDecoder().feed(wire + wire) == [frame, frame]


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ("    - {name: end, type: u8, const: 0xCE}\n",
     "    - {name: end, type: u8, const: 0xCE}\n    - {name: note, type: bytes, size: rest}\n",
     "size, type: u32, size_of: payload", "'size' measures 'payload', not the end of the frame"),
    ("    - {name: type, type: u8}\n    - {name: size, type: u32, size_of: payload}\n",
     "    - {name: size, type: u32, size_of: payload}\n    - {name: type, type: u8}\n"
     "    - {name: tag, type: string, prefix: u8}\n",
     "tag, type: string", "'tag' has no fixed size, so the frame length 'size' cannot tell"),
])
def test_a_trailer_of_no_fixed_size_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                               message: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "trail", text), "specs", ["trail"])
    errors = [str(e) for e in info.value.errors]
    error = next((e for e in errors if message in e), errors[0])
    assert message in error, errors
    at = text.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/trail/trail.yaml:{line}:{column}:"), error
