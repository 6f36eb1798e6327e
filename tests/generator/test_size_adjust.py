"""Sizes that count more than what they measure: ``includes: self`` (PostgreSQL's message
length counts its own four bytes), ``includes: header`` (a length counting the whole frame) and
``adjust: N``, against messages packed by hand from the PostgreSQL protocol documentation
("Message Formats"), in nested structs, through the stream decoder, in round trips, and the
specs they are refused in."""

from __future__ import annotations

import struct
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
from protoframe.runtime.errors import (
    FrameTooLargeError,
    LengthTooSmallError,
    SizeMismatchError,
    TruncatedError,
    ValueOutOfRangeError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

PG = """\
protocol: pg
doc: PostgreSQL-style messages, whose length counts itself.
byte_order: big
structs:
  Query:
    doc: A simple query (its string ends with a NUL, kept in the bytes here).
    fields:
      - {name: sql, type: bytes, size: rest}
  Sync:
    doc: No body.
    fields: []
  Parts:
    doc: Nested sizes that count more than they measure.
    fields:
      - {name: flag, type: u8}
      - {name: rest_len, type: u16, size_of: rest, includes: header}
      - {name: n, type: u8, size_of: name, adjust: 2}
      - {name: name, type: bytes}
      - {name: m, type: varint, size_of: tail, adjust: -1}
      - {name: tail, type: bytes}
      - {name: k, type: u8, size_of: data}
      - {name: data, type: bytes}
frame:
  name: Message
  fields:
    - {name: type, type: u8}
    - {name: length, type: i32, size_of: rest, includes: self}
    - name: body
      type: switch
      on: type
      cases: {"'Q'": Query, "'S'": Sync, "'p'": Parts}
"""

WHOLE = """\
protocol: wh
byte_order: little
frame:
  name: Packet
  fields:
    - {name: magic, type: u16, const: 0xbeef}
    - {name: total, type: u16, size_of: rest, includes: header}
    - {name: payload, type: bytes, size: rest}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("size_adjust")
    generate_text(tmp, "pg", PG, "pg_pkg")
    generate_text(tmp, "wh", WHOLE, "wh_pkg")
    return tmp


@pytest.fixture(scope="module")
def pg(package: Path) -> ModuleType:
    return import_generated(package, "pg.frames", "pg_pkg")


@pytest.fixture(scope="module")
def wh(package: Path) -> ModuleType:
    return import_generated(package, "wh.frames", "wh_pkg")


def message(kind: bytes, body: bytes) -> bytes:
    """A PostgreSQL message: Byte1 type, Int32 length counting itself, the body."""
    return kind + struct.pack(">i", 4 + len(body)) + body


def test_query_and_sync_are_what_the_documentation_packs(pg: ModuleType) -> None:
    wire = message(b"Q", b"SELECT 1\x00")
    assert wire == b"Q\x00\x00\x00\x0dSELECT 1\x00"
    assert pg.Message(body=pg.Query(sql=b"SELECT 1\x00")).encode() == wire
    assert pg.Message.decode(wire) == pg.Message(body=pg.Query(sql=b"SELECT 1\x00"))
    assert pg.Message(body=pg.Sync()).encode() == b"S\x00\x00\x00\x04"
    assert pg.frame_length(wire, 0, 5, 1 << 24) == len(wire)


@pytest.mark.parametrize("length", [0, 3, -1, -(1 << 31)])
def test_a_length_below_its_own_width_is_refused(pg: ModuleType, length: int) -> None:
    wire = b"S" + struct.pack(">i", length)
    with pytest.raises(LengthTooSmallError, match="counts besides"):
        pg.frame_length(wire, 0, len(wire), 1 << 24)
    with pytest.raises(LengthTooSmallError, match="Message.length"):
        pg.Message.decode(wire)
    stream = pg.StreamDecoder()
    with pytest.raises(LengthTooSmallError):
        stream.feed(b"S\x00\x00\x00\x04" + wire)


def test_the_stream_cuts_by_the_adjusted_length(pg: ModuleType) -> None:
    frames = [pg.Message(body=pg.Query(sql=b"select %d\x00" % i)) for i in range(20)]
    frames.insert(5, pg.Message(body=pg.Sync()))
    wire = b"".join(f.encode() for f in frames)
    stream = pg.StreamDecoder()
    got: list[Any] = []
    for i in range(0, len(wire), 3):
        got += stream.feed(wire[i:i + 3])
    assert got == frames
    big = pg.StreamDecoder(max_frame_size=100)
    with pytest.raises(FrameTooLargeError):
        big.feed(b"Q" + struct.pack(">i", 100))  # 1 + 100 bytes in all
    assert pg.StreamDecoder(max_frame_size=100).feed(message(b"Q", bytes(95))) != []


def parts(name: bytes, tail: bytes, data: bytes, flag: int = 7) -> bytes:
    """Parts by hand: a flag, a u16 counting everything from the start of Parts, n =
    len(name) + 2, m = len(tail) - 1 as a varint, and k = len(data)."""
    m = len(tail) - 1
    assert 0 <= m < 0x80 and len(data) < 0x100
    rest = bytes([len(name) + 2]) + name + bytes([m]) + tail + bytes([len(data)]) + data
    return bytes([flag]) + struct.pack(">H", 3 + len(rest)) + rest


def test_nested_sizes_count_what_they_say(pg: ModuleType) -> None:
    body = parts(b"abc", b"tail", b"data!")
    wire = message(b"p", body)
    value = pg.Message(body=pg.Parts(flag=7, name=b"abc", tail=b"tail", data=b"data!"))
    assert value.encode() == wire
    assert wire[5:8] == b"\x07\x00\x12"  # 3 header bytes + the 15 after them
    assert pg.Message.decode(wire) == value


def test_nested_sizes_below_their_adjustment_are_refused(pg: ModuleType) -> None:
    good = parts(b"abc", b"tail", b"data!")
    with pytest.raises(LengthTooSmallError, match="Parts.n"):
        pg.Message.decode(message(b"p", good[:3] + b"\x01" + good[4:]))
    # A u16 that counts less than the 3-byte header it includes.
    with pytest.raises(LengthTooSmallError, match="Parts.rest_len"):
        pg.Message.decode(message(b"p", good[:1] + struct.pack(">H", 2) + good[3:]))
    with pytest.raises(SizeMismatchError):
        pg.Message.decode(message(b"p", good[:1] + struct.pack(">H", 40) + good[3:]))


def test_a_negative_adjustment_that_cannot_be_written_is_out_of_range(pg: ModuleType) -> None:
    with pytest.raises(ValueOutOfRangeError):
        pg.Message(body=pg.Parts(flag=0, name=b"", tail=b"", data=b"")).encode()


def test_a_length_that_counts_the_whole_frame(wh: ModuleType) -> None:
    wire = struct.pack("<HH", 0xBEEF, 4 + 5) + b"hello"
    assert wh.Packet(payload=b"hello").encode() == wire
    assert wh.Packet.decode(wire) == wh.Packet(payload=b"hello")
    assert wh.frame_length(wire, 0, 4, 1 << 16) == 9
    with pytest.raises(LengthTooSmallError):
        wh.frame_length(struct.pack("<HH", 0xBEEF, 3), 0, 4, 1 << 16)
    with pytest.raises(TruncatedError):
        wh.Packet.decode(wire[:-1])


@settings(max_examples=150, deadline=None)
@given(name=st.binary(max_size=50), tail=st.binary(min_size=1, max_size=100),
       data=st.binary(max_size=255), sql=st.binary(max_size=300), cut=st.integers(1, 50))
def test_round_trips_and_streams(pg: ModuleType, wh: ModuleType, name: bytes, tail: bytes,
                                 data: bytes, sql: bytes, cut: int) -> None:
    part = pg.Parts(flag=1, name=name, tail=tail, data=data)
    if len(tail) <= 0x80:
        assert part.encode() == parts(name, tail, data, 1)
    frames = [pg.Message(body=part),
              pg.Message(body=pg.Query(sql=sql)), pg.Message(body=pg.Sync())]
    wire = b"".join(f.encode() for f in frames)
    assert frames[1].encode() == message(b"Q", sql)
    stream = pg.StreamDecoder()
    got: list[Any] = []
    for i in range(0, len(wire), cut):
        got += stream.feed(wire[i:i + cut])
    assert got == frames
    assert wh.Packet.decode(wh.Packet(payload=sql).encode()) == wh.Packet(payload=sql)


def test_adjusted_sizes_of_the_rest_are_compiled(tmp_path: Path) -> None:
    specs = write_spec(tmp_path, "wh", WHOLE)
    [spec] = load_frame_specs(specs, "specs", load_protocol(specs, "wh", "specs"))
    plan = plan_spec(spec)["Packet"]
    assert [op.word for op in plan.field_ops] == ["const", "adjusted_size_rest", "bytes"]
    assert not plan.unknown_to_c and plan.compiled
    plain = write_spec(tmp_path / "plain", "wh", WHOLE.replace(", includes: header", ""))
    [spec] = load_frame_specs(plain, "specs", load_protocol(plain, "wh", "specs"))
    assert plan_spec(spec)["Packet"].compiled


@pytest.mark.slow
def test_the_generated_packages_type_check(package: Path) -> None:
    assert_type_checks(package, "pg_pkg", "wh_pkg")


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ("{name: sql, type: bytes, size: rest}", "{name: sql, type: bytes, size: rest, adjust: 1}",
     "1}", "adjust: needs a size_of: rest or size_of: <field> field"),
    ("size_of: tail, adjust: -1}", "size_of: tail, includes: self}", "self}",
     "includes: needs a fixed-width integer"),
    ("size_of: name, adjust: 2}", "size_of: name, adjust: 0}", "0}",
     "adjust: 0 changes nothing"),
    ("size_of: name, adjust: 2}", "size_of: name, adjust: 256}", "256}",
     "adjust: 256 does not fit a 1-byte size"),
    ("{name: k, type: u8, size_of: data}", "{name: k, type: u8, size_of: data, "
     "includes: header}", "header}",
     "includes: header needs fixed-size fields before 'k', and 'name' has none"),
    ("includes: header}", "includes: all}", "all", "'all' is not one of"),
])
def test_where_an_adjustment_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                        message: str) -> None:
    assert old in PG
    text = PG.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "pg", text), "specs", ["pg"])
    error = str(info.value.errors[0])
    assert message in error, error
    at = text.index(new) + new.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/pg/pg.yaml:{line}:{column}:"), error


def test_the_reference_page_says_what_a_size_counts(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "pg", PG), "specs", ["pg"]).docs["pg.md"]
    assert "size of everything after it in the frame; counting its own bytes too" in page
    assert "counting `Parts` from its start too" in page
    assert "size of `name`; plus 2" in page
    assert "size of `tail`; minus 1" in page


NEGATIVE = """\
protocol: neg
byte_order: little
structs:
  Greeting:
    fields:
      - {name: length, type: u24, size_of: rest, adjust: -1}
      - {name: seq, type: u8}
      - {name: text, type: bytes, size: rest}
frame:
  name: Packet
  fields:
    - {name: length, type: u24, size_of: payload}
    - {name: seq, type: u8}
    - {name: payload, type: bytes, size: length}
first:
  to_client: Greeting
"""


def test_a_size_counting_less_imports_no_error_it_cannot_raise(tmp_path: Path) -> None:
    """A number below what it measures (MySQL's payload length, not counting the sequence id)
    is never too small: the module names no LengthTooSmallError (ruff's F401 otherwise)."""
    frames = generate_text(tmp_path, "neg", NEGATIVE, "neg_pkg")
    assert "LengthTooSmallError" not in Path(frames.__file__ or "").read_text()
    data = struct.pack("<I", 2)[:3] + b"\x00" + b"hi"  # the length leaves out the seq byte
    assert frames.Greeting.decode(data) == frames.Greeting(seq=0, text=b"hi")
    assert frames.Greeting(seq=0, text=b"hi").encode() == data
